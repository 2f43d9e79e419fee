import Foundation
import Media
import RTC
import RTCWire

// A test peer for the Chromium interop tests. It speaks JSON lines on stdin/stdout:
//   --role offer : prints {"type":"offer","sdp":…}, then reads {"type":"answer","sdp":…}
//   --role answer: reads {"type":"offer","sdp":…}, prints {"type":"answer","sdp":…}
// then sends the test pattern and tone, records what it receives, prints
// {"type":"stats",…} and finally {"type":"done","ok":true}. Logs go to stderr.

func log(_ s: String) { FileHandle.standardError.write(Data("interop-peer: \(s)\n".utf8)) }

func emit(_ object: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: object) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func readMessage(expecting type: String) -> String? {
    guard let line = readLine(strippingNewline: true), let data = line.data(using: .utf8),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
        object["type"] as? String == type, let sdp = object["sdp"] as? String
    else { return nil }
    return sdp
}

func die(_ s: String) -> Never {
    log(s)
    emit(["type": "done", "ok": false, "error": s])
    exit(1)
}

var role = "answer"
var recordPath: String?
var duration = 6.0
var sendVideo = true
var sendAudio = true
var simulcast = false
var fitToEstimate = false
var args = Array(CommandLine.arguments.dropFirst())
while !args.isEmpty {
    let a = args.removeFirst()
    switch a {
    case "--role": role = args.isEmpty ? "" : args.removeFirst()
    case "--record": recordPath = args.isEmpty ? nil : args.removeFirst()
    case "--duration": duration = Double(args.isEmpty ? "" : args.removeFirst()) ?? -1
    case "--video": sendVideo = (args.isEmpty ? "" : args.removeFirst()) != "none"
    case "--audio": sendAudio = (args.isEmpty ? "" : args.removeFirst()) != "none"
    case "--simulcast": simulcast = true
    case "--fit-estimate": fitToEstimate = true
    default: die("unknown option \(a)")
    }
}
guard role == "offer" || role == "answer", duration > 0 else { die("bad --role or --duration") }

let loop = EventLoop(name: "interop-peer")
let pc: PeerConnection
do { pc = try PeerConnection(loop: loop) } catch { die("\(error)") }
let recording: Recording?
do { recording = try recordPath.map { try Recording(path: $0) } } catch { die("\(error)") }
let media = SyntheticMedia.shared(layers: simulcast || fitToEstimate ? 3 : 1)
let (wantVideo, wantAudio, wantSimulcast, wantFit) = (sendVideo, sendAudio, simulcast, fitToEstimate)

do {
    let pump: MediaPump = await loop.submit {
        // The answerer's transceivers attach to the offer's m-lines; the offerer creates them.
        let v = pc.addTransceiver(
            kind: .video, direction: wantVideo ? .sendrecv : .recvonly, sendRIDs: wantSimulcast ? ["q", "h", "f"] : [])
        let a = pc.addTransceiver(kind: .audio, direction: wantAudio ? .sendrecv : .recvonly)
        pc.onFrame = { _, _, frame, timing in recording?.write(frame, arrival: timing.arrivalTime) }
        return MediaPump(
            connection: pc, video: wantVideo ? v : nil, audio: wantAudio ? a : nil, fitToEstimate: wantFit,
            sources: media.source)
    }
    if role == "offer" {
        let offer = try await loop.submit {
            let o = try pc.createOffer()
            try pc.setLocalDescription(o)
            return o.serialize()
        }
        emit(["type": "offer", "sdp": offer])
        guard let answer = readMessage(expecting: "answer") else { die("expected an answer line on stdin") }
        let parsed = try SessionDescription.parse(answer)
        try await loop.submit { try pc.setRemoteDescription(parsed, type: .answer) }
    } else {
        guard let offer = readMessage(expecting: "offer") else { die("expected an offer line on stdin") }
        let parsed = try SessionDescription.parse(offer)
        let answer = try await loop.submit {
            try pc.setRemoteDescription(parsed, type: .offer)
            let a = try pc.createAnswer()
            try pc.setLocalDescription(a)
            return a.serialize()
        }
        emit(["type": "answer", "sdp": answer])
    }
    try await pc.waitUntilConnected(timeout: 10)
    log("connected")
    await loop.submit { pump.attach() }
    let start = Date()
    while Date().timeIntervalSince(start) < duration {
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let stats: [String: Any] = await loop.submit {
            [
                "video_frames_received": recording?.videoFrames ?? 0,
                "audio_frames_received": recording?.audioFrames ?? 0,
                "video_frames_sent": pump.videoFramesSent,
                "audio_frames_sent": pump.audioFramesSent,
                "srtp": pc.srtpProfile.map { "\($0)" } ?? "none",
                "state": pc.state.rawValue,
                // The send-side bandwidth estimate from the peer's transport-cc feedback (issue 33).
                "estimate": pc.bandwidthEstimate?.targetBitrate ?? 0,
                "estimate_state": pc.bandwidthEstimate?.state.rawValue ?? "none",
                "estimate_source": pc.bandwidthEstimate?.source.rawValue ?? "none",
                "estimate_acked": pc.bandwidthEstimate?.acknowledgedBitrate ?? 0,
                "estimate_loss": pc.bandwidthEstimate?.lossFraction ?? 0,
                "feedback_received": pc.counters.transportFeedbackReceived,
                "bytes_sent": pc.counters.bytesSent,
                "video_layer": pump.layerFitter?.current ?? 0,
                "layer_bitrates": pump.layerFitter?.layerBitrates ?? [],
            ] as [String: any Sendable]
        }
        var line = stats
        line["type"] = "stats"
        emit(line)
    }
    await loop.submit {
        pump.detach()
        pc.onFrame = nil
    }
    try recording?.close()
    loop.execute { pc.close() }
    loop.shutdown()
    emit(["type": "done", "ok": true])
    exit(0)
} catch {
    try? recording?.close()
    die("\(error)")
}
