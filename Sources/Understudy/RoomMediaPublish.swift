import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

// The publish half of ``RoomMedia``: local tracks, their sources and pumps, producing and stopping.
extension RoomMedia {
    // MARK: Publishing

    func publishConnection() throws -> PeerConnection { try connection(\.publish, loopName: "understudy-pub") }

    /// Publishes `kinds` with one `produce` offer; `reportStatus` also announces them on.
    ///
    /// Throws only ``UnderstudyError``s (docs/spec/participant-methods.md: every method throws a
    /// `VideoSDKError`): a local WebRTC failure keeps its cause in `underlyingError` (``mediaFailure(_:kinds:)``).
    func produce(_ kinds: [StreamKind], reportStatus: Bool) async throws {
        do { try await produceTracks(kinds, reportStatus: reportStatus) } catch let e as UnderstudyError {
            throw e
        } catch {
            throw Self.mediaFailure(error, kinds: kinds)
        }
    }

    /// The documented code of a local WebRTC failure while publishing `kinds`: a socket that cannot
    /// open is the media connection failing (3044); anything else (an offer or answer the connection
    /// refused, its loop gone) failed the produce of that kind (3061 share, 3049 webcam, 3058 mic).
    static func mediaFailure(_ error: any Error, kinds: [StreamKind]) -> UnderstudyError {
        if case .socket? = error as? PeerConnectionError {
            return UnderstudyError(
                code: 3044, message: "the publish connection cannot open: \(error)", underlyingError: error)
        }
        let code = kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058
        let names = kinds.map(\.wireKind).joined(separator: ", ")
        return UnderstudyError(code: code, message: "publishing \(names) failed: \(error)", underlyingError: error)
    }

    func produceTracks(_ kinds: [StreamKind], reportStatus: Bool) async throws {
        guard let room, !kinds.isEmpty else { return }
        let pc = try publishConnection()
        startSampling()
        let rids = room.multiStream ? ["q", "h", "f"] : []
        try makeSources(for: kinds, layers: max(1, rids.count))
        // Each m-line offers exactly the codec its source sends (VP8, or H.264 with `--video-codec
        // h264`): a room that does not take it refuses the produce (4051), never a silent switch.
        let codecs = lock.withLock { kinds.map { sources[$0]?.value.codec } }
        await pc.gatherRelayCandidates()
        let (offer, added) = try await pc.loop.submit { () throws -> (String, [RTPTransceiver]) in
            let added = zip(kinds, codecs).map { kind, codec in
                let t: RTPTransceiver
                switch kind {
                case .video: t = pc.addTransceiver(kind: .video, direction: .sendonly, sendRIDs: rids)
                case .share: t = pc.addTransceiver(kind: .video, direction: .sendonly)  // one layer
                default: t = pc.addTransceiver(kind: .audio, direction: .sendonly)
                }
                if let codec, codec != t.codec { t.setCodecPreferences([codec]) }
                return t
            }
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return (o.serialize(), added)
        }
        let tracks = JSONValue.array(kinds.map { ["kind": .string($0.wireKind)] })
        let response: JSONValue
        do {
            response = try await room.call(.produce, ["tracks": tracks, "sdp": .string(offer)])
        } catch let e as UnderstudyError {
            // The refused m-lines stay in the connection: offer them inactive so a later produce is not
            // taken for them.
            let refused = UncheckedSendable(added)
            _ = await pc.loop.submitIfRunning { for t in refused.value { t.direction = .inactive } }
            let code = kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058
            throw [3066, 3056, 3065, 3079, 4051].contains(e.code)
                ? e : UnderstudyError(code: code, message: "produce failed: \(e.message)", underlyingError: e)
        }
        guard let sdp = response["sdp"]?.stringValue, let answer = try? SessionDescription.parse(sdp) else {
            throw UnderstudyError(
                code: kinds.contains(.share) ? 3061 : kinds.contains(.video) ? 3049 : 3058,
                message: "produce: no usable SDP answer")
        }
        try await pc.loop.submit { try pc.setRemoteDescription(answer, type: .answer) }
        if !lock.withLock({ publishConnected }) {
            do { try await pc.waitUntilConnected(timeout: 10) } catch {
                throw UnderstudyError(
                    code: 3044, message: "publish connection failed: \(error)", underlyingError: error)
            }
            lock.withLock { publishConnected = true }
        }
        var made: [MediaStream] = []
        let localId = room.localParticipant.id
        for entry in response["producers"]?.arrayValue ?? [] {
            guard let id = entry["producerId"]?.stringValue,
                let kind = entry["kind"]?.stringValue.flatMap(StreamKind.init(wire:))
            else { continue }
            made.append(MediaStream(id: id, kind: kind, participantId: localId))
        }
        lock.withLock {
            for (kind, t) in zip(kinds, added) { activeTransceivers[kind] = t }
            for s in made { producers[s.kind] = s.id }
        }
        await rebuildPump()
        if reportStatus {
            for kind in kinds where kind == .audio || kind == .video {
                _ = try? await room.call(.setMediaStatus, ["kind": .string(kind.wireKind), "enabled": true])
            }
        }
        let local = room.localParticipant
        let madeStreams = made
        // Awaited: when the call returns, `streams` and the listeners have the new streams.
        await room.onQueue {
            for s in madeStreams {
                if s.kind == .audio { local.update(mic: true) } else if s.kind == .video { local.update(webcam: true) }
                local.addStream(s)
                for l in local.liveListeners { l.onStreamEnabled(s, participant: local) }
            }
        }
    }

