import DarwinNotify
import Foundation
import Synchronization
import Testing
import Wormhole

/// A wormhole on disk (synced): `file` passes through the prepared spare file (SpareFile.swift),
/// `queue` passes synced in groups and announced after their sync (GroupCommit.swift).
extension IntegrationSuites {
    @Suite("Wormhole on disk", .serialized)
    struct WormholeDiskTests {
        let fixture: WormholeFixture
        init() throws { fixture = try WormholeFixture() }

        struct Tick: Codable, Sendable { var t: Int; var i: Int }
        /// What `wormhole-probe spin` passes.
        struct Spun: Codable, Sendable { var w: Int; var i: Int; var p: String? }

        var messagesPath: String { fixture.root + "/group.test/wormhole/messages" }

        /// The files in the wormhole's `messages/`, dot names included.
        func messageFiles() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: messagesPath).sorted()
        }

        /// The files in `messages/` but this process's spare: the message it replaced last, kept
        /// under its `.tmp-<pid>-` name to be written again (SpareFile.swift). At most one.
        func messageFilesButOurSpare() throws -> [String] {
            let all = try messageFiles()
            let spares = all.filter { $0.hasPrefix(".tmp-\(getpid())-") }
            #expect(spares.count <= 1, "\(spares)")
            return all.filter { !spares.contains($0) }
        }

        func inode(_ path: String) -> UInt64? {
            var info = stat()
            return lstat(path, &info) == 0 ? UInt64(info.st_ino) : nil
        }

        @Test("file on disk: passes of every size, smaller and larger than the spare, each read whole by another process; messages/ holds only the message afterwards")
        func filePassesThroughTheSpare() throws {
            #expect(!wormholeStorageIsInMemory(fixture.root), "the fixture's root must be on a disk for this test to sync")
            let wormhole = try fixture.wormhole()
            // 1 KiB, then smaller, larger, the same again, one over the spare's 64 KiB limit (the
            // plain path), then small again (a spare of the large size, truncated), then empty.
            for size in [1024, 10, 60_000, 1024, 70_000, 100, 0, 1024] {
                let text = String(repeating: "x", count: size)
                try wormhole.pass(text, identifier: "sized")
                #expect(try wormhole.message("sized", as: String.self) == text, "size \(size), read here")
                let read = try fixture.cliOK(["read", "group.test", "sized"])
                #expect(read == "\"\(text)\"\n", "size \(size), read by the wormhole tool: \(read.count) bytes")
            }
            #expect(try messageFilesButOurSpare() == ["sized"])
        }

        /// A file's access time, seconds.
        func accessTime(_ path: String) -> Int? {
            var info = stat()
            return lstat(path, &info) == 0 ? info.st_atim.tv_sec : nil
        }

        /// Sets every regular file's access time under `root` to 2020-01-01, its modification
        /// time left as it is: on a `relatime` mount (this machine's) a read of such a file
        /// would set its access time to now.
        func ageAccessTimes(under root: String) -> [String] {
            let files = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? [])
                .map { root + "/" + $0 }.filter { (try? FileManager.default.attributesOfItem(atPath: $0)[.type] as? FileAttributeType) == .typeRegular }
            for file in files {
                let times = [timespec(tv_sec: 1_577_836_800, tv_nsec: 0), timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2)] // UTIME_OMIT, a macro Swift does not import
                #expect(utimensat(AT_FDCWD, file, times, AT_SYMLINK_NOFOLLOW) == 0, "\(file): errno \(errno)")
            }
            return files
        }

        @Test("file and queue on disk: a reader leaves the access time of what it reads alone (O_NOATIME), so a read between two passes gives the writer's next sync no inode to write")
        func readsLeaveAccessTime() throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass("first", identifier: "quiet")
            // A durable queue listener, registered and stopped, so that what follows waits for it.
            let first = try fixture.listener(["--transiting", "queue", "listen", "group.test", "jobs", "--name", "worker", "--count", "1"])
            try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "jobs", "0"])
            #expect(try first.waitForExit() == 0)
            let queue = try fixture.wormhole(transiting: .queue)
            for n in 1...3 { try queue.pass(n, identifier: "jobs") }
            let message = messagesPath + "/quiet"
            let segments = ageAccessTimes(under: fixture.root + "/group.test/wormhole/queues")
            #expect(!segments.isEmpty)
            _ = ageAccessTimes(under: messagesPath)
            #expect(accessTime(message) == 1_577_836_800)
            // Read here, by the wormhole tool, and by a queue listener in another process.
            #expect(try wormhole.message("quiet", as: String.self) == "first")
            #expect(try fixture.cliOK(["read", "group.test", "quiet"]) == "\"first\"\n")
            let durable = try fixture.listener(["--transiting", "queue", "listen", "group.test", "jobs", "--name", "worker", "--count", "3"])
            #expect(try durable.waitForExit() == 0)
            #expect(durable.lines == ["1", "2", "3"])
            #expect(accessTime(message) == 1_577_836_800, "the message file's access time was set by a read")
            for segment in segments {
                #expect(accessTime(segment) == 1_577_836_800, "\(segment): its access time was set by a read")
            }
        }

        @Test("a group member of another uid reads a shared container's message: O_NOATIME, refused for a file it does not own, is dropped, not an error",
              .enabled(if: geteuid() == 0, "needs root: reads as another uid through setpriv"))
        func sharedReaderWithoutNoAccessTime() throws {
            #expect(chmod(fixture.root, 0o755) == 0)
            try fixture.cliOK(["--share-with-group", "root", "pass", "group.shared", "m", "\"hello\""])
            let read = try run("/usr/bin/setpriv", ["--reuid=1001", "--regid=1001", "--groups=0", "--",
                                                    ChildProcess.productsDirectory + "/wormhole", "--share-with-group", "root",
                                                    "read", "group.shared", "m"], environment: fixture.environment)
            #expect(read.status == 0 && read.out == "\"hello\"\n", "\(read)")
        }

        @Test("file on disk: a pass writes the message file again where it is (the same inode, no other file) while the new message is not smaller and fits a page; a smaller one, or one over a page, replaces it")
        func messageWrittenInPlace() throws {
            let wormhole = try fixture.wormhole()
            let message = messagesPath + "/inplace"
            try wormhole.pass("aaaa", identifier: "inplace")
            let first = try #require(inode(message))
            for text in ["bbbb", "cccc", "dddddddd", String(repeating: "e", count: 3500)] {
                try wormhole.pass(text, identifier: "inplace")
                #expect(try wormhole.message("inplace", as: String.self) == text)
                #expect(inode(message) == first, "\(text.prefix(8)) (\(text.count)): written to another file")
                #expect(try messageFiles() == ["inplace"])
            }
            // Smaller: a truncation after the write could leave a damaged file, so it is replaced.
            try wormhole.pass("f", identifier: "inplace")
            #expect(try wormhole.message("inplace", as: String.self) == "f")
            let second = try #require(inode(message))
            #expect(second != first)
            // Over a page: not written in one copy, so replaced too.
            let big = String(repeating: "g", count: 5000)
            try wormhole.pass(big, identifier: "inplace")
            #expect(try wormhole.message("inplace", as: String.self) == big)
            #expect(inode(message) != second)
            #expect(try messageFilesButOurSpare() == ["inplace"])
        }

        @Test("file on disk: a message file of another owner, with another mode or a second link is never written in place: the pass replaces it, and the other name keeps its bytes")
        func foreignMessageNotWrittenInPlace() throws {
            guard geteuid() == 0 else { return } // chown to another user needs root
            let wormhole = try fixture.wormhole()
            try wormhole.pass("aaaa", identifier: "foreign")
            let path = messagesPath + "/foreign", elsewhere = fixture.root + "/elsewhere"
            // Another user's file (root may take a lease on any file, so only the owner check
            // keeps the pass out of it), another mode, a second name.
            let cases: [(String, () -> Int32)] = [
                ("another owner", { chown(path, 65534, 65534) }),
                ("another mode", { chmod(path, 0o644) }),
                ("a second link", { link(path, elsewhere) }),
            ]
            for (what, change) in cases {
                let before = try #require(inode(path))
                #expect(change() == 0, "\(what): errno \(errno)")
                let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                try wormhole.pass("bbbb", identifier: "foreign")
                #expect(try wormhole.message("foreign", as: String.self) == "bbbb", "\(what)")
                #expect(inode(path) != before, "\(what): written in place")
                if what == "a second link" {
                    #expect(try Data(contentsOf: URL(fileURLWithPath: elsewhere)) == bytes, "the other name's bytes changed")
                    unlink(elsewhere)
                }
                try wormhole.pass("aaaa", identifier: "foreign") // written in place: ours again
            }
        }

        @Test("file on disk: a reader that opens a message while a writer holds its lease (writing it in place) waits for it and reads the new message whole, not an error")
        func readerWaitsForLease() throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass("first", identifier: "leased")
            let path = messagesPath + "/leased"
            // This process writes the message in place as a pass does: under a write lease, whose
            // break signal is SIGURG (ignored) and not SIGIO (which would end the test runner).
            let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            #expect(fd >= 0)
            defer { close(fd) }
            #expect(fcntl(fd, 10 /* F_SETSIG */, SIGURG) == 0)
            #expect(fcntl(fd, 1024 /* F_SETLEASE */, Int32(F_WRLCK)) == 0, "errno \(errno)")
            let reader = try ChildProcess("wormhole", ["read", "group.test", "leased"], environment: fixture.environment)
            defer { reader.kill() }
            // The reader's open starts breaking the lease: F_GETLEASE then says what it is being
            // broken to (F_RDLCK, for an open to read). Until then the reader has not opened.
            let deadline = Date().addingTimeInterval(30)
            while fcntl(fd, 1025 /* F_GETLEASE */) == Int32(F_WRLCK), Date() < deadline, reader.isRunning { usleep(1000) }
            #expect(fcntl(fd, 1025) == Int32(F_RDLCK), "the reader never opened the message: \(reader.stderr)")
            // The writer takes its time (a slow disk), then completes the message and lets go.
            usleep(150_000) // the writer's work, not a synchronisation
            #expect(reader.isRunning, "the reader gave up while the message was written: \(reader.stderr)")
            let payload = Data("\"second\"".utf8)
            let bytes = Array(Data("DNWH1 \(UUID().uuidString) json \(payload.count) \(WormholeTestSupport.checksum(payload)) 1732291200.500000 1\n".utf8) + payload)
            #expect(bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } == bytes.count)
            #expect(ftruncate(fd, off_t(bytes.count)) == 0)
            #expect(fcntl(fd, 1024, Int32(F_UNLCK)) == 0)
            #expect(try reader.waitForExit(timeout: 30) == 0, "\(reader.stderr)")
            #expect(reader.stdout == "\"second\"\n")
        }

        @Test("file on disk: a lease never let go (a writer stopped while it writes) does not hang a reader: it reports the lease after about 2 s, and reads the message once the lease is gone")
        func leaseHeldTooLong() throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass("kept", identifier: "stuck")
            let fd = open(messagesPath + "/stuck", O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            #expect(fd >= 0)
            defer { close(fd) }
            #expect(fcntl(fd, 10 /* F_SETSIG */, SIGURG) == 0)
            #expect(fcntl(fd, 1024 /* F_SETLEASE */, Int32(F_WRLCK)) == 0, "errno \(errno)")
            let started = Date()
            let read = try fixture.cli(["read", "group.test", "stuck"], timeout: 30)
            let took = Date().timeIntervalSince(started)
            #expect(read.status != 0 && read.err.contains("lease"), "\(read)")
            #expect(took >= 1.5 && took < 20, "the reader gave up after \(took) s")
            #expect(fcntl(fd, 1024, Int32(F_UNLCK)) == 0)
            #expect(try fixture.cliOK(["read", "group.test", "stuck"]) == "\"kept\"\n")
        }

        @Test("file on disk: a writer SIGKILLed at random points of a run of passes (in place, and replaced when smaller), 100 times and on until 25 were killed after passing: the message is whole after each, a listener gets only whole messages, each writer's in order, and nothing is quarantined")
        func fileWriterKilled() throws {
            let listener = try fixture.listener(["listen", "group.test", "spun"])
            defer { listener.kill() }
            let wormhole = try fixture.wormhole()
            // The kill points cover a writer's start-up here and 60 ms of passes after it. At least
            // 100 writers, and on until 25 of them were killed after passing: a start-up slower than
            // the one measured (under the sanitizers, under load) puts more kills before the first pass.
            let startup = try fixture.probeStartupMilliseconds(["spin", "group.test", "startup", "0", "1"])
            var seen: Set<Int> = [], bad: [String] = []
            var runs = 0
            while runs < 100 || (seen.count < 25 && runs < 400) {
                let run = runs
                runs += 1
                let writer = try ChildProcess("wormhole-probe", ["spin", "group.test", "spun", "\(run)", "1000000"],
                                              environment: fixture.environment)
                usleep(useconds_t(Int.random(in: 0...(startup + 60)) * 1000)) // a random kill point, not a synchronisation
                writer.kill(SIGKILL)
                _ = try writer.waitForExit()
                do {
                    if let tick = try wormhole.message("spun", as: Spun.self) { seen.insert(tick.w) }
                } catch {
                    bad.append("after writer \(run): \(error)")
                }
            }
            let last = try ChildProcess("wormhole-probe", ["spin", "group.test", "spun", "\(runs)", "1"], environment: fixture.environment)
            #expect(try last.waitForExit(timeout: 60) == 0, "\(last.stderr)")
            try listener.waitForLine(timeout: 120) { $0.contains("\"w\":\(runs)") }
            var perWriter: [Int: [Int]] = [:]
            for line in listener.lines {
                let tick = try #require(try? JSONDecoder().decode(Spun.self, from: Data(line.utf8)), "not a whole message: \(line.prefix(80))")
                perWriter[tick.w, default: []].append(tick.i)
            }
            for (w, got) in perWriter {
                #expect(got == got.sorted() && Set(got).count == got.count, "writer \(w): \(got.prefix(20)) not increasing")
            }
            #expect(bad.isEmpty, "\(bad.prefix(3))")
            #expect(!listener.stderr.contains("damaged"), "\(listener.stderr.suffix(2000))")
            let quarantine = fixture.root + "/group.test/wormhole/quarantine"
            let moved = (try? FileManager.default.subpathsOfDirectory(atPath: quarantine)) ?? []
            #expect(moved.isEmpty, "damaged files moved aside: \(moved)")
            let cut = seen.filter { $0 < runs }.count
            #expect(cut >= 25, "\(cut) of \(runs) writers left their message (start-up \(startup) ms)")
            print("wormhole fileWriterKilled: \(cut) of \(runs) writers killed after passing, \(perWriter.values.map(\.count).reduce(0, +)) messages heard (start-up \(startup) ms)")
        }

        @Test("file on disk: a reader that comes while a pass holds its write lease sends no signal to the writing process (a host application's SIGURG handler is never run by the wormhole)")
        func leaseBreakSendsNoSignal() throws {
            let path = messagesPath + "/leased"
            let wormhole = try fixture.wormhole()
            try wormhole.pass("first", identifier: "leased")
            // A reader opening the message as fast as it can, as listeners do when announced: each
            // open during a pass's lease (in place, or a spare) is refused with EWOULDBLOCK and
            // breaks the lease.
            let stop = Atomic<Bool>(false), refused = Atomic<Int>(0), ended = DispatchSemaphore(value: 0)
            let reader = Thread {
                while !stop.load(ordering: .relaxed) {
                    let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
                    if fd >= 0 { close(fd) } else if errno == EWOULDBLOCK { refused.add(1, ordering: .relaxed) }
                }
                ended.signal()
            }
            reader.start()
            defer { stop.store(true, ordering: .relaxed); ended.wait() }
            let writer = try ChildProcess("wormhole-probe", ["spin", "group.test", "leased", "0", "400", "count-urg"],
                                          environment: fixture.environment)
            #expect(try writer.waitForExit(timeout: 120) == 0, "\(writer.stderr)")
            stop.store(true, ordering: .relaxed)
            let done = try #require(writer.lines.first { $0.hasPrefix("done 400") })
            // The reader did come during leases, or this run shows nothing.
            #expect(refused.load(ordering: .relaxed) > 0, "no open was refused: no lease was broken")
            #expect(done == "done 400 urg=0", "the writer's SIGURG handler ran: \(done), \(refused.load(ordering: .relaxed)) opens refused")
        }

        @Test("file on disk: when a pass cannot write in place (each message smaller than the last), the message it replaced is written again by the next pass (no new file), and its name goes when the process exits")
        func replacedMessageIsReused() throws {
            let wormhole = try fixture.wormhole()
            let message = messagesPath + "/reused"
            var inodes: [UInt64] = []
            // Each message shorter than the one before: never written in place (InPlace.swift).
            for i in 0..<6 {
                try wormhole.pass(String(repeating: "r", count: 60 - 10 * i), identifier: "reused")
                #expect(try wormhole.message("reused", as: String.self)?.count == 60 - 10 * i)
                inodes.append(try #require(inode(message)))
                // From the second pass on, the replaced message is this process's spare.
                if i >= 1 {
                    let files = try messageFiles()
                    let spare = files.filter { $0.hasPrefix(".tmp-\(getpid())-") }
                    #expect(spare.count == 1 && inode(messagesPath + "/" + spare[0]) == inodes[i - 1],
                            "pass \(i): \(files), inodes \(inodes)")
                }
            }
            // The first pass makes the message, the second writes the spare made after it, and
            // from then on the two files take turns.
            #expect(inodes[2] == inodes[0] && inodes[3] == inodes[1] && inodes[4] == inodes[2], "\(inodes)")
            // Another process: coordinated updates go through the same spares, and its exit
            // removes its spare's name.
            let result = try run("wormhole-probe", ["increment", "group.test", "counted", "5"], environment: fixture.environment)
            #expect(result.status == 0, "\(result.err)")
            #expect(try wormhole.message("counted", as: [String: Int].self) == ["count": 5])
            #expect(try messageFilesButOurSpare() == ["counted", "reused"])
        }

        @Test("file on disk: a replaced message that a reader still holds open is never written again: the reader reads it whole after later passes")
        func heldMessageIsNotReused() throws {
            let wormhole = try fixture.wormhole()
            let first = String(repeating: "1", count: 1000)
            try wormhole.pass(first, identifier: "held")
            // A reader opens the message, as a listener does, and is slow to read it.
            let fd = open(messagesPath + "/held", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            #expect(fd >= 0)
            defer { close(fd) }
            // The next pass replaces it (it becomes the spare), the one after would write it.
            for n in 2...4 {
                try wormhole.pass(String(repeating: "\(n)", count: 1000), identifier: "held")
                #expect(try wormhole.message("held", as: String.self) == String(repeating: "\(n)", count: 1000))
            }
            var bytes = [UInt8](repeating: 0, count: 4096)
            let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            let text = String(decoding: bytes[0..<max(0, count)], as: UTF8.self)
            #expect(text.hasPrefix("DNWH1 ") && text.hasSuffix("\"" + first + "\""),
                    "the held file now reads \(count) bytes: \(text.prefix(80))…\(text.suffix(20))")
            #expect(try messageFilesButOurSpare() == ["held"])
        }

        /// The message checksum of docs/PROTOCOL.md ("Message file").
        static func checksum(_ payload: [UInt8]) -> String {
            var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(payload.count)
            var i = 0
            while i + 8 <= payload.count {
                var w: UInt64 = 0
                for k in 0..<8 { w |= UInt64(payload[i + k]) << (8 * UInt64(k)) }
                h = (h ^ w) &* 0xFF51_AFD7_ED55_8CCD
                h = (h << 31) | (h >> 33)
                i += 8
            }
            while i < payload.count { h = (h ^ UInt64(payload[i])) &* 0x0100_0000_01B3; i += 1 }
            h ^= h >> 33
            h = h &* 0xC4CE_B9FE_1A85_EC53
            h ^= h >> 33
            let hex = String(h, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }

        @Test("file on disk: while a writer in another process passes 1,500 times, this process opens its spare by the .tmp- name and the message over and over (breaking its lease) and reads each message it opens twice, apart: the lease's signal does not end the writer, every pass lands, and a message file once opened reads the same whole message to the end")
        func spareOpenedWhileWritten() throws {
            let wormhole = try fixture.wormhole(transiting: .coordinated)
            try wormhole.update("counted", as: [String: Int].self) { $0 = ["count": 0] }
            let writer = try ChildProcess("wormhole-probe", ["increment", "group.test", "counted", "1500"],
                                          environment: fixture.environment)
            let prefix = ".tmp-\(writer.processIdentifier)-"
            var refused = 0, messages = 0, bad: [String] = []
            var first = [UInt8](repeating: 0, count: 4096), again = first
            func read(_ fd: Int32, into buffer: inout [UInt8]) -> Int {
                buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            }
            while writer.isRunning {
                // A spare, by its name: opening it while it is written breaks the writer's lease
                // (the open is refused, and the writer is signalled); opening it between passes
                // keeps the next pass off it.
                let spares = ((try? messageFiles()) ?? []).filter { $0.hasPrefix(prefix) }
                for _ in 0..<20 {
                    for name in spares {
                        let fd = open(messagesPath + "/" + name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                        if fd < 0 { if errno == EWOULDBLOCK { refused += 1 }; continue }
                        close(fd)
                    }
                }
                // The message, as a reader opens it: read at once, then again after passes went by.
                // Refused too while the writer writes it in place (InPlace.swift).
                let fd = open(messagesPath + "/counted", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                guard fd >= 0 else { if errno == EWOULDBLOCK { refused += 1 }; continue }
                let count = read(fd, into: &first)
                usleep(2000)
                let later = read(fd, into: &again)
                close(fd)
                messages += 1
                guard count > 0, let newline = first[0..<count].firstIndex(of: 0x0a) else {
                    bad.append("\(count) bytes, no header line"); continue
                }
                let fields = String(decoding: first[0..<newline], as: UTF8.self).split(separator: " ")
                let payload = Array(first[(newline + 1)..<count])
                if fields.count != 7 || Int(fields[3]) != payload.count || String(fields[4]) != Self.checksum(payload) {
                    bad.append("not whole: " + String(decoding: first[0..<count], as: UTF8.self))
                } else if later != count || first[0..<count] != again[0..<later] {
                    bad.append("changed while open: " + String(decoding: again[0..<max(0, later)], as: UTF8.self))
                }
            }
            let status = try writer.waitForExit()
            #expect(status == 0, "the writer ended with \(status) (SIGIO is \(SIGIO)): \(writer.stderr)")
            #expect(try wormhole.message("counted", as: [String: Int].self) == ["count": 1500])
            #expect(bad.isEmpty, "\(bad.count) of \(messages) messages: \(bad.prefix(3))")
            #expect(refused > 0 && messages > 0, "refused \(refused), messages read \(messages): the test did not race")
            print("spareOpenedWhileWritten: \(refused) opens of a spare refused (its lease broken), \(messages) messages read whole twice")
        }

        @Test("file on disk: a directory someone made at a message's path fails the pass, as before, and stays where it is with what it holds (never exchanged away under a hidden name)")
        func directoryAtMessagePath() throws {
            let wormhole = try fixture.wormhole()
            try wormhole.pass(1, identifier: "other") // the container, and a spare for the next pass
            let path = fixture.root + "/group.test/wormhole/messages/taken"
            try FileManager.default.createDirectory(atPath: path + "/inside", withIntermediateDirectories: true)
            #expect(throws: WormholeError.self) { try wormhole.pass(2, identifier: "taken") }
            #expect(FileManager.default.fileExists(atPath: path + "/inside"))
            #expect(try messageFiles() == ["other", "taken"])
        }


        @Test("file on disk: a listener in another process gets 200 passes from two threads, each at most once, the last one last; no temporary file stays")
        func fileConcurrentPasses() throws {
            let listener = try fixture.listener(["listen", "group.test", "race"])
            let wormhole = try fixture.wormhole()
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                for i in 0..<100 { #expect(throws: Never.self) { try wormhole.pass(Tick(t: thread, i: i), identifier: "race") } }
            }
            try wormhole.pass(Tick(t: 9, i: 999), identifier: "race")
            // The tool prints each payload as JSON, keys in any order: compared as values.
            _ = try listener.waitForLine { $0.contains("999") }
            listener.kill(SIGTERM)
            let ticks = listener.lines.compactMap { try? JSONDecoder().decode(Tick.self, from: Data($0.utf8)) }
            #expect(ticks.count == listener.lines.count, "\(listener.lines.prefix(3))")
            #expect(ticks.last.map { [$0.t, $0.i] } == [9, 999])
            #expect(Set(ticks.map { $0.t * 1000 + $0.i }).count == ticks.count, "a message came twice")
            #expect(try messageFilesButOurSpare() == ["race"])
        }

        @Test("queue on disk: 500 passes return before their sync, and a listener in another process is told of every one, in order; flush() returns once all are announced")
        func queueGroupCommit() throws {
            let listener = try fixture.listener(["--transiting", "queue", "listen", "group.test", "batch", "--count", "500"])
            let queue = try fixture.wormhole(transiting: .queue)
            for i in 0..<500 { try queue.pass(i, identifier: "batch") }
            try queue.flush()
            #expect(try listener.waitForExit() == 0)
            let passedLines: [String] = (0..<500).map { String($0) }
            #expect(listener.lines == passedLines)
            // Two segments (1…256, 257…512), no file per message and no temporary name.
            let names = try FileManager.default.contentsOfDirectory(atPath: fixture.root + "/group.test/wormhole/queues/batch")
            #expect(names.sorted() == [".cursors", ".state", "00000000000000000001.seg", "00000000000000000257.seg"], "\(names.sorted())")
        }

        @Test("queue on disk: the wormhole tool's pass is announced before it exits, so a running listener gets it")
        func queueToolPassIsAnnounced() throws {
            let listener = try fixture.listener(["--transiting", "queue", "listen", "group.test", "tool", "--count", "3"])
            for n in 1...3 { try fixture.cliOK(["--transiting", "queue", "pass", "group.test", "tool", "\(n)"]) }
            #expect(try listener.waitForExit() == 0)
            #expect(listener.lines == ["1", "2", "3"])
        }
    }
}
