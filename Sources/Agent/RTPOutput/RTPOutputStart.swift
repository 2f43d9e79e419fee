import RTC

extension RTPOutput {
    /// The start-up of `--relay` that the room agent and the Janus agent share: parses `url`
    /// (`rtp://HOST:PORT`), opens the output on `loop`, writes the session description that plays it
    /// to `relay.sdp` in `sdpDirectory` (the current directory when nil; the directory must exist) and
    /// logs how to play it.
    static func start(
        url: String, loop: EventLoop, sdpDirectory: String?, log: @escaping @Sendable (String) -> Void
    ) async throws(RTPOutputError) -> RTPOutput {
        let target = try parseURL(url)
        let opened = await loop.submit { () -> Result<RTPOutput, RTPOutputError> in
            Result { () throws(RTPOutputError) in
                try RTPOutput(destination: target.host, basePort: target.port, loop: loop)
            }
        }
        let output = try opened.get()
        // The .sdp lets ffmpeg/GStreamer/VLC open the relayed streams.
        let sdpPath = (sdpDirectory ?? ".") + "/relay.sdp"
        let written = await loop.submit { () -> Result<Void, RTPOutputError> in
            output.onFormatChange = { format, outcome in
                switch outcome {
                case .success(let path?): log("relaying \(format.rtpmap) video; rewrote \(path)")
                case .success(nil): log("relaying \(format.rtpmap) video")
                case .failure(let error): log("relaying \(format.rtpmap) video, but \(error)")
                }
            }
            return Result { () throws(RTPOutputError) in try output.writeSDP(to: sdpPath) }
        }
        do { try written.get() } catch {
            await loop.submit { output.close() }
            throw error
        }
        log("relaying to \(url); play with: ffmpeg -protocol_whitelist file,udp,rtp -i \(sdpPath)")
        return output
    }
}
