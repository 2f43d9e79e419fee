import Foundation
import RoomProtocol
import Signaling
import Testing

@testable import RoomServer

/// `Room`: identity on join, `end`, the lobby wait, producer rules and many joins, each against a real
/// in-process server.
@Suite("Room")
struct RoomTests {
    @Test func aFreeIdTokenCannotReplaceAParticipant() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let intruder = try await TestClient.connect(server, token: token(server, room: "r1"))
        let error = try await intruder.expectError("join", ["roomId": "r1", "participantId": "host"])
        #expect(error.code == 4005)
        #expect(error.name == "DUPLICATE_PARTICIPANT")
        #expect(try await intruder.closed() == 4005)
        // The host was not touched.
        _ = try await host.request("ping").get()
        #expect(host.notifications("roomLeft").isEmpty)
        // A token bound to the id may replace it (a reconnect).
        let (again, _) = try await TestClient.joined(server, participant: "host", bound: true)
        #expect(try await host.notification("roomLeft")["reason"]?.intValue == 1011)
        _ = try await again.request("ping").get()
    }

    @Test func aFreeIdTokenCannotTakeALobbyEntrysId() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        _ = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        let copy = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let error = try await copy.expectError("join", ["roomId": "r1", "participantId": "guest"])
        #expect(error.code == 4005)
        #expect(!guest.isClosed)
    }

    @Test func endNeedsAllowModUnlessTheServerOpensIt() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (plain, _) = try await TestClient.joined(server, participant: "plain")
        let (mod, _) = try await TestClient.joined(
            server, participant: "mod", permissions: ["allow_join", "allow_mod"])
        let error = try await plain.expectError("end")
        #expect(error.code == 4024)
        _ = try await mod.request("ping").get()
        _ = try await mod.request("end").get()
        #expect(try await plain.notification("roomClosed")["reason"]?.intValue == 1006)

        let open = try startServer { $0.anyoneMayEnd = true }
        defer { open.stop() }
        let (a, _) = try await TestClient.joined(open, participant: "a")
        let (b, _) = try await TestClient.joined(open, participant: "b")
        _ = try await a.request("end").get()
        #expect(try await b.notification("roomClosed")["reason"]?.intValue == 1006)
    }

    @Test func anUnansweredLobbyEntryExpires() async throws {
        let server = try startServer { $0.lobbyTimeoutSeconds = 1 }
        defer { server.stop() }
        let (host, _) = try await TestClient.joined(server, participant: "host")
        let guest = try await TestClient.connect(server, token: token(server, room: "r1", permissions: ["ask_join"]))
        let id = guest.sendRequest("join", ["roomId": "r1", "participantId": "guest"])
        try await host.notification("entryRequested")
        let result = try await guest.response(id: .number(Double(id)))
        guard case .failure(let error) = result else {
            Issue.record("lobby join succeeded")
            return
        }
        #expect(error.code == 3047)
        #expect(try await guest.closed() == 3047)
        let event = try await host.notification("entryResponded")
        #expect(event["decision"] == "timeout")
    }

    @Test func producerRules() async throws {
        let server = try startServer()
        defer { server.stop() }
        let (a, _) = try await TestClient.joined(server, participant: "alice")
        let (b, _) = try await TestClient.joined(server, participant: "bob", extra: ["mode": "RECV_ONLY"])
        let mic = try await a.request("produce", ["kind": "mic"]).get()
        #expect(try await a.expectError("produce", ["kind": "audio"]).code == 3058)
        _ = try await a.request("produce", ["kind": "screen"]).get()
        #expect(try await a.expectError("produce", ["kind": "share"]).code == 3061)
        #expect(try await a.expectError("produce", ["kind": "hologram"]).code == 3073)
        #expect(try await a.expectError("closeProducer", ["producerId": "pr-unknown"]).code == 3073)
        #expect(try await b.expectError("closeProducer", ["producerId": mic["producerId"] ?? nil]).code == 3066)
        // Another participant cannot share while alice presents.
        _ = try await b.request("changeMode", ["mode": "SEND_AND_RECV"]).get()
        #expect(try await b.expectError("produce", ["kind": "screen"]).code == 3061)
        // Leaving SEND_AND_RECV ends alice's presentation for everyone.
        _ = try await a.request("changeMode", ["mode": "SIGNALLING_ONLY"]).get()
        try await b.notification("presenterChanged") { $0["participantId"]?.isNull == true }
        _ = try await b.request("produce", ["kind": "screen"]).get()
        try await a.notification("presenterChanged") { $0["participantId"] == "bob" }
    }

    @Test func sixtyConcurrentJoinsAllSeeEachOther() async throws {
        let server = try startServer()
        defer { server.stop() }
        let count = 60
        let clients = try await withThrowingTaskGroup(of: TestClient.self) { group in
            for i in 0..<count {
                group.addTask { try await TestClient.joined(server, participant: "p\(i)").0 }
            }
            var all: [TestClient] = []
            for try await c in group { all.append(c) }
            return all
        }
        #expect(await server.roomSummaries().first?.participantCount == count)
        // Everyone learns about everyone else exactly once: before its join answer or after it.
        for client in clients {
            let deadline = Date().addingTimeInterval(10)
            while client.notifications("participantJoined").count < count - 1 && Date() < deadline {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            let ids = client.notifications("participantJoined").compactMap { $0["participantId"]?.stringValue }
            #expect(ids.count == count - 1)
            #expect(Set(ids).count == count - 1)
        }
    }
}

@Suite("RoomServer modes, producers and consumers")
struct RoomModeAndConsumeTests {
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
