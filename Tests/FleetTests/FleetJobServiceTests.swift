import Agent
import Foundation
import LoadGen
import Redis
import RoomProtocol
import RoomServer
import Signaling
import Testing

@testable import Fleet

// Issue 34: typed jobs. `POST /admin/jobs` keeps taking `understudy join` options as documented;
// what is stored is a typed job; load shares travel as whole configurations.

@Suite(.serialized) struct FleetJobServiceTests {
    @Test func submittedOptionsAreStoredAsATypedJobWithATokenOfItsOwn() async throws {
        let server = try LocalRedisServer()
        let store = FleetStore(redis: RedisClient(url: try RedisURL(parsing: server.url)))
        let service = FleetJobService(store: store, serverURL: "http://10.0.0.5:7880", secret: "s3cret")
        let created = try await service.submit(
            roomId: "standup",
            options: [
                "--consume", "stage", "--max-video=3", "--agent", "--record-format", "ogg+ivf", "--duration", "2m",
            ],
            jobId: "rec-1", cost: nil)
        #expect(created["jobId"]?.stringValue == "rec-1")
        let stored = try #require(try await store.status("rec-1"))
        let agent = stored.spec.agent
        #expect(stored.spec.room == "standup" && agent.room == "standup")
        #expect(agent.server == "http://10.0.0.5:7880")
        #expect(agent.consume == "stage" && agent.maxVideo == 3 && agent.agent == true)
        #expect(agent.recordFormat == "ogg+ivf" && agent.duration == 120)
        #expect(agent.id == "rec-rec-1")
        #expect(stored.spec.cost == 3)
        // A token bound to the room and to no participant, never the secret.
        let token = try RoomToken.verify(agent.token, secret: "s3cret")
        #expect(token.roomId == "standup" && token.participantId == nil)
        #expect(!RedisJSON.encode(stored).contains("s3cret"))
        // What the worker will build from it.
        let options = try agent.roomAgentOptions(recordDirectory: "/out/rec-1/attempt-1", checkMedia: false)
        #expect(options.signalingURL == "ws://10.0.0.5:7880" && options.consume == .stage)
        #expect(options.recordFormat == .oggIVF && options.recordDirectory == "/out/rec-1/attempt-1")
    }

    @Test func compositeJobsWriteNamedFilesInTheirAttemptDirectory() async throws {
        let server = try LocalRedisServer()
        let store = FleetStore(redis: RedisClient(url: try RedisURL(parsing: server.url)))
        let service = FleetJobService(store: store, serverURL: "http://10.0.0.5:7880", secret: "s")
        _ = try await service.submit(
            roomId: "standup",
            options: ["--composite", "room.mp4", "--composite", "rtmp://live.example/app/key", "--layout", "speaker"],
            jobId: "comp-1", cost: nil)
        let stored = try #require(try await store.status("comp-1"))
        #expect(stored.spec.kind == .composite)
        #expect(stored.spec.cost == FleetJobSpec.compositeCost + 2)
        // The record says its kind; a record's kind always follows its options.
        let json = RedisJSON.encode(stored.spec)
        #expect(json.contains("\"kind\":\"composite\""))
        let decoded = try JSONDecoder().decode(
            FleetJobSpec.self,
            from: Data(
                json.replacingOccurrences(
                    of: "\"kind\":\"composite\"", with: "\"kind\":\"recording\""
                ).utf8))
        #expect(decoded.kind == .composite)
        // A worker resolves the file names in the attempt's directory; URLs stay as they are.
        let resolved = try stored.spec.agentOptions(in: "/out/comp-1/attempt-2")
        #expect(resolved.composite == ["/out/comp-1/attempt-2/room.mp4", "rtmp://live.example/app/key"])
        // Paths are refused: a job writes in its own directory only.
        for bad in ["/etc/room.mp4", "../room.mp4", "sub/room.mp4", ".hidden.mp4"] {
            await #expect(throws: RoomError.self) {
                _ = try await service.submit(roomId: "standup", options: ["--composite", bad], jobId: nil, cost: nil)
            }
        }
        // A job without --composite is a recording job.
        _ = try await service.submit(roomId: "standup", options: [], jobId: "rec-2", cost: nil)
        #expect(try #require(try await store.status("rec-2")).spec.kind == .recording)
    }

    @Test func eachJobEventIsClaimedByOneServer() async throws {
        let server = try LocalRedisServer()
        let url = try RedisURL(parsing: server.url)
        let first = FleetJobService(
            store: FleetStore(redis: RedisClient(url: url)), serverURL: "http://10.0.0.5:7880", secret: "s")
        let second = FleetJobService(
            store: FleetStore(redis: RedisClient(url: url)), serverURL: "http://10.0.0.6:7880", secret: "s")
        #expect(await first.claimEvent(jobId: "rec-1", key: "job_started:attempt-1"))
        #expect(!(await second.claimEvent(jobId: "rec-1", key: "job_started:attempt-1")))
        #expect(!(await first.claimEvent(jobId: "rec-1", key: "job_started:attempt-1")))
        #expect(await second.claimEvent(jobId: "rec-1", key: "job_started:attempt-2"))
        #expect(await second.claimEvent(jobId: "rec-2", key: "job_started:attempt-1"))
        // The claim expires after a day, so Redis does not keep it forever.
        let ttl = try await RedisClient(url: url).command([
            "TTL", FleetKeys().jobEvent("rec-1", "job_started:attempt-1"),
        ])
        #expect((86_000...86_400).contains(ttl.int ?? 0))
    }

    @Test func reservedUnknownAndBadOptionsAreRefusedWith3073() async throws {
        let server = try LocalRedisServer()
        let store = FleetStore(redis: RedisClient(url: try RedisURL(parsing: server.url)))
        let service = FleetJobService(store: store, serverURL: "http://h:1", secret: "s")
        for (options, jobId, cost, reason) in [
            (["--token", "x"], nil, nil, "--token is chosen"), (["--record=/tmp"], nil, nil, "--record is chosen"),
            (["--nope"], nil, nil, "not an option"), (["--consume"], nil, nil, "needs a value"),
            (["--mode", "LOUD"], nil, nil, "LOUD"), (["--duration", "-5"], nil, nil, "positive duration"),
            ([], "..", nil, "job id"), ([], nil, 0, "positive"),
        ] as [([String], String?, Int?, String)] {
            do {
                _ = try await service.submit(roomId: "r", options: options, jobId: jobId, cost: cost)
                Issue.record("\(options) was accepted")
            } catch {
                #expect(error.code == 3073)
                #expect(error.message.contains(reason), "\(error.message)")
            }
        }
        #expect(try await store.list().jobs.isEmpty)
    }
}
