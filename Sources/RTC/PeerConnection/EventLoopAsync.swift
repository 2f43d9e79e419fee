import Dispatch

extension PeerConnection {
    /// Waits until the connection is connected, or throws when it fails, closes or `timeout` passes.
    ///
    /// The wait is a continuation resumed by the state change itself (or the timeout), not a poll.
    public func waitUntilConnected(timeout seconds: Double) async throws(PeerConnectionError) {
        let outcome: Result<Void, PeerConnectionError> = await withCheckedContinuation { continuation in
            loop.execute { [self] in
                // Runs on the loop thread: `state` and `stateWaiters` are confined there.
                let once = ConnectWaitOnce(continuation)
                if once.finish(connectOutcome(state)) { return }
                stateWaiters.append { [self] s in once.finish(connectOutcome(s)) }
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                    loop.execute { [self] in
                        _ = once.finish(
                            .failure(
                                .invalidState(
                                    "timed out after \(Int(seconds)) s waiting for ICE/DTLS (\(progressDescription))")))
                    }
                }
            }
        }
        try outcome.get()
    }

    /// What a wait for `connected` makes of state `s`: nil while it may still connect.
    private func connectOutcome(_ s: PeerConnectionState) -> Result<Void, PeerConnectionError>? {
        switch s {
        case .connected: .success(())
        case .failed: .failure(.invalidState(failureReason ?? "ICE or DTLS failed"))
        case .closed: .failure(.closed)
        default: nil
        }
    }

    /// A short description of how far connection establishment got, for error messages.
    var progressDescription: String {
        let iceState = ice.map { "\($0.state)" } ?? "none"
        let dtlsState = dtls.map { "\($0.state)" } ?? "none"
        return "ice=\(iceState) dtls=\(dtlsState)" + relaySummary
    }
}

/// Resumes a connect wait once (the state change and the timeout race for it); loop-confined.
private final class ConnectWaitOnce: @unchecked Sendable {
    private var continuation: CheckedContinuation<Result<Void, PeerConnectionError>, Never>?
    init(_ continuation: CheckedContinuation<Result<Void, PeerConnectionError>, Never>) {
        self.continuation = continuation
    }

    /// Resumes with `outcome` unless it is nil or the wait ended already; true when the wait is over.
    func finish(_ outcome: Result<Void, PeerConnectionError>?) -> Bool {
        guard let continuation else { return true }
        guard let outcome else { return false }
        self.continuation = nil
        continuation.resume(returning: outcome)
        return true
    }
}
