import Foundation
import Testing

/// The benchmark's own tools: a reference row is only worth its figure if every post it times
/// reached every process.
extension IntegrationSuites {
    @Suite("Benchmark tools", .serialized)
    struct BenchToolTests {
        @Test("dbus-floor bare-fanout, each way, posts back to back: every post reaches every process, the last one too (broadcast lost the last when the hang-up came with it)",
              arguments: ["", "write", "loop", "broadcast", "doorbell"])
        func bareFanoutLosesNothing(variant: String) throws {
            // Back to back (GAP_MS 0): the poster hangs up right after its last post, so a child
            // that ends at the hang-up before it counted what came with it misses that post.
            for round in 1...3 {
                let r = try run("dbus-floor", ["bare-fanout", "4", "300", "0"] + (variant.isEmpty ? [] : [variant]), timeout: 60)
                #expect(r.status == 0, "round \(round): \(r.err)")
                let lines = r.out.split(separator: "\n")
                #expect(lines.count == 300, "round \(round): \(lines.count) lines")
                let lost = lines.filter { UInt64($0) == nil }
                #expect(lost.isEmpty, "round \(round), \(variant): \(lost.count) of 300 not reached every process (\(lost.prefix(3)))")
            }
        }

        @Test("dbus-floor bare-fanout refuses a way it does not know, and a word too many, with its usage")
        func bareFanoutUsage() throws {
            for arguments in [["bare-fanout", "3", "5", "0", "broadcst"], ["bare-fanout", "3", "5", "0", "broadcast", "extra"],
                              ["bare-fanout", "0", "5", "0", "broadcast"]] {
                let r = try run("dbus-floor", arguments)
                #expect(r.status == 64, "\(arguments): exit \(r.status)")
                #expect(r.err.contains("usage: dbus-floor bare-fanout"), "\(arguments): \(r.err)")
                #expect(r.out.isEmpty)
            }
        }
    }
}
