import Foundation
import Testing
@testable import Wormhole

/// Wormhole's own JSON reader (JSONText), which replaced JSONSerialization when the tools moved
/// to FoundationEssentials: strict RFC 8259, bounded depth, and compaction that keeps the text.
@Suite("JSON text of wormhole messages")
struct JSONTextTests {
    @Test("valid documents pass, fragments included; each invalid one is refused with the reason and where")
    func validation() throws {
        for good in ["{}", "[]", "0", "-0", "1.5e-3", "\"\"", "true", "null", " {\"a\": [1, {\"b\": null}]} ",
                     "\"\\u00e9\\n\\/\"", "\"é\""] {
            #expect(throws: Never.self, "\(good)") { try JSONText.validate(Data(good.utf8)) }
        }
        let bad: [(String, String)] = [
            ("", "empty input"), ("  ", "only whitespace"), ("{bad", "a key"), ("[1,", "unexpected end"),
            ("{\"a\":}", "a value expected"), ("{\"a\":1,}", "a key"), ("[01]", "may not start with 0"),
            ("\"\\x\"", "unknown escape"), ("\"\u{01}\"", "control character"), ("tru", "a value expected"),
            ("1 2", "after the value"), ("{\"a\" 1}", "':' expected"), ("-", "a digit expected"),
            ("1.", "after '.'"), ("1e", "exponent"), ("\"\\u12\"", "four hex digits"),
        ]
        for (text, reason) in bad {
            #expect { try JSONText.validate(Data(text.utf8)) } throws: {
                let error = $0 as? WormholeError
                return error?.code == .invalidJSON && error?.message.contains(reason) == true && error?.message.contains("at byte") == true
            }
        }
        #expect { try JSONText.validate(Data([0x22, 0xff, 0x22])) } throws: { ($0 as? WormholeError)?.message.contains("not UTF-8") == true }
    }

    @Test("nesting past 512 is refused, not a crash, at any depth")
    func depth() throws {
        let fine = String(repeating: "[", count: 511) + String(repeating: "]", count: 511)
        #expect(throws: Never.self) { try JSONText.validate(Data(fine.utf8)) }
        for depth in [513, 100_000] {
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            #expect { try JSONText.validate(Data(deep.utf8)) } throws: { ($0 as? WormholeError)?.message.contains("nested deeper than 512") == true }
        }
    }

    @Test("a multi-line document prints on one line with its key order and number spellings; a one-line one unchanged")
    func compaction() {
        #expect(JSONText.compact(Data("{\n  \"b\": [1, 2.50, -0, 1e3],\n  \"a\": \"x y\\n\"\n}\n".utf8)) == "{\"b\":[1,2.50,-0,1e3],\"a\":\"x y\\n\"}")
        #expect(JSONText.compact(Data("  {\"z\": 1, \"a\": 2}\t".utf8)) == "{\"z\": 1, \"a\": 2}")
        #expect(JSONText.compact(Data("{\n".utf8)) == nil)
    }
}
