import Dispatch
import Foundation
import RTC
import RTCWire
import RoomProtocol
import SFU
import Signaling
import Synchronization

/// The server's media plane as rooms see it: one ``SFU`` plus a blocking bridge for room queues.
///
/// SFU participant ids are `"<roomId>/<participantId>"` (`/` is not allowed in either id), so one SFU
/// serves every room without collisions.
// Safe: immutable references (the SFU, its executor) and an atomic counter.
final class RoomMedia: @unchecked Sendable {
    let sfu: SFU
    /// Calls a room made onto the SFU's loop and waited for (``callOnLoop(_:timeout:_:)``): each waits for
    /// the loop to get between two datagrams, so they are what a room's bursts cost (`/metrics`).
    let loopCalls = Atomic<UInt64>(0)
    /// The SFU's async control calls run on a private queue, not the cooperative pool: room handlers
    /// wait for them synchronously (so requests stay strictly ordered).
    private let executor = DispatchTaskExecutor(label: "room.media.executor")

    init(configuration: RoomServerConfiguration, server: RoomServer) throws(EventLoopError) {
        let address = configuration.mediaAddress ?? configuration.listenHost
        // Port 0 (low end) means ephemeral ports, one per connection.
        let range: ClosedRange<UInt16>? =
            configuration.udpPortLow == 0 ? nil : configuration.udpPortLow...configuration.udpPortHigh
        var sfuConfiguration = SFUConfiguration(mediaAddresses: [address], portRange: range, loopName: "room-sfu")
        sfuConfiguration.maxSSRCsPerConnection = configuration.maxSSRCsPerPublisher
        sfuConfiguration.keyframeRequestInterval = UInt64(configuration.keyframeRequestIntervalMilliseconds) * 1_000_000
        sfuConfiguration.iceTCP = configuration.iceTCP
        sfuConfiguration.staleMediaAfter = UInt64(configuration.staleMediaMilliseconds) * 1_000_000
        sfu = try SFU.make(configuration: sfuConfiguration)
        sfu.onRenegotiationNeeded = { [weak server] key in
            guard let server, let (roomId, participantId) = RoomMedia.split(key) else { return }
            guard let room = server.existingRoom(roomId) else {
                // An edge member: its room is on the origin, which makes the offer.
                server.edges.host(key: key)?.report(.renegotiate)
                return
            }
            // Several consumers added by one request ask several times; one offer covers them all.
            room.renegotiationNeeded(participantId: participantId)
        }
        watchLayers(server: server)
        watchRefusals(server: server)
        watchSpeakers(server: server)
        watchHTTPSessionTransports(server: server)
    }

    /// Tells a WHIP/WHEP session when its media connection (publish, resp. subscribe) changes
    /// state; the session reaps itself when it stays unconnected too long.
    private func watchHTTPSessionTransports(server: RoomServer) {
        sfu.onConnectionStateChanged = { [weak server] key, role, state in
            guard let server, let session = server.httpSessions.find(mediaKey: key),
                role == (session.kind == .whip ? .publish : .subscribe)
            else { return }
            session.mediaStateChanged(state)
        }
    }

    /// Forwards the SFU's active-speaker changes (one group per room) to their room.
    private func watchSpeakers(server: RoomServer) {
        sfu.onSpeakerChanged = { [weak server] roomId, participantId in
            guard let server, let room = server.existingRoom(roomId) else { return }
            room.enqueue { room.speakerChanged(participantId) }
        }
    }

    /// Tells the subscriber which layer it now receives (`consumerLayerChanged`).
    private func watchLayers(server: RoomServer) {
        sfu.onLayerChanged = { [weak server] key, producerId, quality in
            Self.tell(key, on: server, edge: .layer(producerId: producerId, quality: quality)) { room, subscriberId in
                room.consumerLayerChanged(subscriberId: subscriberId, producerId: producerId, quality)
            }
        }
    }

    /// A subscriber refused a consumer's codec (its answer rejected the m-line): the room closes the
    /// consumer and tells the subscriber why (`consumerClosed` with `reason`).
    private func watchRefusals(server: RoomServer) {
        sfu.onConsumerRefused = { [weak server] key, producerId, codec in
            Self.tell(key, on: server, edge: .refused(producerId: producerId, codec: codec)) { room, subscriberId in
                room.consumerRefused(subscriberId: subscriberId, producerId: producerId, codec: codec)
            }
        }
    }

