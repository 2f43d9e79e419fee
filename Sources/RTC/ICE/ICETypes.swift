import RTCWire

/// The connectivity state of an `ICEAgent` (the subset of `RTCIceConnectionState` we need).
public enum ICEState: Sendable, Hashable, CustomStringConvertible {
    /// Created; no check sent or received yet.
    case new
    /// Checks are running and no pair is selected yet.
    case checking
    /// A pair is selected and consent is fresh.
    case connected
    /// Consent has not been refreshed for `ICETimeouts.disconnectedAfter`; may recover.
    case disconnected
    /// Every pair failed, or consent expired (`ICETimeouts.consentExpiry`). Final until restart.
    case failed
    /// `close()` was called.
    case closed

    public var description: String {
        switch self {
        case .new: "new"
        case .checking: "checking"
        case .connected: "connected"
        case .disconnected: "disconnected"
        case .failed: "failed"
        case .closed: "closed"
        }
    }
}

/// Timers of an `ICEAgent`, in nanoseconds. Tests shorten them.
public struct ICETimeouts: Sendable, Equatable {
    /// Pacing of new connectivity checks (RFC 8445 Ta).
    public var checkInterval: UInt64 = 20_000_000
    /// First retransmission timeout of a check; doubles on each retransmission.
    public var initialRTO: UInt64 = 250_000_000
    /// Largest retransmission timeout.
    public var maxRTO: UInt64 = 3_000_000_000
    /// Transmissions of one check before its pair fails: 12 spans about 28 s with the timeouts
    /// above, as long as a browser keeps checking (30 s) before it calls a connection failed. A
    /// server whose loop is seconds behind (hundreds of members joining at once) still answers in
    /// that time; 7 (13 s) left late joiners of a busy live stream unconnected for good.
    public var maxTransmissions = 12
    /// After the first pair succeeds, how long the controlling agent waits for a better one
    /// before nominating.
    public var nominationDelay: UInt64 = 100_000_000
    /// Mean interval of consent checks (RFC 7675: 5 s, randomized by ±20 %).
    public var consentInterval: UInt64 = 5_000_000_000
    /// Without consent for this long the state becomes `.disconnected`.
    public var disconnectedAfter: UInt64 = 10_000_000_000
    /// Without consent for this long the state becomes `.failed` (RFC 7675: 30 s).
    public var consentExpiry: UInt64 = 30_000_000_000

    /// The defaults above.
    public init() {}
}

/// Counters of an `ICEAgent`, for stats and tests.
public struct ICECounters: Sendable, Equatable {
    /// STUN that did not parse or failed its FINGERPRINT.
    public var droppedMalformed: UInt64 = 0
    /// Requests or responses whose MESSAGE-INTEGRITY did not verify.
    public var droppedBadIntegrity: UInt64 = 0
    /// Requests whose USERNAME does not name our ufrag (or lacks one).
    public var droppedUnknownUsername: UInt64 = 0
    /// Responses that match no outstanding transaction, or arrive from the wrong address.
    public var droppedUnmatchedResponse: UInt64 = 0
    /// Valid binding requests answered with success.
    public var requestsAnswered: UInt64 = 0
    /// Error responses sent (400, 401, 487).
    public var errorResponsesSent: UInt64 = 0
    /// Checks sent, including retransmissions and consent checks.
    public var checksSent: UInt64 = 0
    /// Success responses to our checks.
    public var successResponses: UInt64 = 0
    /// Error responses to our checks and consent checks (400, 401, 487, …).
    public var errorResponses: UInt64 = 0
    /// Role switches caused by role conflicts.
    public var roleSwitches: UInt64 = 0

    public init() {}
}

/// A candidate pair of the checklist.
final class ICECandidatePair {
    enum State { case waiting, inProgress, succeeded, failed }

    let socket: UDPSocket
    let remote: SocketAddress
    let localPriority: UInt32
    var remotePriority: UInt32
    var state = State.waiting
    /// The peer sent USE-CANDIDATE on this pair (we are controlled or lite).
    var nominatedByPeer = false
    /// Our USE-CANDIDATE check on it succeeded (we are controlling).
    var nominated = false
    /// The next check on this pair carries USE-CANDIDATE.
    var nominateOnNextCheck = false
    /// A valid request arrived on it (used by the lite agent and `isValidRemote`).
    var lastValidRequest: UInt64 = 0
    var triggered = false

    init(socket: UDPSocket, remote: SocketAddress, localPriority: UInt32, remotePriority: UInt32) {
        self.socket = socket
        self.remote = remote
        self.localPriority = localPriority
        self.remotePriority = remotePriority
    }

    /// RFC 8445 §6.1.2.3: G is the controlling agent's candidate priority, D the controlled one's.
    func priority(controlling: Bool) -> UInt64 {
        let g = UInt64(controlling ? localPriority : remotePriority)
        let d = UInt64(controlling ? remotePriority : localPriority)
        return (min(g, d) << 32) + 2 * max(g, d) + (g > d ? 1 : 0)
    }
}

/// One outstanding STUN client transaction.
struct ICETransaction {
    enum Kind { case check, consent }
    let pair: ICECandidatePair
    let kind: Kind
    let request: [UInt8]
    let useCandidate: Bool
    /// Whether the request carried ICE-CONTROLLING (for 487 handling).
    let sentControlling: Bool
    /// The key the response must be signed with (the remote password).
    let key: [UInt8]
    var transmissions = 1
    var rto: UInt64
    var nextRetransmit: UInt64
    let sentAt: UInt64
}
