import Dispatch

extension PeerConnection {
    /// Waits until the connection is connected, or throws when it fails, closes or `timeout` passes.
    ///
    /// The wait is a continuation resumed by the state change itself (or the timeout), not a poll.
    /// A connection whose loop has shut down is closed: the wait throws ``PeerConnectionError/closed``.
    public func waitUntilConnected(timeout seconds: Double) async throws(PeerConnectionError) {
        try await waitFor("ICE/DTLS", timeout: seconds) { [self] s in connectOutcome(s) }
    }

    /// Waits until the connection is connected over a pair selected with the current ICE
    /// credentials (``isFullyConnected``: an ICE restart is over), or throws when it fails, closes
    /// or `timeout` passes. Woken by the ICE events themselves, not a poll.
    public func waitUntilFullyConnected(timeout seconds: Double) async throws(PeerConnectionError) {
        try await waitFor("the ICE restart", timeout: seconds) { [self] s in
            switch s {
            case .failed: .failure(.invalidState(failureReason ?? "ICE or DTLS failed"))
            case .closed: .failure(.closed)
            default: isFullyConnected ? .success(()) : nil
            }
        }
    }

    /// Waits until `outcome` (asked on the loop at once and after every state change or ICE
    /// event) is not nil, or `seconds` pass.
    func waitFor(
        _ what: String, timeout seconds: Double,
        _ outcome: @escaping (PeerConnectionState) -> Result<Void, PeerConnectionError>?
    ) async throws(PeerConnectionError) {
        let check = LoopBound(outcome, loop: loop)
        let outcome: Result<Void, PeerConnectionError> = await withCheckedContinuation { continuation in
            let accepted = loop.execute { [self] in
                // Runs on the loop thread: `state` and `stateWaiters` are confined there.
                let once = ConnectWaitOnce(continuation, loop: loop)
                if once.finish(check.value(state)) { return }
                stateWaiters.append { s in once.finish(check.value(s)) }
                // A one-shot deadline (not a poll): whichever comes first, state change or timeout, wins.
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                    let onLoop = loop.execute { [self] in
                        _ = once.finish(
                            .failure(
                                .invalidState(
                                    "timed out after \(Int(seconds)) s waiting for \(what) (\(progressDescription))")))
                    }
                    // The loop has stopped (its last work ran), so nothing else touches `once` now.
                    if !onLoop { _ = once.finish(.failure(.closed)) }
                }
            }
            if !accepted { continuation.resume(returning: .failure(.closed)) }
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
        let iceState = transport.ice.map { "\($0.state)" } ?? "none"
        let dtlsState = transport.dtls.map { "\($0.state)" } ?? "none"
        return "ice=\(iceState) dtls=\(dtlsState)" + transport.relaySummary
    }
}

/// A connect wait's continuation, resumed once (the state change and the timeout race for it).
typealias ConnectWaitOnce = LoopBound<CheckedContinuation<Result<Void, PeerConnectionError>, Never>?>

extension LoopBound where Value == CheckedContinuation<Result<Void, PeerConnectionError>, Never>? {
    /// Resumes with `outcome` unless it is nil or the wait ended already; true when the wait is over.
    func finish(_ outcome: Result<Void, PeerConnectionError>?) -> Bool {
        guard let continuation = value else { return true }
        guard let outcome else { return false }
        value = nil
        continuation.resume(returning: outcome)
        return true
    }
}
