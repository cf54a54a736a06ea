import NotifyUtilCore
import Testing

@Suite("notifyutil argument parsing")
struct InvocationParserTests {
    @Test("commands keep their order; -N waits for N, -w forever")
    func order() throws {
        let inv = try InvocationParser.parse(["-p", "a", "-w", "b", "-3", "c", "-p", "e"])
        #expect(inv.commands == [.post("a"), .wait("b", count: nil, delivery: .port), .wait("c", count: 3, delivery: .port),
                                 .post("e")])
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
        ["-g"], ["-s"], ["-s", "k"], ["-s", "k", "abc"], ["-s", "k", "1.5"], ["-signal", "x"], ["-signal", "0"],
        ["-0", "d"], // Apple's waits forever; a script means -w
    ])
    func usageErrors(arguments: [String]) {
        #expect(throws: UsageError.self) { try InvocationParser.parse(arguments) }
    }

    @Test("embedded bus commands")
    func busCommands() throws {
        let inv = try InvocationParser.parse(["--bus-status", "--bus-start", "--bus-stop"])
        #expect(inv.commands == [.busStatus, .busStart, .busStop])
    }

    @Test("delivery switches apply to later registrations; -signal takes an optional number (default 1)")
    func deliverySwitches() throws {
        let inv = try InvocationParser.parse(["-w", "a", "-file", "-1", "b", "-signal", "-w", "c", "-signal", "10", "-w", "d",
                                              "-dispatch", "-w", "e", "-check", "-w", "f", "-plain", "-w", "g", "-port", "-w", "h"])
        #expect(inv.commands == [
            .wait("a", count: nil, delivery: .port), .wait("b", count: 1, delivery: .file),
            .wait("c", count: nil, delivery: .signal(1)), .wait("d", count: nil, delivery: .signal(10)),
            .wait("e", count: nil, delivery: .dispatch), .wait("f", count: nil, delivery: .check),
            .wait("g", count: nil, delivery: .plain), .wait("h", count: nil, delivery: .port),
        ])
    }

    @Test("-g and -s take a key (and a 64-bit value)")
    func stateCommands() throws {
        let inv = try InvocationParser.parse(["-s", "k", "18446744073709551615", "-s", "n", "-1", "-g", "k"])
        #expect(inv.commands == [.set("k", .max), .set("n", .max), .get("k")])
    }
}
