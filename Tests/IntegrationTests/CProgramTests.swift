import Foundation
import Testing

/// A C program written for macOS compiles unchanged against our notify.h and runs on our library.
extension IntegrationSuites {
    @Suite("A plain C program", .serialized)
    struct CProgramTests {
        let bus: TestBus
        init() throws { bus = try TestBus() }

        @Test("compiles with #include <notify.h>, links libCNotify.so, and works")
        func macOSStyleProgram() throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
            let products = ChildProcess.productsDirectory
            try #require(FileManager.default.fileExists(atPath: products + "/libCNotify.so"), "build the CNotify product first")
            let out = try makeTemporaryDirectory("cprog") + "/macos_style"
            let cc = try run("/usr/bin/cc", ["-Wall", "-Werror", root + "/Tests/Fixtures/macos_style.c",
                                             "-I", root + "/Shims/CNotify/include", "-L", products, "-lCNotify",
                                             "-Wl,-rpath," + products, "-o", out])
            #expect(cc.status == 0, "cc: \(cc.err)")
            let result = try run(out, [], environment: bus.environment)
            #expect(result.status == 0, "\(result.err)")
            #expect(result.out == "ok\n")
        }
    }
}