    /// Routes an SFU event about the subscriber of connection `key`: to its room on this node (on the
    /// room's queue), or, for an edge guest whose room lives on another node, to that node as `edge`.
    private static func tell(
        _ key: String, on server: RoomServer?, edge: EdgeEvent,
        room deliver: @escaping @Sendable (Room, _ subscriberId: String) -> Void
    ) {
        guard let server, let (roomId, participantId) = RoomMedia.split(key) else { return }
        guard let room = server.existingRoom(roomId) else {
            server.edges.host(key: key)?.report(edge)
            return
        }
        room.enqueue { deliver(room, participantId) }
    }

    static func key(room: String, participant: String) -> String { room + "/" + participant }

    static func split(_ key: String) -> (String, String)? {
        guard let slash = key.firstIndex(of: "/") else { return nil }
        return (String(key[..<slash]), String(key[key.index(after: slash)...]))
    }

    /// Runs `body` against the SFU and waits for it (on a room queue, never on the cooperative pool).
    func call<T: Sendable>(
        _ what: String, timeout: Double = 10, _ body: @escaping @Sendable (SFU) async throws -> T
    ) throws(RoomError) -> T {
        let box = MediaResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        let sfu = self.sfu
        Task(executorPreference: executor) {
            do { box.result = .success(try await body(sfu)) } catch { box.result = .failure(error) }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success, let result = box.result else {
            throw RoomError(5000, "the media server did not answer \(what) in time")
        }
        switch result {
        case .success(let value): return value
        case .failure(let error as SFUError) where error == .restartAddsMLines:
            throw RoomError(3073, "\(what): \(error.description)", cause: error)
        case .failure(let error as SFUError): throw RoomError(5000, "\(what): \(error.description)", cause: error)
        case .failure(let error): throw RoomError(5000, "\(what): \(error)", cause: error)
        }
    }

    /// Runs `body` on the SFU's loop thread and waits for it: one hop each way, for the calls a live
    /// stream makes by the thousand (consume, offers and answers, layer choice), where the async
    /// path's extra executor hops added up on the room's queue.
    func callOnLoop<T: Sendable>(
        _ what: String, timeout: Double = 10, _ body: @escaping @Sendable (SFU) throws -> T
    ) throws(RoomError) -> T {
        loopCalls.add(1, ordering: .relaxed)
        let box = MediaResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        let sfu = self.sfu
        let accepted = sfu.loop.execute {
            do { box.result = .success(try body(sfu)) } catch { box.result = .failure(error) }
            done.signal()
        }
        // A stopped media server refuses at once rather than after the timeout.
        guard accepted else { throw RoomError(5000, "\(what): the media server has stopped") }
        guard done.wait(timeout: .now() + timeout) == .success, let result = box.result else {
            throw RoomError(5000, "the media server did not answer \(what) in time")
        }
        return try MediaResultBox.roomResult(what, result)
    }

    /// Runs `body` against the SFU without waiting (closing things, where nobody needs the answer).
    func fire(_ body: @escaping @Sendable (SFU) async throws -> Void) {
        let sfu = self.sfu
        Task(executorPreference: executor) { try? await body(sfu) }
    }

    func shutdown() {
        _ = try? call("shutdown", timeout: 5) { await $0.shutdown() }
    }
}

/// Hands a result from the executor to the waiting room queue (the semaphore orders the accesses).
// Safe: written before the semaphore signal and read after its wait (the semaphore orders them).
final class MediaResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?

    /// The SFU's result as a room reports it (5000 for what the SFU could not do, or did not run).
    func value(_ what: String) throws(RoomError) -> T {
        guard let result else { throw RoomError(5000, "\(what): the media server did not run it") }
        return try Self.roomResult(what, result)
    }

    static func roomResult(_ what: String, _ result: Result<T, any Error>) throws(RoomError) -> T {
        switch result {
        case .success(let value): return value
        case .failure(let error as SFUError): throw RoomError(5000, "\(what): \(error.description)", cause: error)
        case .failure(let error): throw RoomError(5000, "\(what): \(error)", cause: error)
        }
    }
}

