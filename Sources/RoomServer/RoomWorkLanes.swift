import Foundation
import RoomProtocol
import Signaling

/// The order in which a room's queue runs its members' requests and its subscribe renegotiations.
///
/// A live-stream invite adds a track to every member at once: every member then gets a
/// `subscriberOffer` and answers it, and every member's client reacts to the mode change with its own
/// requests. Run first-come first-served, the invited guest's `changeMode` and `produce` waited behind
/// all of that. Three lanes instead, each first-in first-out:
/// - **stage**: what puts someone on stage or takes them off (``isStageMethod(_:)``);
/// - **requests**: every other request;
/// - **renegotiations**: members whose subscribe connection needs a new offer (one entry per member,
///   however many consumers changed; taken in batches when nothing else waits). A renegotiation the
///   member's own request caused (its `consume`, its join) is *expedited*: it runs right after the
///   stage requests, like the rest of that request's answer; the bulk of a fan-out waits. One asked
///   for before the request started (a stage change's fan-out) stays in the bulk even when the member
///   sends a request meanwhile: expedited one by one after each member's next request, an invite's
///   fan-out went one SFU hop (one edge round trip) per member instead of one per batch.
///
/// A stage request of a participant that still has requests waiting in the requests lane takes them
/// along: they move to the stage lane, in order, ahead of it (an invited guest's `produce` must not
/// wait behind the room's whole burst because its own `subscriberAnswer` is somewhere in it), so each
/// participant's requests keep their order. Every submission enqueues one job on the room's queue,
/// and each job runs the most urgent waiting work, so the queue never runs dry while work waits. So
/// that renegotiations cannot starve under a steady stream of requests, one of them runs after every
/// ``renegotiationEvery`` requests.
///
/// Requests whose work on the SFU can share one call (``sharesSFUCalls(_:)``) are handed out together
/// when several members' such requests wait in a row at the head of the requests lane, whatever their
/// methods (at most ``sharedCallBatch``, one per member, so that each member's requests keep their
/// order): an invite's burst interleaves every member's `consume`, `subscriberAnswer` and
/// `setViewPort`, and an edge member's share of the call is a round trip to its edge, which the batch
/// makes together rather than one after another.
// Safe: the lanes are guarded by `lock`.
final class RoomWorkLanes: @unchecked Sendable {
    /// What a job of the room's queue should run next.
    enum Work {
        case request(@Sendable () -> Void)
        /// Requests of different members whose SFU work shares one call.
        case sharingSFUCall([SharedRequest])
        case renegotiations([String])
        case nothing
    }

    /// A request that may share its SFU call with others (see ``sharesSFUCalls(_:)``).
    struct SharedRequest: Sendable {
        let session: any ParticipantSignaling
        let id: JSONValue
        let method: RoomMethod
        let data: JSONValue
    }

    private struct Waiting {
        let session: ObjectIdentifier
        let work: @Sendable () -> Void
        let shared: SharedRequest?
    }

    /// Renegotiations handed to one job when nothing else waits (one SFU hop makes all their offers).
    let renegotiationBatch: Int
    /// A renegotiation runs at least once every this many requests.
    let renegotiationEvery: Int
    /// Requests handed out together to share one SFU call, at most.
    let sharedCallBatch: Int

    private let lock = NSLock()
    private var stage = FIFO<@Sendable () -> Void>()
    private var requests = FIFO<Waiting>()
    /// Requests of each session now in `requests` (absent: none).
    private var waitingRequests: [ObjectIdentifier: Int] = [:]
    private var renegotiations = FIFO<String>()
    /// Members with a renegotiation waiting (in `renegotiations`, and maybe in `expedited` too).
    private var renegotiationSet: Set<String> = []
    private var expedited = FIFO<String>()
    private var expeditedSet: Set<String> = []
    /// Renegotiations asked for so far, and the count when each waiting one was last asked for.
    private var asked: UInt64 = 0
    private var askedAt: [String: UInt64] = [:]
    private var requestsSinceRenegotiation = 0

    /// Requests waiting in the stage and requests lanes (tests wait on it to order requests).
    var waitingRequestCount: Int { lock.withLock { stage.count + requests.count } }

    init(renegotiationBatch: Int = 16, renegotiationEvery: Int = 32, sharedCallBatch: Int = 16) {
        self.renegotiationBatch = max(1, renegotiationBatch)
        self.renegotiationEvery = max(1, renegotiationEvery)
        self.sharedCallBatch = max(1, sharedCallBatch)
    }

    /// Methods whose work on the SFU several members' requests can do in one call: what every member of
    /// a live stream sends at once when a track joins the stage.
    static func sharesSFUCalls(_ method: RoomMethod) -> Bool {
        method == .consume || method == .subscriberAnswer || method == .setViewPort
    }

    /// Methods that change who is on stage: a stage invite (`publish` of the invite message,
    /// `changeMode`, then `produce`) must take effect without waiting for the room's bulk work.
    static func isStageMethod(_ method: RoomMethod) -> Bool {
        switch method {
        case .changeMode, .produce, .closeProducer, .setMediaStatus, .publish: return true
        default: return false
        }
    }

