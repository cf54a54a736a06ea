import CNotify
import Foundation
import Testing
@testable import Wormhole

/// Every value in docs/PROTOCOL.md's "Test vectors" section, checked against the code: the page
/// another implementation is written from cannot drift from what we do.
@Suite("docs/PROTOCOL.md test vectors")
struct ProtocolVectorTests {
    static let page: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)) ?? ""
    }()

    /// The section's text, from its heading to the end of the page.
    static var section: Substring {
        guard let start = page.range(of: "\n## Test vectors\n") else { return "" }
        return page[start.upperBound...]
    }

    /// The table rows: (what, input, value), backquotes removed.
    static var rows: [(what: String, input: String, value: String)] {
        section.split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 5, cells[1] != "what", !cells[1].hasPrefix("---") else { return nil }
            return (cells[1], cells[2], cells[3].trimmingCharacters(in: CharacterSet(charactersIn: "`")))
        }
    }

    /// The fenced blocks of the section, in order.
    static var blocks: [String] {
        section.components(separatedBy: "```\n").enumerated().filter { $0.offset % 2 == 1 }.map { $0.element }
    }

    /// `` `text` (…) `` or "the empty payload" → the bytes it names.
    static func bytes(of input: String) -> Data {
        if input == "the empty payload" { return Data() }
        guard let open = input.firstIndex(of: "`"), let close = input[input.index(after: open)...].firstIndex(of: "`") else { return Data(input.utf8) }
        return Data(input[input.index(after: open) ..< close].utf8)
    }

    @Test("the section has the table and the four samples")
    func present() {
        #expect(ProtocolVectorTests.rows.count >= 8, "\(ProtocolVectorTests.rows)")
        #expect(ProtocolVectorTests.blocks.count == 4, "\(ProtocolVectorTests.blocks)")
    }

    @Test("every table row matches the code")
    func table() throws {
        for row in ProtocolVectorTests.rows {
            let input = String(String.UnicodeScalarView(row.input.unicodeScalars.filter { $0 != "`" }))
            switch row.what {
            case "bucket interface":
                var out = [CChar](repeating: 0, count: 32)
                CNotify_bucket_interface(input, &out)
                #expect(cString(out) == row.value, "\(row)")
            case "state file name":
                var out = [CChar](repeating: 0, count: 33)
                CNotify_state_file_name(input, &out)
                #expect(cString(out) == row.value, "\(row)")
            case "payload checksum":
                #expect(Checksum.hex(of: ProtocolVectorTests.bytes(of: row.input)) == row.value, "\(row)")
            case "state directory of an address":
                // DARWIN_NOTIFY_STATE_DIR, when a developer has it set, overrides every bus's directory.
                if ProcessInfo.processInfo.environment["DARWIN_NOTIFY_STATE_DIR"] != nil { continue }
                var out = [CChar](repeating: 0, count: 4096)
                #expect(CNotify_state_directory(input, &out, out.count) == 0, "\(String(cString: CNotify_last_error()))")
                #expect(cString(out) == row.value, "\(row)")
            case "post body with an origin":
                // "<name> <sequence> <origin>": the Post our library sends carries the origin as its
                // third argument (signature `stt`), and a receiver reads it back.
                let parts = input.split(separator: " ").map(String.init)
                try #require(parts.count == 3, "\(row)")
                var bytes: UnsafeMutablePointer<CChar>?
                var length: Int32 = 0
                let originValue = try #require(UInt64(parts[2].dropFirst(2), radix: 16))
                #expect(CNotify_protocol_build_post_from(parts[0], UInt64(parts[1])!, originValue, &bytes, &length) == 0,
                        "\(String(cString: CNotify_last_error()))")
                let data = Data(bytes: try #require(bytes), count: Int(length))
                let signature = Data([UInt8(row.value.utf8.count)] + Array(row.value.utf8) + [0])
                #expect(data.range(of: signature) != nil, "the marshalled post has signature \(row.value)")
                var origin: UInt64 = 0
                #expect(CNotify_protocol_post_origin(bytes, length, &origin) == 0)
                #expect(origin == originValue)
                var name = [CChar](repeating: 0, count: 600)
                var seq: UInt64 = 0
                var hasSeq: Int32 = 0
                #expect(CNotify_protocol_parse_post(bytes, length, &name, name.count, &seq, &hasSeq) == 0)
                #expect(cString(name) == parts[0] && seq == UInt64(parts[1])! && hasSeq == 1)
                CNotify_protocol_free(bytes)
            case "gap rule with a count":
                // "<first> then <seq> counting <n>": the posts lost between two bus copies of a name
                // from one origin, when the second stands for n posts (docs: Bus copies, coalesced).
                let parts = input.split(separator: " ").map(String.init)
                try #require(parts.count == 5 && parts[1] == "then" && parts[3] == "counting", "\(row)")
                let book = try #require(CNotify_sequences_create())
                defer { CNotify_sequences_destroy(book) }
                var duplicate: Int32 = 0
                var gaps: UInt64 = 0
                #expect(CNotify_sequences_note(book, ":1.42", 0x0011_2233_4455_6677, "com.example.changed", UInt64(parts[0])!, 1, &duplicate, &gaps) == 0)
                #expect(CNotify_sequences_note(book, ":1.42", 0x0011_2233_4455_6677, "com.example.changed", UInt64(parts[2])!,
                                               UInt32(parts[4])!, &duplicate, &gaps) == 0)
                #expect("gaps \(gaps)" == row.value && duplicate == 0, "\(row)")
            case "distributed match rule":
                var out = [CChar](repeating: 0, count: 1100)
                #expect(CNotify_protocol_distributed_match_rule(input == "every name" ? nil : input, &out, out.count) == 0)
                #expect(cString(out) == row.value, "\(row)")
            case "distributed post received":
                // "<name> with an object of N bytes" or "<name> with options N": built as a sender
                // may build it, read as a receiver reads it.
                let words = input.split(separator: " ").map(String.init)
                let name = words[0]
                var object = ""
                var options: UInt32 = 0
                if words.count == 7, words[3] == "object", let n = Int(words[5]) { object = String(repeating: "o", count: n) }
                else if words.count == 4, words[2] == "options", let n = UInt32(words[3]) { options = n }
                else { Issue.record("a distributed vector the test cannot read: \(row)") }
                var bytes: UnsafeMutablePointer<CChar>?
                var length: Int32 = 0
                #expect(CNotify_protocol_build_distributed(name, object, nil, 1, 1, options, &bytes, &length) == 0,
                        "\(String(cString: CNotify_last_error()))")
                var outName = [CChar](repeating: 0, count: 600), outObject = [CChar](repeating: 0, count: 600)
                var info: OpaquePointer?
                var outOptions: UInt32 = 0
                let status = CNotify_protocol_parse_distributed(bytes, length, &outName, &outObject, &info, &outOptions)
                CNotify_protocol_free(bytes)
                if row.value == "dropped" {
                    #expect(status != 0, "\(row)")
                } else {
                    #expect(status == 0, "\(row): \(String(cString: CNotify_last_error()))")
                    #expect(cString(outObject) == object, "\(row)")
                    if row.value.hasPrefix("options") { #expect("options \(outOptions)" == row.value, "\(row)") }
                }
                CNotify_plist_free(info)
            case "fast-path endpoint address":
                var out = [CChar](repeating: 0, count: 128)
                #expect(CNotify_protocol_fast_address(input, &out, out.count) == 0, "\(String(cString: CNotify_last_error()))")
                #expect(cString(out) == row.value, "\(row)")
            case "fast-path bucket bit":
                // Bit b of the 512-byte bitmap: byte b / 8, bit b % 8, b the bucket of the name.
                var interface = [CChar](repeating: 0, count: 32)
                CNotify_bucket_interface(input, &interface)
                let bucket = try #require(Int(cString(interface).suffix(3), radix: 16))
                #expect("byte \(bucket / 8), bit \(bucket % 8)" == row.value, "\(row)")
            case "fast-path POST frame", "fast-path HELLO frame":
                let parts = input.split(separator: " ").map(String.init)
                var out = [UInt8](repeating: 0, count: 1024)
                var length = 0
                if row.what == "fast-path POST frame" {
                    #expect(CNotify_protocol_fast_post(parts[0], UInt64(parts[1])!, &out, out.count, &length) == 0)
                } else {
                    let origin = try #require(UInt64(parts[1].dropFirst(2), radix: 16)), token = try #require(UInt64(parts[2].dropFirst(2), radix: 16))
                    #expect(CNotify_protocol_fast_hello(origin, token, parts[0], &out, out.count, &length) == 0)
                }
                #expect(out.prefix(length).map { String(format: "%02x", $0) }.joined(separator: " ") == row.value, "\(row)")
            case "fast-path ring setup":
                var out = [UInt8](repeating: 0, count: 64)
                var length = 0
                #expect(CNotify_protocol_fast_ring_setup(&out, out.count, &length) == 0)
                #expect(out.prefix(length).map { String(format: "%02x", $0) }.joined(separator: " ") == row.value, "\(row)")
            case "fast-path ring record":
                // "the POST frame of NAME SEQ" (its backquotes removed)
                let parts = input.split(separator: " ").suffix(2).map(String.init)
                var frame = [UInt8](repeating: 0, count: 1024), out = [UInt8](repeating: 0, count: 1024)
                var frameLength = 0, length = 0
                #expect(CNotify_protocol_fast_post(parts[0], UInt64(parts[1])!, &frame, frame.count, &frameLength) == 0)
                #expect(CNotify_protocol_fast_ring_record(frame, frameLength, &out, out.count, &length) == 0)
                #expect(out.prefix(length).map { String(format: "%02x", $0) }.joined(separator: " ") == row.value, "\(row)")
            case "queue segment name":
                #expect(QueueSegment.name(first: QueueSegment.first(of: UInt64(input.split(separator: " ")[1])!)) == row.value, "\(row)")
            case "queue segment entry":
                // "sequence S, offset O, length L, T ns"
                let numbers = input.split(whereSeparator: { !$0.isNumber }).compactMap { UInt64($0) }
                let entry = QueueSegment.Entry(offset: numbers[1], length: UInt32(numbers[2]), nanoseconds: Int64(numbers[3]))
                let bytes = entry.encoded(sequence: numbers[0])
                #expect(bytes.map { String(format: "%02x", $0) }.joined(separator: " ") == row.value, "\(row)")
                #expect(QueueSegment.Slot.decode(bytes, sequence: numbers[0]) == .entry(entry))
                #expect(QueueSegment.Slot.decode(bytes, sequence: numbers[0] + 1) == .damaged, "the check covers the sequence")
            default:
                Issue.record("a vector the test does not know: \(row)")
            }
        }
    }

    @Test("the sample message file decodes to its header and payload, and encodes to the same bytes")
    func messageFile() throws {
        let text = ProtocolVectorTests.blocks[0]
        let file = Data(text.dropLast().utf8) // the fence's own newline is not in the file
        #expect(file.count == 97, "\(file.count) bytes")
        let envelope = try Envelope.decode(file).get()
        #expect(envelope.header.id == "3F2504E0-4F89-11D3-9A0C-0305E82C3301")
        #expect(envelope.header.kind == .json && envelope.header.length == 7 && envelope.header.pid == 4242)
        #expect(envelope.header.passed == 1_732_291_200.5)
        #expect(envelope.payload == Data("{\"v\":1}".utf8))
        #expect(envelope.encoded() == file)
    }

    @Test("a new message's id is a random version-4 UUID, spelled as UUID().uuidString spells one")
    func messageIDs() throws {
        let ids = (0..<2000).map { _ in Envelope(kind: .data, payload: Data()).header.id }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(200) {
            let chars = Array(id)
            #expect(chars.count == 36 && [8, 13, 18, 23].allSatisfy { chars[$0] == "-" }, "\(id)")
            #expect(UUID(uuidString: id)?.uuidString == id, "\(id)") // upper case, parsed back the same
            #expect(chars[14] == "4", "version: \(id)")
            #expect("89AB".contains(chars[19]), "variant: \(id)")
        }
        // Every random bit is used: each of the 30 free hex digits takes more than one value.
        for position in (0..<36).filter({ ![8, 13, 14, 18, 23].contains($0) }) {
            #expect(Set(ids.map { Array($0)[position] }).count > (position == 19 ? 3 : 8), "position \(position)")
        }
    }

    @Test("the sample .state reads as head 4, tail 2, bytes 194, its generation")
    func queueState() throws {
        let hex = ProtocolVectorTests.blocks[1].split(whereSeparator: { $0 == " " || $0 == "\n" })
        let bytes = Data(hex.compactMap { UInt8($0, radix: 16) })
        #expect(bytes.count == 32)
        let container = FileManager.default.temporaryDirectory.appendingPathComponent("vectors-\(getpid())-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: container) }
        try FileManager.default.createDirectory(at: container.appendingPathComponent("queues/q"), withIntermediateDirectories: true)
        try bytes.write(to: container.appendingPathComponent("queues/q/.state"))
        let queue = MessageQueue(layout: Layout(base: .init(container.path), shared: false), identifier: "q",
                                 configuration: WormholeConfiguration())
        let state = try queue.currentState()
        #expect(state == MessageQueue.State(head: 4, tail: 2, bytes: 194, generation: 0x0123_4567_89ab_cdef))
        #expect(state.bytes == 2 * 97, "two sample files, headers included")
    }

    @Test("the sample credential is the text the library seals")
    func credential() {
        let lines = ProtocolVectorTests.blocks[2].split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(Array(lines) == ["darwin-notify-credential 1", "0123456789abcdef0123456789abcdef", ":1.42", "user.uid.1000.sync", "2"])
        // The library's own format string is in Shims/CNotify/base/credentials.c (CN_CREDENTIAL_MAGIC
        // and format_binding); checked here against the source, as the function is internal.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = (try? String(contentsOf: root.appendingPathComponent("Shims/CNotify/base/credentials.c"), encoding: .utf8)) ?? ""
        #expect(source.contains("#define CN_CREDENTIAL_MAGIC \"darwin-notify-credential 1\\n\""))
        #expect(source.contains("CN_CREDENTIAL_MAGIC \"%s\\n%s\\n%s\\n%llu\\n\", bus_id, sender, name"))
    }

    @Test("the sample Distributed Post is what the library marshals, byte for byte")
    func distributedPost() throws {
        let hex = ProtocolVectorTests.blocks[3].split(whereSeparator: { $0 == " " || $0 == "\n" })
        let documented = Data(hex.compactMap { UInt8($0, radix: 16) })
        #expect(documented.count == 244)
        let info = try #require(CNotify_plist_dictionary())
        defer { CNotify_plist_free(info) }
        #expect(CNotify_plist_set(info, "theme", CNotify_plist_string("dark")) == 0)
        #expect(CNotify_plist_set(info, "size", CNotify_plist_integer(12)) == 0)
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        #expect(CNotify_protocol_build_distributed("com.example.settings", "prefs", info, 3, 0x0011_2233_4455_6677, 1, &bytes, &length) == 0,
                "\(String(cString: CNotify_last_error()))")
        defer { CNotify_protocol_free(bytes) }
        #expect(Data(bytes: try #require(bytes), count: Int(length)) == documented)
    }
}
