import Dispatch
import Foundation
import RTC
import RTCWire
import RoomProtocol
import SFU
import Signaling

// Origin and edges (docs/cluster.md, "Origin and edges"): a room lives on its origin node; with
// `--edge-audience N` an audience member who joins through another node (the edge) keeps its
// subscribe connection there. The origin's room stays the one truth (roster, events, PubSub, modes)
// and drives the member's media plane on the edge through the small calls below, carried on the
// member's own proxied WebSocket (docs/protocol.md, "Node to node"). Each stage track the edge's
// members consume crosses once per edge over a pipe (SFUPipe) and is fanned out there.

/// The node-to-node messages of an edge member's media plane, and their checks.
///
/// On the member's proxied WebSocket, an edge message is the text `edge:` followed by a JSON
/// object, which no client message can be (they are JSON objects). Calls go origin → edge, replies
/// and events edge → origin.
enum EdgeWire {
    /// Marks a node-to-node message on a member's proxied WebSocket.
    static let prefix = "edge:"
    /// The proxying edge's pipe socket (`IP:PORT`, `[IPv6]:PORT`), sent with the proxied join: the
    /// edge offers to serve the member's media.
    static let pipeHeader = "X-Understudy-Edge-Pipe"
    /// The pipe id an edge uses for its origin `node`, and an origin for its edge `node`.
    static func edgePipeID(origin node: String) -> String { "origin:" + node }
    static func originPipeID(edge node: String) -> String { "edge:" + node }

    /// `IP:PORT` or `[IPv6]:PORT`, nil when it is neither.
    static func address(_ text: String) -> SocketAddress? {
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":"),
            let port = UInt16(text[text.index(after: colon)...]), port != 0
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return SocketAddress(ip: host, port: port)
    }

    static func text(_ address: SocketAddress) -> String {
        address.isIPv6 ? "[\(address.ip)]:\(address.port)" : "\(address.ip):\(address.port)"
    }

    /// The JSON object of an edge message; 3073 for anything else.
    static func object(_ text: String) throws(RoomError) -> JSONValue {
        guard text.hasPrefix(prefix), text.utf8.count <= 256 * 1024 else {
            throw RoomError(3073, "not an edge message")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(String(text.dropFirst(prefix.count))) } catch {
            throw RoomError(3073, "edge message: \(error)")
        }
        guard value.objectValue != nil else { throw RoomError(3073, "edge message: not a JSON object") }
        return value
    }

    static func encode(_ value: JSONValue) -> String { prefix + value.jsonString }
}

/// One call of the origin on an edge member's media plane (the SFU call it stands for).
enum EdgeCall: Sendable, Equatable {
    /// Mirror `piped` when missing (its pipe from the origin at `originPipe`), consume it, and with
    /// `offering` make the member's next subscribe offer: `{consumerId, mid, renegotiationNeeded, sdp?}`.
    /// Without `piped` the producer is the edge's own (a guest of this edge publishes here).
    case consume(producerId: String, piped: SFUPipedProducer?, originPipe: String, offering: Bool)
    /// A guest's publish offer, answered by the edge's SFU; each new track is piped to the origin at
    /// `originPipe`: `{sdp, producers: [{producerId, kind, mid, piped}]}`.
    case publish(sdp: String, sources: [SFUMediaSource], originPipe: String)
    /// ICE restart of a guest's publish connection by SDP: `{sdp}`.
    case restartPublish(sdp: String)
    /// Closes a guest's producer (and its pipe to the origin).
    case closeProducer(producerId: String)
    /// Closes a guest's publish connection when it carries no producer (back in the audience): `{closed}`.
    case closePublishConnection
    case stopConsuming(producerId: String)
    case setQuality(producerId: String, quality: SFULayerQuality)
    case setViewport(producerId: String, width: Int, height: Int)
    /// The member's next subscribe offer: `{sdp}` (null: nothing to offer).
    case offer
    /// Applies the member's answer: `{next}`, the next offer when consumers changed meanwhile.
    case answer(sdp: String)
    /// ICE restart of the member's subscribe connection, or of a guest's publish connection: `{ufrag, pwd}`.
    case restartIce(connection: SFUConnectionRole, ufrag: String, pwd: String)
    /// Closes the member's subscribe connection (it left, or left the audience).
    case close
    /// The member's `getStats` figures on the edge (its producers, consumers and subscribe transport).
    case stats
    /// A participant of the member's room is pinned (or no more): the edge's allocator favours its
    /// webcam as the origin's does. `participantKey` is `ROOM/PARTICIPANT`, of the member's room.
    case pin(participantKey: String, pinned: Bool)

