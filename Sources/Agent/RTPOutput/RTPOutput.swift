import RTC
import RTCWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Counters of one ``RTPOutput``.
public struct RTPOutputStats: Sendable, Equatable {
    /// Video frames packetized and sent.
    public var videoFrames: UInt64 = 0
    /// Opus packets sent.
    public var audioFrames: UInt64 = 0
    /// RTP packets sent (both streams).
    public var packets: UInt64 = 0
    /// Bytes of those packets, headers included.
    public var bytes: UInt64 = 0
    /// Video delta frames dropped because no key frame had been relayed yet (a receiver cannot decode them).
    public var framesBeforeKeyframe: UInt64 = 0
    /// Video frames dropped because their codec is not the one the first key frame chose (the `.sdp`
    /// announces one video codec), or one the output cannot send.
    public var framesOtherCodec: UInt64 = 0
    /// Frames that could not be packetized (empty, or an Opus packet larger than one datagram).
    public var framesFailed: UInt64 = 0
}

/// Forwards received frames as plain RTP (no SRTP, no RTCP) to a UDP destination, so that tools such
/// as ffmpeg can play them from the session description that ``writeSDP(to:)`` writes.
///
/// Port convention: video (payload type 96) goes to `basePort`, audio (Opus, payload type 111) to
/// `basePort + 2`. The odd ports `basePort + 1` and `basePort + 3` are left for the receiver's
/// RTCP, which this output neither sends nor reads.
///
/// Each stream gets a fresh random SSRC, sequence number and timestamp base; the sender's RTP
/// timestamps are kept (shifted by that base), so the receiver sees the original pacing.
///
/// Video codec: the first video key frame chooses it (VP8 as RFC 7741, H.264 as RFC 6184 in
/// packetization mode 1, VP9 as RFC 9628 with one spatial and temporal layer, AV1 as the AOM RTP
/// payload format's OBU aggregation); until then the session description announces VP8. When the key frame's
/// format differs (another codec, or H.264 whose SPS/PPS the `.sdp` should carry), the output
/// rewrites the `.sdp` it wrote (``writeSDP(to:)``) and reports it through ``onFormatChange``.
/// Frames of any other codec are then dropped (``RTPOutputStats/framesOtherCodec``).
///
/// Confined to the event-loop thread like the other RTC objects: create it anywhere, call
/// ``send(_:arrival:)`` and ``close()`` on the loop (e.g. from `PeerConnection.onFrame`). Packets are
/// built in one preallocated buffer; nothing is allocated per packet.
// Safe: confined to one event-loop thread (see above); Sendable only to be handed to it.
public final class RTPOutput: @unchecked Sendable {
    /// Video payload type on the wire and in the SDP, whatever the codec.
    public static let videoPayloadType: UInt8 = 96
    /// The video codecs the output packetizes.
    public static let videoCodecs: Set<MediaCodec> = [.vp8, .h264, .vp9, .av1]
    /// Opus payload type on the wire and in the SDP.
    public static let audioPayloadType: UInt8 = 111
    /// Largest RTP payload (descriptor included) per packet, well below a 1500-byte MTU.
    public static let maxPayloadSize = 1200
    private static let headerLength = 12
    /// The VP8 payload descriptor with a 15-bit picture id (RFC 7741 §4.2): 4 bytes.
    private static let vp8DescriptorLength = 4
    private static let packetCapacity = 1500

    /// The destination host as given (numeric IP).
    public let host: String
    /// Destination port of the video stream.
    public let videoPort: UInt16
    /// Destination port of the audio stream (`videoPort + 2`).
    public var audioPort: UInt16 { videoPort + 2 }
    /// SSRC of the relayed video stream.
    public let videoSSRC: UInt32
    /// SSRC of the relayed audio stream.
    public let audioSSRC: UInt32
    /// Counters.
    public private(set) var stats = RTPOutputStats()
    /// The video stream as ``sessionDescription`` announces it: VP8 until the first video key frame.
    public private(set) var videoFormat = RTPOutputVideoFormat.vp8
    /// Called on the loop thread when the first video key frame changed ``videoFormat`` with the
    /// path of the rewritten `.sdp` (nil when none was written) or the error rewriting it.
    public var onFormatChange: (@Sendable (RTPOutputVideoFormat, Result<String?, RTPOutputError>) -> Void)?

