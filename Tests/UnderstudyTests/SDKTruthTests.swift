import Agent
import Foundation
import Media
import SDKTestSupport
import TestSupport
import Testing

@testable import RoomServer
@testable import Understudy

// Issue 14: state, events and errors that match the spec after every turn of events. Each test
// drives the SDK against the real in-process room server and asserts the spec's exact outcome.

/// Holds the server-side room's serial queue for `seconds`: requests to that room wait, as they
/// would on a slow or overloaded server. Returns once the stall has begun.
func stallRoom(_ server: RoomServer, _ roomId: String, seconds: Double) async throws {
    // `try?`: `room(for:)` returns an optional here and throws on newer servers; either way, nil = none.
    let room = try #require(try? server.room(for: roomId))
    let started = Flag()
    room.enqueue {
        started.set()
        Thread.sleep(forTimeInterval: seconds)
    }
    try await waitUntil("the room stalled") { started.isSet }
}

/// A flag set once from any thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// A UDP socket bound to a free loopback port whose next port is free too: a server given the
/// range `port...port+1` has exactly one usable media port while this socket stays open.
final class HeldUDPPort {
    let port: UInt16
    private let fd: Int32

    init() throws {
        for _ in 0..<50 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { break }
            if let port = Self.bind(fd, 0), port < 65000, let next = Self.probe(port + 1) {
                _ = next
                self.fd = fd
                self.port = port
                return
            }
            close(fd)
        }
        throw WaitTimeout(what: "a pair of free UDP ports")
    }

    deinit { close(fd) }

    private static func bind(_ fd: Int32, _ port: UInt16) -> UInt16? {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return named == 0 ? UInt16(bigEndian: address.sin_port) : nil
    }

    /// Whether `port` can be bound now (bound and released at once).
    private static func probe(_ port: UInt16) -> UInt16? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        return bind(fd, port)
    }
}

/// Runs `work` from `onRoomJoined`, synchronously on the event queue.
final class JoinHook: RoomEventListener, @unchecked Sendable {
    let work: @Sendable () -> Void
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    func onRoomJoined() { work() }
}

final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var codes: [String: Int] = [:]
    func set(_ key: String, _ error: Error?) {
        lock.withLock { codes[key] = (error as? UnderstudyError)?.code ?? (error == nil ? 0 : -1) }
    }
    func get(_ key: String) -> Int? { lock.withLock { codes[key] } }
}

@Suite("Understudy: the SDK tells the truth (issue 14)", .serialized)
struct SDKTruthTests {
    // MARK: 1. Publishing at join

    /// While the join still publishes the mic: `unmuteMic()` is 3054 (it is on), `muteMic()` and
    /// `changeMode()` are 3055 (an operation is running), and `join()` returns with the mic produced.
    @Test func publishingAtJoinHoldsTheOperationLock() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try makeRoom(server, room: "join-lock", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let log = EventLog()
        let results = ErrorBox()
        let done = Flag()
        room.addEventListener(log)
        room.localParticipant.addEventListener(log)
        room.addEventListener(
            JoinHook {
                // Hold the server's room so the join's produce cannot finish before the calls below.
                (try? server.room(for: "join-lock"))?.enqueue { Thread.sleep(forTimeInterval: 1) }
                Task {
                    do { try await room.unmuteMic() } catch { results.set("unmute", error) }
                    do { try await room.muteMic() } catch { results.set("mute", error) }
                    do { try await room.changeMode(.RECV_ONLY) } catch { results.set("mode", error) }
                    done.set()
                }
            })
        await room.join()
        try await waitUntil("the calls from onRoomJoined") { done.isSet }
        #expect(results.get("unmute") == 3054)
        #expect(results.get("mute") == 3055)
        #expect(results.get("mode") == 3055)
        #expect(room.localParticipant.mode == .SEND_AND_RECV)
        #expect(log.has("streamOn:pub:audio"))
        // Once the join's publishing is done the mic can be toggled normally.
        try await room.muteMic()
        #expect(!room.localParticipant.micOn)
        await room.leave()
    }