    var name: String {
        switch self {
        case .consume: return "consume"
        case .publish: return "publish"
        case .restartPublish: return "restartPublish"
        case .closeProducer: return "closeProducer"
        case .closePublishConnection: return "closePublishConnection"
        case .stopConsuming: return "stopConsuming"
        case .setQuality: return "setQuality"
        case .setViewport: return "setViewport"
        case .offer: return "offer"
        case .answer: return "answer"
        case .restartIce: return "restartIce"
        case .close: return "close"
        case .stats: return "stats"
        case .pin: return "pin"
        }
    }

    /// The message: `{call, seq, key, …}`; `key` is the member's SFU key `ROOM/PARTICIPANT`.
    func json(seq: Int, key: String) -> JSONValue {
        var o: [String: JSONValue] = ["call": .string(name), "seq": .number(Double(seq)), "key": .string(key)]
        switch self {
        case .consume(let producerId, let piped, let originPipe, let offering):
            o["producerId"] = .string(producerId)
            o["piped"] = piped?.edgeJSON ?? .null
            o["originPipe"] = .string(originPipe)
            o["offering"] = .bool(offering)
        case .publish(let sdp, let sources, let originPipe):
            o["sdp"] = .string(sdp)
            o["sources"] = .array(sources.map { .string($0.edgeName) })
            o["originPipe"] = .string(originPipe)
        case .restartPublish(let sdp): o["sdp"] = .string(sdp)
        case .closeProducer(let producerId): o["producerId"] = .string(producerId)
        case .closePublishConnection: break
        case .stopConsuming(let producerId): o["producerId"] = .string(producerId)
        case .setQuality(let producerId, let quality):
            o["producerId"] = .string(producerId)
            o["quality"] = .number(Double(quality.rawValue))
        case .setViewport(let producerId, let width, let height):
            o["producerId"] = .string(producerId)
            o["width"] = .number(Double(width))
            o["height"] = .number(Double(height))
        case .offer, .close, .stats: break
        case .pin(let participantKey, let pinned):
            o["participantKey"] = .string(participantKey)
            o["pinned"] = .bool(pinned)
        case .answer(let sdp): o["sdp"] = .string(sdp)
        case .restartIce(let connection, let ufrag, let pwd):
            o["connection"] = .string(connection.rawValue)
            o["ufrag"] = .string(ufrag)
            o["pwd"] = .string(pwd)
        }
        return .object(o)
    }

    private static func originPipe(_ v: JSONValue) throws(RoomError) -> String {
        let text = try v.requiredString("originPipe", maxLength: 64)
        guard EdgeWire.address(text) != nil else { throw .invalidParameter("edge call: bad 'originPipe'") }
        return text
    }

