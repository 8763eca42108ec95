import RPCCore
import Testing

/// Expects `body` to fail with `code`; returns the error for further checks.
@discardableResult
public func expectError(_ code: ErrorCode, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> RPCError? {
    do {
        try await body()
        Issue.record("expected \(code), but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Expects `body` to fail with `code` and a message (or data) that mentions `text`.
@discardableResult
public func expectError(_ code: ErrorCode, containing text: String, sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () async throws -> Void) async -> RPCError? {
    let error = await expectError(code, sourceLocation: sourceLocation, body)
    if let error {
        #expect("\(error.message) \(error.data.map { "\($0)" } ?? "")".contains(text), "\(error)", sourceLocation: sourceLocation)
    }
    return error
}
