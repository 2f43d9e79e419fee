extension PeerConnection {
    /// Waits until the connection is connected, or throws when it fails, closes or `timeout` passes.
    public func waitUntilConnected(timeout seconds: Double) async throws {
        let deadline = EventLoop.now() + UInt64(seconds * 1e9)
        while true {
            let s = await loop.submit { self.state }
            switch s {
            case .connected: return
            case .failed: throw PeerConnectionError.invalidState(failureReason ?? "ICE or DTLS failed")
            case .closed: throw PeerConnectionError.closed
            default: break
            }
            if EventLoop.now() > deadline {
                let detail = await loop.submit { self.progressDescription }
                throw PeerConnectionError.invalidState(
                    "timed out after \(Int(seconds)) s waiting for ICE/DTLS (\(detail))")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    /// A short description of how far connection establishment got, for error messages.
    var progressDescription: String {
        let iceState = ice.map { "\($0.state)" } ?? "none"
        let dtlsState = dtls.map { "\($0.state)" } ?? "none"
        return "ice=\(iceState) dtls=\(dtlsState)" + relaySummary
    }
}