    /// Reads a call: its sequence number, member key and call; 3073 naming what is wrong.
    static func parse(_ v: JSONValue) throws(RoomError) -> (seq: Int, key: String, call: EdgeCall) {
        guard let seq = try v.optionalInt("seq"), seq >= 0 else { throw .invalidParameter("edge call: bad 'seq'") }
        let key = try v.requiredString("key", maxLength: 258)
        guard RoomMedia.split(key) != nil else { throw .invalidParameter("edge call: bad 'key'") }
        let call: EdgeCall
        switch try v.requiredString("call", maxLength: 32) {
        case "consume":
            let producerId = try v.requiredString("producerId", maxLength: 128)
            var piped: SFUPipedProducer?
            if let description = v["piped"], !description.isNull {
                piped = try SFUPipedProducer(edgeJSON: description)
                guard piped?.producerID == producerId else {
                    throw .invalidParameter("edge call: 'piped' is another producer")
                }
            }
            call = .consume(
                producerId: producerId, piped: piped, originPipe: try originPipe(v),
                offering: try v.optionalBool("offering") ?? false)
        case "publish":
            guard let list = v["sources"]?.arrayValue, list.count <= 8 else {
                throw .invalidParameter("edge call: 'sources' must be an array of at most 8")
            }
            let sources = try list.map { (item: JSONValue) throws(RoomError) -> SFUMediaSource in
                guard let source = SFUMediaSource.allCases.first(where: { $0.edgeName == item.stringValue }) else {
                    throw .invalidParameter("edge call: unknown source")
                }
                return source
            }
            call = .publish(
                sdp: try v.requiredString("sdp", maxLength: SessionDescription.maximumInputSize), sources: sources,
                originPipe: try originPipe(v))
        case "restartPublish":
            call = .restartPublish(sdp: try v.requiredString("sdp", maxLength: SessionDescription.maximumInputSize))
        case "closeProducer": call = .closeProducer(producerId: try v.requiredString("producerId", maxLength: 128))
        case "closePublishConnection": call = .closePublishConnection
        case "stopConsuming": call = .stopConsuming(producerId: try v.requiredString("producerId", maxLength: 128))
        case "setQuality":
            guard let q = try v.optionalInt("quality"), let quality = SFULayerQuality(rawValue: q) else {
                throw .invalidParameter("edge call: quality must be 0, 1 or 2")
            }
            call = .setQuality(producerId: try v.requiredString("producerId", maxLength: 128), quality: quality)
        case "setViewport":
            guard let w = try v.optionalInt("width"), let h = try v.optionalInt("height"), (1...16384).contains(w),
                (1...16384).contains(h)
            else { throw .invalidParameter("edge call: width and height must be 1...16384") }
            call = .setViewport(producerId: try v.requiredString("producerId", maxLength: 128), width: w, height: h)
        case "offer": call = .offer
        case "answer": call = .answer(sdp: try v.requiredString("sdp", maxLength: SessionDescription.maximumInputSize))
        case "restartIce":
            guard let connection = SFUConnectionRole(rawValue: try v.optionalString("connection", maxLength: 16) ?? "")
            else { throw .invalidParameter("edge call: connection must be publish or subscribe") }
            call = .restartIce(
                connection: connection, ufrag: try v.requiredString("ufrag", maxLength: 256),
                pwd: try v.requiredString("pwd", maxLength: 256))
        case "close": call = .close
        case "stats": call = .stats
        case "pin":
            let participantKey = try v.requiredString("participantKey", maxLength: 258)
            guard let (room, _) = RoomMedia.split(participantKey), room == RoomMedia.split(key)?.0 else {
                throw .invalidParameter("edge call: 'participantKey' is not of the member's room")
            }
            guard let pinned = try v.optionalBool("pinned") else {
                throw .invalidParameter("edge call: missing 'pinned'")
            }
            call = .pin(participantKey: participantKey, pinned: pinned)
        case let other: throw .invalidParameter("edge call: unknown call '\(other.prefix(32))'")
        }
        return (seq, key, call)
    }
}

/// What an edge tells the origin about a member's media plane unasked (the SFU's callbacks there).
enum EdgeEvent: Sendable, Equatable {
    /// The member's consumers changed: it needs a new subscribe offer.
    case renegotiate
    /// The member now receives `quality` of `producerId`.
    case layer(producerId: String, quality: SFULayerQuality)
    /// The member's answer refused the codec of `producerId`.
    case refused(producerId: String, codec: MediaCodec)

    var json: JSONValue {
        switch self {
        case .renegotiate: return ["event": "renegotiate"]
        case .layer(let producerId, let quality):
            return ["event": "layer", "producerId": .string(producerId), "quality": .number(Double(quality.rawValue))]
        case .refused(let producerId, let codec):
            return ["event": "refused", "producerId": .string(producerId), "codec": .string(codec.rawValue)]
        }
    }

    static func parse(_ v: JSONValue) throws(RoomError) -> EdgeEvent {
        switch try v.requiredString("event", maxLength: 32) {
        case "renegotiate": return .renegotiate
        case "layer":
            guard let q = try v.optionalInt("quality"), let quality = SFULayerQuality(rawValue: q) else {
                throw .invalidParameter("edge event: quality must be 0, 1 or 2")
            }
            return .layer(producerId: try v.requiredString("producerId", maxLength: 128), quality: quality)
        case "refused":
            guard let codec = MediaCodec(rawValue: try v.requiredString("codec", maxLength: 16)) else {
                throw .invalidParameter("edge event: unknown codec")
            }
            return .refused(producerId: try v.requiredString("producerId", maxLength: 128), codec: codec)
        case let other: throw .invalidParameter("edge event: unknown event '\(other.prefix(32))'")
        }
    }
}

