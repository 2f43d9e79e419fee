import Dispatch
import Foundation
import RoomProtocol
import Signaling

/// How a room tells everyone about joins, leaves and mode changes without N² work.
///
/// Every participant must learn of every join, leave and mode change, so a live-stream ramp of N
/// joins is N² deliveries whatever we do. What we can avoid is N² *encodings* and N² *frames*:
/// - each event is encoded to JSON once (a participant's description is cached in
///   ``ParticipantState/jsonText``), and one framed copy is shared by every recipient;
/// - protocol-1 clients get each event at once as its own notification (the original protocol);
/// - protocol-2 clients get the events of a short window coalesced into one `participantEvents`
///   notification, the same bytes for every recipient that was in the room when the window opened.
///
/// Loop confinement: the room's serial queue only.
// Safe: confined to the room's serial queue (see above).
final class ParticipantEventFanout: @unchecked Sendable {
    /// One event, already encoded as `{"method": …, "data": …}`.
    private struct Event {
        let sequence: UInt64
        let text: String
    }

    /// The largest roster page sent to a protocol-2 joiner (bounded messages, whatever the room size).
    static let rosterPageSize = 200

    private let windowNanos: UInt64
    private let queue: DispatchQueue
    private var pending: [Event] = []
    private var flushScheduled = false
    /// When the last batch went out (uptime ns; 0: never).
    private var lastFlushNanos: UInt64 = 0
    /// Sequence number of the last event posted (0: none yet).
    private(set) var lastSequence: UInt64 = 0
    /// Called on the room queue when the window has passed and ``flush(to:)`` should run.
    var onWindowElapsed: (() -> Void)?

    init(windowMilliseconds: Int, queue: DispatchQueue) {
        windowNanos = UInt64(max(0, windowMilliseconds)) * 1_000_000
        self.queue = queue
    }

    /// Posts one participant event to `recipients` (except `except`): protocol-1 recipients get it
    /// now, protocol-2 recipients with the next batch. Returns true when that batch should go out
    /// now (the caller then calls ``flush(to:)``): nothing went out for a whole window, so a lone
    /// event is not delayed; events in quick succession wait for the end of the window.
    @discardableResult
    func post(method: String, dataText: String, except: String? = nil, recipients: [ParticipantState]) -> Bool {
        let text = Self.envelope(method: method, dataText: dataText)
        lastSequence += 1
        var immediate: PreparedTextMessage?
        var batched = false
        for r in recipients where r.id != except {
            if r.protocolVersion >= 2 {
                batched = true
            } else {
                if immediate == nil { immediate = PreparedTextMessage(text) }
                r.session.send(immediate!)
            }
        }
        guard batched else { return false }
        pending.append(Event(sequence: lastSequence, text: text))
        guard !flushScheduled else { return false }
        let now = DispatchTime.now().uptimeNanoseconds
        let sinceLast = now &- lastFlushNanos
        if lastFlushNanos == 0 || sinceLast >= windowNanos { return true }
        flushScheduled = true
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(windowNanos - sinceLast))) { [weak self] in
            self?.onWindowElapsed?()
        }
        return false
    }

    /// Sends the pending events to every protocol-2 recipient: each gets the events posted after it
    /// joined (``ParticipantState/eventMark``). Recipients present before the window share one message.
    func flush(to recipients: [ParticipantState]) {
        flushScheduled = false
        lastFlushNanos = DispatchTime.now().uptimeNanoseconds
        guard let first = pending.first?.sequence else { return }
        let events = pending
        pending.removeAll(keepingCapacity: true)
        var shared: PreparedTextMessage?
        for r in recipients where r.protocolVersion >= 2 {
            if r.eventMark < first {
                if shared == nil { shared = PreparedTextMessage(Self.batch(events.lazy.map(\.text))) }
                r.session.send(shared!)
            } else {
                // Joined during the window: only what happened after its join (its roster covers the rest).
                let newer = events.lazy.filter { $0.sequence > r.eventMark }.map(\.text)
                if !newer.isEmpty { r.session.send(PreparedTextMessage(Self.batch(newer))) }
            }
        }
    }

    /// Sends a departing protocol-2 participant the pending events it has not had, without ending the
    /// window for the others: it learns of everything that happened while it was in the room.
    func deliverPending(to leaving: ParticipantState) {
        guard leaving.protocolVersion >= 2 else { return }
        let newer = pending.lazy.filter { $0.sequence > leaving.eventMark }.map(\.text)
        if !newer.isEmpty { leaving.session.send(PreparedTextMessage(Self.batch(newer))) }
    }

    /// True while events wait for the end of their window.
    var hasPending: Bool { !pending.isEmpty }

    // MARK: Joining

    /// The roster for a joiner, before its join response: protocol 2 gets pages of
    /// `participantEvents` (at most ``rosterPageSize`` each), protocol 1 one `participantJoined` each.
    static func roster(of existing: [ParticipantState], protocolVersion: Int) -> [PreparedTextMessage] {
        if protocolVersion < 2 {
            return existing.map {
                PreparedTextMessage(
                    envelope(method: RoomNotification.participantJoined.rawValue, dataText: $0.jsonText))
            }
        }
        var pages: [PreparedTextMessage] = []
        var start = 0
        while start < existing.count {
            let end = min(existing.count, start + rosterPageSize)
            let events = existing[start..<end].lazy.map {
                envelope(method: RoomNotification.participantJoined.rawValue, dataText: $0.jsonText)
            }
            pages.append(PreparedTextMessage(batch(events)))
            start = end
        }
        return pages
    }

    /// The join response: `fields`, plus (protocol 1 only) the full `participants` list spliced in from
    /// the cached descriptions instead of being re-encoded.
    static func joinResponse(id: JSONValue, fields: [String: JSONValue], participants: [ParticipantState]?)
        -> PreparedTextMessage
    {
        guard let participants else {
            return PreparedTextMessage(SignalEnvelope.response(id: id, result: .success(.object(fields))).text)
        }
        var text = "{\"id\":" + id.jsonString + ",\"ok\":true,\"data\":{\"participants\":["
        text.reserveCapacity(participants.count * 200 + 512)
        for (i, p) in participants.enumerated() {
            if i > 0 { text += "," }
            text += p.jsonText
        }
        text += "]"
        let rest = JSONValue.object(fields).jsonString  // "{…}"
        if rest.count > 2 { text += "," + rest.dropFirst() } else { text += "}" }
        text += "}"
        return PreparedTextMessage(text)
    }

    // MARK: Encoding

    static func envelope(method: String, dataText: String) -> String {
        "{\"method\":" + JSONValue.string(method).jsonString + ",\"data\":" + dataText + "}"
    }

    /// `{"method":"participantEvents","data":{"events":[…]}}` around already-encoded events.
    static func batch(_ events: some Sequence<String>) -> String {
        var text = "{\"method\":\"participantEvents\",\"data\":{\"events\":["
        var first = true
        for e in events {
            if !first { text += "," }
            first = false
            text += e
        }
        return text + "]}}"
    }
}
