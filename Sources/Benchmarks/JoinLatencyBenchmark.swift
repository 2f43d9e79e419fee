import Foundation
import LoadGen
import Media
import RTCWire
import RoomProtocol
import RoomServer
import Signaling
import Understudy

/// `join()` → `onRoomJoined` latency and `join()` → first recorded keyframe, on an in-process
/// ``RoomServer`` over loopback.
///
/// Anchors, measured against the same server in the same run: a bare HTTP `GET /healthz` and the
/// WebSocket connect + upgrade handshake alone (the first step of every join).
public enum JoinLatencyBenchmark {
    public struct Result: Sendable {
        /// Milliseconds, one per sample.
        public var joins: [Double]
        public var httpRequests: [Double]
        public var webSocketHandshakes: [Double]
        /// `join()` → first keyframe written to a WebM file, milliseconds; one per run.
        public var firstKeyframes: [Double]
        /// `join()` → first media frame of any kind received, milliseconds; one per run.
        public var firstFrames: [Double]
        /// Runs in which no keyframe was recorded within the timeout.
        public var keyframeTimeouts: Int
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Percentile `p` (0…1) of `values` by nearest rank; NaN when empty.
    public static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        return nearestRank(p, ofSorted: values.sorted())
    }

    /// Records the instant `onRoomJoined` (or a leave) arrives.
    // Safe: the recorded instants are guarded by `lock`.
    final class JoinWatch: RoomEventListener, @unchecked Sendable {
        private let lock = NSLock()
        private var joinedAt: UInt64?
        private var left = false
        func onRoomJoined() { lock.withLock { joinedAt = DispatchTime.now().uptimeNanoseconds } }
        func onRoomLeft(reason: Understudy.LeaveReason) { lock.withLock { left = true } }
        var state: (joinedAt: UInt64?, left: Bool) { lock.withLock { (joinedAt, left) } }
    }

    /// Writes the subscribed frames to WebM and notes when the first keyframe was written.
    // Safe: the writer and first-keyframe time are guarded by `lock`.
    final class KeyframeWatch: @unchecked Sendable {
        private let lock = NSLock()
        let recording: Recording
        private var firstKeyframeAt: UInt64?
        private var firstFrameAt: UInt64?
        init(path: String) throws { recording = try Recording(path: path) }
        func write(_ frame: EncodedFrame, arrival: UInt64) {
            lock.withLock {
                if firstFrameAt == nil { firstFrameAt = DispatchTime.now().uptimeNanoseconds }
                recording.write(frame, arrival: arrival)
                if firstKeyframeAt == nil && recording.keyframes > 0 {
                    firstKeyframeAt = DispatchTime.now().uptimeNanoseconds
                }
            }
        }
        var firstKeyframe: UInt64? { lock.withLock { firstKeyframeAt } }
        var firstFrame: UInt64? { lock.withLock { firstFrameAt } }
        func close() { lock.withLock { try? recording.close() } }
    }

