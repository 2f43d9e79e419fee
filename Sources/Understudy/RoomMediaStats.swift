import Dispatch
import Foundation
import Media
import RTC
import RTCWire
import RoomProtocol
import Signaling

// ``RoomMedia``'s stats: the sampling clock, its readings and the stats rows built from them.
extension RoomMedia {
    // MARK: Stats

    /// Runs `work` on `pc`'s loop and waits for it (directly when already on that loop).
    func onLoopSync<T>(_ pc: PeerConnection, _ work: @escaping () -> T) -> T? {
        if pc.loop.isInLoop { return work() }
        let semaphore = DispatchSemaphore(value: 0)
        let box = ResultBox<T>()
        let workBox = UncheckedSendable(work)
        let accepted = pc.loop.execute {
            box.value = workBox.value()
            semaphore.signal()
        }
        guard accepted, semaphore.wait(timeout: .now() + 2) == .success else { return nil }
        return box.value
    }

    /// One stream's stats rows: the change between the sampling clock's last two readings, so that
    /// every caller sees the same values whenever and however often it asks. Empty until a stream
    /// has two readings (about a second after it starts).
    func stats(for participant: Participant, kind: StreamKind) -> [[String: Any]] {
        let mediaKind: MediaKind = kind == .audio || kind == .shareAudio ? .audio : .video
        let prefix: Set<String>
        if participant.isLocal {
            guard kind == .audio || kind == .video || kind == .share,
                let mid = lock.withLock({ activeTransceivers[kind]?.mid })
            else { return [] }
            prefix = ["pub|\(mid)|"]
        } else {
            prefix = lock.withLock {
                Set(
                    consumers.values.filter { $0.participantId == participant.id && $0.kind == kind }.compactMap(\.mid)
                        .map { "sub|\($0)|" })
            }
        }
        guard !prefix.isEmpty else { return [] }
        let chosen: [(key: String, layer: String?, previous: StatsReading, latest: StatsReading)] = lock.withLock {
            readings.compactMap { key, pair in
                guard pair.latest.kind == mediaKind, let previous = pair.previous,
                    let split = key.lastIndex(of: "|"), prefix.contains(String(key[...split]))
                else { return nil }
                let layer = String(key[key.index(after: split)...])
                return (key, layer.isEmpty ? nil : layer, previous, pair.latest)
            }.sorted { $0.key < $1.key }
        }
        return chosen.map { c in
            let (p, l) = (c.previous, c.latest)
            let seconds = Double(l.at &- p.at) / 1e9
            var row: [String: Any] = [
                "totalPackets": Int(clamping: l.packets - p.packets),
                "packetsLost": Int(clamping: max(0, l.lost &- p.lost)),
                "bitrate": seconds > 0 ? Double(l.bytes - p.bytes) * 8 / 1000 / seconds : 0.0,
                "jitter": l.jitterMs, "rtt": l.rttMs, "codec": mediaKind == .audio ? "opus" : "vp8",
            ]
            if let layer = c.layer { row["rid"] = layer }
            if mediaKind == .video {
                var size = pictureSize(participant, kind, layer: c.layer)
                if seconds > 0, !size.isEmpty {
                    size["framerate"] = (Double(l.frames - p.frames) / seconds * 10).rounded() / 10
                }
                row["size"] = size
            }
            return row
        }
    }

    // MARK: Sampling clock

    /// How often the stats sampling clock reads the counters, in seconds.
    static let statsInterval = 1.0

    /// Starts the sampling clock (once; it stops when the room's media closes).
    func startSampling() {
        let timer: DispatchSourceTimer? = lock.withLock {
            guard sampler == nil, !closed else { return nil }
            let t = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
            sampler = t
            return t
        }
        guard let timer else { return }
        timer.schedule(deadline: .now() + Self.statsInterval, repeating: Self.statsInterval)
        timer.setEventHandler { [weak self] in self?.sample() }
        timer.resume()
    }

    /// One tick: each connection reads its counters on its own loop thread.
    func sample() {
        let (pub, sub) = lock.withLock { (publish, subscribe) }
        if let pub {
            pub.loop.execute { [weak self] in
                let rtt = pub.iceRoundTripTime
                let now = EventLoop.now()
                let rows = pub.senderStats().compactMap { r -> (String, StatsReading)? in
                    guard let mid = r.mid else { return nil }
                    // RTT from the receiver reports (RR), else from the ICE checks of this connection.
                    let roundTrip = r.stats.roundTripTime > 0 ? r.stats.roundTripTime : rtt
                    return (
                        "pub|\(mid)|\(r.layer)",
                        StatsReading(
                            kind: r.kind, packets: r.stats.packetsSent, bytes: r.stats.bytesSent,
                            lost: r.stats.reportedPacketsLost, frames: r.stats.framesSent,
                            jitterMs: r.stats.reportedJitter * 1000, rttMs: Double(roundTrip) / 1e6, at: now)
                    )
                }
                let estimate = pub.bandwidthEstimate
                self?.lock.withLock { self?.publishEstimateReading = estimate }
                self?.record(rows, prefix: "pub|")
            }
        }
        if let sub {
            sub.loop.execute { [weak self] in
                // A receive-only connection sends no SR, so the far end's RR cannot time it: the ICE
                // consent checks give the round trip between this device and the server.
                let rtt = Double(sub.iceRoundTripTime) / 1e6
                let now = EventLoop.now()
                let rows = sub.receiverStats().compactMap { r -> (String, StatsReading)? in
                    guard let mid = r.mid else { return nil }
                    return (
                        "sub|\(mid)|\(r.rid ?? "")",
                        StatsReading(
                            kind: r.kind, packets: r.stats.packetsReceived, bytes: r.stats.bytesReceived,
                            lost: r.stats.packetsLost, frames: r.stats.framesAssembled, jitterMs: r.stats.jitter,
                            rttMs: rtt, at: now)
                    )
                }
                self?.record(rows, prefix: "sub|")
            }
        }
    }

    /// Stores one tick's readings of one connection; streams that are gone are forgotten.
    func record(_ rows: [(String, StatsReading)], prefix: String) {
        lock.withLock {
            let seen = Set(rows.map(\.0))
            for key in readings.keys where key.hasPrefix(prefix) && !seen.contains(key) { readings[key] = nil }
            for (key, reading) in rows {
                // Counters that went backwards belong to a new stream under the same key: start over.
                let last = readings[key]?.latest
                let continues = last.map { $0.packets <= reading.packets && $0.bytes <= reading.bytes } ?? false
                readings[key] = (continues ? last : nil, reading)
            }
        }
    }
}

/// One reading of a stream's counters by the sampling clock.
struct StatsReading {
    var kind: MediaKind
    var packets: UInt64
    var bytes: UInt64
    var lost: Int64
    var frames: UInt64
    var jitterMs: Double
    var rttMs: Double
    var at: UInt64
}

extension RoomMedia {
    /// A video stats row's `size`: the newest keyframe's width and height (empty before the first).
    fileprivate func pictureSize(_ participant: Participant, _ kind: StreamKind, layer: String?) -> [String: Any] {
        let size: (width: Int, height: Int)?
        if participant.isLocal {
            size = layer.flatMap { Int($0) }.flatMap { localTap(kind)?.size(ofLayer: $0) }
        } else {
            size = kind == .share ? participant.sharePictureSize.pictureSize : participant.captureFrames.pictureSize
        }
        guard let size else { return [:] }
        return ["width": size.width, "height": size.height]
    }
}

// Safe: written before a semaphore signal and read after its wait (the semaphore orders them).
final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
