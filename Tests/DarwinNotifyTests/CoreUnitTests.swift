// CoreUnitTests.swift: the C core's protocol functions and the Wormhole envelope and names, with
// no bus and no child process: a mistake here fails in milliseconds, with the value that is wrong.
import CNotify
import DarwinNotify
import Foundation
import Testing
import NotifyBridge
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
    /// The fuzzing lane's seeds for the Swift readers (Tests/Fuzz/corpus, .ci/fuzz): the
    /// protocol's examples and the fuzzer's findings, each a file the reader takes, so that the
    /// fuzzer starts from accepted inputs, and the lane's written-back check runs on them here too.
    @Test("the Swift fuzzers' seeds are read as the protocol's own examples: accepted, and the same once written back")
    func fuzzSeeds() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus")
        func seeds(_ name: String) throws -> [String: Data] {
            let folder = corpus.appendingPathComponent(name)
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(!files.isEmpty, "no seeds for \(name)")
            return try Dictionary(uniqueKeysWithValues: files.map { ($0, try Data(contentsOf: folder.appendingPathComponent($0))) })
        }
        for (file, bytes) in try seeds("message-file") {
            #expect(bytes.withUnsafeBytes { WormholeFuzzing.messageFile($0) }, "message-file/\(file) is refused")
        }
        let entries = try seeds("queue-entry")
        #expect(entries["protocol-sample"].map { $0.withUnsafeBytes { WormholeFuzzing.queueEntry($0) } } == true)
        #expect(entries["empty"].map { $0.withUnsafeBytes { WormholeFuzzing.queueEntry($0) } } == false)
        for (file, bytes) in try seeds("bridge-payload") {
            let payload = try bytes.withUnsafeBytes { try BridgePayload.decode($0).get() }
            #expect(payload.encoded() == [UInt8](bytes), "bridge-payload/\(file) is not written back as it came")
        }
    }

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

    /// A file of PROTOCOL.md's example, with one header field replaced.
    static func header(passed: String = "1732291200.500000", length: String = "7", checksum: String = "b7470d46a1e1113f",
                       pid: String = "4242", id: String = "3F2504E0-4F89-11D3-9A0C-0305E82C3301") -> Data {
        Data("DNWH1 \(id) json \(length) \(checksum) \(passed) \(pid)\n{\"v\":1}".utf8)
    }

    @Test("a header field outside PROTOCOL.md's form is a fault: a time that is not 'seconds.six digits' never reaches a writer, who could not write it back")
    func headerFieldsAreChecked() throws {
        // The example itself decodes (ProtocolVectorTests holds it too).
        #expect(try Envelope.decode(Self.header()).get().header.passed == 1732291200.5)
        // NaN, infinities, negative or huge times and other spellings of a number: the old
        // reader took anything Double(_:) parses, and re-encoding such a time (a bridge mirroring
        // the message) trapped converting it to microseconds.
        for passed in ["nan", "inf", "-inf", "-5.500000", "1e300", "0x1p3", "1732291200.5", "1732291200", ".500000",
                       "1732291200.5000000", "+1732291200.500000", "17322912000000000000.500000", "1732291200,500000"] {
            #expect(throws: EnvelopeFault.self, "passed \(passed)") { try Envelope.decode(Self.header(passed: passed)).get() }
        }
        for length in ["+7", "-7", "07x", "", "99999999999999999999"] {
            #expect(throws: EnvelopeFault.self, "length \(length)") { try Envelope.decode(Self.header(length: length)).get() }
        }
        for pid in ["+4242", "4242x", "", "99999999999"] {
            #expect(throws: EnvelopeFault.self, "pid \(pid)") { try Envelope.decode(Self.header(pid: pid)).get() }
        }
        for checksum in ["B7470D46A1E1113F", "b7470d46a1e1113", "b7470d46a1e1113g", "b7470d46a1e1113f0"] {
            #expect(throws: EnvelopeFault.self, "checksum \(checksum)") { try Envelope.decode(Self.header(checksum: checksum)).get() }
        }
        // What the old reader took and PROTOCOL.md allows stays: an opaque id, pid 0 (a mirrored
        // copy), a leading zero in the seconds.
        #expect(try Envelope.decode(Self.header(id: "any-opaque_id.1")).get().header.id == "any-opaque_id.1")
        #expect(try Envelope.decode(Self.header(pid: "0")).get().header.pid == 0)
        #expect(try Envelope.decode(Self.header(passed: "0.000001")).get().header.passed == 0.000_001)
        #expect(try Envelope.decode(Self.header(length: "007")).get().header.length == 7)
    }

    @Test("a message whose time is NaN, infinite or negative is never written back: a bridge mirroring it trapped")
    func mirroredTimes() async {
        // What notify-bridge does with a message it exports or imports (Mirroring.swift): decode,
        // then the file form again. In a child process: before the fix it died of a trap.
        await #expect(processExitsWith: .success) {
            for passed in ["nan", "inf", "-inf", "-5.500000", "1e300"] {
                guard case .success(let envelope) = Envelope.decode(WormholeUnitTests.header(passed: passed)) else { continue }
                let message = WormholeMessage(identifier: "x", envelope: envelope, sequence: nil)
                _ = Envelope(message, pid: 0).encoded()
            }
        }
    }

    @Test("20,000 changed message files: each decodes or is a fault, never a trap; what decodes encodes to a file that decodes the same")
    func envelopeMutations() throws {
        var generator = QueueSegmentTests.Seeded(state: 0x5EED_E7E1)
        let original = Array(Self.header())
        let alphabet = Array("0123456789abcdefABCDEF.-+ \nxDNWH1jsondata".utf8) + [0x00, 0xFF, 0xC3]
        for round in 0..<20_000 {
            var bytes = original
            for _ in 0...Int.random(in: 0...3, using: &generator) {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[at] = alphabet.randomElement(using: &generator)!
                case 1: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
                default: if bytes.count > 1 { bytes.remove(at: at) }
                }
            }
            guard case .success(let envelope) = Envelope.decode(Data(bytes)) else { continue }
            let again = try Envelope.decode(envelope.encoded()).get()
            #expect(again.header == envelope.header && again.payload == envelope.payload, "round \(round): \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    @Test("a decoded envelope encodes back to the same bytes, whatever the time's digits")
    func envelopeBytesRoundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = UInt64.random(in: 0 ... 4_000_000_000, using: &generator) // to 2096: microseconds under 2⁵², which a Double holds
            let micros = UInt64.random(in: 0 ... 999_999, using: &generator)
            let passed = "\(seconds)." + String(String(micros + 1_000_000).dropFirst())
            let pid = Int32.random(in: 0 ... .max, using: &generator)
            let file = Self.header(passed: passed, pid: String(pid))
            let envelope = try Envelope.decode(file).get()
            #expect(envelope.header.passed == Double(passed)!, "\(passed)") // as strtod rounds it
            #expect(envelope.encoded() == file, "\(passed) \(pid)")
        }
    }

    /// Found by the fuzzing lane (.ci/fuzz, message-file): a file whose time is in 2255 or later
    /// (2⁵³ µs and over, read with `strtod`) was written back with another last digit, which read
    /// as another time; from 2112 on (2⁵² µs) the encoder's rounding could miss by one too.
    @Test("a time of any year PROTOCOL.md allows reads the same once written back (fuzzing found 9732291200.315115 did not)")
    func farTimesRoundTrip() throws {
        var generator = QueueSegmentTests.Seeded(state: 0x7153_2255)
        var times = ["9732291200.315115", "9007199254.740992", "9007199254.740993", "4503599627.370496", "9999999999.999999"]
        for _ in 0..<5000 {
            let seconds = 4_503_599_627 + generator.next() % (10_000_000_000 - 4_503_599_627) // 2⁵² µs up to 10 digits
            times.append("\(seconds)." + String(String(generator.next() % 1_000_000 + 1_000_000).dropFirst()))
        }
        for passed in times {
            let envelope = try Envelope.decode(Self.header(passed: passed)).get()
            let again = try Envelope.decode(envelope.encoded()).get()
            #expect(again.header == envelope.header, "\(passed) was written back as \(again.header.passed)")
        }
    }

    /// A child forked while another thread of its parent held the lease owner's lock inherited
    /// the lock held, by a thread it does not have: its first lease trapped in the lock (SIGILL,
    /// the child's exit status here before the fix).
    @Test("a child forked while another thread looks up the lease owner gets its own owner thread, never waiting for the parent's")
    func leaseOwnerAcrossFork() async {
        await #expect(processExitsWith: .success) {
            guard let parentOwner = LeaseOwner.thread else { exit(2) } // started here, in the exit test's process
            var looker = pthread_t()
            guard pthread_create(&looker, nil, { _ in
                while true { _ = LeaseOwner.thread } // over and over (before the fix each look took and left a lock)
            }, nil) == 0 else { exit(3) }
            for _ in 0..<300 {
                let child = fork()
                if child == 0 {
                    let owner = LeaseOwner.thread
                    _exit(owner != nil && owner != parentOwner ? 0 : 4)
                }
                guard child > 0 else { exit(5) }
                guard Self.reap(child, seconds: 10) == 0 else { exit(6) } // a trap, a wait for ever, or no owner of its own
            }
            exit(0)
        }
    }

    /// A forked child's status, waited for at most `seconds`; a child still running then is
    /// killed, and nil returned (a hang). An exit test's process may have SIGALRM blocked, so the
    /// parent keeps the time.
    static func reap(_ child: pid_t, seconds: Int) -> Int32? {
        var status: Int32 = 0
        for _ in 0 ..< seconds * 100 {
            let done = waitpid(child, &status, WNOHANG)
            if done == child { return status }
            if done < 0 && errno != EINTR { return -1 }
            usleep(10_000)
        }
        kill(child, SIGKILL)
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        return nil
    }

    /// A child forked from a process whose queue wormhole on disk had passed a message hung in
    /// `exit`: the exit-time group commit waited for its parent's commit thread, which a child does
    /// not have. And its own pass would take locks and queues its parent's threads may hold.
    @Test("a forked child's wormholes neither write nor listen (.notification, optionDisabled, nothing written), its reads work, and its exit returns (it hung in the exit-time flush)")
    func forkedChild() async {
        await #expect(processExitsWith: .success) {
            var template = Array("/tmp/wormhole-fork-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { exit(2) }
            let directory = String(cString: made)
            let code = Self.forkedChildChecks(in: directory)
            _ = try? FileManager.default.removeItem(atPath: directory)
            exit(code)
        }
    }

    /// forkedChild's body, in the exit test's process: 0, or what failed.
    static func forkedChildChecks(in directory: String) -> Int32 {
        // A bus where nobody listens, named outright: the default (no DARWIN_NOTIFY_BUS) would start
        // the per-user embedded bus, a dbus-daemon and /tmp/darwin-notify-<uid> that outlived the
        // test (CI's leftovers check found them).
        guard let center = try? NotifyCenter(bus: "unix:path=\(directory)/no-bus"),
              let container = try? GroupContainer(group: "group.fork", directory: directory),
              let queue = try? Wormhole(group: "group.fork", transiting: .queue, container: container, center: center),
              let file = try? Wormhole(group: "group.fork", directory: "latest", container: container, center: center) else { return 3 }
        try? file.pass(data: Data("parent".utf8), identifier: "f") // its announcement fails: no bus there
        guard (try? file.message("f"))?.payload == Data("parent".utf8) else { return 4 }
        // A child that only exits, forked while the queue's pass waits for its group commit:
        // the exit-time work is its parent's (before the fix: a wait for ever for the commit).
        try? queue.pass(data: Data("parent".utf8), identifier: "q")
        let exiting = fork()
        if exiting == 0 { exit(0) }
        guard exiting > 0 else { return 5 }
        guard let exited = reap(exiting, seconds: 20) else { return 8 } // hung
        guard exited == 0 else { return 9 }
        let child = fork()
        if child == 0 {
            func refused(_ call: () throws(WormholeError) -> Void) -> Bool {
                do throws(WormholeError) { try call(); return false } catch {
                    if case .notify(let cause)? = error.underlying { return error.code == .notification && cause.code == .optionDisabled }
                    return false
                }
            }
            guard refused({ () throws(WormholeError) in try file.pass(data: Data("child".utf8), identifier: "f") }),
                  refused({ () throws(WormholeError) in try queue.pass(data: Data("child".utf8), identifier: "q") }),
                  refused({ () throws(WormholeError) in try queue.flush() }),
                  refused({ () throws(WormholeError) in try file.clear("f") }),
                  refused({ () throws(WormholeError) in _ = try file.listen(for: "f") { _ in } }) else { _exit(10) }
            guard (try? file.message("f"))?.payload == Data("parent".utf8) else { _exit(11) } // unchanged, and readable
            exit(0) // the exit-time work: the parent's, left alone
        }
        guard child > 0 else { return 5 }
        guard let status = reap(child, seconds: 20) else { return 6 } // hung
        guard status == 0 else { return status & 0x7f != 0 ? 20 : 30 + (status >> 8 & 0xff) }
        guard (try? file.message("f"))?.payload == Data("parent".utf8) else { return 7 }
        return 0
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