    static func elapsedMilliseconds(since start: UInt64) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
    }

    /// Runs `joins` sequential joins (with their anchors interleaved) and `keyframeRuns` recordings.
    public static func run(
        joins: Int, keyframeRuns: Int, directory: String, progress: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws -> Result {
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        configuration.udpPortLow = 0
        configuration.secret = "bench-secret"
        let server = RoomServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        func token(_ room: String) -> String {
            RoomToken.sign(
                RoomToken(
                    apikey: "bench", permissions: ["allow_join", "allow_mod"], roomId: room, participantId: nil,
                    lifetime: 3600), secret: server.secret)
        }
        let base = "ws://127.0.0.1:\(server.httpPort)"
        let health = try HTTPURL("http://127.0.0.1:\(server.httpPort)/healthz")

        var result = Result(
            joins: [], httpRequests: [], webSocketHandshakes: [], firstKeyframes: [], firstFrames: [],
            keyframeTimeouts: 0)
        // One warm-up of each, not counted (first-use costs: thread pools, lazy statics).
        for i in -1..<joins {
            let httpStart = DispatchTime.now().uptimeNanoseconds
            let response = try await HTTPClient.request("GET", health)
            let httpMs = elapsedMilliseconds(since: httpStart)
            guard response.status == 200 else { throw Failure(description: "GET /healthz: \(response.status)") }

            let wsStart = DispatchTime.now().uptimeNanoseconds
            let ws = try await WebSocketConnection.connect(url: server.signalingURL + "?token=" + token("bench-ws"))
            let wsMs = elapsedMilliseconds(since: wsStart)
            ws.close()

            let room = try Understudy.createRoom(
                roomId: "bench-join", token: token("bench-join"), participantName: "joiner \(i)",
                participantId: "joiner-\(i + 1)", micEnabled: false, camEnabled: false, mode: .RECV_ONLY,
                multiStream: false, autoConsume: false, signalingBaseUrl: base)
            let watch = JoinWatch()
            room.addEventListener(watch)
            let joinStart = DispatchTime.now().uptimeNanoseconds
            await room.join()
            let deadline = Date().addingTimeInterval(15)
            var joinedAt: UInt64?
            while joinedAt == nil {
                let s = watch.state
                if s.left { throw Failure(description: "join \(i) was refused") }
                if Date() > deadline { throw Failure(description: "join \(i) timed out") }
                joinedAt = s.joinedAt
                if joinedAt == nil { try await Task.sleep(nanoseconds: 1_000_000) }
            }
            let joinMs = Double((joinedAt ?? joinStart) - joinStart) / 1e6
            await room.leave()
            if i >= 0 {
                result.joins.append(joinMs)
                result.httpRequests.append(httpMs)
                result.webSocketHandshakes.append(wsMs)
            }
        }
        progress(
            String(
                format: "bench:   %d joins, p50 %.1f ms", result.joins.count, percentile(result.joins, 0.5)))

        // First recorded keyframe: a host publishes camera and microphone; a recording agent joins.
        let host = try Understudy.createRoom(
            roomId: "bench-record", token: token("bench-record"), participantName: "host", participantId: "host",
            micEnabled: true, camEnabled: true, mode: .SEND_AND_RECV, multiStream: false, autoConsume: false,
            signalingBaseUrl: base)
        let hostWatch = JoinWatch()
        host.addEventListener(hostWatch)
        await host.join()
        let hostDeadline = Date().addingTimeInterval(15)
        while hostWatch.state.joinedAt == nil {
            if hostWatch.state.left || Date() > hostDeadline { throw Failure(description: "the host did not join") }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        // Let the host's producers come up before the first agent arrives.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for i in -1..<keyframeRuns {
            let path = (directory as NSString).appendingPathComponent("first-keyframe-\(i + 1).webm")
            let keyframes = try KeyframeWatch(path: path)
            let agent = try Understudy.createRoom(
                roomId: "bench-record", token: token("bench-record"), participantName: "recorder",
                participantId: "recorder-\(i + 1)", micEnabled: false, camEnabled: false, mode: .RECV_ONLY,
                multiStream: false, autoConsume: true, signalingBaseUrl: base)
            agent.onFrame = { _, _, frame, arrival in keyframes.write(frame, arrival: arrival) }
            let start = DispatchTime.now().uptimeNanoseconds
            await agent.join()
            let deadline = Date().addingTimeInterval(10)
            while keyframes.firstKeyframe == nil && Date() < deadline {
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            let at = keyframes.firstKeyframe
            let firstFrame = keyframes.firstFrame
            agent.onFrame = nil
            await agent.leave()
            keyframes.close()
            try? FileManager.default.removeItem(atPath: path)
            // Each join stands alone: the SFU asks a publisher for at most one key frame per 500 ms
            // per layer, so a join within 500 ms of the previous one's request waits out that throttle.
            try await Task.sleep(nanoseconds: 700_000_000)
            guard i >= 0 else { continue }
            if let firstFrame { result.firstFrames.append(Double(firstFrame - start) / 1e6) }
            if let at {
                result.firstKeyframes.append(Double(at - start) / 1e6)
            } else {
                result.keyframeTimeouts += 1
            }
        }
        await host.leave()
        progress(
            String(
                format: "bench:   %d recordings, first keyframe p50 %.1f ms", result.firstKeyframes.count,
                percentile(result.firstKeyframes, 0.5)))
        return result
    }
}
