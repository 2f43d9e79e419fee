import Foundation
import RoomServer
import Signaling
import Testing

@Suite("RoomServer modes, producers and consumers")
struct ModeAndMediaTests {
    @Test func changeModeClosesProducersAndIsBroadcastToEveryoneIncludingTheCaller() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (viewer, _) = try await TestClient.joined(server, participant: "viewer", extra: ["mode": "RECV_ONLY"])
        let produced = try await host.request("produce", ["kind": "webcam"]).get()
        let producerId = try #require(produced["producerId"]?.stringValue)
        let consumer = try await viewer.notification("consumerCreated")
        #expect(consumer["producerId"]?.stringValue == producerId)

        let same = try await host.expectError("changeMode", ["mode": "SEND_AND_RECV"])
        #expect(same.code == 3054)
        #expect(same.name == "ERROR_ALREADY_IN_REQUESTED_STATE")

        _ = try await host.request("changeMode", ["mode": "RECV_ONLY"]).get()
        let closed = try await viewer.notification("producerClosed")
        #expect(closed["producerId"]?.stringValue == producerId)
        try await viewer.notification("consumerClosed") { $0["producerId"]?.stringValue == producerId }
        for client in [host, viewer] {
            let changed = try await client.notification("participantModeChanged")
            #expect(changed["participantId"] == "host")
            #expect(changed["mode"] == "RECV_ONLY")
        }
        // The viewer's own mode did not change.
        #expect(viewer.notifications("participantModeChanged").allSatisfy { $0["participantId"] == "host" })

