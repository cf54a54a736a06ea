import Foundation
import Testing

/// notify_set_state / notify_get_state between processes on one bus.
extension IntegrationSuites {
    @Suite("State", .serialized)
    struct StateTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        private func state(_ args: [String]) throws -> String {
            let r = try run("cnotify-probe", ["state"] + args, environment: bus.environment)
            return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @Test("state set in one process is read in another after the setter exits, and survives a bus restart")
        func sharedAndDurable() throws {
            #expect(try state(["get", "state.never.set"]) == "get state.never.set: 0 0")
            #expect(try state(["set", "state.shared", "18446744073709551615"]) == "set state.shared: 0")
            #expect(try state(["get", "state.shared"]) == "get state.shared: 0 18446744073709551615")
            #expect(try state(["set", "state.shared", "42"]) == "set state.shared: 0")
            try bus.restart()
            #expect(try state(["get", "state.shared"]) == "get state.shared: 0 42")
        }

        @Test("state on a cancelled token and a NULL pointer are refused; self. state stays in the process")
        func badInput() throws {
            #expect(try state(["cancelled", "state.bad"]) == "set cancelled: 2\nget cancelled: 2\nget NULL: 10")
            #expect(try state(["set", "self.mine", "5"]) == "set self.mine: 0")
            #expect(try state(["get", "self.mine"]) == "get self.mine: 0 0") // another process: not shared
            let long = String(repeating: "n", count: 512)
            #expect(try state(["set", long, "1"]) == "set \(long): 0")
            #expect(try state(["get", long]) == "get \(long): 0 1")
        }
    }
}
