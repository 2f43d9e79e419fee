import Dispatch
import Foundation
import Media
import RTCWire
import Signaling
import Synchronization
import Understudy

/// Counters of a ``RoomAgent``, rendered in the Prometheus text format by ``RoomAgent/metricsText()``.
/// Thread-safe: frames are counted on the subscribe loop thread, events on the room's event queue.
// Safe: counters are atomics or guarded by `lock` (loop thread and event queue both write).
public final class RoomAgentCounters: @unchecked Sendable {
    private let lock = NSLock()
    /// Per-frame counts are atomics, bumped by the tracks' sinks on the loop thread without a lock.
    private let audioReceived = FrameTally()
    private let videoReceived = FrameTally()
    private let audioRecorded = FrameTally()
    private let videoRecorded = FrameTally()
    private let keyframes = Atomic<UInt64>(0)
    private var invitesAccepted: UInt64 = 0
    private var invitesRefused: UInt64 = 0
    private var reconnectCount: UInt64 = 0
    private var consumeFailures: UInt64 = 0
    private var recordingFailures: UInt64 = 0
    private let startNanos = DispatchTime.now().uptimeNanoseconds

    func received(_ frame: EncodedFrame) {
        let video = frame.codec.kind == .video
        (video ? videoReceived : audioReceived).add(frame)
        if video && frame.isKeyframe { keyframes.add(1, ordering: .relaxed) }
    }

    /// Frames that reached a recording's file (the disk writer thread reports them).
    func recorded(_ frames: RecordedFrames) {
        videoRecorded.add(count: frames.video, bytes: frames.videoBytes)
        audioRecorded.add(count: frames.audio, bytes: frames.audioBytes)
    }

    func recordingFailed() { lock.withLock { recordingFailures += 1 } }

    func invite(accepted: Bool) { lock.withLock { if accepted { invitesAccepted += 1 } else { invitesRefused += 1 } } }
    func reconnected() { lock.withLock { reconnectCount += 1 } }
    func consumeFailed() { lock.withLock { consumeFailures += 1 } }

    /// Frames received of `kind`.
    public func framesReceived(_ kind: MediaKind) -> UInt64 { (kind == .video ? videoReceived : audioReceived).frames }
    /// Recordings whose file failed to be written (a full disk, a file size limit).
    public var recordingWriteErrors: UInt64 { lock.withLock { recordingFailures } }
    /// Frames written to recordings of `kind` (in the files).
    public func framesRecorded(_ kind: MediaKind) -> UInt64 { (kind == .video ? videoRecorded : audioRecorded).frames }
    /// Stage invites refused.
    public var refusedInvites: UInt64 { lock.withLock { invitesRefused } }
    /// Times the room started reconnecting.
    public var reconnects: UInt64 { lock.withLock { reconnectCount } }

    /// Seconds since the counters were created.
    public var uptimeSeconds: Double { Double(DispatchTime.now().uptimeNanoseconds - startNanos) / 1e9 }

    /// The counter part of the exposition.
    func render(into out: inout PrometheusText) {
        for (name, help, audio, video) in [
            (
                "understudy_agent_frames_received_total", "Media frames received from consumed participants.",
                audioReceived.frames, videoReceived.frames
            ),
            (
                "understudy_agent_bytes_received_total", "Payload bytes of the frames received.", audioReceived.bytes,
                videoReceived.bytes
            ),
            (
                "understudy_agent_frames_recorded_total", "Frames written to recording files.", audioRecorded.frames,
                videoRecorded.frames
            ),
            (
                "understudy_agent_bytes_recorded_total", "Payload bytes written to recordings.", audioRecorded.bytes,
                videoRecorded.bytes
            ),
        ] {
            out.family(name, "counter", help)
            out.sample(name, labels: ["kind": "audio"], Double(audio))
            out.sample(name, labels: ["kind": "video"], Double(video))
        }
        out.single(
            "understudy_agent_keyframes_received_total", "counter", "Video keyframes received.",
            keyframes.load(ordering: .relaxed))
        lock.withLock {
            out.single(
                "understudy_agent_invites_accepted_total", "counter", "Stage invites followed.", invitesAccepted)
            out.single(
                "understudy_agent_invites_refused_total", "counter", "Stage invites refused by --accept-invites.",
                invitesRefused)
            out.single(
                "understudy_agent_reconnects_total", "counter", "Times the signalling connection was re-established.",
                reconnectCount)
            out.single(
                "understudy_agent_consume_failures_total", "counter", "consume/stopConsuming calls that failed twice.",
                consumeFailures)
            out.single(
                "understudy_agent_recording_write_errors_total", "counter",
                "Recordings whose file could not be written (full disk, file size limit); reported when it happens.",
                recordingFailures)
        }
        out.single(
            "understudy_agent_uptime_seconds", "gauge", "Seconds since the agent started.", uptimeSeconds)
    }
}