extension SFUMediaSource {
    /// The source's name in edge calls: the room's track-kind name (a screen's audio is a `mic` source).
    var edgeName: String {
        switch self {
        case .microphone: return TrackKind.mic.rawValue
        case .webcam: return TrackKind.webcam.rawValue
        case .screen: return TrackKind.screen.rawValue
        }
    }
}

extension SFUPipedProducer {
    /// The description as an edge call carries it.
    var edgeJSON: JSONValue {
        [
            "producerId": .string(producerID), "participantId": .string(participantID), "kind": .string(kind.rawValue),
            "source": .string(source.edgeName), "codec": .string(codec.rawValue),
            "fmtp": codecParameters.map { list in
                .array(list.map { .array([.string($0.key), $0.value.map(JSONValue.string) ?? .null]) })
            } ?? .null,
            "rids": .array(rids.map(JSONValue.string)), "ssrcs": .array(ssrcs.map { .number(Double($0)) }),
            "mid": .string(mid), "audioLevelExtensionId": .number(Double(audioLevelExtensionID)),
            "captureTimeExtensionId": .number(Double(captureTimeExtensionID)),
        ]
    }

    /// Reads a description; 3073 naming what is wrong (the SFU checks the SSRCs against the RIDs).
    init(edgeJSON v: JSONValue) throws(RoomError) {
        func fail(_ why: String) -> RoomError { .invalidParameter("edge call: piped producer: \(why)") }
        guard v.objectValue != nil else { throw fail("not an object") }
        guard let kind = MediaKind(rawValue: try v.requiredString("kind", maxLength: 16)) else { throw fail("kind") }
        let sourceName = try v.requiredString("source", maxLength: 16)
        guard let source = SFUMediaSource.allCases.first(where: { $0.edgeName == sourceName }) else {
            throw fail("source")
        }
        guard let codec = MediaCodec(rawValue: try v.requiredString("codec", maxLength: 16)) else {
            throw fail("codec")
        }
        var parameters: [SDPParameter]?
        if let list = v["fmtp"], !list.isNull {
            guard let items = list.arrayValue, items.count <= 32 else { throw fail("fmtp") }
            parameters = []
            for item in items {
                guard let pair = item.arrayValue, pair.count == 2, let key = pair[0].stringValue, key.utf8.count <= 64,
                    pair[1].isNull || (pair[1].stringValue?.utf8.count ?? 1000) <= 256
                else { throw fail("fmtp") }
                parameters?.append(SDPParameter(key: key, value: pair[1].stringValue))
            }
        }
        guard let ridList = v["rids"]?.arrayValue, ridList.count <= 4 else { throw fail("rids") }
        let rids = try ridList.map { (r: JSONValue) throws(RoomError) -> String in
            guard let s = r.stringValue, (1...16).contains(s.utf8.count) else { throw fail("rids") }
            return s
        }
        guard let ssrcList = v["ssrcs"]?.arrayValue, (1...4).contains(ssrcList.count) else { throw fail("ssrcs") }
        let ssrcs = try ssrcList.map { (s: JSONValue) throws(RoomError) -> UInt32 in
            guard let n = s.intValue, (1...Int(UInt32.max)).contains(n) else { throw fail("ssrcs") }
            return UInt32(n)
        }
        func extensionID(_ key: String) throws(RoomError) -> UInt8 {
            guard let n = try v.optionalInt(key), (0...255).contains(n) else { throw fail(key) }
            return UInt8(n)
        }
        self.init(
            producerID: try v.requiredString("producerId", maxLength: 128),
            participantID: try v.requiredString("participantId", maxLength: 258), kind: kind, source: source,
            codec: codec, codecParameters: parameters, rids: rids, ssrcs: ssrcs,
            mid: try v.requiredString("mid", maxLength: 32),
            audioLevelExtensionID: try extensionID("audioLevelExtensionId"),
            captureTimeExtensionID: try extensionID("captureTimeExtensionId"))
    }
}

// MARK: - Origin side

/// The answer to one call, waited for on the room's queue.
// Safe: `result` is written under `lock` before the semaphore is signalled.
final class EdgePending: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<JSONValue, RoomError>?
    private let done = DispatchSemaphore(value: 0)
    let what: String

    init(_ what: String) { self.what = what }

    func finish(_ r: Result<JSONValue, RoomError>) {
        let first: Bool = lock.withLock {
            guard result == nil else { return false }
            result = r
            return true
        }
        if first { done.signal() }
    }

    /// The edge's answer; 5000 when none came by `deadline` or the member's link closed.
    func wait(until deadline: DispatchTime) throws(RoomError) -> JSONValue {
        guard done.wait(timeout: deadline) == .success, let r = lock.withLock({ result }) else {
            throw RoomError(5000, "the edge node did not answer \(what) in time")
        }
        return try r.get()
    }
}