    /// The codec of the published webcam; nil when none is published.
    var publishedVideoCodec: MediaCodec? {
        lock.withLock { producers[.video] != nil ? sources[.video]?.value.codec : nil }
    }

    /// Opens a source for each kind that has none; a source that cannot open fails the produce.
    func makeSources(for kinds: [StreamKind], layers: Int) throws {
        guard let room else { return }
        // Without a factory: the synthetic test pattern and tone, as `--video testsrc --audio tone`.
        let factory: MediaSourceFactory =
            room.mediaSourceFactory ?? { [weak room] kind, layers in
                try LocalSources.makeSource(
                    kind: kind, layers: layers, video: .testPattern, audio: .tone,
                    videoCodec: room?.publishVideoCodec ?? .vp8)
            }
        for kind in kinds where lock.withLock({ sources[kind] == nil }) {
            let mediaKind: MediaKind = kind == .audio ? .audio : .video
            var source: MediaSource
            do { source = try factory(mediaKind, kind == .video ? layers : 1) } catch {
                // A missing or unusable capture device (or a kind configured as `none`) is "no device
                // found" (3059 mic, 3051 webcam); anything else failed the produce (3058, 3049, 3061).
                var noDevice = false
                switch error as? MediaSourceError {
                case .capture?, .notPublished?: noDevice = true
                default: break
                }
                let code =
                    kind == .share ? 3061 : kind == .video ? (noDevice ? 3051 : 3049) : (noDevice ? 3059 : 3058)
                throw UnderstudyError(
                    code: code, message: "cannot open the \(kind.wireKind) source: \(error)", underlyingError: error)
            }
            if kind == .video || kind == .share {
                source = CaptureTapSource(source, buffer: kind == .video ? room.localParticipant.captureFrames : nil)
            }
            lock.withLock { sources[kind] = UncheckedSendable(source) }
        }
    }

    /// Closes the sources of `kinds` (all when nil) on the publish loop thread.
    func closeSources(_ kinds: Set<StreamKind>?, on pc: PeerConnection?) {
        let closing: [UncheckedSendable<MediaSource>] = lock.withLock {
            let chosen = sources.filter { kinds?.contains($0.key) ?? true }
            for k in chosen.keys { sources[k] = nil }
            return Array(chosen.values)
        }
        guard !closing.isEmpty else { return }
        if let pc {
            pc.loop.execute { for s in closing { s.value.close() } }
        } else {
            for s in closing { s.value.close() }
        }
    }

