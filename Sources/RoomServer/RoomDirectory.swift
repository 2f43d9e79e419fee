import Foundation
import Signaling

/// Another room server of the same cluster.
public struct ClusterPeer: Sendable, Equatable {
    public var nodeId: String
    /// Where its clients connect (`ws://HOST:PORT/v1/rtc`).
    public var signalingURL: String
    /// Its HTTP base (`http://HOST:PORT`), for the admin API.
    public var httpURL: String

    public init(nodeId: String, signalingURL: String, httpURL: String) {
        self.nodeId = nodeId
        self.signalingURL = signalingURL
        self.httpURL = httpURL
    }
}

/// Where a room lives.
public enum RoomLocation: Sendable, Equatable {
    /// On this server.
    case here
    /// On another node: the connection is proxied there (``SignalProxy``).
    case peer(ClusterPeer)
    /// Nowhere yet (the shared state cannot be reached); the reason goes to the client.
    case unavailable(String)
}

/// A room on another node, as the admin API lists it.
public struct RemoteRoomSummary: Sendable, Equatable {
    public var roomId: String
    public var nodeId: String
    public var participantCount: Int
    public var producerCount: Int
    public var consumerCount: Int

    public init(roomId: String, nodeId: String, participantCount: Int, producerCount: Int, consumerCount: Int) {
        self.roomId = roomId
        self.nodeId = nodeId
        self.participantCount = participantCount
        self.producerCount = producerCount
        self.consumerCount = consumerCount
    }
}

/// Where rooms live when several servers share the load. Without one (the default) every room is
/// local; the `Cluster` module implements it over Redis.
public protocol RoomDirectory: AnyObject, Sendable {
    /// The owner of `roomId`, placing the room first when nobody owns it.
    func locate(roomId: String) async -> RoomLocation
    /// A room opened on this server (it was placed here).
    func roomOpened(_ roomId: String)
    /// A room on this server closed; its placement is released.
    func roomClosed(_ roomId: String)
    /// Rooms of the other nodes, for `GET /v1/rooms`.
    func remoteRooms() async -> [RemoteRoomSummary]
    /// The owner of a room that is not on this server, for forwarding admin requests; nil when none.
    func owner(of roomId: String) async -> ClusterPeer?
    /// `GET /cluster`: nodes, their load and their rooms; for a token scoped to `roomScope`, the
    /// nodes and only that room (no other room id, no load).
    func status(roomScope: String?) async -> JSONValue
    /// Extra lines for `/metrics`.
    func metricsText() -> String
    /// Keeps a persisted PubSub message (at most `topicLimit` per topic) where the room's next
    /// holder finds it. Called on the room's queue; must not block. `stored` runs (on any thread)
    /// once the store acknowledged the write or gave up on it, so that the request is answered
    /// only when the message would survive this node.
    func saveMessage(roomId: String, message: JSONValue, topicLimit: Int, stored: @escaping @Sendable () -> Void)
    /// Keeps the room's pins (the whole list after a change). Must not block; `stored` as above.
    func savePins(roomId: String, pins: [JSONValue], stored: @escaping @Sendable () -> Void)
    /// What a previous holder of the room left; nil when nothing (or the store is unreachable).
    func restore(roomId: String) async -> RoomStateSnapshot?
    /// Every live node's signalling URL (this one first), as last read; sent to clients after they
    /// join (`clusterNodes`) so that they can reconnect through another node when this one dies.
    var signalingURLs: [String] { get }
    /// The media address a live node registered, as last read (nil: unknown). An origin accepts an
    /// edge's pipe only at its node's registered address (docs/cluster.md, "Origin and edges").
    func mediaAddress(ofNode nodeId: String) -> String?
    /// Where a room's audience should join its media, for a `RECV_ONLY` join through this node
    /// (docs/cluster.md, "Placement of the audience"); nil: this node decides alone.
    func audiencePlacement(roomId: String, share: Int) async -> AudiencePlacement?
}

extension RoomDirectory {
    public func mediaAddress(ofNode nodeId: String) -> String? { nil }
    public func audiencePlacement(roomId: String, share: Int) async -> AudiencePlacement? { nil }
}

/// Where an audience member's media goes (`--edge-audience`): the least-loaded node that already
/// carries the room below its share, else a node that does not carry it yet, else the origin.
public enum AudiencePlacement: Sendable, Equatable {
    /// This node serves the member's media as an edge.
    case here
    /// Another node serves it as an edge: the join is proxied there, which proxies it on to the origin.
    case edge(ClusterPeer)
    /// The origin serves it (every carrier is at its share and no node is free).
    case origin
}