/// The origin's end of one edge member's media plane: calls over the member's proxied WebSocket,
/// answers and events back. Created for a proxied join whose edge offered its pipe.
// Safe: its tables are guarded by `lock`; the connection synchronizes itself.
final class EdgeMediaLink: @unchecked Sendable {
    /// The edge node.
    let nodeId: String
    /// The edge's pipe socket, where this node's pipe to it sends.
    let pipeAddress: SocketAddress
    private let connection: WebSocketConnection
    private weak var session: ClientSession?
    private let lock = NSLock()
    private var sequence = 0
    private var pending: [Int: EdgePending] = [:]
    private var closed = false

    init(nodeId: String, pipeAddress: SocketAddress, connection: WebSocketConnection, session: ClientSession) {
        self.nodeId = nodeId
        self.pipeAddress = pipeAddress
        self.connection = connection
        self.session = session
    }

    var pipeID: String { EdgeWire.originPipeID(edge: nodeId) }

    /// Sends `call` for `key`; its answer is waited for with ``EdgePending/wait(until:)``.
    func start(_ call: EdgeCall, key: String) -> EdgePending {
        let pendingCall = EdgePending(call.name)
        let seq: Int? = lock.withLock {
            guard !closed else { return nil }
            sequence += 1
            pending[sequence] = pendingCall
            return sequence
        }
        guard let seq else {
            pendingCall.finish(.failure(RoomError(5000, "\(call.name): the edge node's connection closed")))
            return pendingCall
        }
        connection.send(text: EdgeWire.encode(call.json(seq: seq, key: key)))
        return pendingCall
    }

    /// Sends `call` and waits for its answer (10 s).
    func call(_ call: EdgeCall, key: String) throws(RoomError) -> JSONValue {
        try start(call, key: key).wait(until: .now() + 10)
    }

    /// Sends `call` without waiting (closing things, where nobody needs the answer; seq 0).
    func send(_ call: EdgeCall, key: String) {
        guard !lock.withLock({ closed }) else { return }
        connection.send(text: EdgeWire.encode(call.json(seq: 0, key: key)))
    }

    /// A message from the edge (the session's connection queue): an answer or an event. A
    /// malformed one is dropped and counted as a bad message of the session.
    func received(_ text: String) {
        do throws(RoomError) {
            let v = try EdgeWire.object(text)
            if let seq = v["reply"]?.intValue {
                let waiting = lock.withLock { pending.removeValue(forKey: seq) }
                if let error = v["error"]?.stringValue {
                    waiting?.finish(.failure(RoomError(5000, String(error.prefix(512)))))
                } else {
                    waiting?.finish(.success(v["result"] ?? .null))
                }
                return
            }
            let event = try EdgeEvent.parse(v)
            guard let session, let room = session.joinedRoom, let participantId = session.participantId else { return }
            switch event {
            case .renegotiate: room.renegotiationNeeded(participantId: participantId)
            case .layer(let producerId, let quality):
                room.enqueue {
                    room.consumerLayerChanged(subscriberId: participantId, producerId: producerId, quality)
                }
            case .refused(let producerId, let codec):
                room.enqueue { room.consumerRefused(subscriberId: participantId, producerId: producerId, codec: codec) }
            }
        } catch {
            session?.noteBadMessage()
        }
    }

    /// The member's connection closed: every waiting call fails at once.
    func close() {
        let waiting: [EdgePending] = lock.withLock {
            closed = true
            defer { pending = [:] }
            return Array(pending.values)
        }
        for p in waiting { p.finish(.failure(RoomError(5000, "the edge node's connection closed"))) }
    }

    /// On this SFU's loop: this side's pipe to edge `node` at `address`, opened and connected when
    /// new; returns its local address (what the edge's pipe sends to).
    static func openPipe(_ sfu: SFU, node: String, address: SocketAddress) throws -> String {
        let id = EdgeWire.originPipeID(edge: node)
        let local = try sfu.openPipeOnLoop(id: id)
        try sfu.connectPipeOnLoop(id: id, remote: address)
        return EdgeWire.text(local)
    }

