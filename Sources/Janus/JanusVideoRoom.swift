import Signaling

/// The VideoRoom plugin's requests that the Janus agent and the Janus load bots both make, with the
/// reply checks they share. SDPs travel as text (this module knows no SDP types); we never trickle,
/// so every offer or answer we send is followed by end-of-candidates.
extension JanusSession {
    /// `join` as a publisher named `display` in `room`; returns our feed id and the reply (its
    /// `publishers`: who publishes already).
    public func joinAsPublisher(
        _ handle: UInt64, room: UInt64, display: String
    ) async throws(JanusError) -> (feed: UInt64, reply: JanusMessage) {
        let reply = try await request(
            handle,
            body: [
                "request": "join", "ptype": "publisher", "room": .number(Double(room)), "display": .string(display),
            ])
        guard reply.data["videoroom"]?.stringValue == "joined", let feed = reply.data["id"]?.intValue else {
            throw .refused(code: 0, reason: "unexpected join reply \(reply.json)")
        }
        return (UInt64(feed), reply)
    }

    /// `publish` with our SDP `offer` (and `display`, when given); returns Janus's SDP answer.
    public func publish(_ handle: UInt64, offer: String, display: String? = nil) async throws(JanusError) -> String {
        var body: [String: JSONValue] = ["request": "publish"]
        if let display { body["display"] = .string(display) }
        let reply = try await request(handle, body: .object(body), jsep: ("offer", offer))
        try await endOfCandidates(handle)
        guard let jsep = reply.jsep, jsep.type == "answer" else {
            throw .refused(code: 0, reason: "publish answered without an SDP answer: \(reply.json)")
        }
        return jsep.sdp
    }

    /// `join` as a subscriber of `streams` in `room` (each `["feed": id]`, plus `"mid"` for one
    /// stream of that feed); returns Janus's SDP offer and the reply (its `streams`: the offer's
    /// m-lines, in order).
    public func joinAsSubscriber(
        _ handle: UInt64, room: UInt64, streams: [JSONValue]
    ) async throws(JanusError) -> (offer: String, reply: JanusMessage) {
        let reply = try await request(
            handle,
            body: [
                "request": "join", "ptype": "subscriber", "room": .number(Double(room)), "streams": .array(streams),
            ])
        guard let jsep = reply.jsep, jsep.type == "offer" else {
            throw .refused(code: 0, reason: "subscriber join without an offer: \(reply.json)")
        }
        return (jsep.sdp, reply)
    }

    /// `start` with our SDP `answer` to a subscription.
    public func start(_ handle: UInt64, answer: String) async throws(JanusError) {
        _ = try await request(handle, body: ["request": "start"], jsep: ("answer", answer))
        try await endOfCandidates(handle)
    }
}
