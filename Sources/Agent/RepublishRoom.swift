import Foundation
import RTCWire
import Understudy

/// Received frames of one consumed participant, handed from the agent's subscribe loop thread
/// (``push(_:)``) to the publish loop of its stand-in in the republish room (``take(_:)``).
///
/// Only kinds with an attached ``ForwardingSource`` are queued, video starts at a keyframe, and a
/// queue that grows past a few seconds (the publish side stalled) is dropped: video then waits for
/// the next keyframe so that no undecodable delta frame is forwarded.
// Safe: the queued frames and state are guarded by `lock` (loop thread in, publish side out).
final class RepublishFeed: @unchecked Sendable {
    /// About three seconds of 30 fps video.
    static let maxVideoFrames = 90
    /// About three seconds of 20 ms Opus frames.
    static let maxAudioFrames = 150

    private let lock = NSLock()
    private var queues: [MediaKind: [EncodedFrame]] = [:]
    private var attached: Set<MediaKind> = []
    private var videoNeedsKeyframe = true
    private var droppedFrames = 0
    private var forwardedFrames = 0
    private var keyframeRequests = 0
    /// Asks the consumed participant for a keyframe through the agent's subscribe connection.
    private let requestUpstreamKeyframe: @Sendable () -> Void

    /// - Parameter requestUpstreamKeyframe: passes a republish-room keyframe request on to the original
    ///   publisher; called off the publish loop thread, must not block.
    init(requestUpstreamKeyframe: @escaping @Sendable () -> Void = {}) {
        self.requestUpstreamKeyframe = requestUpstreamKeyframe
    }

    /// Frames dropped (queue overflow or waiting for a keyframe), forwarded, and keyframe requests
    /// received from the republish room.
    var counters: (dropped: Int, forwarded: Int, keyframeRequests: Int) {
        lock.withLock { (droppedFrames, forwardedFrames, keyframeRequests) }
    }

    /// Queues one received frame (subscribe loop thread).
    func push(_ frame: EncodedFrame) {
        let kind = frame.codec.kind
        lock.withLock {
            guard attached.contains(kind) else { return }
            if kind == .video {
                if videoNeedsKeyframe {
                    guard frame.isKeyframe else {
                        droppedFrames += 1
                        return
                    }
                    videoNeedsKeyframe = false
                }
                queues[kind, default: []].append(frame)
                if let count = queues[kind]?.count, count > Self.maxVideoFrames {
                    droppedFrames += count
                    queues[kind] = []
                    videoNeedsKeyframe = true
                }
            } else {
                queues[kind, default: []].append(frame)
                if let count = queues[kind]?.count, count > Self.maxAudioFrames {
                    let excess = count - Self.maxAudioFrames
                    queues[kind]?.removeFirst(excess)
                    droppedFrames += excess
                }
            }
        }
    }

    /// Everything queued for `kind` (publish loop thread).
    func take(_ kind: MediaKind) -> [EncodedFrame] {
        lock.withLock {
            let frames = queues[kind] ?? []
            queues[kind] = []
            forwardedFrames += frames.count
            return frames
        }
    }

    func attach(_ kind: MediaKind) {
        lock.withLock {
            attached.insert(kind)
            queues[kind] = []
            if kind == .video { videoNeedsKeyframe = true }
        }
    }

    func detach(_ kind: MediaKind) {
        lock.withLock {
            attached.remove(kind)
            queues[kind] = nil
        }
    }

    /// A viewer in the republish room asked for a keyframe (publish loop thread): counts it and, for
    /// video, asks the original publisher from a global queue so the publish loop never waits on the
    /// subscribe side's lock or loop.
    func keyframeRequested(_ kind: MediaKind) {
        lock.withLock { keyframeRequests += 1 }
        guard kind == .video else { return }
        let upstream = requestUpstreamKeyframe
        DispatchQueue.global().async { upstream() }
    }
}

/// A ``MediaSource`` that publishes what a ``RepublishFeed`` received, re-timed onto its own media clock.
///
/// The first forwarded frame is mapped to the track's elapsed time; later frames keep the original
/// RTP timestamp spacing, so the republished pacing is the sender's.
final class ForwardingSource: MediaSource {
    let kind: MediaKind
    let layerCount = 1
    private let feed: RepublishFeed
    private var timestampShift: UInt32?

    init(kind: MediaKind, feed: RepublishFeed) {
        self.kind = kind
        self.feed = feed
        feed.attach(kind)
    }

    func pull(elapsedNanos: UInt64, emit: (EncodedFrame, Int) -> Void) {
        for var frame in feed.take(kind) {
            let shift: UInt32
            if let timestampShift {
                shift = timestampShift
            } else {
                let clock = UInt64(frame.codec.clockRate)
                let now = UInt32(truncatingIfNeeded: (elapsedNanos / 1_000) &* clock / 1_000_000)
                shift = now &- frame.timestamp
                timestampShift = shift
            }
            frame.timestamp &+= shift
            emit(frame, 0)
        }
    }