/// Builds a Prometheus text exposition (format 0.0.4).
struct PrometheusText {
    private(set) var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    mutating func sample(_ name: String, labels: [String: String] = [:], _ value: Double) {
        var line = name
        if !labels.isEmpty {
            let pairs = labels.keys.sorted().map { key in "\(key)=\"\(Self.escape(labels[key] ?? ""))\"" }
            line += "{" + pairs.joined(separator: ",") + "}"
        }
        let formatted = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        text += line + " " + formatted + "\n"
    }

    mutating func single<V: BinaryInteger>(_ name: String, _ type: String, _ help: String, _ value: V) {
        family(name, type, help)
        sample(name, Double(value))
    }

    mutating func single(_ name: String, _ type: String, _ help: String, _ value: Double) {
        family(name, type, help)
        sample(name, value)
    }

    /// RTCP feedback sent by the agent's subscribe connection (``Room/subscribeFeedbackSent``); the
    /// counts restart when a reconnection replaces that connection, which Prometheus reads as a reset.
    mutating func subscribeFeedback(_ sent: (plis: UInt64, nacks: UInt64)) {
        single(
            "understudy_agent_plis_sent_total", "counter",
            "Keyframe requests (PLI) sent to the SFU by the subscribe connection.", sent.plis)
        single(
            "understudy_agent_nacks_sent_total", "counter",
            "Retransmission requests (NACK) sent to the SFU by the subscribe connection.", sent.nacks)
    }

