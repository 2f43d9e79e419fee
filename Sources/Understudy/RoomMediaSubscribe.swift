import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

// The subscribe half of ``RoomMedia``: the subscribe connection, consumers and their remote tracks.
extension RoomMedia {
    // MARK: Subscribing

    func subscribeConnection() throws -> PeerConnection {
        try connection(\.subscribe, loopName: "understudy-sub") { pc in
            let handler = room?.onFrame
            pc.loop.execute { [weak self] in
                self?.loopFrameHandler = handler
                pc.onFrame = { transceiver, _, frame, timing in
                    self?.frameArrived(transceiver.mid, frame, timing)
                }
            }
        }
    }

    /// Installs ``Room/onFrame`` on the subscribe loop; returns once the loop uses it (so that no
    /// frame reaches a handler after it was replaced), or at once when there is no connection.
    func setFrameHandler(_ handler: RoomFrameHandler?) {
        guard let pc = lock.withLock({ subscribe }) else { return }
        _ = onLoopSync(pc) { [self] in loopFrameHandler = handler }
    }

    /// Loop thread: every track ends (the connection is going away).
    func endAllTracks() {
        let ending = tracksByMid.values
        tracksByMid.removeAll()
        for track in ending { track.end() }
    }

    /// Loop thread: the track of a confirmed consumer, reported to ``Room/onTrack``, with the SDK's
    /// own sinks (``Room/onFrame``, the first-frame event, the picture kept for `captureImage`).
    func addTrack(_ track: RemoteTrack) {
        guard let room else { return }
        tracksByMid[track.mid]?.end()
        tracksByMid[track.mid] = track
        track.addSink(StreamEnabledSink(media: self))
        if track.kind == .video || track.kind == .share, let participant = room.participant(track.participantId) {
            track.addSink(CaptureSink(participant: participant))
        }
        track.addSink(RoomFrameSink(media: self))
        room.onTrack?(track)
    }

    /// Loop thread: the stream's first frame arrived; announce it (`onStreamEnabled`) on the event queue.
    fileprivate func firstFrame(of track: RemoteTrack) {
        guard let room else { return }
        let first = lock.withLock { consumers[track.consumerId] != nil && flowing.insert(track.consumerId).inserted }
        guard first else { return }
        room.eventQueue.async {
            guard let p = room.participants[track.participantId] else { return }
            let s = MediaStream(id: track.producerId, kind: track.kind, participantId: track.participantId)
            p.addStream(s)
            for l in p.liveListeners { l.onStreamEnabled(s, participant: p) }
        }
    }

    fileprivate func frameToRoom(_ track: RemoteTrack, _ frame: EncodedFrame, _ arrival: UInt64) {
        loopFrameHandler?(track.participantId, frame.codec.kind, frame, arrival)
    }

    /// Ends the track of consumer `consumerId` on media line `mid` (any thread); a newer consumer
    /// that already took over the mid keeps its track.
    func endTrack(consumerId: String, mid: String?) {
        guard let mid, let pc = lock.withLock({ subscribe }) else { return }
        pc.loop.execute { [self] in
            guard let track = tracksByMid[mid], track.consumerId == consumerId else { return }
            tracksByMid[mid] = nil
            track.end()
        }
    }

    /// Loop thread: one assembled frame of the subscribe connection, to its track's sinks.
    func frameArrived(_ mid: String?, _ frame: EncodedFrame, _ timing: FrameTiming) {
        guard let mid, let track = tracksByMid[mid] else { return }
        track.deliver(frame, arrival: timing.arrivalTime, senderTime: timing.ntpTime)
    }

    /// Asks the SFU for a keyframe of `participantId`'s webcam (PLI), so a capture can decode soon.
    func requestWebcamKeyframe(of participantId: String) {
        guard let pc = lock.withLock({ subscribe }) else { return }
        let mids = lock.withLock {
            Set(consumers.values.filter { $0.participantId == participantId && $0.kind == .video }.compactMap(\.mid))
        }
        pc.loop.execute {
            for t in pc.transceivers where t.mid.map(mids.contains) ?? false { pc.requestKeyframe(on: t) }
        }
    }

    /// PLIs and NACKs sent by the subscribe connection's receivers (zeros without one).
    func receiverFeedbackSent() -> (plis: UInt64, nacks: UInt64) {
        guard let pc = lock.withLock({ subscribe }) else { return (0, 0) }
        let rows = onLoopSync(pc) { pc.receiverStats() } ?? []
        return rows.reduce((UInt64(0), UInt64(0))) { ($0.0 &+ $1.stats.plisSent, $0.1 &+ $1.stats.nacksSent) }
    }