/// Subscribe-connection negotiation state of one participant (room queue only).
struct SubscribeNegotiation {
    /// Revision of the last `subscriberOffer` sent (0: none yet).
    var revision = 0
    /// An offer is out and its answer has not arrived.
    var outstanding = false
    /// The consumer set changed since the last offer was made.
    var wanted = false
}

// MARK: Reconnection: ICE restart

extension ClientSession {
    /// `restartIce {connection, ufrag, pwd}` → `{ufrag, pwd}`, or for the publish connection
    /// `restartIce {connection: "publish", sdp}` → `{sdp}` (a re-offer with new credentials).
    ///
    /// Runs on the room's queue like every other request of a joined participant, so it is ordered
    /// with produce and subscribe negotiation. See docs/protocol.md, "Reconnection".
    func handleRestartICE(id: JSONValue, data: JSONValue) {
        guard let room = joinedRoom, let participantId = participantId, currentPhase == .joined else {
            return respond(id, error: RoomError(3035, "'restartIce' was called before the room was joined"))
        }
        room.enqueue {
            do throws(RoomError) {
                let result = try self.restartICE(roomId: room.id, participantId: participantId, data: data)
                self.respond(id, result)
            } catch {
                self.respond(id, error: error)
                if error.code == 3073 { self.noteBadMessage() }
            }
        }
    }

    private func restartICE(roomId: String, participantId: String, data: JSONValue) throws(RoomError) -> JSONValue {
        guard let which = data["connection"]?.stringValue, let role = SFUConnectionRole(rawValue: which) else {
            throw RoomError(3073, "restartIce needs connection: \"publish\" or \"subscribe\"")
        }
        let key = RoomMedia.key(room: roomId, participant: participantId)
        if data["sdp"] == nil, let link = joinedRoom?.edgeLink(of: participantId) {
            // An edge member's connections are on its edge.
            guard let ufrag = data["ufrag"]?.stringValue, let pwd = data["pwd"]?.stringValue,
                (4...256).contains(ufrag.utf8.count), (22...256).contains(pwd.utf8.count)
            else { throw RoomError(3073, "restartIce needs ufrag (4-256 chars) and pwd (22-256 chars), or sdp") }
            let fresh = try link.call(.restartIce(connection: role, ufrag: ufrag, pwd: pwd), key: key)
            return [
                "connection": .string(which), "ufrag": fresh["ufrag"] ?? .null, "pwd": fresh["pwd"] ?? .null,
            ]
        }
        if role == .publish, let sdp = data["sdp"]?.stringValue, let link = joinedRoom?.edgeLink(of: participantId) {
            // An edge guest publishes to its edge.
            let answer = try link.call(.restartPublish(sdp: sdp), key: key)
            return ["connection": .string(which), "sdp": answer["sdp"] ?? .null]
        }
        guard let media = server.media() else { throw RoomError(5000, "the media server is stopping") }
        if let sdp = data["sdp"]?.stringValue {
            guard role == .publish else { throw RoomError(3073, "an SDP restart applies to the publish connection") }
            let offer: SessionDescription
            do { offer = try SessionDescription.parse(sdp) } catch {
                throw RoomError(3073, "restartIce: bad SDP: \(error)", cause: error)
            }
            let answer = try media.call("restartIce") {
                try await $0.restartPublishICE(participantID: key, offer: offer)
            }
            return ["connection": .string(which), "sdp": .string(answer.serialize())]
        }
        guard let ufrag = data["ufrag"]?.stringValue, let pwd = data["pwd"]?.stringValue,
            (4...256).contains(ufrag.utf8.count), (22...256).contains(pwd.utf8.count)
        else {
            throw RoomError(3073, "restartIce needs ufrag (4-256 chars) and pwd (22-256 chars), or sdp")
        }
        let fresh = try media.call("restartIce") {
            try await $0.restartICE(participantID: key, connection: role, remoteUfrag: ufrag, remotePassword: pwd)
        }
        return ["connection": .string(which), "ufrag": .string(fresh.ufrag), "pwd": .string(fresh.password)]
    }
}
