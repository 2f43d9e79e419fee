import Foundation
import Redis
import Testing

@Suite struct RedisURLTests {
    @Test func parsesHostPortDatabaseAndPassword() throws {
        #expect(
            try RedisURL(parsing: "redis://127.0.0.1:6380/2") == RedisURL(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisURL(parsing: "redis://cache") == RedisURL(host: "cache"))
        #expect(try RedisURL(parsing: "redis://:s3cret@h:1/") == RedisURL(host: "h", port: 1, password: "s3cret"))
        #expect(try RedisURL(parsing: "redis://:pw@h").description == "redis://:***@h:6379")
    }

    @Test(arguments: [
        "http://h:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:-1", "redis://h:x",
        "redis://h:1/-3", "redis://h:1/db", "redis://:", "redis://h:99999999999999999999999",
    ])
    func refusesBadURLs(_ text: String) {
        #expect(throws: RedisError.self) { try RedisURL(parsing: text) }
    }
}

@Suite(.serialized) struct RedisClientTests {
    @Test func commandsRoundTripBinarySafeValues() async throws {
        let server = try LocalRedisServer()
        let client = RedisClient(url: try RedisURL(parsing: server.url))
        #expect(try await client.command(["PING"]) == .status("PONG"))
        #expect(try await client.command(["SET", "k", "v\u{0}w"]) == .status("OK"))
        #expect(try await client.command(["GET", "k"]) == .bulk(Array("v\u{0}w".utf8)))
        #expect(try await client.command(["GET", "missing"]) == .null)
        #expect(try await client.command(["INCRBY", "n", "41"]).int == 41)
        _ = try await client.command(["RPUSH", "l", "a", "b"])
        #expect(try await client.command(["LRANGE", "l", "0", "-1"]) == .array([.bulk([97]), .bulk([98])]))
        let values = try await client.pipeline([["SET", "p", "1"], ["INCR", "p"], ["GET", "p"]])
        #expect(values.last?.string == "2")
    }

    @Test func errorRepliesAreThrownAndTheConnectionStaysUsable() async throws {
        let server = try LocalRedisServer()
        let client = RedisClient(url: try RedisURL(parsing: server.url))
        _ = try await client.command(["SET", "s", "text"])
        await #expect(throws: RedisError.self) { try await client.command(["INCR", "s"]) }
        do {
            _ = try await client.command(["NOSUCHCOMMAND"])
            Issue.record("an unknown command must fail")
        } catch {
            guard case .server(let message) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(message.contains("unknown command"))
        }
        #expect(try await client.command(["PING"]) == .status("PONG"))
        #expect(client.connectionFailures == 0)
    }

    @Test func unreachableServerIsAConnectionErrorThenTheClientReconnects() async throws {
        let server = try LocalRedisServer()
        let client = RedisClient(url: try RedisURL(parsing: server.url), timeout: 1)
        let changes = ChangeLog()
        client.onConnectionChange { up, _ in changes.append(up) }
        _ = try await client.command(["SET", "a", "1"])
        server.stop()
        do {
            _ = try await client.command(["GET", "a"])
            Issue.record("a stopped server must fail the command")
        } catch {
            guard case .connection = error else {
                Issue.record("wrong error \(error)")
                return
            }
        }
        #expect(!client.isConnected)
        try server.start()
        // A fresh server (no persistence): the client reconnects on its own and sees empty state.
        #expect(try await client.command(["GET", "a"]) == .null)
        #expect(client.isConnected)
        #expect(changes.values == [true, false, true])
        #expect(client.connectionFailures >= 1)
    }
}

final class ChangeLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Bool] = []
    func append(_ value: Bool) { lock.withLock { items.append(value) } }
    var values: [Bool] { lock.withLock { items } }
}
