import Dispatch
import Foundation
import RoomProtocol
import Signaling

extension Room {
    /// Claims the single slot for a mode change or mic/cam toggle (3055 when taken).
    func beginOperation(_ api: String) throws {
        let taken: Bool = operationLock.withLock {
            if operationFlag.value { return true }
            operationFlag.value = true
            return false
        }
        if taken {
            throw UnderstudyError(code: 3055, message: "\(api): another mode change or media toggle is running")
        }
    }

    func endOperation() { operationLock.withLock { operationFlag.value = false } }

    /// ``videoCodec`` `auto`, after `roomVideoCodecsChanged`: a webcam sent in another codec than
    /// the room's choice now is stopped and published again in it (receivers see the camera go off
    /// and on). A toggle or mode change under way is waited for (up to 30 s); the codec is checked
    /// again each time, so changes in quick succession end in the last choice.
    func followVideoCodec() {
        guard videoCodec == .auto else { return }
        Task {
            for _ in 0..<300 {
                guard isJoined, let sent = media.publishedVideoCodec, sent != publishVideoCodec else { return }
                guard (try? beginOperation("videoCodec auto")) != nil else {
                    try? await Task.sleep(for: .milliseconds(100))
                    continue
                }
                await media.stopLocal(.video, onServer: true)
                do { try await media.produce([.video], reportStatus: true) } catch {
                    let e = error as? UnderstudyError ?? UnderstudyError(code: 3049, message: "\(error)")
                    eventQueue.async { self.emit { $0.onError(e) } }
                }
                endOperation()
                return
            }
        }
    }

    /// On the event queue: delivers the local participant's `participantModeChanged` that arrived
    /// while ``changeMode(_:)`` was stopping its streams (none when it has not arrived yet: it is
    /// then delivered as it comes).
    func releaseOwnModeEvent() {
        dispatchPrecondition(condition: .onQueue(eventQueue))
        guard let mode = ownModeEvents.release(), exitReason == nil else { return }
        localParticipant.update(mode: mode)
        emit { $0.onParticipantModeChanged(participantId: localParticipant.id, mode: mode) }
    }

    /// Changes the caller's own mode (docs/spec/change-mode.md). Leaving `SEND_AND_RECV` stops screen, camera and mic;
    /// returning restores what was on before (or `micEnabled`/`camEnabled` for a participant that
    /// joined without sending).
    public func changeMode(_ mode: Mode) async throws {
        try gate("changeMode")
        let target = mode.canonical
        let local = localParticipant
        let previous = local.mode
        if previous == target {
            throw UnderstudyError(code: 3054, message: "already in \(target.rawValue)")
        }
        try beginOperation("changeMode")
        defer { endOperation() }
        // The server answers first: a refusal (4065) or an interruption (3065, 3079, 3056) leaves the
        // local media as it was, matching the server, which keeps the producers in that case.
        // Leaving the stage also ends the publish connection on both sides: an audience member that may
        // never publish again holds no ICE, DTLS or SRTP state on the server (a later produce opens a
        // new connection).
        var request: [String: JSONValue] = ["mode": .string(target.rawValue)]
        let leavingStage = previous == .SEND_AND_RECV
        if leavingStage {
            request["closePublishConnection"] = true
            // docs/spec/room-api.md §3: the caller hears its streams end before its own participantModeChanged,
            // which the server may send before its answer: the event waits for the streams to stop.
            await onQueue { self.ownModeEvents.hold() }
        }
        do {
            _ = try await call(.changeMode, .object(request))
        } catch let e as UnderstudyError {
            if leavingStage { await onQueue { self.releaseOwnModeEvent() } }
            throw [3054, 3056, 3065, 3079].contains(e.code)
                ? e : UnderstudyError(code: 4065, message: "changeMode refused: \(e.message)", underlyingError: e)
        }
        if leavingStage {
            let producing = media.producingKinds
            savedMediaState.value = (producing.contains(.audio), producing.contains(.video))
            // The server closed the producers itself when the mode changed. Screen share, camera,
            // mic: the order docs/spec/room-api.md §3 names.
            for kind in [StreamKind.share, .video, .audio] where producing.contains(kind) {
                await media.stopLocal(kind, onServer: false)
            }
            media.resetPublish()
            local.update(mode: target)
            await onQueue { self.releaseOwnModeEvent() }
            return
        }
        local.update(mode: target)
        if target == .SEND_AND_RECV {
            let restore = savedMediaState.value ?? (micEnabled, camEnabled)
            var kinds: [StreamKind] = []
            if restore.mic { kinds.append(.audio) }
            if restore.cam { kinds.append(.video) }
            try await media.produce(kinds, reportStatus: true)
        }
    }

