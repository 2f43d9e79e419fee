import Foundation

// Foundation only: Fuzz/run.sh compiles this file alone as the `Cluster` fuzz library.

/// A node's registration, as stored in Redis and listed by `GET /cluster`.
///
/// What Redis holds is untrusted input (anyone who can write to it can write anything): a record is
/// read only through ``parse(_:id:now:)``, which refuses what does not decode and what is
/// implausible, so such a record is skipped and never chosen for a placement.
public struct NodeRecord: Codable, Sendable, Equatable {
    /// The node id.
    public var id: String
    /// Where clients and proxying nodes reach it: `ws://HOST:PORT/v1/rtc`.
    public var signalingURL: String
    /// Its HTTP base for forwarded admin requests.
    public var httpURL: String
    /// The address clients send media to.
    public var mediaAddress: String
    /// Rooms on the node.
    public var rooms: Int
    /// Participants on the node.
    public var participants: Int
    /// Producers (published tracks) on the node.
    public var producers: Int
    /// Consumers (subscribed tracks) on the node.
    public var consumers: Int
    /// Process CPU over the last refresh period, in cores.
    public var cpu: Double
    /// Each room's load.
    public var roomList: [RoomLoad]
    /// Rooms of other nodes whose audience this node serves as an edge (absent: none, or a node
    /// that predates edges).
    public var edgeRooms: [EdgeLoad]?
    /// When the node started and last refreshed this record (seconds since 1970).
    public var startedAt: Double
    /// When the record was last refreshed.
    public var updatedAt: Double

    /// A record with these fields.
    public init(
        id: String, signalingURL: String, httpURL: String, mediaAddress: String, rooms: Int, participants: Int,
        producers: Int, consumers: Int, cpu: Double, roomList: [RoomLoad], startedAt: Double, updatedAt: Double
    ) {
        self.id = id
        self.signalingURL = signalingURL
        self.httpURL = httpURL
        self.mediaAddress = mediaAddress
        self.rooms = rooms
        self.participants = participants
        self.producers = producers
        self.consumers = consumers
        self.cpu = cpu
        self.roomList = roomList
        self.edgeRooms = nil
        self.startedAt = startedAt
        self.updatedAt = updatedAt
    }

    /// One room's load in a registration.
    public struct RoomLoad: Codable, Sendable, Equatable {
        /// The room id.
        public var roomId: String
        /// Its participants.
        public var participants: Int
        /// Its producers.
        public var producers: Int
        /// Its consumers.
        public var consumers: Int
        /// Its `RECV_ONLY` members whose media this node serves (absent: a node that predates edges).
        public var audience: Int?

        /// A room's load.
        public init(roomId: String, participants: Int, producers: Int, consumers: Int, audience: Int? = nil) {
            self.roomId = roomId
            self.participants = participants
            self.producers = producers
            self.consumers = consumers
            self.audience = audience
        }
    }

    /// The audience a node serves as an edge of another node's room.
    public struct EdgeLoad: Codable, Sendable, Equatable {
        public var roomId: String
        /// Members whose media this node serves.
        public var audience: Int

        public init(roomId: String, audience: Int) {
            self.roomId = roomId
            self.audience = audience
        }
    }

    /// The room's audience this node serves (as its origin or an edge); 0 when none.
    public func audience(of roomId: String) -> Int {
        if let load = roomList.first(where: { $0.roomId == roomId }) { return load.audience ?? 0 }
        return edgeRooms?.first { $0.roomId == roomId }?.audience ?? 0
    }

    /// Why a registration read from Redis was refused.
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        /// The reason, one line.
        public var description: String
    }

    /// Largest registration read (bytes of JSON); a real one with 10,000 rooms is about 1 MB.
    public static let maxBytes = 4 << 20
    /// Largest count a registration may claim (rooms, participants, producers, consumers).
    public static let maxCount = 10_000_000
    /// How far `updatedAt` may be from the reader's clock (clock skew between hosts); a record
    /// lives 3 s, so one older than this was written by something that is not a live node.
    public static let maxClockSkew: Double = 300

    /// Decodes and checks a registration read from the key of node `id`.
    ///
    /// Refused: more than ``maxBytes``, not the JSON of a record, an `id` other than the key's or
    /// outside the node-id grammar (1–64 letters, digits, `-`, `_`, `.`), URLs that are not
    /// `ws(s)://…`/`http(s)://…`, an empty or over-long media address, negative or absurd counts,
    /// a CPU that is not a finite 0…4096, a room list longer than ``maxCount`` or with room ids
    /// outside 1–128 bytes (edge rooms
    /// likewise, with an audience in range), or an `updatedAt` more than ``maxClockSkew`` from `now`.
    public static func parse(_ bytes: [UInt8], id: String, now: Double) throws(Invalid) -> NodeRecord {
        guard bytes.count <= maxBytes else { throw Invalid(description: "\(bytes.count) bytes") }
        let record: NodeRecord
        do {
            record = try JSONDecoder().decode(NodeRecord.self, from: Data(bytes))
        } catch {
            throw Invalid(description: "not a node registration")
        }
        try record.check(id: id, now: now)
        return record
    }

    private func check(id key: String, now: Double) throws(Invalid) {
        func fail(_ why: String) -> Invalid { Invalid(description: why) }
        guard id == key else { throw fail("registration of '\(id.prefix(64))' under the key of '\(key.prefix(64))'") }
        guard Self.isNodeId(id) else { throw fail("node id outside the grammar") }
        for (url, schemes) in [(signalingURL, ["ws://", "wss://"]), (httpURL, ["http://", "https://"])] {
            guard url.utf8.count <= 512, let scheme = schemes.first(where: { url.hasPrefix($0) }),
                url.utf8.count > scheme.utf8.count, !url.contains(where: { $0.isWhitespace })
            else { throw fail("bad URL") }
        }
        guard !mediaAddress.isEmpty, mediaAddress.utf8.count <= 256 else { throw fail("bad media address") }
        for count in [rooms, participants, producers, consumers] where !(0...Self.maxCount).contains(count) {
            throw fail("count \(count) out of range")
        }
        guard cpu.isFinite, (0...4096).contains(cpu) else { throw fail("bad CPU") }
        guard roomList.count <= Self.maxCount else { throw fail("room list too long") }
        for room in roomList {
            guard !room.roomId.isEmpty, room.roomId.utf8.count <= 128 else { throw fail("bad room id") }
            for count in [room.participants, room.producers, room.consumers, room.audience ?? 0]
            where !(0...Self.maxCount).contains(count) {
                throw fail("room count \(count) out of range")
            }
        }
        guard (edgeRooms?.count ?? 0) <= Self.maxCount else { throw fail("edge room list too long") }
        for edge in edgeRooms ?? [] {
            guard !edge.roomId.isEmpty, edge.roomId.utf8.count <= 128 else { throw fail("bad edge room id") }
            guard (0...Self.maxCount).contains(edge.audience) else { throw fail("edge audience out of range") }
        }
        guard updatedAt.isFinite, startedAt.isFinite, abs(updatedAt - now) <= Self.maxClockSkew else {
            throw fail("updatedAt \(updatedAt) is not now (\(now))")
        }
    }

    /// The node-id grammar `serve --node-id` enforces: 1–64 letters, digits, `-`, `_` or `.`.
    public static func isNodeId(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 64 && id.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }
    }
}