    /// On this SFU's loop: `producerId` piped to each edge (its pipe opened and connected when
    /// new); per edge node, the description (nil: the producer came from that edge) and this side's
    /// pipe address, or why not.
    static func pipe(_ sfu: SFU, producerId: String, edges: [(node: String, address: SocketAddress)]) -> [String:
        Result<(SFUPipedProducer?, String), RoomError>]
    {
        var out: [String: Result<(SFUPipedProducer?, String), RoomError>] = [:]
        for edge in edges where out[edge.node] == nil {
            let id = EdgeWire.originPipeID(edge: edge.node)
            out[edge.node] = Result { () throws(RoomError) in
                do {
                    let local = try sfu.openPipeOnLoop(id: id)
                    try sfu.connectPipeOnLoop(id: id, remote: edge.address)
                    // A guest's track that came from this very edge is consumed there as it is.
                    if sfu.isPipedProducerOnLoop(pipeID: id, producerID: producerId) {
                        return (nil, EdgeWire.text(local))
                    }
                    let piped = try sfu.pipeProducerOnLoop(pipeID: id, producerID: producerId)
                    return (piped, EdgeWire.text(local))
                } catch {
                    throw RoomError(
                        5000, "pipe to edge \(edge.node): \((error as? SFUError)?.description ?? "\(error)")")
                }
            }
        }
        return out
    }
}

// MARK: - Edge side

/// An edge's end of one member's media plane: runs the origin's calls on this node's SFU and
/// reports the SFU's callbacks for the member back. Created when this node proxies an audience
/// join in edge mode (``SignalProxy``).
// Safe: `key`, `closed` and `reply` are guarded by `lock`; SFU work runs on the SFU's loop.
final class EdgeHost: @unchecked Sendable {
    let roomId: String
    let originNode: String
    let media: RoomMedia
    private weak var registry: EdgeRegistry?
    private let lock = NSLock()
    /// The member's SFU key, bound by the first call (every later call must name it too).
    private var boundKey: String?
    private var closed = false
    private var reply: (@Sendable (String) -> Void)?

    init(roomId: String, originNode: String, media: RoomMedia, registry: EdgeRegistry) {
        self.roomId = roomId
        self.originNode = originNode
        self.media = media
        self.registry = registry
    }

    var pipeID: String { EdgeWire.edgePipeID(origin: originNode) }
    var key: String? { lock.withLock { boundKey } }

    /// Where answers and events go (the proxy's connection to the origin).
    func connect(reply: @escaping @Sendable (String) -> Void) { lock.withLock { self.reply = reply } }

    private func send(_ value: JSONValue) { lock.withLock { reply }?(EdgeWire.encode(value)) }

    /// A call from the origin (the proxy's connection queue). Each runs on the SFU's loop in
    /// arrival order and is answered from there; a bad call is answered with its error.
    func handle(_ text: String) {
        let seq: Int
        let key: String
        let call: EdgeCall
        do throws(RoomError) {
            let v = try EdgeWire.object(text)
            (seq, key, call) = try EdgeCall.parse(v)
            try bind(key)
        } catch {
            let seq = (try? EdgeWire.object(text))?["seq"]?.intValue ?? 0
            return send(["reply": .number(Double(seq)), "error": .string(error.description)])
        }
        if call == .stats {
            // The SFU's statistics are gathered asynchronously (not a loop call); read-only, so their
            // answer may pass calls sent after it.
            let sfu = media.sfu
            Task { [self] in
                let stats = await sfu.stats()
                send(["reply": .number(Double(seq)), "result": Room.statsJSON(stats, key: key)])
            }
            return
        }
        let accepted = media.sfu.loop.execute { [self] in
            let result = Result { () throws(RoomError) -> JSONValue in try run(call, key: key, on: media.sfu) }
            switch result {
            case .success(let value): send(["reply": .number(Double(seq)), "result": value])
            case .failure(let error): send(["reply": .number(Double(seq)), "error": .string(error.description)])
            }
        }
        if !accepted { send(["reply": .number(Double(seq)), "error": "the edge's media server has stopped"]) }
    }