        let refused = try await host.expectError("produce", ["kind": "mic"])
        #expect(refused.code == 3066)
        #expect(refused.name == "ERROR_ACTION_NOT_SUPPORTED_IN_MODE")
    }

    @Test func signallingOnlyClosesConsumersAndCannotConsume() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (viewer, _) = try await TestClient.joined(server, participant: "viewer", extra: ["mode": "RECV_ONLY"])
        _ = try await host.request("produce", ["kind": "mic"]).get()
        let consumer = try await viewer.notification("consumerCreated")
        _ = try await viewer.request("changeMode", ["mode": "SIGNALLING_ONLY"]).get()
        try await viewer.notification("consumerClosed") { $0["consumerId"] == consumer["consumerId"] }
        let refused = try await viewer.expectError("consume", ["participantId": "host", "kind": "mic"])
        #expect(refused.code == 3066)
        let badMode = try await viewer.expectError("changeMode", ["mode": "AUDIENCE"])
        #expect(badMode.code == 3067)
        // Back to RECV_ONLY: the mic is received again.
        _ = try await viewer.request("changeMode", ["mode": "RECV_ONLY"]).get()
        try await viewer.notification("consumerCreated")
    }

    @Test func autoConsumeOffReceivesOnlyWhatItAsksFor() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (bot, _) = try await TestClient.joined(
            server, participant: "bot", extra: ["mode": "RECV_ONLY", "autoConsume": false])
        _ = try await host.request("produce", ["kind": "mic"]).get()
        _ = try await host.request("produce", ["kind": "webcam"]).get()
        _ = try await host.request("produce", ["kind": "screen"]).get()
        // Screen shares are always consumed; mic and webcam are not.
        let screen = try await bot.notification("consumerCreated")
        #expect(screen["kind"] == "screen")
        try await bot.notification("presenterChanged") { $0["participantId"] == "host" }
        #expect(bot.notifications("consumerCreated").count == 1)

        let noVideo = try await bot.expectError("setQuality", ["participantId": "host", "quality": "low"])
        #expect(noVideo.code == 3068)

        _ = try await bot.request("consume", ["participantId": "host", "kind": "webcam"]).get()
        let webcam = try await bot.notification("consumerCreated")
        #expect(webcam["kind"] == "webcam")
        let quality = try await bot.request("setQuality", ["participantId": "host", "quality": "low"]).get()
        #expect(quality["quality"] == "low")
        let viewport = try await bot.request("setViewPort", ["participantId": "host", "width": 320, "height": 180])
            .get()
        #expect(viewport["width"]?.intValue == 320)
        let badViewport = try await bot.expectError(
            "setViewPort", ["participantId": "host", "width": 0, "height": 180])
        #expect(badViewport.code == 3073)

        _ = try await bot.request("stopConsuming", ["participantId": "host", "kind": "webcam"]).get()
        try await bot.notification("consumerClosed") { $0["kind"] == "webcam" }
        let unknown = try await bot.expectError("consume", ["participantId": "nobody", "kind": "mic"])
        #expect(unknown.code == 4080)
        let unknownStop = try await bot.expectError("stopConsuming", ["participantId": "nobody", "kind": "webcam"])
        #expect(unknownStop.code == 4083)
        // A later producer of an unwanted kind stays unconsumed; the wanted mic arrives.
        _ = try await bot.request("consume", ["participantId": "host", "kind": "mic"]).get()
        try await bot.notification("consumerCreated") { $0["kind"] == "mic" }
        #expect(await server.roomSummaries().first?.consumerCount == 2)
    }

    /// A consume names a participant: once it leaves, its return (same id) is a new participant that
    /// is received only when asked for again.
    @Test func aConsumeIsForgottenWhenItsParticipantLeaves() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (bot, _) = try await TestClient.joined(
            server, participant: "bot", extra: ["mode": "RECV_ONLY", "autoConsume": false])
        _ = try await bot.request("consume", ["participantId": "host", "kind": "mic"]).get()
        _ = try await host.request("produce", ["kind": "mic"]).get()
        try await bot.notification("consumerCreated") { $0["kind"] == "mic" }
        #expect(await server.roomSummaries().first?.consumerCount == 1)

        host.close()
        try await bot.notification("participantLeft") { $0["participantId"] == "host" }
        let (back, _) = try await TestClient.joined(server, participant: "host")
        _ = try await back.request("produce", ["kind": "mic"]).get()
        // The produce created every consumer its room wanted before answering: none.
        #expect(await server.roomSummaries().first?.consumerCount == 0)
        _ = try await bot.request("consume", ["participantId": "host", "kind": "mic"]).get()
        #expect(await server.roomSummaries().first?.consumerCount == 1)
        back.close()
        bot.close()
    }

    @Test func mediaStatusIsBroadcastToEveryoneIncludingNonConsumers() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host", extra: ["micEnabled": false])
        let (listener, _) = try await TestClient.joined(
            server, participant: "quiet", extra: ["mode": "SIGNALLING_ONLY"])
        _ = try await host.request("setMediaStatus", ["kind": "mic", "enabled": true]).get()
        for client in [host, listener] {
            let event = try await client.notification("mediaStatusChanged")
            #expect(event["participantId"] == "host")
            #expect(event["kind"] == "mic")
            #expect(event["enabled"] == true)
        }
        let refused = try await listener.expectError("setMediaStatus", ["kind": "webcam", "enabled": true])
        #expect(refused.code == 3066)
    }

    @Test func mediaHooksSeeProducersAndConsumers() async throws {
        final class Recorder: RoomMediaHooks, @unchecked Sendable {
            let lock = NSLock()
            var events: [String] = []
            func add(_ s: String) {
                lock.lock()
                events.append(s)
                lock.unlock()
            }
            func producerCreated(roomId: String, producer: RoomProducer) { add("producer+ \(producer.kind.rawValue)") }
            func producerClosed(roomId: String, producer: RoomProducer) { add("producer- \(producer.kind.rawValue)") }
            func consumerCreated(roomId: String, consumer: RoomConsumer) { add("consumer+ \(consumer.subscriberId)") }
            func consumerClosed(roomId: String, consumer: RoomConsumer) { add("consumer- \(consumer.subscriberId)") }
            func consumerPreferencesChanged(roomId: String, consumer: RoomConsumer) {
                add("prefs \(consumer.preferredQuality ?? "-")")
            }
            var snapshot: [String] {
                lock.lock()
                defer { lock.unlock() }
                return events
            }
        }
        let recorder = Recorder()
        var configuration = RoomServerConfiguration()
        configuration.listenPort = 0
        configuration.secret = "test-secret"
        let server = RoomServer(configuration: configuration)
        server.mediaHooks = recorder
        try server.start()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let (viewer, _) = try await TestClient.joined(server, participant: "viewer")
        let produced = try await host.request("produce", ["kind": "webcam"]).get()
        try await viewer.notification("consumerCreated")
        _ = try await viewer.request("setQuality", ["participantId": "host", "quality": "medium"]).get()
        _ = try await host.request("closeProducer", ["producerId": produced["producerId"] ?? nil]).get()
        try await viewer.notification("consumerClosed")
        #expect(
            recorder.snapshot == [
                "producer+ webcam", "consumer+ viewer", "prefs medium", "consumer- viewer", "producer- webcam",
            ])
    }
}
