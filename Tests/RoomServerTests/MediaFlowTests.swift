import Foundation
import Media
import RTC
import RTCWire
import RoomServer
import Signaling
import TestSupport
import Testing

/// Media through the real room server: WebRTC negotiated over the room protocol (`produce` with
/// an SDP offer, `subscriberOffer`/`subscriberAnswer`), forwarded by the server's SFU.
@Suite(.serialized) struct MediaFlowTests {
    @Test func consumeStartsMediaAndStopConsumingStopsIt() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "media-a", participant: "alice")
        let bob = try await RoomMediaPeer.join(
            server, room: "media-a", participant: "bob", mode: "RECV_ONLY", autoConsume: false)

        let producers = try await alice.publish()
        #expect(producers.count == 2)
        #expect(Set(producers.compactMap { $0["kind"]?.stringValue }) == ["webcam", "mic"])
        #expect(producers.allSatisfy { $0["mid"]?.stringValue != nil }, "SFU producers carry their mid")
        try await bob.signaling.notification("producerAdded") { $0["kind"]?.stringValue == "webcam" }

        // Media reaches the SFU but nobody consumes it yet.
        try await Task.sleep(for: .seconds(1.5))
        #expect(bob.frames.videoFrames == 0 && bob.frames.audioFrames == 0)
        #expect(bob.signaling.notifications("subscriberOffer").isEmpty, "no consumer, no subscribe offer")
        #expect((try await metricValue(server, "understudy_rtp_packets_received_total") ?? 0) > 50)
        #expect(try await metricValue(server, "understudy_rtp_packets_forwarded_total") == 0)

        let path = temporaryPath("room-consume.webm")
        let recording = try Recording(path: path)
        await bob.record(recording)
        _ = try await bob.signaling.request("consume", ["participantId": "alice", "kind": "webcam"]).get()
        _ = try await bob.signaling.request("consume", ["participantId": "alice", "kind": "mic"]).get()
        let created = try await bob.signaling.notification("consumerCreated")
        #expect(created["mid"]?.stringValue != nil, "the consumer names its subscribe m-line")
        try await bob.waitForAnswers(1)
        try await bob.subscribeConnection.waitUntilConnected(timeout: 10)
        try await bob.waitForFrames(video: 60, audio: 100, seconds: 15)
        await bob.record(nil)
        try recording.close()

        #expect(recording.videoFrames >= 60, "video frames recorded: \(recording.videoFrames)")
        #expect(recording.audioFrames >= 100, "audio frames recorded: \(recording.audioFrames)")
        let probe = try runToolText(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,nb_read_frames", "-of",
                "csv=p=0", path,
            ])
        let counted = probe.split(separator: "\n").map { $0.split(separator: ",") }
        let videoCount = counted.first { $0.first == "vp8" }.flatMap { Int($0.last ?? "") } ?? 0
        let audioCount = counted.first { $0.first == "opus" }.flatMap { Int($0.last ?? "") } ?? 0
        #expect(videoCount >= 60, "ffprobe counted \(videoCount) video frames: \(probe)")
        #expect(audioCount >= 100, "ffprobe counted \(audioCount) audio frames: \(probe)")
        let decode = try runToolText(
            "/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(decode.isEmpty, "ffmpeg reported decode errors: \(decode)")
        #expect((try await metricValue(server, "understudy_rtp_packets_forwarded_total") ?? 0) > 100)
        #expect(try await metricValue(server, "understudy_sfu_consumers") == 2)
        // getStats: the subscriber sees its two consumers with forwarded packets, by publisher and kind.
        let stats = try await bob.signaling.request("getStats").get()
        let consumers = stats["consumers"]?.arrayValue ?? []
        #expect(consumers.count == 2, "consumers in getStats: \(stats)")
        let webcamStats = consumers.first { $0["kind"]?.stringValue == "webcam" }
        #expect(webcamStats?["participantId"]?.stringValue == "alice")
        #expect((webcamStats?["packetsSent"]?.doubleValue ?? 0) > 50)
        // The stream allocator's view: not paused, and the subscribe connection's transport entry
        // (bob's client sends transport-cc feedback, so an estimate exists; nothing is congested).
        #expect(webcamStats?["paused"]?.boolValue == false, "\(String(describing: webcamStats))")
        let transport = stats["transport"]
        #expect((transport?["estimate"]?.doubleValue ?? 0) > 0, "transport in getStats: \(stats)")
        #expect(transport?["estimateBinds"]?.boolValue == false, "\(String(describing: transport))")
        #expect(transport?["pausedConsumers"]?.doubleValue == 0)
        #expect(try await metricValue(server, "understudy_sfu_paused_consumers") == 0)

        // stopConsuming the webcam: a new offer turns its m-line inactive; audio keeps flowing.
        let answersBefore = bob.answeredRevisions.count
        _ = try await bob.signaling.request("stopConsuming", ["participantId": "alice", "kind": "webcam"]).get()
        try await bob.signaling.notification("consumerClosed") { $0["kind"]?.stringValue == "webcam" }
        try await bob.waitForAnswers(answersBefore + 1)
        try await Task.sleep(for: .seconds(0.5))
        let videoAfterStop = bob.frames.videoFrames
        let audioAfterStop = bob.frames.audioFrames
        try await Task.sleep(for: .seconds(1.5))
        #expect(bob.frames.videoFrames == videoAfterStop, "video stops after stopConsuming")
        #expect(bob.frames.audioFrames > audioAfterStop + 30, "audio keeps flowing")

        await alice.close()
        await bob.close()
    }

    /// A live stream's audience consumes each new stage track at once, and each call the room waits for on
    /// the busy SFU loop delays the rest: a `consume` makes its member's subscribe offer in the same call,
    /// and a `subscriberAnswer` the offer of what changed while the previous one was out. Both offers go
    /// after the request's response, as when each had its own call.
    @Test func aConsumeAndAnAnswerEachMakeTheNextOfferInTheirOwnSFUCall() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "media-fold", participant: "alice")
        let (bob, _) = try await TestClient.joined(
            server, room: "media-fold", participant: "bob", extra: ["mode": "RECV_ONLY", "autoConsume": false])
        let receiver = try SFUTestClient(name: "bob-fold-sub")
        await receiver.startReceiving()
        try await alice.publish()
        try await bob.notification("producerAdded") { $0["kind"]?.stringValue == "webcam" }
        try await bob.notification("producerAdded") { $0["kind"]?.stringValue == "mic" }
        func calls() async throws -> Int { try await metricValue(server, "understudy_room_sfu_calls_total") ?? -1 }

        let beforeConsume = try await calls()
        let webcamRequest = bob.sendRequest("consume", ["participantId": "alice", "kind": "webcam"])
        _ = try await bob.response(id: .number(Double(webcamRequest))).get()
        let firstOffer = try await bob.notification("subscriberOffer")
        #expect(firstOffer["revision"]?.intValue == 1)
        #expect(try await calls() - beforeConsume == 1, "the consume and its offer took one SFU call")
        let log = bob.messages
        let responseAt = log.firstIndex {
            if case .response(let id, _) = $0 { return id == .number(Double(webcamRequest)) }
            return false
        }
        let offerAt = log.firstIndex {
            if case .notification(let method, _) = $0 { return method == "subscriberOffer" }
            return false
        }
        #expect(responseAt != nil && offerAt != nil && responseAt! < offerAt!, "the response comes first")

        // The mic, while offer 1 is out: one call, and no offer until that one is answered.
        let beforeMic = try await calls()
        _ = try await bob.request("consume", ["participantId": "alice", "kind": "mic"]).get()
        #expect(try await calls() - beforeMic == 1)
        let firstAnswer = try await receiver.answer(try SessionDescription.parse(firstOffer["sdp"]?.stringValue ?? ""))
        let beforeAnswer = try await calls()
        let answered = try await bob.request(
            "subscriberAnswer", ["sdp": .string(firstAnswer.serialize()), "revision": 1]
        ).get()
        #expect(answered["revision"]?.intValue == 1)
        let secondOffer = try await bob.notification("subscriberOffer")
        #expect(secondOffer["revision"]?.intValue == 2, "the next offer, with no empty round before it")
        #expect(try await calls() - beforeAnswer == 1, "the answer and the next offer took one SFU call")
        let offer = try SessionDescription.parse(secondOffer["sdp"]?.stringValue ?? "")
        #expect(Set(offer.media.map(\.type)) == [.audio, .video], "the second offer adds the mic")

        let secondAnswer = try await receiver.answer(offer)
        _ = try await bob.request("subscriberAnswer", ["sdp": .string(secondAnswer.serialize()), "revision": 2]).get()
        try await receiver.connection.waitUntilConnected(timeout: 10)
        try await receiver.waitForFrames(video: 10, audio: 20, seconds: 15)
        await receiver.close()
        await alice.close()
        bob.close()
    }

    @Test func autoConsumeReceivesWithoutConsume() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let bob = try await RoomMediaPeer.join(server, room: "media-b", participant: "bob", mode: "RECV_ONLY")
        let alice = try await RoomMediaPeer.join(server, room: "media-b", participant: "alice")
        try await alice.publish()
        let created = try await bob.signaling.notification("consumerCreated")
        #expect(created["participantId"]?.stringValue == "alice")
        try await bob.waitForFrames(video: 30, audio: 50, seconds: 15)
        #expect(bob.answeredRevisions.first == 1)
        // A stale revision is refused.
        let stale = try await bob.signaling.expectError("subscriberAnswer", ["sdp": "v=0", "revision": 0])
        #expect(stale.code == 3054)
        await alice.close()
        await bob.close()
    }

    @Test func recvOnlyCannotProduceAndChangeModeClosesProducers() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "media-c", participant: "alice")
        let bob = try await RoomMediaPeer.join(server, room: "media-c", participant: "bob", mode: "RECV_ONLY")

        switch try await bob.publishRequest() {
        case .success(let d): Issue.record("produce in RECV_ONLY succeeded: \(d)")
        case .failure(let e): #expect(e.code == 3066)
        }
        try await alice.publish()
        try await bob.waitForFrames(video: 20, audio: 40, seconds: 15)

        _ = try await alice.signaling.request("changeMode", ["mode": "RECV_ONLY"]).get()
        try await bob.signaling.notification("producerClosed") { $0["kind"]?.stringValue == "webcam" }
        try await bob.signaling.notification("producerClosed") { $0["kind"]?.stringValue == "mic" }
        try await Task.sleep(for: .seconds(0.5))
        let video = bob.frames.videoFrames
        let audio = bob.frames.audioFrames
        try await Task.sleep(for: .seconds(1.5))
        #expect(bob.frames.videoFrames == video, "no video after alice left SEND_AND_RECV")
        #expect(bob.frames.audioFrames == audio, "no audio after alice left SEND_AND_RECV")
        #expect(try await metricValue(server, "understudy_sfu_producers") == 0)
        await alice.close()
        await bob.close()
    }

    /// A guest back in the audience can end its publish connection; its next turn on stage
    /// publishes over a new one, and the audience receives it again.
    @Test func aGuestBackInTheAudienceClosesItsPublishConnectionAndPublishesAgainOnANewOne() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "media-d", participant: "alice")
        let bob = try await RoomMediaPeer.join(server, room: "media-d", participant: "bob", mode: "RECV_ONLY")
        try await alice.publish()
        try await bob.waitForFrames(video: 20, audio: 40, seconds: 15)
        #expect(try await metricValue(server, "understudy_sfu_publish_connections") == 1)
        #expect((try await metricValue(server, "understudy_process_heap_in_use_bytes") ?? 0) > 0)

        // Bad input: the mode stays, the connection too.
        let bad = try await alice.signaling.expectError(
            "changeMode", ["mode": "RECV_ONLY", "closePublishConnection": "yes"])
        #expect(bad.code == 3073)
        #expect(try await metricValue(server, "understudy_sfu_publish_connections") == 1)

        let left = try await alice.signaling.request(
            "changeMode", ["mode": "RECV_ONLY", "closePublishConnection": true]
        ).get()
        #expect(left["publishConnectionClosed"]?.boolValue == true)
        #expect(try await metricValue(server, "understudy_sfu_publish_connections") == 0)
        #expect(try await metricValue(server, "understudy_sfu_producers") == 0)
        // Its audience side is untouched: bob still has the only subscribe connection (alice consumes nothing).
        #expect(try await metricValue(server, "understudy_sfu_subscribe_connections") == 1)
        await alice.publisher.close()

        // Back on stage: a new peer connection, a new ICE and DTLS session.
        _ = try await alice.signaling.request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        let again = try SFUTestClient(name: "alice-pub2")
        let offer = try await again.makeSendOffer()
        let response = try await alice.signaling.request(
            "produce", ["tracks": [["kind": "webcam"], ["kind": "mic"]], "sdp": .string(offer.serialize())]
        ).get()
        let sdp = try #require(response["sdp"]?.stringValue)
        try await again.accept(answer: try SessionDescription.parse(sdp))
        try await again.connection.waitUntilConnected(timeout: 10)
        await again.startPump(layers: 1)
        let video = bob.frames.videoFrames
        let audio = bob.frames.audioFrames
        try await bob.waitForFrames(video: video + 20, audio: audio + 40, seconds: 20)
        #expect(try await metricValue(server, "understudy_sfu_publish_connections") == 1)

        // Without the flag the connection stays (for the next produce to renegotiate), and a caller
        // without one is told so.
        let kept = try await alice.signaling.request("changeMode", ["mode": "RECV_ONLY"]).get()
        #expect(kept["publishConnectionClosed"] == nil)
        #expect(try await metricValue(server, "understudy_sfu_publish_connections") == 1)
        _ = try await bob.signaling.request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        let none = try await bob.signaling.request(
            "changeMode", ["mode": "RECV_ONLY", "closePublishConnection": true]
        ).get()
        #expect(none["publishConnectionClosed"]?.boolValue == false)
        await again.close()
        await alice.close()
        await bob.close()
    }
}