    /// The first call binds the member's key (it must be of this proxy's room); later ones must match.
    private func bind(_ key: String) throws(RoomError) {
        guard let (room, _) = RoomMedia.split(key), room == roomId else {
            throw .invalidParameter("edge call: key '\(key.prefix(64))' is not of room '\(roomId)'")
        }
        let first: Bool? = lock.withLock {
            if closed { return nil }
            if let boundKey { return boundKey == key ? false : nil }
            boundKey = key
            return true
        }
        guard let first else { throw .invalidParameter("edge call: key '\(key.prefix(64))' is not this member's") }
        if first { registry?.bind(self, key: key) }
    }

    /// One call on the SFU's loop.
    private func run(_ call: EdgeCall, key: String, on sfu: SFU) throws(RoomError) -> JSONValue {
        do {
            switch call {
            case .consume(let producerId, let piped, let originPipe, let offering):
                try connectPipe(sfu, originPipe)
                if let piped { try sfu.ensurePipedProducerOnLoop(pipeID: pipeID, piped) }
                let info = try sfu.consumeOnLoop(subscriber: key, producerID: producerId)
                var out: [String: JSONValue] = [
                    "consumerId": .string(info.id), "mid": .string(info.mid),
                    "renegotiationNeeded": .bool(info.renegotiationNeeded),
                ]
                if offering, info.renegotiationNeeded, let offer = try? sfu.subscriberOfferOnLoop(participantID: key) {
                    out["sdp"] = .string(offer.serialize())
                }
                return .object(out)
            case .publish(let sdp, let sources, let originPipe):
                let offer: SessionDescription
                do { offer = try SessionDescription.parse(sdp) } catch {
                    throw RoomError(3073, "sdp is not a valid offer: \(error)", cause: error)
                }
                try connectPipe(sfu, originPipe)
                let (answer, infos) = try sfu.publishOnLoop(participantID: key, offer: offer, sources: sources)
                var producers: [JSONValue] = []
                for info in infos {
                    // Every track goes to the origin at once: the stage is there.
                    let piped = try sfu.pipeProducerOnLoop(pipeID: pipeID, producerID: info.id)
                    producers.append([
                        "producerId": .string(info.id), "kind": .string(info.kind.rawValue), "mid": .string(info.mid),
                        "piped": piped.edgeJSON,
                    ])
                }
                return ["sdp": .string(answer.serialize()), "producers": .array(producers)]
            case .restartPublish(let sdp):
                let offer: SessionDescription
                do { offer = try SessionDescription.parse(sdp) } catch {
                    throw RoomError(3073, "sdp is not a valid offer: \(error)", cause: error)
                }
                return ["sdp": .string(try sfu.restartPublishICEOnLoop(participantID: key, offer: offer).serialize())]
            case .closeProducer(let producerId):
                // Only this member's own producers (never a mirror or another member's).
                if sfu.producerOwnerOnLoop(producerId) == key { sfu.closeProducerOnLoop(producerId) }
                return [:]
            case .closePublishConnection:
                return ["closed": .bool(sfu.closePublishConnectionIfUnusedOnLoop(key))]
            case .stopConsuming(let producerId):
                try? sfu.stopConsumingOnLoop(subscriber: key, producerID: producerId)
                sfu.closeUnusedPipedProducersOnLoop(pipeID: pipeID)
                return [:]
            case .setQuality(let producerId, let quality):
                try sfu.setPreferredLayerOnLoop(subscriber: key, producerID: producerId, quality: quality)
                return [:]
            case .setViewport(let producerId, let width, let height):
                try sfu.setViewportOnLoop(subscriber: key, producerID: producerId, width: width, height: height)
                return [:]
            case .offer:
                guard let offer = try? sfu.subscriberOfferOnLoop(participantID: key) else { return ["sdp": nil] }
                return ["sdp": .string(offer.serialize())]
            case .answer(let sdp):
                let answer: SessionDescription
                do { answer = try SessionDescription.parse(sdp) } catch {
                    throw RoomError(3073, "sdp is not a valid answer: \(error)", cause: error)
                }
                guard try sfu.subscriberAnswerOnLoop(participantID: key, answer: answer),
                    let next = try? sfu.subscriberOfferOnLoop(participantID: key)
                else { return ["next": nil] }
                return ["next": .string(next.serialize())]
            case .restartIce(let connection, let ufrag, let pwd):
                let fresh = try sfu.restartICEOnLoop(
                    participantID: key, connection: connection, remoteUfrag: ufrag, remotePassword: pwd)
                return ["ufrag": .string(fresh.ufrag), "pwd": .string(fresh.password)]
            case .stats:
                return [:]  // answered in handle(_:)
            case .pin(let participantKey, let pinned):
                sfu.setPinnedOnLoop(participantID: participantKey, pinned: pinned)
                registry?.pinned(participantKey, pinned)
                return [:]
            case .close:
                sfu.closeParticipantOnLoop(key)
                sfu.closeUnusedPipedProducersOnLoop(pipeID: pipeID)
                return [:]
            }
        } catch let error as RoomError {
            throw error
        } catch let error as SFUError {
            throw RoomError(5000, "\(call.name): \(error.description)", cause: error)
        } catch {
            throw RoomError(5000, "\(call.name): \(error)", cause: error)
        }
    }

