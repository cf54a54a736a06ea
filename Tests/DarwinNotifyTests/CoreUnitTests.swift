// CoreUnitTests.swift: the C core's protocol functions and the Wormhole envelope and names, with
// no bus and no child process: a mistake here fails in milliseconds, with the value that is wrong.
import CNotify
import Foundation
import Testing
@testable import Wormhole

@Suite("C protocol functions (protocol.c)")
struct CoreProtocolUnitTests {
    func rule(_ key: String, namespace: Bool = false) -> (status: UInt32, rule: String) {
        var buffer = [CChar](repeating: 0, count: 2048)
        let status = CNotify_protocol_match_rule(key, namespace ? 1 : 0, &buffer, buffer.count)
        return (status, String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    func bucket(_ name: String) -> String {
        var buffer = [CChar](repeating: 0, count: 32)
        CNotify_bucket_interface(name, &buffer)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test("an exact rule names the bucket interface and arg0, a quote escaped as '\\''")
    func exactRule() {
        let r = rule("it's")
        #expect(r.status == 0)
        #expect(r.rule == "type='signal',path='/org/darwinnotify',interface='\(bucket("it's"))',member='Post',arg0='it'\\''s'")
    }

    @Test("a name whose escaped rule passes 1024 bytes falls back to the bucket's rule")
    func longRule() {
        let name = String(repeating: "'", count: 300)
        let r = rule(name)
        #expect(r.status == 0)
        #expect(!r.rule.contains("arg0"), "\(r.rule)")
        #expect(r.rule.contains(bucket(name)))
    }

    @Test("a namespace rule uses arg0namespace on every interface; a bad namespace is INVALID_NAME")
    func namespaceRule() {
        #expect(rule("com.example", namespace: true).rule == "type='signal',path='/org/darwinnotify',member='Post',arg0namespace='com.example'")
        #expect(rule("1bad", namespace: true).status == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(!String(cString: CNotify_last_error()).isEmpty)
        // An element starting with a digit (issue 20 item 2): the rule of the longest prefix D-Bus accepts.
        #expect(rule("user.uid.1000", namespace: true).rule == "type='signal',path='/org/darwinnotify',member='Post',arg0namespace='user.uid'")
        #expect(rule("a.b2.3c.d", namespace: true).rule.hasSuffix("arg0namespace='a.b2'"))
    }

    @Test("a Post built and parsed keeps name and sequence; garbage and foreign messages are refused with a sentence")
    func postRoundTrip() throws {
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        #expect(CNotify_protocol_build_post("com.example.ünï", 42, &bytes, &length) == 0)
        let built = try #require(bytes)
        defer { CNotify_protocol_free(built) }
        #expect(String(cString: CNotify_last_error()).isEmpty, "a success leaves no sentence")
        var name = [CChar](repeating: 0, count: 600)
        var seq: UInt64 = 0
        var hasSeq: Int32 = 0
        #expect(CNotify_protocol_parse_post(built, length, &name, name.count, &seq, &hasSeq) == 0)
        #expect(cString(name) == "com.example.ünï" && seq == 42 && hasSeq == 1)

        let garbage: [CChar] = Array(repeating: 7, count: 64)
        #expect(CNotify_protocol_parse_post(garbage, Int32(garbage.count), &name, name.count, &seq, &hasSeq) == UInt32(NOTIFY_STATUS_INVALID_REQUEST))
        #expect(String(cString: CNotify_last_error()).contains("not a D-Bus message"))

        // A name too long for the caller's buffer is refused, not cut.
        #expect(CNotify_protocol_parse_post(built, length, &name, 4, &seq, &hasSeq) == UInt32(NOTIFY_STATUS_INVALID_REQUEST))
    }

    @Test("building refuses what a poster refuses: empty, NULL, over 512 bytes")
    func buildRefuses() {
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        #expect(CNotify_protocol_build_post("", 1, &bytes, &length) == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(CNotify_protocol_build_post(nil, 1, &bytes, &length) == UInt32(NOTIFY_STATUS_INVALID_NAME)) // a NULL name, as notify(3)
        #expect(CNotify_protocol_build_post(String(repeating: "x", count: 513), 1, &bytes, &length) == UInt32(NOTIFY_STATUS_INVALID_NAME))
        #expect(CNotify_protocol_build_post("a", 1, nil, &length) == UInt32(NOTIFY_STATUS_NULL_INPUT))
        #expect(String(cString: CNotify_last_error()).contains("NULL"))
    }
}

@Suite("Wormhole envelope and names")
struct WormholeUnitTests {
    @Test("an envelope encodes and decodes to itself; its checksum is checked")
    func envelopeRoundTrip() throws {
        let envelope = Envelope(kind: .data, payload: Data("payload".utf8))
        let decoded = try Envelope.decode(envelope.encoded()).get()
        var expected = envelope.header
        expected.passed = decoded.header.passed // written with six decimals
        #expect(abs(decoded.header.passed - envelope.header.passed) < 0.000_001)
        #expect(decoded.header == expected && decoded.payload == envelope.payload)
        var tampered = envelope.encoded()
        tampered[tampered.count - 1] ^= 0x20
        #expect(throws: EnvelopeFault.self) { try Envelope.decode(tampered).get() }
    }

    @Test("a round's files are synced and closed by several threads; a sync that fails is reported, the others still done")
    func parallelSync() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parallel-sync-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func files(_ n: Int) -> [Int32] {
            (0..<n).map { i in open("\(directory)/f\(i)", O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600) }
        }
        // Closed: the number no longer names one of these files (other tests, running at the same
        // time, may have been given the number since).
        func closed(_ fd: Int32) -> Bool {
            ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? "").hasPrefix(directory + "/") == false
        }
        #expect(ParallelSync.syncAndClose([]) == nil)
        for n in [1, 2, 7, 8, 9, 100] {
            let fds = files(n)
            #expect(fds.allSatisfy { $0 >= 0 })
            #expect(ParallelSync.syncAndClose(fds) == nil, "\(n) files")
            #expect(fds.allSatisfy(closed), "every one of \(n) closed")
        }
        // A descriptor that is not open (-1: EBADF) among 20: its error comes back, the rest are
        // closed. (Not a closed number: another test, running meanwhile, may be given it.)
        var fds = files(20)
        close(fds[7])
        fds[7] = -1
        #expect(ParallelSync.syncAndClose(fds) == EBADF)
        #expect(fds.allSatisfy(closed))
    }

    @Test("truncated, headerless and foreign files are faults, never messages")
    func envelopeFaults() {
        let encoded = Envelope(kind: .data, payload: Data(repeating: 1, count: 100)).encoded()
        for bad in [encoded.prefix(encoded.count - 1), Data("DNWH1 x".utf8), Data("hello\n".utf8), Data()] {
            #expect(throws: EnvelopeFault.self) { try Envelope.decode(Data(bad)).get() }
        }
    }

    @Test("identifiers and groups outside the rules are refused with their code")
    func names() {
        for bad in ["", "..", "a/b", ".hidden", "nul\u{0}", String(repeating: "i", count: 256)] {
            do { try Names.validateIdentifier(bad); Issue.record("identifier \(bad.debugDescription) accepted") } catch {
                #expect(error.code == .invalidIdentifier)
            }
        }
        for bad in ["", "has space", "a/b", String(repeating: "g", count: 129)] {
            do { try Names.validateGroup(bad); Issue.record("group \(bad.debugDescription) accepted") } catch {
                #expect(error.code == .invalidGroup)
            }
        }
        #expect(throws: Never.self) { try Names.validateIdentifier("com.example.ok-1") }
    }

    @Test("a WormholeError names its code, and keeps the errno beneath it typed")
    func errorDescription() {
        let error = WormholeError.io("open /x", .noSuchFileOrDirectory)
        #expect(error.code == .io && error.underlying == .errno(.noSuchFileOrDirectory))
        #expect(error.description.hasPrefix("io: open /x"))
        #expect(WormholeError.io("write", .noSpace).code == .diskFull)
    }
}

/// The text of a NUL-terminated C buffer a C call filled.
func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