    /// Each consumed track's quality reading (zero rows without a subscribe connection).
    func receiveQuality() -> [ReceivedTrackQuality] {
        guard let pc = lock.withLock({ subscribe }) else { return [] }
        let tracks = lock.withLock { consumers.values.compactMap { c in c.mid.map { ($0, c.participantId, c.kind) } } }
        let rows = onLoopSync(pc) { pc.receiverStats() } ?? []
        var best: [String: ReceiveQualitySnapshot] = [:]
        for r in rows {
            guard let mid = r.mid else { continue }
            if best[mid].map({ $0.frames < r.stats.quality.frames }) ?? true { best[mid] = r.stats.quality }
        }
        return tracks.compactMap { mid, participant, kind in
            best[mid].map { ReceivedTrackQuality(participantId: participant, kind: kind, mid: mid, quality: $0) }
        }
        .sorted { ($0.participantId, $0.mid) < ($1.participantId, $1.mid) }
    }

    func consumerCreated(_ data: JSONValue) {
        guard let id = data["consumerId"]?.stringValue, let pid = data["participantId"]?.stringValue,
            let kind = data["kind"]?.stringValue.flatMap(StreamKind.init(wire:))
        else { return }
        let info = ConsumerInfo(
            participantId: pid, kind: kind, producerId: data["producerId"]?.stringValue ?? id,
            mid: data["mid"]?.stringValue)
        lock.withLock { consumers[id] = info }
        if let mid = info.mid, let pc = try? subscribeConnection() {
            let loop = pc.loop
            let track = RemoteTrack(
                participantId: pid, kind: kind, producerId: info.producerId, consumerId: id, mid: mid, loop: loop,
                requestKeyframe: {
                    loop.execute {
                        for t in pc.transceivers where t.mid == mid { pc.requestKeyframe(on: t) }
                    }
                })
            loop.execute { [self] in
                // A consumer closed again before this ran must not come back.
                guard lock.withLock({ consumers[id] != nil }) else { return }
                addTrack(track)
            }
        }
        if kind == .video || kind == .share, let p = room?.participants[pid] {
            Task { await p.reapplyChoices(to: kind) }
        }
    }

    /// On the event queue.
    func consumerClosed(_ data: JSONValue) {
        guard let room, let id = data["consumerId"]?.stringValue else { return }
        let (info, wasFlowing) = lock.withLock { (consumers.removeValue(forKey: id), flowing.remove(id) != nil) }
        endTrack(consumerId: id, mid: info?.mid)
        guard let info, wasFlowing, let p = room.participants[info.participantId],
            let s = p.removeStream(id: info.producerId)
        else { return }
        for l in p.liveListeners { l.onStreamDisabled(s, participant: p) }
    }

    func forgetRemote(_ participantId: String) {
        lock.withLock {
            for (id, c) in consumers where c.participantId == participantId {
                consumers[id] = nil
                flowing.remove(id)
            }
        }
        guard let pc = lock.withLock({ subscribe }) else { return }
        pc.loop.execute { [self] in
            for (mid, track) in tracksByMid where track.participantId == participantId {
                tracksByMid[mid] = nil
                track.end()
            }
        }
    }

    /// Answers a `subscriberOffer` (called on the event queue; the answer goes out asynchronously).
    func answer(_ data: JSONValue) {
        guard let room, let sdp = data["sdp"]?.stringValue, let revision = data["revision"]?.intValue,
            let offer = try? SessionDescription.parse(sdp), let pc = try? subscribeConnection()
        else { return }
        startSampling()
        Task {
            do {
                await pc.gatherRelayCandidates()
                let answer = try await pc.loop.submit { () throws -> String in
                    try pc.setRemoteDescription(offer, type: .offer)
                    let a = try pc.createAnswer()
                    try pc.setLocalDescription(a)
                    return a.serialize()
                }
                _ = try await room.call(
                    .subscriberAnswer, ["sdp": .string(answer), "revision": .number(Double(revision))])
            } catch {
                let e = UnderstudyError(
                    code: 3044, message: "subscribe negotiation failed: \(error)", underlyingError: error)
                room.eventQueue.async { room.emit { $0.onError(e) } }
            }
        }
    }
}

/// The SDK's sink that announces a stream when its first frame arrives (`onStreamEnabled`).
private final class StreamEnabledSink: RemoteTrackSink {
    private weak var media: RoomMedia?
    private var seen = false
    init(media: RoomMedia) { self.media = media }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        guard !seen else { return }
        seen = true
        media?.firstFrame(of: track)
    }
}

/// The SDK's sink behind ``Room/onFrame``.
private final class RoomFrameSink: RemoteTrackSink {
    private weak var media: RoomMedia?
    init(media: RoomMedia) { self.media = media }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        media?.frameToRoom(track, frame, arrival)
    }
}

/// The SDK's sink that keeps a webcam's frames since its last keyframe for `captureImage` (and a
/// screen share's picture size for its stats).
private final class CaptureSink: RemoteTrackSink {
    private weak var participant: Participant?
    init(participant: Participant) { self.participant = participant }
    func receive(_ frame: EncodedFrame, arrival: UInt64, track: RemoteTrack) {
        participant?.receivedVideoFrame(frame, kind: track.kind)
    }
}