    /// Starts or stops the pump of each kind whose source changed; a running track keeps its pump.
    ///
    /// Pumps that start together are made in one loop turn, so their first tick (their time zero) is
    /// the same: the synthetic flash and beep then leave at the same wall time and the far end
    /// measures the true A/V offset, not the gap between two loop hops.
    func rebuildPump() async {
        guard let pc = lock.withLock({ publish }) else { return }
        typealias Change = (kind: StreamKind, transceiver: RTPTransceiver?, source: MediaSource?, old: MediaPump?)
        let changes: [Change] = lock.withLock {
            [StreamKind.audio, .video, .share].compactMap { kind -> Change? in
                let (transceiver, source, old) = (activeTransceivers[kind], sources[kind], pumps[kind])
                if let old, let source, transceiver != nil,
                    (kind == .audio ? old.audioSource : old.videoSource) === source.value
                {
                    return nil
                }
                guard old != nil || (transceiver != nil && source != nil) else { return nil }
                return (kind, transceiver, source?.value, old)
            }
        }
        guard !changes.isEmpty else { return }
        let box = UncheckedSendable(changes)
        let clock = lock.withLock { publishClock }
        // A connection closed meanwhile (left or reset) gets no pumps.
        let made: [StreamKind: UncheckedSendable<MediaPump>]? = await pc.loop.submitIfRunning {
            var made: [StreamKind: UncheckedSendable<MediaPump>] = [:]
            for change in box.value {
                change.old?.detach()
                guard let transceiver = change.transceiver, let source = change.source else { continue }
                let p =
                    change.kind == .audio
                    ? MediaPump(
                        connection: pc, video: nil, videoSource: nil, audio: transceiver, audioSource: source,
                        clock: clock)
                    : MediaPump(
                        connection: pc, video: transceiver, videoSource: source, audio: nil, audioSource: nil,
                        clock: clock)
                if change.kind != .audio, Self.fitsPublishingToEstimate, source.layerCount > 1,
                    transceiver.sendRIDs.count == source.layerCount
                {
                    // Simulcast from a pre-encoded source: the layers that do not fit the publish
                    // connection's estimate (from the server's transport-cc feedback) stop.
                    p.layerFitter = EstimateLayerFitter(mode: .simulcast, layerCount: source.layerCount)
                }
                p.attach()
                made[change.kind] = UncheckedSendable(p)
            }
            return made
        }
        lock.withLock {
            for change in changes { pumps[change.kind] = made?[change.kind]?.value }
        }
    }

    func detachPumps(on pc: PeerConnection?) {
        let old: [MediaPump] = lock.withLock {
            let p = Array(pumps.values)
            pumps.removeAll()
            return p
        }
        guard let pc, !old.isEmpty else { return }
        let box = UncheckedSendable(old)
        pc.loop.execute { for p in box.value { p.detach() } }
    }

    /// Stops a local stream; `onServer` also closes the producer and announces the status off.
    func stopLocal(_ kind: StreamKind, onServer: Bool) async {
        guard let room, let producerId = lock.withLock({ producers.removeValue(forKey: kind) }) else { return }
        let retired = lock.withLock { activeTransceivers.removeValue(forKey: kind) }
        // A retired m-line is offered inactive from now on, so the SFU never takes it for a new track.
        if let retired, let pc = lock.withLock({ publish }) {
            _ = await pc.loop.submitIfRunning { retired.direction = .inactive }
        }
        await rebuildPump()
        closeSources([kind], on: lock.withLock { publish })
        if onServer {
            _ = try? await room.call(.closeProducer, ["producerId": .string(producerId)])
            if kind != .share {
                _ = try? await room.call(.setMediaStatus, ["kind": .string(kind.wireKind), "enabled": false])
            }
        }
        await announceStopped(kind, producerId: producerId)
    }

    /// Awaited: when the stop returns, `streams` and the listeners have seen it.
    func announceStopped(_ kind: StreamKind, producerId: String) async {
        guard let room else { return }
        let local = room.localParticipant
        await room.onQueue {
            if kind == .audio { local.update(mic: false) } else if kind == .video { local.update(webcam: false) }
            if let s = local.removeStream(id: producerId) {
                for l in local.liveListeners { l.onStreamDisabled(s, participant: local) }
            }
        }
    }

    /// A moderator turned a local stream off: the server closed the producer already.
    func stopLocalNow(_ kind: StreamKind) {
        Task { await stopLocal(kind, onServer: false) }
    }

    /// On the event queue, when the room is left: every local stream ends with `onStreamDisabled`.
    func stopAllLocal(announce: Bool) {
        guard let room else { return }
        let (stopped, pc) = lock.withLock { () -> ([StreamKind: String], PeerConnection?) in
            let s = producers
            producers.removeAll()
            activeTransceivers.removeAll()
            return (s, publish)
        }
        detachPumps(on: pc)
        closeSources(nil, on: pc)
        let local = room.localParticipant
        for (kind, id) in stopped {
            if kind == .audio { local.update(mic: false) } else if kind == .video { local.update(webcam: false) }
            if let s = local.removeStream(id: id), announce {
                for l in local.liveListeners { l.onStreamDisabled(s, participant: local) }
            }
        }
    }
}
