import NotifyUtilCore
import Testing

@Suite("notifyutil argument parsing")
struct InvocationParserTests {
    @Test("commands keep their order; -N waits for N, -w forever, -0 forever as in Apple's tool")
    func order() throws {
        let inv = try InvocationParser.parse(["-p", "a", "-w", "b", "-3", "c", "-0", "d", "-p", "e"])
        #expect(inv.commands == [.post("a"), .wait("b", count: nil), .wait("c", count: 3), .wait("d", count: nil), .post("e")])
        #expect(inv.output == .key)
        #expect(inv.napMilliseconds == 100)
    }

    @Test("options apply to the whole run")
    func options() throws {
        let inv = try InvocationParser.parse(["-q", "-p", "a", "-v", "-z", "5", "-M", "-R", "--bus", "unix:path=/x"])
        #expect(inv.output == .verbose)
        #expect(inv.napMilliseconds == 5)
        #expect(inv.bus == "unix:path=/x")
    }

    @Test("bad arguments are usage errors", arguments: [
        ["-p"], ["-w"], ["-1"], ["-z"], ["-z", "x"], ["-z", "-1"], ["--bus"], ["--bus", ""], ["-x"], ["p"], ["-"],
    ])
    func usageErrors(arguments: [String]) {
        #expect(throws: UsageError.self) { try InvocationParser.parse(arguments) }
    }

    @Test("embedded bus commands")
    func busCommands() throws {
        let inv = try InvocationParser.parse(["--bus-status", "--bus-start", "--bus-stop"])
        #expect(inv.commands == [.busStatus, .busStart, .busStop])
    }
}
