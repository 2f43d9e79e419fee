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
        try await signallingOnlyAgent(roomId: roomId, token: token, signalingURL: signalingURL, name: name).room
    }

    /// A started `SIGNALLING_ONLY` agent (no media, no invites accepted).
    private static func signallingOnlyAgent(
        roomId: String, token: String, signalingURL: String, name: String
    ) async throws -> RoomAgent {
        var options = RoomAgent.Options(roomId: roomId, token: token, signalingURL: signalingURL)
        options.participantName = name
        options.mode = .SIGNALLING_ONLY
        options.consume = .none
        options.acceptInvites = .no
        let agent = try RoomAgent(options: options)
        try await agent.start()
        return agent
    }

    /// Publishes `REQUEST_TO_JOIN_AS_HOST_<participantId>` with `mode` (docs/spec/change-mode.md, steps 1-2).
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

    /// Subscribes to `topic` and hands every message to `output` until `duration` passes, the room
    /// is left or `stopEvent` returns (see ``RoomAgent/run(duration:until:)``: each one wakes it).
    public static func subscribe(
        roomId: String, token: String, signalingURL: String, topic: String, duration: Double?,
        until stopEvent: (@Sendable () async -> Void)? = nil, output: @escaping @Sendable (PubSubMessage) -> Void
    ) async throws {
        let agent = try await signallingOnlyAgent(
            roomId: roomId, token: token, signalingURL: signalingURL, name: "understudy-pubsub")
        let printer = Printer(output: output)
        try await agent.room.pubSub.subscribe(topic: topic, listener: printer)
        await agent.run(duration: duration, until: stopEvent)
    }
}