    /// Opens this edge's pipe to the origin (once) and points it at `originPipe`.
    private func connectPipe(_ sfu: SFU, _ originPipe: String) throws {
        guard let origin = EdgeWire.address(originPipe) else { throw RoomError(3073, "bad originPipe") }
        _ = try sfu.openPipeOnLoop(id: pipeID)
        try sfu.connectPipeOnLoop(id: pipeID, remote: origin)
    }

    /// Tells the origin about the member's media plane (from the SFU's callbacks).
    func report(_ event: EdgeEvent) { send(event.json) }

    /// The member's client or the origin went: its subscribe connection closes here, and the
    /// mirrors nobody consumes any more with it.
    func close() {
        let key: String? = lock.withLock {
            guard !closed else { return nil }
            closed = true
            reply = nil
            return boundKey ?? ""
        }
        guard let key else { return }
        // The room's last member here: the pins this edge learnt for it go too.
        let unpin = registry?.remove(self, key: key.isEmpty ? nil : key) ?? []
        guard !key.isEmpty || !unpin.isEmpty else { return }
        let pipeID = self.pipeID
        _ = media.sfu.loop.execute { [media] in
            if !key.isEmpty {
                media.sfu.closeParticipantOnLoop(key)
                media.sfu.closeUnusedPipedProducersOnLoop(pipeID: pipeID)
            }
            for participant in unpin { media.sfu.setPinnedOnLoop(participantID: participant, pinned: false) }
        }
    }
}

/// This node's edge members: by SFU key (the SFU's callbacks find them there) and counted per room
/// (placement and the registration).
// Safe: guarded by `lock`.
final class EdgeRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: EdgeHost] = [:]
    private var audience: [String: Int] = [:]
    /// Pinned participants (`ROOM/PARTICIPANT`) this node's SFU was told of, per room.
    private var pins: [String: Set<String>] = [:]
    /// Edge members ever admitted (for `/metrics`).
    private var admitted = 0
    var total: Int { lock.withLock { admitted } }

    /// Counts a new member of `roomId` if this node serves fewer than `limit` of it; false when full.
    func admit(roomId: String, limit: Int) -> Bool {
        lock.withLock {
            guard audience[roomId, default: 0] < limit else { return false }
            audience[roomId, default: 0] += 1
            admitted += 1
            return true
        }
    }

    /// A member admitted but never served (its proxy could not open).
    func release(roomId: String) {
        lock.withLock {
            audience[roomId, default: 1] -= 1
            if audience[roomId] == 0 { audience[roomId] = nil }
        }
    }

    func bind(_ host: EdgeHost, key: String) { lock.withLock { byKey[key] = host } }

    /// `host` is gone; returns the pins to clear when it was its room's last member here.
    @discardableResult
    func remove(_ host: EdgeHost, key: String?) -> [String] {
        lock.withLock {
            if let key, byKey[key] === host { byKey[key] = nil }
        }
        release(roomId: host.roomId)
        return lock.withLock {
            guard audience[host.roomId] == nil else { return [] }
            return (pins.removeValue(forKey: host.roomId) ?? []).sorted()
        }
    }

    func pinned(_ participantKey: String, _ pinned: Bool) {
        guard let (room, _) = RoomMedia.split(participantKey) else { return }
        lock.withLock {
            if pinned {
                pins[room, default: []].insert(participantKey)
            } else {
                pins[room]?.remove(participantKey)
                if pins[room]?.isEmpty == true { pins[room] = nil }
            }
        }
    }

    func host(key: String) -> EdgeHost? { lock.withLock { byKey[key] } }

    /// Members served per room (rooms with none are absent).
    var audienceByRoom: [String: Int] { lock.withLock { audience } }
}
