import Foundation
import Understudy

/// One-shot room actions for the CLI: publish a stage invite, publish or follow a PubSub topic.
public enum RoomAgentTools {
    /// Prints each received message (live and history) through `output`.
    final class Printer: RoomEventListener, PubSubMessageListener, @unchecked Sendable {
        let output: @Sendable (PubSubMessage) -> Void
        init(output: @escaping @Sendable (PubSubMessage) -> Void) { self.output = output }
        func onMessageReceived(_ message: PubSubMessage) { output(message) }
        func onOldMessagesReceived(_ messages: [PubSubMessage], isLast: Bool) { messages.forEach(output) }
    }

    /// Joins `roomId` in `SIGNALLING_ONLY` as a lightweight participant and waits for the outcome.
    public static func joinSignallingOnly(
        roomId: String, token: String, signalingURL: String, name: String
    ) async throws -> Room {
        var options = RoomAgent.Options(roomId: roomId, token: token, signalingURL: signalingURL)
        options.participantName = name
        options.mode = .SIGNALLING_ONLY
        options.consume = .none
        options.acceptInvites = .no
        let agent = try RoomAgent(options: options)
        try await agent.start()
        return agent.room
    }

    /// Publishes `REQUEST_TO_JOIN_AS_HOST_<participantId>` with `mode` as the message (seed 000, steps 1-2).
    public static func invite(
        roomId: String, token: String, signalingURL: String, participantId: String, mode: Mode = .SEND_AND_RECV
    ) async throws {
        let room = try await joinSignallingOnly(
            roomId: roomId, token: token, signalingURL: signalingURL, name: "understudy-invite")
        try await room.pubSub.publish(topic: "REQUEST_TO_JOIN_AS_HOST_\(participantId)", message: mode.rawValue)
        await room.leave()
    }

    /// Publishes one message on `topic`.
    public static func publish(
        roomId: String, token: String, signalingURL: String, topic: String, message: String, persist: Bool
    ) async throws {
        let room = try await joinSignallingOnly(
            roomId: roomId, token: token, signalingURL: signalingURL, name: "understudy-pubsub")
        try await room.pubSub.publish(topic: topic, message: message, options: persist ? ["persist": true] : [:])
        await room.leave()
    }

    /// Subscribes to `topic` and hands every message to `output` until `duration` passes or shutdown.
    public static func subscribe(
        roomId: String, token: String, signalingURL: String, topic: String, duration: Double?,
        shouldStop: @escaping @Sendable () -> Bool, output: @escaping @Sendable (PubSubMessage) -> Void
    ) async throws {
        let room = try await joinSignallingOnly(
            roomId: roomId, token: token, signalingURL: signalingURL, name: "understudy-pubsub")
        let printer = Printer(output: output)
        try await room.pubSub.subscribe(topic: topic, listener: printer)
        let end = duration.map { Date().addingTimeInterval($0) }
        while !shouldStop() && room.state != .DISCONNECTED && room.state != .FAILED {
            if let end, Date() >= end { break }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        await room.leave()
    }
}