    /// Passed upstream: the original publisher is asked for a keyframe (PLI on the agent's subscribe
    /// connection, throttled there), which then reaches the republish room like any received frame.
    func requestKeyframe() { feed.keyframeRequested(kind) }

    func close() { feed.detach(kind) }
}

/// The agent's stand-ins in another room: one participant `relay-<id>` (`SEND_AND_RECV`) per
/// consumed participant, publishing that participant's received media (`--relay-room`).
// Safe: the stand-in rooms are guarded by `lock`.
final class RepublishRoom: @unchecked Sendable {
    /// Watches one stand-in room for its join outcome.
    // Safe: its outcome is guarded by `lock` (set on the room's event queue, read by the waiter).
    private final class Watcher: RoomEventListener, @unchecked Sendable {
        let lock = NSLock()
        var joined = false
        var left: Understudy.LeaveReason?
        func onRoomJoined() { lock.withLock { joined = true } }
        func onRoomLeft(reason: Understudy.LeaveReason) { lock.withLock { left = reason } }
    }

    private struct StandIn {
        var room: Room
        var feed: RepublishFeed
        var watcher: Watcher
    }

    let roomId: String
    let token: String
    let signalingURL: String
    private let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var standIns: [String: StandIn] = [:]
    private var closed = false

    init(roomId: String, token: String, signalingURL: String, log: @escaping @Sendable (String) -> Void) {
        self.roomId = roomId
        self.token = token
        self.signalingURL = signalingURL
        self.log = log
    }

    /// The stand-in id for a consumed participant.
    static func standInId(for participantId: String) -> String { "relay-\(participantId)" }

    /// Ids of the stand-ins currently in the republish room (joined or joining).
    var participantIds: [String] { lock.withLock { standIns.keys.sorted().map(Self.standInId) } }

    /// Frames dropped/forwarded and keyframe requests received, over all stand-ins.
    var counters: (dropped: Int, forwarded: Int, keyframeRequests: Int) {
        lock.withLock {
            standIns.values.reduce((0, 0, 0)) { sum, s in
                let c = s.feed.counters
                return (sum.0 + c.dropped, sum.1 + c.forwarded, sum.2 + c.keyframeRequests)
            }
        }
    }

    /// Hands a received frame to the stand-in of `participantId`, if there is one.
    func forward(_ participantId: String, _ frame: EncodedFrame) {
        lock.withLock { standIns[participantId]?.feed }?.push(frame)
    }

    /// Joins the republish room as the stand-in of `participantId` (no-op when it is already there).
    /// `requestUpstreamKeyframe` asks `participantId` for a keyframe when a republish-room viewer wants one.
    func add(
        participantId: String, name: String, kinds: Set<MediaKind>,
        requestUpstreamKeyframe: @escaping @Sendable () -> Void = {}
    ) async {
        let feed = RepublishFeed(requestUpstreamKeyframe: requestUpstreamKeyframe)
        let watcher = Watcher()
        let standInId = Self.standInId(for: participantId)
        let room: Room
        do {
            room = try Understudy.createRoom(
                roomId: roomId, token: token, participantName: "relay of \(name)", participantId: standInId,
                micEnabled: kinds.contains(.audio), camEnabled: kinds.contains(.video), mode: .SEND_AND_RECV,
                multiStream: false, autoConsume: false, signalingBaseUrl: signalingURL)
        } catch {
            log("relay-room: cannot create \(standInId) in \(roomId): \(error)")
            return
        }
        room.mediaSourceFactory = { kind, _ in ForwardingSource(kind: kind, feed: feed) }
        room.addEventListener(watcher)
        let isNew = lock.withLock { () -> Bool in
            guard !closed, standIns[participantId] == nil else { return false }
            standIns[participantId] = StandIn(room: room, feed: feed, watcher: watcher)
            return true
        }
        guard isNew else { return }
        // `join()` returns once the outcome reached the listeners (the watcher among them).
        await room.join()
        let (joined, left) = watcher.lock.withLock { (watcher.joined, watcher.left) }
        if joined {
            log("relay-room: \(participantId) republished in \(roomId) as \(standInId)")
            return
        }
        let reason = left ?? .JOIN_ROOM_FAILED
        log("relay-room: \(standInId) could not join \(roomId): \(reason.name) (\(reason.rawValue))")
        _ = lock.withLock { standIns.removeValue(forKey: participantId) }
        await room.leave()
    }

    /// Takes the stand-in of `participantId` out of the republish room.
    func remove(participantId: String) async {
        guard let standIn = lock.withLock({ standIns.removeValue(forKey: participantId) }) else { return }
        await standIn.room.leave()
        log("relay-room: \(Self.standInId(for: participantId)) left \(roomId)")
    }

    /// Takes every stand-in out; later ``add(participantId:name:kinds:)`` calls do nothing.
    func closeAll() async {
        let all = lock.withLock { () -> [StandIn] in
            closed = true
            let list = Array(standIns.values)
            standIns.removeAll()
            return list
        }
        for s in all { await s.room.leave() }
    }
}
