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
            #expect(try state(["get", "state.never.set"]) == "get state.never.set: OK 0")
            #expect(try state(["set", "state.shared", "18446744073709551615"]) == "set state.shared: OK")
            #expect(try state(["get", "state.shared"]) == "get state.shared: OK 18446744073709551615")
            #expect(try state(["set", "state.shared", "42"]) == "set state.shared: OK")
            try bus.restart()
            #expect(try state(["get", "state.shared"]) == "get state.shared: OK 42")
        }

        @Test("state on a cancelled token and a NULL pointer are refused; self. state stays in the process")
        func badInput() throws {
            #expect(try state(["cancelled", "state.bad"]) == "set cancelled: Invalid Token\nget cancelled: Invalid Token\nget NULL: Null Input")
            #expect(try state(["set", "self.mine", "5"]) == "set self.mine: OK")
            #expect(try state(["get", "self.mine"]) == "get self.mine: OK 0") // another process: not shared
            let long = String(repeating: "n", count: 512)
            #expect(try state(["set", long, "1"]) == "set \(long): OK")
            #expect(try state(["get", long]) == "get \(long): OK 1")
        }
    }
}