    private let socket: UDPSocket
    private let videoAddress: SocketAddress
    private let audioAddress: SocketAddress
    private let isIPv6: Bool
    private let scratch: UnsafeMutableRawBufferPointer
    private var videoSequence: UInt16
    private var audioSequence: UInt16
    private let videoTimestampOffset: UInt32
    private let audioTimestampOffset: UInt32
    private var pictureID: UInt16
    private var sawKeyframe = false
    /// Where ``writeSDP(to:)`` last wrote, rewritten when the video format changes.
    private var sdpPath: String?
    /// H.264 FU-A fragments are built here before they are copied behind the RTP header.
    private var fragmentScratch = [UInt8](repeating: 0, count: RTPOutput.maxPayloadSize)
    /// AV1 OBU aggregation (its packet buffer is reused from unit to unit).
    private var av1Packetizer = AV1Packetizer()

    /// Parses `rtp://HOST:PORT` into a numeric host and an even base port.
    ///
    /// `HOST` is an IPv4 address, a bracketed IPv6 address (`rtp://[::1]:5004`) or `localhost`
    /// (mapped to `127.0.0.1`); host names are refused rather than resolved, so the destination is
    /// always exactly what the user typed. `PORT` must be even and at most 65532 (audio uses PORT+2).
    public static func parseURL(_ url: String) throws(RTPOutputError) -> (host: String, port: UInt16) {
        let prefix = "rtp://"
        guard url.lowercased().hasPrefix(prefix) else { throw .unsupportedScheme(url) }
        let rest = url.dropFirst(prefix.count)
        guard !rest.isEmpty else { throw .missingHost }
        var host: Substring
        var afterHost: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .invalidHost(String(rest)) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            afterHost = rest[rest.index(after: close)...]
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            afterHost = rest[colon...]
        } else {
            let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            host = rest[..<end]
            afterHost = rest[end...]
        }
        guard !host.isEmpty else { throw .missingHost }
        guard afterHost.hasPrefix(":") else { throw .missingPort }
        afterHost = afterHost.dropFirst()
        let portEnd = afterHost.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? afterHost.endIndex
        let portText = afterHost[..<portEnd]
        let suffix = afterHost[portEnd...]
        guard !portText.isEmpty else { throw .missingPort }
        guard portText.utf8.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = UInt16(portText), port > 0, port % 2 == 0, port <= 65532
        else { throw .invalidPort(String(portText)) }
        // A lone trailing slash is harmless; anything else would be silently ignored, so refuse it.
        guard suffix.isEmpty || suffix == "/" else { throw .unexpectedSuffix(String(suffix)) }
        if host.lowercased() == "localhost" { host = "127.0.0.1" }
        guard SocketAddress(ip: String(host), port: port) != nil else { throw .invalidHost(String(host)) }
        return (String(host), port)
    }

    /// Opens a UDP socket on `loop` that sends to `host:basePort` (video) and `host:basePort+2` (audio).
    ///
    /// - Parameters:
    ///   - host: a numeric IPv4/IPv6 address (see ``parseURL(_:)``).
    ///   - basePort: the even video port.
    ///   - seed: fixes SSRCs, sequence numbers and timestamp bases for tests; random when nil.
    public init(destination host: String, basePort: UInt16, loop: EventLoop, seed: UInt64? = nil) throws(RTPOutputError)
    {
        guard basePort > 0, basePort % 2 == 0, basePort <= 65532 else { throw .invalidPort(String(basePort)) }
        guard let video = SocketAddress(ip: host, port: basePort),
            let audio = SocketAddress(ip: host, port: basePort + 2)
        else { throw .invalidHost(host) }
        self.host = host
        videoPort = basePort
        videoAddress = video
        audioAddress = audio
        isIPv6 = video.isIPv6
        // SplitMix64 is enough for SSRCs and initial sequence numbers: plain RTP is unprotected anyway.
        var random = SplitMix64(seed: seed ?? UInt64.random(in: .min ... .max))
        videoSSRC = UInt32(truncatingIfNeeded: random.next())
        var audio32 = UInt32(truncatingIfNeeded: random.next())
        if audio32 == videoSSRC { audio32 &+= 1 }
        audioSSRC = audio32
        // Start low so the first thousands of packets do not wrap (some receivers mishandle an early wrap).
        videoSequence = UInt16(truncatingIfNeeded: random.next() % 0x7FFF)
        audioSequence = UInt16(truncatingIfNeeded: random.next() % 0x7FFF)
        videoTimestampOffset = UInt32(truncatingIfNeeded: random.next())
        audioTimestampOffset = UInt32(truncatingIfNeeded: random.next())
        pictureID = UInt16(truncatingIfNeeded: random.next()) & 0x7FFF
        scratch = .allocate(byteCount: Self.packetCapacity, alignment: 16)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
        let bindAddress = SocketAddress(ip: video.isIPv6 ? "::" : "0.0.0.0", port: 0)
        do throws(SocketError) {
            guard let bindAddress else { throw SocketError.system(call: "bind", errno: EINVAL) }
            socket = try loop.openUDP(bindTo: bindAddress, handler: IgnoreDatagrams.shared)
        } catch {
            scratch.deallocate()
            throw .socket(error)
        }
    }

    deinit {
        socket.close()
        scratch.deallocate()
    }

    /// Sends one frame: a VP8 frame as RFC 7741 packets (15-bit picture id, marker on the last), an
    /// H.264 access unit as RFC 6184 single NAL unit and FU-A packets (marker on the last), a VP9
    /// frame as RFC 9628 packets (15-bit picture id, B/E bits, marker on the last), an AV1 temporal
    /// unit as aggregated OBUs (N on a key frame's first packet, marker on the last), an Opus packet
    /// as one RTP packet. Video delta frames before the first key frame are dropped.
    /// Loop thread only.
    ///
    /// - Parameter arrival: when the frame arrived (`EventLoop.now()`); the wire timing comes from the
    ///   frame's RTP timestamp, so this is only informational today.
    public func send(_ frame: EncodedFrame, arrival: UInt64) {
        socket.loop.assertInLoop()
        guard !frame.data.isEmpty, !socket.isClosed else {
            stats.framesFailed += 1
            return
        }
        if frame.codec == .opus {
            sendAudio(frame)
        } else {
            sendVideo(frame)
        }
    }

    /// Closes the socket. Loop thread or any thread.
    public func close() { socket.close() }

    private func sendAudio(_ frame: EncodedFrame) {
        guard frame.data.count <= Self.packetCapacity - Self.headerLength else {
            stats.framesFailed += 1
            return
        }
        writeHeader(
            payloadType: Self.audioPayloadType, marker: false, sequence: audioSequence,
            timestamp: frame.timestamp &+ audioTimestampOffset, ssrc: audioSSRC)
        audioSequence &+= 1
        let length = Self.headerLength + frame.data.count
        frame.data.withUnsafeBytes { data in
            if let src = data.baseAddress, let dst = scratch.baseAddress {
                (dst + Self.headerLength).copyMemory(from: src, byteCount: data.count)
            }
        }
        send(length: length, to: audioAddress)
        stats.audioFrames += 1
    }

    private func sendVideo(_ frame: EncodedFrame) {
        if !sawKeyframe {
            guard Self.videoCodecs.contains(frame.codec) else {
                stats.framesOtherCodec += 1
                return
            }
            guard frame.isKeyframe else {
                stats.framesBeforeKeyframe += 1
                return
            }
            sawKeyframe = true
            adoptFormat(of: frame)
        }
        guard frame.codec == videoFormat.codec else {
            stats.framesOtherCodec += 1
            return
        }
        if frame.codec == .h264 || frame.codec == .av1 {
            sendPayloads(frame)
            return
        }
        let timestamp = frame.timestamp &+ videoTimestampOffset
        let isVP9 = frame.codec == .vp9
        // RTCWire's VP8 (or VP9) payload format, as RTPSender uses it: balanced packets, each payload
        // written straight behind the RTP header in the scratch buffer.
        let sent: Int = frame.data.withUnsafeBytes { data in
            let split = VP8PayloadFormat.Split(
                frameLength: data.count, maxPayloadSize: Self.maxPayloadSize,
                descriptorLength: isVP9
                    ? VP9PayloadFormat.descriptorLength(isKeyframe: frame.isKeyframe) : Self.vp8DescriptorLength)
            let payloadRoom = UnsafeMutableRawBufferPointer(rebasing: scratch[Self.headerLength...])
            for k in 0..<split.count {
                // Neither fails: the scratch buffer holds the largest packet.
                var payloadLength = 0
                if isVP9 {
                    payloadLength = VP9PayloadFormat.writePacket(
                        k, of: split, frame: data, pictureID: pictureID, isKeyframe: frame.isKeyframe,
                        into: payloadRoom)
                } else {
                    do throws(VP8Error) {
                        payloadLength = try VP8PayloadFormat.writePacket(
                            k, of: split, frame: data, pictureID: pictureID, into: payloadRoom)
                    } catch {}
                }
                guard payloadLength > 0 else { return 0 }
                writeHeader(
                    payloadType: Self.videoPayloadType, marker: k == split.count - 1, sequence: videoSequence,
                    timestamp: timestamp, ssrc: videoSSRC)
                videoSequence &+= 1
                send(length: Self.headerLength + payloadLength, to: videoAddress)
            }
            return split.count
        }
        guard sent > 0 else {
            stats.framesFailed += 1
            return
        }
        pictureID = VP8Packetizer.nextPictureID(pictureID)
        stats.videoFrames += 1
    }

    /// An H.264 access unit or an AV1 temporal unit: the codec's packetizer hands each payload over,
    /// copied behind the RTP header.
    private func sendPayloads(_ frame: EncodedFrame) {
        let timestamp = frame.timestamp &+ videoTimestampOffset
        let sent = frame.data.withUnsafeBytes { data in
            if frame.codec == .av1 {
                return av1Packetizer.packetize(
                    temporalUnit: data, isKeyframe: frame.isKeyframe, maxPayloadSize: Self.maxPayloadSize
                ) { sendVideoPayload($0, marker: $1, timestamp: timestamp) }
            }
            return H264PayloadFormat.packetize(
                accessUnit: data, maxPayloadSize: Self.maxPayloadSize, scratch: &fragmentScratch
            ) { sendVideoPayload($0, marker: $1, timestamp: timestamp) }
        }
        guard sent > 0 else {
            stats.framesFailed += 1
            return
        }
        stats.videoFrames += 1
    }

    private func sendVideoPayload(_ payload: UnsafeRawBufferPointer, marker: Bool, timestamp: UInt32) {
        guard let dst = scratch.baseAddress, let src = payload.baseAddress else { return }
        (dst + Self.headerLength).copyMemory(from: src, byteCount: payload.count)
        writeHeader(
            payloadType: Self.videoPayloadType, marker: marker, sequence: videoSequence, timestamp: timestamp,
            ssrc: videoSSRC)
        videoSequence &+= 1
        send(length: Self.headerLength + payload.count, to: videoAddress)
    }

    /// The first video key frame: its codec and parameters become the `.sdp`'s (once per output).
    private func adoptFormat(of keyframe: EncodedFrame) {
        let format = keyframe.data.withUnsafeBytes { RTPOutputVideoFormat(codec: keyframe.codec, keyframe: $0) }
        guard let format, format != videoFormat else { return }
        videoFormat = format
        var outcome: Result<String?, RTPOutputError> = .success(sdpPath)
        if let sdpPath {
            do throws(RTPOutputError) { try writeSDP(to: sdpPath) } catch { outcome = .failure(error) }
        }
        onFormatChange?(format, outcome)
    }

    private func writeHeader(payloadType: UInt8, marker: Bool, sequence: UInt16, timestamp: UInt32, ssrc: UInt32) {
        // The scratch buffer is far larger than a header, so this cannot throw.
        _ = try? RTPHeaderWriter.writeFixedHeader(
            into: scratch, marker: marker, payloadType: payloadType, sequenceNumber: sequence, timestamp: timestamp,
            ssrc: ssrc)
    }

    private func send(length: Int, to address: SocketAddress) {
        socket.send(UnsafeRawBufferPointer(rebasing: scratch[0..<length]), to: address)
        stats.packets += 1
        stats.bytes += UInt64(length)
    }

    // MARK: - Session description

    /// The session description a receiver needs to play the relayed streams (ffmpeg, VLC, GStreamer).
    public var sessionDescription: String {
        let family = isIPv6 ? "IP6" : "IP4"
        var lines = [
            "v=0",
            "o=- \(videoSSRC) 1 IN \(family) \(host)",
            "s=Understudy relay",
            "c=IN \(family) \(host)",
            "t=0 0",
            "m=video \(videoPort) RTP/AVP \(Self.videoPayloadType)",
            "a=rtpmap:\(Self.videoPayloadType) \(videoFormat.rtpmap)",
        ]
        if let fmtp = videoFormat.fmtp { lines.append("a=fmtp:\(Self.videoPayloadType) \(fmtp)") }
        lines += [
            "a=recvonly",
            "m=audio \(audioPort) RTP/AVP \(Self.audioPayloadType)",
            "a=rtpmap:\(Self.audioPayloadType) opus/48000/2",
            "a=fmtp:\(Self.audioPayloadType) minptime=10;useinbandfec=1",
            "a=recvonly",
            "",
        ]
        return lines.joined(separator: "\n")
    }

    /// Writes ``sessionDescription`` to `path` (replacing the file), and again when the first video
    /// key frame changes ``videoFormat``. Throws ``RTPOutputError/file(path:errno:)``. Loop thread once
    /// frames flow.
    public func writeSDP(to path: String) throws(RTPOutputError) {
        // Written beside and renamed over: a player opening the file never reads half of it.
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file(path: path, errno: errno) }
        var text = sessionDescription
        var failure: Int32? = text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                guard let base = bytes.baseAddress else { return EINVAL }
                let n = Glibc.write(fd, base + offset, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return nil
        }
        Glibc.close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = errno }
        if let failure {
            unlink(temporary)
            throw .file(path: path, errno: failure)
        }
        sdpPath = path
    }
}

/// Drops every datagram; the relay's socket only sends.
// Safe: no state at all.
private final class IgnoreDatagrams: DatagramHandler, @unchecked Sendable {
    static let shared = IgnoreDatagrams()
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
}