    /// One gauge or counter per consumed track and quality figure (``ReceiveQualitySnapshot``),
    /// labelled with the publishing participant and the stream kind; times in seconds.
    mutating func trackQuality(_ rows: [ReceivedTrackQuality]) {
        let figures: [(String, String, String, (ReceiveQualitySnapshot) -> Double?)] = [
            (
                "understudy_agent_track_frames_total", "counter", "Frames completed (video) or played (audio).",
                {
                    Double($0.frames)
                }
            ),
            (
                "understudy_agent_track_fps", "gauge", "Frames per second since the track's first frame.",
                {
                    $0.framesPerSecond
                }
            ),
            (
                "understudy_agent_track_freezes_total", "counter", "Video freezes (W3C freezeCount definition).",
                {
                    $0.kind == "video" ? Double($0.freezeCount) : nil
                }
            ),
            (
                "understudy_agent_track_freeze_seconds_total", "counter", "Summed duration of the video freezes.",
                {
                    $0.kind == "video" ? $0.totalFreezesDurationMs / 1000 : nil
                }
            ),
            (
                "understudy_agent_track_pauses_total", "counter", "Gaps of 5 s or more between frames.",
                {
                    Double($0.pauseCount)
                }
            ),
            ("understudy_agent_track_jitter_seconds", "gauge", "RFC 3550 interarrival jitter.", { $0.jitterMs / 1000 }),
            (
                "understudy_agent_track_jitter_buffer_delay_seconds", "gauge", "Estimated mean jitter-buffer delay.",
                {
                    $0.jitterBufferDelayMs / 1000
                }
            ),
            (
                "understudy_agent_track_packets_lost_total", "counter", "Packets lost (RFC 3550 cumulative).",
                {
                    Double($0.packetsLost)
                }
            ),
            (
                "understudy_agent_track_packets_received_total", "counter",
                "Unique media packets received (a repaired hole included).",
                {
                    Double($0.packetsReceived)
                }
            ),
            (
                "understudy_agent_track_frame_height", "gauge", "Coded height of the last key frame (video).",
                {
                    $0.height.map(Double.init)
                }
            ),
            (
                "understudy_agent_track_nacks_sent_total", "counter", "NACK messages sent for the track.",
                {
                    Double($0.nacksSent)
                }
            ),
            ("understudy_agent_track_plis_sent_total", "counter", "PLIs sent for the track.", { Double($0.plisSent) }),
            ("understudy_agent_track_firs_sent_total", "counter", "FIRs sent for the track.", { Double($0.firsSent) }),
            (
                "understudy_agent_track_layer_switches_total", "counter", "Key frames of a new size (layer switches).",
                {
                    $0.layerSwitches.map(Double.init)
                }
            ),
            (
                "understudy_agent_track_latency_seconds", "gauge", "Mean capture-to-arrival time (abs-capture-time).",
                {
                    $0.latencyMs.map { $0 / 1000 }
                }
            ),
            (
                "understudy_agent_track_concealed_seconds_total", "counter", "Audio concealed for lost packets.",
                {
                    $0.concealedMs.map { $0 / 1000 }
                }
            ),
            ("understudy_agent_track_mos", "gauge", "E-model (G.107) MOS estimate of the audio.", { $0.mos }),
        ]
        for (name, type, help, value) in figures {
            let samples = rows.compactMap { row in
                value(row.quality).map { (["participant": row.participantId, "kind": row.kind.rawValue], $0) }
            }
            guard !samples.isEmpty else { continue }
            family(name, type, help)
            for (labels, v) in samples { sample(name, labels: labels, v) }
        }
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}

/// Serves `GET /metrics` (Prometheus text) for one agent on a loopback address.
///
/// Only loopback addresses are accepted: the endpoint has no authentication and reveals who is in
/// the room, so exposing it further is left to a deliberate proxy.
// Safe: immutable after start; the HTTP server it wraps synchronizes itself.
public final class RoomAgentMetricsServer: @unchecked Sendable {
    private let server: HTTPServer

    /// Parses `HOST:PORT` (`127.0.0.1:9100`, `[::1]:9100`, `localhost:9100`); refuses other hosts.
    public static func parseAddress(_ text: String) throws(RoomAgentMetricsError) -> (host: String, port: UInt16) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[close...].hasPrefix("]:") else {
                throw .notHostAndPort(text)
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw .notHostAndPort(text) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = UInt16(portText) else { throw .badPort(String(portText)) }
        switch host {
        case "127.0.0.1", "localhost": return ("127.0.0.1", port)
        case "::1": return ("::1", port)
        default:
            throw .notLoopback(String(host))
        }
    }

    /// Starts listening on `host:port` (port 0 picks one; read ``port``).
    public init(host: String, port: UInt16, render: @escaping @Sendable () -> String) throws(RoomAgentMetricsError) {
        server = HTTPServer(host: host, port: port)
        server.route(method: "GET", path: "/metrics") { _ in
            var response = HTTPResponse.text(render())
            response.headers = HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")])
            return response
        }
        do { try server.start() } catch { throw .cannotListen(host: host, port: port, cause: error) }
    }

    /// The bound port.
    public var port: UInt16 { server.port }

    /// Stops listening.
    public func stop() { server.stop() }
}

/// Frames and payload bytes of one kind, counted without a lock.
final class FrameTally: Sendable {
    private let frameCount = Atomic<UInt64>(0)
    private let byteCount = Atomic<UInt64>(0)

    func add(_ frame: EncodedFrame) {
        frameCount.add(1, ordering: .relaxed)
        byteCount.add(UInt64(frame.data.count), ordering: .relaxed)
    }

    func add(count: Int, bytes: Int) {
        guard count > 0 else { return }
        frameCount.add(UInt64(count), ordering: .relaxed)
        byteCount.add(UInt64(max(0, bytes)), ordering: .relaxed)
    }

    var frames: UInt64 { frameCount.load(ordering: .relaxed) }
    var bytes: UInt64 { byteCount.load(ordering: .relaxed) }
}