    /// Queues a request of `session`; the caller enqueues one job that calls ``next()``. `shared`: the
    /// same request, for a method that ``sharesSFUCalls(_:)`` (`work` runs it alone).
    func submit(
        session: ObjectIdentifier, method: RoomMethod, shared: SharedRequest? = nil,
        _ work: @escaping @Sendable () -> Void
    ) {
        lock.lock()
        defer { lock.unlock() }
        if Self.isStageMethod(method) {
            if waitingRequests.removeValue(forKey: session) != nil {
                for earlier in requests.removeAll(where: { $0.session == session }) { stage.append(earlier.work) }
            }
            stage.append(work)
        } else {
            requests.append(Waiting(session: session, work: work, shared: shared))
            waitingRequests[session, default: 0] += 1
        }
    }

    /// One request of `session` left the requests lane. Under `lock`.
    private func countOut(_ session: ObjectIdentifier) {
        requestsSinceRenegotiation += 1
        if let n = waitingRequests[session], n > 1 {
            waitingRequests[session] = n - 1
        } else {
            waitingRequests[session] = nil
        }
    }

    /// Queues a renegotiation of `participantId`; returns false when one is already waiting (the
    /// caller then enqueues no job: the waiting one makes an offer of everything changed by then).
    func submitRenegotiation(_ participantId: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        asked += 1
        askedAt[participantId] = asked
        guard renegotiationSet.insert(participantId).inserted else { return false }
        renegotiations.append(participantId)
        return true
    }

    /// Drops the waiting renegotiation of `participantId` (if any): an offer made meanwhile covers it.
    /// Its job still runs and finds other work or none.
    func cancelRenegotiation(_ participantId: String) {
        lock.lock()
        defer { lock.unlock() }
        // The FIFO entries go lazily, as in next().
        if renegotiationSet.remove(participantId) != nil {
            expeditedSet.remove(participantId)
            askedAt[participantId] = nil
        }
    }

    /// Marks the start of a request: ``expediteRenegotiation(_:askedSince:)`` with it expedites only
    /// what was asked for after it.
    var mark: UInt64 { lock.withLock { asked } }

    /// Moves the waiting renegotiation of `participantId` (if any, and asked for after `mark`, from
    /// ``mark`` when its request started) ahead of the requests: its own request caused it. No job is
    /// enqueued: the one of its ``submitRenegotiation(_:)`` runs it.
    func expediteRenegotiation(_ participantId: String, askedSince mark: UInt64 = 0) {
        lock.lock()
        defer { lock.unlock() }
        guard renegotiationSet.contains(participantId), let at = askedAt[participantId], at > mark,
            expeditedSet.insert(participantId).inserted
        else { return }
        expedited.append(participantId)
    }

    /// The most urgent waiting work, taken out of its lane.
    func next() -> Work {
        lock.lock()
        defer { lock.unlock() }
        if let work = stage.popFirst() { return .request(work) }
        // Entries are removed lazily: an id run from one FIFO stays in the other and is skipped there
        // (unless asked for again meanwhile, when running it at the earlier place is just as right).
        while let id = expedited.popFirst() {
            guard expeditedSet.remove(id) != nil else { continue }
            renegotiationSet.remove(id)
            askedAt[id] = nil
            return .renegotiations([id])
        }
        let renegotiationDue = requestsSinceRenegotiation >= renegotiationEvery && !renegotiationSet.isEmpty
        if !renegotiationDue, let first = requests.popFirst() {
            countOut(first.session)
            guard let shared = first.shared, sharedCallBatch > 1, let second = requests.first,
                second.shared != nil, second.session != first.session
            else { return .request(first.work) }
            // Several members' shareable requests in a row: one SFU call for them all.
            var batch = [shared]
            var members: Set<ObjectIdentifier> = [first.session]
            while batch.count < sharedCallBatch, let next = requests.first, let request = next.shared,
                members.insert(next.session).inserted
            {
                _ = requests.popFirst()
                countOut(next.session)
                batch.append(request)
            }
            return .sharingSFUCall(batch)
        }
        requestsSinceRenegotiation = 0
        // Only a batch when the other lanes are empty: a due renegotiation lets requests go on after one.
        let count = requests.isEmpty ? renegotiationBatch : 1
        var batch: [String] = []
        while batch.count < count, let id = renegotiations.popFirst() {
            guard renegotiationSet.remove(id) != nil else { continue }
            expeditedSet.remove(id)
            askedAt[id] = nil
            batch.append(id)
        }
        return batch.isEmpty ? .nothing : .renegotiations(batch)
    }

    /// Whether any lane holds work (tests).
    var isEmpty: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stage.isEmpty && requests.isEmpty && renegotiationSet.isEmpty
    }
}

/// A first-in first-out queue that pops in O(1) and reuses its storage.
struct FIFO<Element> {
    private var items: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ item: Element) { items.append(item) }

    /// The item ``popFirst()`` would take.
    var first: Element? { head < items.count ? items[head] : nil }

    /// Takes out the waiting items that match, in order; the others keep theirs.
    mutating func removeAll(where match: (Element) -> Bool) -> [Element] {
        var taken: [Element] = []
        var kept: [Element?] = []
        kept.reserveCapacity(count)
        for case let item? in items[head...] {
            if match(item) { taken.append(item) } else { kept.append(item) }
        }
        guard !taken.isEmpty else { return [] }
        items = kept
        head = 0
        return taken
    }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let item = items[head]
        items[head] = nil
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}
