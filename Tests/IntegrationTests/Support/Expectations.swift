// Expectations.swift: "this call must fail with code X", for both error types of the package.
import DarwinNotify
import Testing
import Wormhole

/// An error with a named code: NotifyError (a NOTIFY_STATUS_*) and WormholeError.
protocol CodedError: Error {
    associatedtype Code: Equatable & CustomStringConvertible
    var code: Code { get }
}

extension NotifyError: CodedError {}
extension WormholeError: CodedError {}

/// `body` must throw an error with `code`. Records an issue, naming the code, when it returns
/// normally (a test that passes when the error is missing proves nothing) or throws another
/// code. Returns the error for further checks, nil when there was none.
@discardableResult
func expectError<E: CodedError, T>(
    _ code: E.Code, _ what: @autoclosure () -> String = "",
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws(E) -> T
) -> E? {
    do {
        _ = try body()
        Issue.record("expected \(code), but nothing was thrown \(what())", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(error.code == code, "expected \(code), got \(error) \(what())", sourceLocation: sourceLocation)
        return error
    }
}