    /// A publish at join that fails reaches `onError` with the documented code, and the room is told
    /// the mic is off after all (the join announced it on).
    @Test func aFailedPublishAtJoinIsReportedAndCorrected() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (watcher, watcherLog) = try await joinedRoom(server, room: "join-fail", id: "watcher")
        watcherLog.onJoined = nil
        let room = try makeRoom(server, room: "join-fail", id: "pub", mode: .SEND_AND_RECV, mic: true)
        room.mediaSourceFactory = { _, _ in
            throw MediaSourceError.capture(.cannotOpen(device: "default", message: "no capture device"))
        }
        let log = EventLog()
        room.addEventListener(log)
        await room.join()
        #expect(log.errorCodes == [3059])
        #expect(log.errors.first?.name == "ERROR_NO_MICROPHONE_DEVICE_FOUND")
        // The source's own error stays reachable, typed, for callers that want the detail.
        guard case .capture(.cannotOpen(let device, _))? = log.errors.first?.underlyingError as? MediaSourceError else {
            Issue.record("no MediaSourceError cause in \(String(describing: log.errors.first))")
            return
        }
        #expect(device == "default")
        #expect(room.localParticipant.streams.isEmpty)
        try await waitUntil("the watcher sees pub") { watcher.participants["pub"] != nil }
        let seen = try #require(watcher.participants["pub"])
        try await waitUntil("the watcher sees the mic off") { !seen.micOn }
        // A file that cannot be read is a failed produce (3058), not a missing device.
        room.mediaSourceFactory = { _, _ in
            throw MediaSourceError.unreadable(path: "/nonexistent.ogg", errno: ENOENT)
        }
        await expectCode(3058) { try await room.unmuteMic() }
        await room.leave()
        await watcher.leave()
    }

    // MARK: 2. Quality choices survive

    /// `setQuality(.low)` holds after the publisher turns its camera off and on (the server makes a
    /// new consumer): the received picture is the low layer again, and the same call is not a no-op.
    @Test func aQualityChoiceSurvivesANewConsumer() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(
            server, room: "quality", id: "pub", mode: .SEND_AND_RECV, cam: true, multiStream: true)
        try await waitUntil("camera on") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "quality", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        try await waitUntil("the top layer arrives", seconds: 20) {
            remote.captureFrames.pictureSize?.width == 640
        }
        try await remote.setQuality(.low)
        try await waitUntil("the low layer arrives", seconds: 20) { remote.captureFrames.pictureSize?.width == 160 }
        // onVideoQualityChanged reports the switch of what is received.
        try await waitUntil("quality event", seconds: 20) { viewerLog.has("quality:pub:high->low") }
        try await pub.disableCam()
        try await waitUntil("stream off at the viewer") { viewerLog.has("streamOff:pub:video") }
        try await pub.enableCam()
        try await waitUntil("stream on again", seconds: 20) { viewerLog.count("streamOn:pub:video") == 2 }
        try await waitUntil("the low layer arrives again", seconds: 20) {
            remote.captureFrames.pictureSize?.width == 160
        }
        try await remote.setQuality(.medium)
        try await waitUntil("the middle layer arrives", seconds: 20) { remote.captureFrames.pictureSize?.width == 320 }
        try await waitUntil("quality event", seconds: 20) { viewerLog.has("quality:pub:low->medium") }
        await viewer.leave()
        await pub.leave()
    }

    // MARK: 3. Listeners added before join()

    @Test func listenersAddedToTheLocalParticipantBeforeJoinStay() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let room = try makeRoom(server, room: "early-listener", id: "pub", mode: .SEND_AND_RECV, mic: true)
        let log = EventLog()
        room.addEventListener(log)
        room.localParticipant.addEventListener(log)  // before join(), as the spec says
        await room.join()
        #expect(log.has("joined"))
        #expect(log.has("streamOn:pub:audio"))
        await room.leave()
        #expect(log.has("streamOff:pub:audio"))
    }

    // MARK: 4. Stats

    /// Rows are the sampling clock's last interval: the first row already has a bitrate, two callers
    /// asking back to back see the same interval, own streams carry what the receiver reports say
    /// (jitter, RTT) and remote streams an RTT; a remote's transport stats include what it receives.
    @Test func statsReportWhatRTCPSaysAndDoNotDependOnTheCaller() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(
            server, room: "stats-truth", id: "pub", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("camera on") { pubLog.has("streamOn:pub:video") }
        let (viewer, viewerLog) = try await joinedRoom(server, room: "stats-truth", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["pub"])
        remote.addEventListener(viewerLog)
        try await waitUntil("video at the viewer", seconds: 20) { viewerLog.has("streamOn:pub:video") }
        var first: [String: Any]?
        try await waitUntil("a first stats row", seconds: 20) {
            first = remote.getVideoStats()?.first
            return first != nil
        }
        let row = try #require(first)
        #expect((row["bitrate"] as? Double ?? 0) > 0, "the first row has a rate: \(row)")
        // Two callers, back to back: the same interval, so the same values.
        let a = try #require(remote.getAudioStats()?.first)
        let b = try #require(remote.getAudioStats()?.first)
        #expect(a["totalPackets"] as? Int == b["totalPackets"] as? Int)
        #expect((a["totalPackets"] as? Int ?? 0) > 0)
        #expect(a["bitrate"] as? Double == b["bitrate"] as? Double)
        // Remote streams: the round trip between this device and the server.
        try await waitUntil("remote rtt", seconds: 20) {
            (remote.getVideoStats()?.first?["rtt"] as? Double ?? 0) > 0
        }
        // Own streams: jitter and RTT from the server's receiver reports.
        try await waitUntil("own jitter and rtt from RR", seconds: 20) {
            let rows = pub.localParticipant.getVideoStats() ?? []
            return rows.contains { ($0["jitter"] as? Double ?? 0) > 0 && ($0["rtt"] as? Double ?? 0) > 0 }
        }
        // A remote's transport stats: what it sends and what it receives, as the server counts them.
        let atPub = try #require(pub.participants["viewer"])
        let transport = try #require(await transportStats(atPub))
        let receive = try #require(transport["receive"] as? [String: Any])
        #expect((receive["totalReceivedBytes"] as? Int ?? 0) > 0)
        #expect((receive["incomingBitrate"] as? Double ?? 0) > 0, "the first call has a rate: \(receive)")
        await viewer.leave()
        await pub.leave()
    }

    // MARK: 5. After a reconnect

    /// A mic muted before the drop is announced off by the rejoin; local streams end and start again
    /// (off between two ons).
    @Test func theRejoinAnnouncesTheCurrentDevicesAndPairsStreamEvents() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "rejoin-flags", id: "host")
        let (guest, guestLog) = try await joinedRoom(
            server, room: "rejoin-flags", id: "guest", mode: .SEND_AND_RECV, mic: true, cam: true)
        try await waitUntil("guest media") {
            guestLog.has("streamOn:guest:audio") && guestLog.has("streamOn:guest:video")
        }
        try await guest.muteMic()
        try await waitUntil("host sees the mic off") { host.participants["guest"]?.micOn == false }
        guest.simulateConnectionDrop()
        try await waitUntil("host sees guest back", seconds: 30) { hostLog.count("pjoined:guest") == 2 }
        // The re-announced participant is the rejoin's join: mic off, camera on.
        let back = try #require(host.participants["guest"])
        #expect(!back.micOn)
        #expect(back.webcamOn)
        try await waitUntil("camera again", seconds: 30) { guestLog.count("streamOn:guest:video") == 2 }
        let video = guestLog.events.filter { $0.hasSuffix(":guest:video") }
        #expect(video == ["streamOn:guest:video", "streamOff:guest:video", "streamOn:guest:video"])
        #expect(guestLog.count("streamOn:guest:audio") == 1)
        await guest.leave()
        await host.leave()
    }

    /// Leaving with 1102: every local stream has ended (`onStreamDisabled`) before `onRoomLeft`.
    @Test func leavingWith1102EndsTheLocalStreams() async throws {
        let server = try startRoomServer()
        let (room, log) = try await joinedRoom(server, room: "gone-streams", id: "pub", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("mic on") { log.has("streamOn:pub:audio") }
        room.reconnectAttempts = 1
        room.reconnectDelay = 1
        room.simulateConnectionDrop()
        try await waitUntil("reconnecting") { room.state == .RECONNECTING }
        server.stop()
        try await waitUntil("gave up", seconds: 20) { log.has("left:1102") }
        let events = log.events
        let off = try #require(events.firstIndex(of: "streamOff:pub:audio"))
        #expect(off < events.firstIndex(of: "left:1102")!)
        #expect(log.count("streamOn:pub:audio") == log.count("streamOff:pub:audio"))
        #expect(room.localParticipant.streams.isEmpty)
    }

    // MARK: 6. changeMode refused or interrupted

    /// A `changeMode` cut off by a reconnect throws 3065 (not 4065) and leaves the media as it was:
    /// the rejoin publishes the mic again, in SEND_AND_RECV.
    @Test func aChangeModeInterruptedByAReconnectIs3065AndKeepsTheMedia() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, hostLog) = try await joinedRoom(server, room: "mode-cut", id: "host")
        let (guest, guestLog) = try await joinedRoom(
            server, room: "mode-cut", id: "guest", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("guest mic") { guestLog.has("streamOn:guest:audio") }
        try await stallRoom(server, "mode-cut", seconds: 2)
        let result = ErrorBox()
        let task = Task {
            do { try await guest.changeMode(.RECV_ONLY) } catch { result.set("mode", error) }
        }
        try await waitUntil("changeMode sent") {
            // Polled from the test: the request is on its way once it is pending.
            let box = ResultBox<Int>()
            let sem = DispatchSemaphore(value: 0)
            guest.eventQueue.async {
                box.value = guest.client?.pendingCount ?? 0
                sem.signal()
            }
            sem.wait()
            return (box.value ?? 0) > 0
        }
        guest.simulateConnectionDrop()
        await task.value
        #expect(result.get("mode") == 3065)
        #expect(guest.localParticipant.mode == .SEND_AND_RECV)
        try await waitUntil("mic again", seconds: 30) { guestLog.count("streamOn:guest:audio") == 2 }
        try await waitUntil("host sees guest back", seconds: 30) { hostLog.count("pjoined:guest") == 2 }
        #expect(host.participants["guest"]?.mode == .SEND_AND_RECV)
        #expect(host.participants["guest"]?.micOn == true)
        await guest.leave()
        await host.leave()
    }

    /// An offer whose video m-line has no codec the SFU forwards (H.265, H.264 only in the
    /// interleaved mode) is refused with 4051.
    @Test func anOfferWithoutASupportedCodecIs4051() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (room, _) = try await joinedRoom(server, room: "codec", id: "pub", mode: .SEND_AND_RECV)
        let fingerprint = Array(repeating: "00", count: 32).joined(separator: ":")
        let sdp = [
            "v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "m=video 9 UDP/TLS/RTP/SAVPF 98 102", "c=IN IP4 0.0.0.0", "a=mid:0", "a=sendonly",
            "a=rtpmap:98 H265/90000", "a=rtpmap:102 H264/90000", "a=fmtp:102 packetization-mode=2",
            "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
            "a=fingerprint:sha-256 \(fingerprint)", "a=setup:actpass", "",
        ].joined(separator: "\r\n")
        await expectCode(4051) { _ = try await room.call(.produce, ["kind": "webcam", "sdp": .string(sdp)]) }
        await room.leave()
    }

    // MARK: 9. Names and shapes

    /// `payload` is the spec's `[String: Any]` both ways.
    @Test func aPubSubPayloadIsADictionaryBothWays() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (a, aLog) = try await joinedRoom(server, room: "payload", id: "a")
        try await a.pubSub.subscribe(topic: "t", listener: aLog)
        try await a.pubSub.publish(topic: "t", message: "hi", payload: ["n": 7, "s": "x", "list": [1, 2]])
        try await waitUntil("message back") { !aLog.received.isEmpty }
        let payload = try #require(aLog.received.first?.payload)
        #expect(payload["n"] as? Int == 7)
        #expect(payload["s"] as? String == "x")
        #expect(payload["list"] as? [Int] == [1, 2])
        await a.leave()
    }

    /// Issue 32 item 2: `payloadText` goes out as written and `payloadJSON` is the exact text the
    /// publisher sent, live and in the history; the dictionary view still works.
    @Test func aPubSubPayloadTextArrivesByteForByte() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let exact = #"{"z":1.50,"a":1e2,"neg":-0.0,"big":12345678901234567890,"s":"\u00e9","n":[ 1 , {"y":2} ]}"#
        let (a, aLog) = try await joinedRoom(server, room: "payload-text", id: "a")
        try await a.pubSub.subscribe(topic: "t", listener: aLog)
        try await a.pubSub.publish(topic: "t", message: "hi", options: ["persist": true], payloadText: exact)
        try await waitUntil("message back") { !aLog.received.isEmpty }
        #expect(aLog.received.first?.payloadJSON == exact)
        #expect(aLog.received.first?.payload?["z"] as? Double == 1.5)
        let (b, bLog) = try await joinedRoom(server, room: "payload-text", id: "b")
        try await b.pubSub.subscribe(topic: "t", listener: bLog)
        try await waitUntil("history") { bLog.historyBatches.last?.1 == true }
        #expect(bLog.historyBatches.flatMap(\.0).first?.payloadJSON == exact)
        await expectCode(3073) { try await a.pubSub.publish(topic: "t", message: "x", payloadText: "[1]") }
        await expectCode(3073) { try await a.pubSub.publish(topic: "t", message: "x", payloadText: "{\"a\":}") }
        await a.leave()
        await b.leave()
    }

    /// `setScreenShareQuality` works on an agent's share (room-api §7 refuses only `setQuality`).
    @Test func setScreenShareQualityWorksOnAnAgent() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let agent = try Understudy.createRoom(
            roomId: "agent-share", token: sdkToken(server, room: "agent-share"), participantName: "bot",
            participantId: "bot", micEnabled: false, camEnabled: false, mode: .SEND_AND_RECV,
            signalingBaseUrl: server.signalingURL, agentId: "bot")
        let agentLog = EventLog()
        agent.addEventListener(agentLog)
        await agent.join()
        try await agent.enableScreenShare()
        let (viewer, viewerLog) = try await joinedRoom(server, room: "agent-share", id: "viewer", mode: .RECV_ONLY)
        let remote = try #require(viewer.participants["bot"])
        #expect(remote.isAgent())
        remote.addEventListener(viewerLog)
        try await waitUntil("share arrives", seconds: 20) { viewerLog.has("streamOn:bot:share") }
        try await remote.setScreenShareQuality(.low)
        await expectCode(3068) { try await remote.setQuality(.low) }
        await viewer.leave()
        await agent.leave()
    }

    /// The agent's audience is RECV_ONLY members only: a SIGNALLING_ONLY member is in neither list.
    @Test func theAgentDoesNotCountSignallingOnlyMembersAsAudience() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (watcher, _) = try await joinedRoom(server, room: "agent-lists", id: "watcher", mode: .SIGNALLING_ONLY)
        let (viewer, _) = try await joinedRoom(server, room: "agent-lists", id: "viewer", mode: .RECV_ONLY)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lists-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var options = RoomAgent.Options(
            roomId: "agent-lists", token: sdkToken(server, room: "agent-lists"), signalingURL: server.signalingURL)
        options.participantId = "agent"
        options.recordDirectory = dir
        let agent = try RoomAgent(options: options)
        try await agent.start()
        let manifest = try #require(agent.manifestPath)
        var audience: [String]?
        try await waitUntil("the manifest lists the audience", seconds: 15) {
            guard let data = FileManager.default.contents(atPath: manifest),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return false }
            audience = json["audience"] as? [String]
            return audience?.contains("viewer") == true
        }
        #expect(audience == ["agent", "viewer"])
        await agent.stop()
        await viewer.leave()
        await watcher.leave()
    }

    // MARK: 7. Timeouts

    /// A request the server does not answer in time fails with 3079, reported once.
    @Test func anUnansweredRequestTimesOutWith3079() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "slow", id: "host")
        let (guest, _) = try await joinedRoom(server, room: "slow", id: "guest")
        let remote = try #require(guest.participants["host"])
        guest.requestTimeout = 0.5
        try await stallRoom(server, "slow", seconds: 3)
        await expectCode(3079) { try await remote.pin() }
        guest.requestTimeout = 30
        // The room works on once the server catches up.
        try await remote.unpin()
        await guest.leave()
        await host.leave()
    }

    /// A join the server does not answer in time fails with 3079 and `JOIN_ROOM_FAILED` instead of
    /// hanging `join()`.
    @Test func anUnansweredJoinFailsWith3079() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (host, _) = try await joinedRoom(server, room: "slow-join", id: "host")
        let late = try makeRoom(server, room: "slow-join", id: "late")
        let log = EventLog()
        late.addEventListener(log)
        late.requestTimeout = 0.5
        try await stallRoom(server, "slow-join", seconds: 3)
        await late.join()
        #expect(log.errorCodes == [3079])
        #expect(log.has("left:1103") && late.state == .DISCONNECTED)
        await host.leave()
    }

    /// `enableMic()` on a remote waits for the answer: accepted → it returns with the mic on;
    /// rejected (silent) → 3079.
    @Test func enableMicOnARemoteWaitsForTheAnswer() async throws {
        let server = try startRoomServer()
        defer { server.stop() }
        let (target, _) = try await joinedRoom(server, room: "ask", id: "target", mode: .SEND_AND_RECV)
        let requests = RequestLog()
        target.addEventListener(requests)
        let (mod, _) = try await joinedRoom(server, room: "ask", id: "mod")
        let remote = try #require(mod.participants["target"])
        requests.acceptRequests = false
        mod.requestTimeout = 1
        await expectCode(3079) { try await remote.enableMic() }
        #expect(requests.events == ["micRequested:mod"])
        #expect(!remote.micOn)
        requests.acceptRequests = true
        mod.requestTimeout = 30
        try await remote.enableCam()
        // The server answers after it announced the camera on: the state is already here.
        #expect(remote.webcamOn)
        #expect(requests.events == ["micRequested:mod", "webcamRequested:mod"])
        await mod.leave()
        await target.leave()
    }

    // MARK: 8. A consumer the server cannot create

    /// The server has one usable media port: the publisher takes it, the subscriber's connection
    /// cannot be made. `consumeMicStreams()` fails with 4050 and nothing is announced.
    @Test func aConsumerTheServerCannotCreateIs4050() async throws {
        let held = try HeldUDPPort()
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        configuration.secret = "sdk-test-secret"
        configuration.udpPortLow = held.port
        configuration.udpPortHigh = held.port + 1
        let server = RoomServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let (pub, pubLog) = try await joinedRoom(server, room: "no-port", id: "pub", mode: .SEND_AND_RECV, mic: true)
        try await waitUntil("mic on") { pubLog.has("streamOn:pub:audio") }
        let (manual, _) = try await joinedRoom(
            server, room: "no-port", id: "manual", mode: .RECV_ONLY, autoConsume: false)
        let remote = try #require(manual.participants["pub"])
        await expectCode(4050) { try await remote.consumeMicStreams() }
        // With autoConsume the failure comes as onError(4050).
        let (auto, autoLog) = try await joinedRoom(server, room: "no-port", id: "auto", mode: .RECV_ONLY)
        try await waitUntil("4050 reported") { autoLog.errorCodes.contains(4050) }
        #expect(autoLog.errors.first { $0.code == 4050 }?.name == "CREATE_CONSUMER_FAILED")
        await auto.leave()
        await manual.leave()
        await pub.leave()
        withExtendedLifetime(held) {}
    }
}
