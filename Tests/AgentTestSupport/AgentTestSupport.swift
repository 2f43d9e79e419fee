import Agent
import Foundation
import RoomServer
import SDKTestSupport
import TestSupport
import Understudy

/// A room agent joined to `room` on `server`: the start-up every agent test shares.
///
/// The token is one for the room with join and moderation rights (``sdkToken(_:room:participant:permissions:)``)
/// unless `token` is given; `id` becomes the agent's participant id (nil: the agent's default);
/// `configure` sets the rest of the options before the agent starts. Throws what `start()` throws.
public func startAgent(
    _ server: RoomServer, room: String, id: String?, token: String? = nil,
    _ configure: (inout RoomAgent.Options) -> Void = { _ in }, log: @escaping @Sendable (String) -> Void = { _ in }
) async throws -> RoomAgent {
    var options = RoomAgent.Options(
        roomId: room, token: token ?? sdkToken(server, room: room), signalingURL: server.signalingURL)
    options.participantId = id
    configure(&options)
    let agent = try RoomAgent(options: options, log: log)
    try await agent.start()
    return agent
}

/// Counts the video and audio frames `room` receives from `participantId`, through its `onFrame`
/// (which this replaces; set it to nil when done).
public func countFrames(in room: Room, from participantId: String) -> SFUFrameLog {
    let counts = SFUFrameLog()
    room.onFrame = { id, kind, _, _ in if id == participantId { counts.add(kind) } }
    return counts
}

/// A new empty directory under the temporary directory, named after `prefix`; the caller removes it.
public func makeScratchDirectory(_ prefix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