    private func toggle(_ api: String, _ kind: StreamKind, on: Bool) async throws {
        try gate(api)
        if on && localParticipant.mode != .SEND_AND_RECV {
            throw UnderstudyError(code: 3066, message: "\(api) needs SEND_AND_RECV mode")
        }
        // A device the join is still publishing counts as on (3054 to turn it on, 3055 to turn it off).
        if media.producingKinds.union(media.joinPublishing).contains(kind) == on {
            throw UnderstudyError(
                code: 3054, message: "\(api): the \(kind == .audio ? "mic" : "camera") is already \(on ? "on" : "off")")
        }
        try beginOperation(api)
        defer { endOperation() }
        if on {
            try await media.produce([kind], reportStatus: true)
        } else {
            await media.stopLocal(kind, onServer: true)
        }
    }

    /// Turns the local mic on (publishes the synthetic tone).
    public func unmuteMic() async throws { try await toggle("unmuteMic", .audio, on: true) }
    /// Turns the local mic off.
    public func muteMic() async throws { try await toggle("muteMic", .audio, on: false) }
    /// Turns the local camera on (publishes the synthetic test pattern, 3 layers with multiStream).
    public func enableCam() async throws { try await toggle("enableCam", .video, on: true) }
    /// Turns the local camera off.
    public func disableCam() async throws { try await toggle("disableCam", .video, on: false) }

    // MARK: Stats

    private var statsAllowed: Bool { isJoined && state != .RECONNECTING }

    func stats(for participant: Participant, kind: StreamKind) -> [[String: Any]]? {
        guard statsAllowed else { return nil }
        return media.stats(for: participant, kind: kind)
    }

    /// Blocks on the server's `getStats` for the participant (local or remote): what the server
    /// received from it is its `send`, what the server sent it is its `receive`. Bitrates are over
    /// a shared reference reading renewed about once a second; the first call reads twice, half a
    /// second apart, so that it has a rate too.
    func transportStats(for participant: Participant) -> [String: Any]? {
        guard statsAllowed else { return nil }
        func totals() -> (sent: Int, received: Int, data: JSONValue)? {
            let semaphore = DispatchSemaphore(value: 0)
            let box = ResultBox<JSONValue>()
            let data: JSONValue = participant.isLocal ? [:] : ["participantId": .string(participant.id)]
            Task {
                box.value = try? await self.call(.getStats, data)
                semaphore.signal()
            }
            guard semaphore.wait(timeout: .now() + 5) == .success, let data = box.value else { return nil }
            let sent = (data["producers"]?.arrayValue ?? []).compactMap { $0["bytesReceived"]?.intValue }.reduce(0, +)
            let received = (data["consumers"]?.arrayValue ?? []).compactMap { $0["bytesSent"]?.intValue }.reduce(0, +)
            return (sent, received, data)
        }
        if !participant.transportSample.hasReference, let first = totals() {
            _ = participant.transportSample.rates(sent: first.sent, received: first.received)
            Thread.sleep(forTimeInterval: 0.5)
        }
        guard let (sent, received, data) = totals() else { return nil }
        let (sendKbps, receiveKbps) = participant.transportSample.rates(sent: sent, received: received)
        var send: [String: Any] = ["outgoingBitrate": sendKbps, "totalSentBytes": sent]
        if participant.isLocal, let estimate = media.publishEstimate {
            // As W3C's candidate-pair stats name it: the send-side estimate, bits per second.
            send["availableOutgoingBitrate"] = estimate.targetBitrate
            send["bandwidthEstimateState"] = estimate.state.rawValue
        }
        var receive: [String: Any] = ["incomingBitrate": receiveKbps, "totalReceivedBytes": received]
        // The server's stream allocator: its estimate of this connection's downlink (kbit/s) and the
        // layer it forwards of each video consumed (docs/protocol.md, getStats).
        if let estimate = data["transport"]?["estimate"]?.intValue {
            receive["serverEstimate"] = Double(estimate) / 1000
        }
        let layers: [[String: Any]] = (data["consumers"]?.arrayValue ?? []).compactMap { c in
            guard let kind = c["kind"]?.stringValue.flatMap(TrackKind.init(wireName:)),
                kind == .webcam || kind == .screen
            else { return nil }
            var row: [String: Any] = ["paused": c["paused"]?.boolValue ?? false]
            for key in ["participantId", "kind", "currentLayer", "targetLayer", "allocatedLayer"] {
                if let v = c[key]?.stringValue { row[key] = v }
            }
            return row
        }
        if !layers.isEmpty { receive["layers"] = layers }
        return [
            "send": send,
            "receive": receive,
        ]
    }
}
