import RTCWire

/// An ICE agent (RFC 8445) with consent freshness (RFC 7675), for one component over UDP host
/// candidates.
///
/// Full agents (controlling or controlled) run a paced checklist with retransmissions and regular
/// nomination; a lite agent (the SFU) only answers checks and selects the pair the peer nominates.
/// The agent is confined to its sockets' `EventLoop` thread: call every method there, and feed it
/// STUN datagrams with `handleSTUN` and time with `tick(now:)`.
// Safe: confined to its sockets' loop thread (see above); Sendable only to be handed to it.
public final class ICEAgent: @unchecked Sendable, EventLoopTicker {
    /// The agent's role.
    public enum Role: Sendable, Hashable {
        case controlling, controlled, lite
    }

    /// The current role; a full agent may switch between controlling and controlled on a role
    /// conflict (RFC 8445 §7.3.1.1).
    public private(set) var role: Role
    /// Our ufrag and password, as advertised in our description.
    public private(set) var localUfrag: String
    public private(set) var localPassword: String
    /// The peer's ufrag and password, from its description.
    public private(set) var remoteUfrag: String?
    public private(set) var remotePassword: String?
    /// Our tie-breaker for role conflicts.
    public let tieBreaker: UInt64
    /// Timers; set before checks start (tests shorten them).
    public var timeouts = ICETimeouts()
    /// Drop and traffic counters.
    public private(set) var counters = ICECounters()
    /// The latest round-trip time of a connectivity or consent check, in nanoseconds (0 until known):
    /// the time between this end and the peer, measured about once per consent interval.
    public private(set) var roundTripTime: UInt64 = 0

    /// The peer said `a=ice-lite`. A lite peer checks nothing itself and selects the pair the
    /// controlling agent nominates, so a controlling agent nominates its best pair in the first check
    /// (one round trip before DTLS can start instead of two; RFC 8445 §7.3.1.5 has every agent accept
    /// a nomination in any check).
    public var peerIsLite = false

    /// The connectivity state.
    public private(set) var state: ICEState = .new
    /// Called on the loop thread when `state` changes.
    public var onStateChange: ((ICEState) -> Void)?
    /// Called on the loop thread when a pair is selected (again after an ICE restart or a
    /// re-nomination).
    public var onSelectedPair: ((UDPSocket, SocketAddress) -> Void)?
    /// The pair media should use.
    public var selectedPair: (socket: UDPSocket, remote: SocketAddress)? {
        selected.map { ($0.socket, $0.remote) } ?? pendingReselect
    }

    /// Our host candidates, one per local socket.
    public private(set) var localCandidates: [ICECandidate] = []
    /// Remote candidates accepted so far (signalled, plus peer-reflexive ones learnt from checks).
    public private(set) var remoteCandidates: [ICECandidate] = []

    private var localSockets: [(socket: UDPSocket, priority: UInt32)] = []
    /// ICE-TCP sockets and the one peer each is connected to.
    private var tcpRemotes: [ObjectIdentifier: SocketAddress] = [:]
    /// The signalled priority of each ICE-TCP socket's peer, to pair it again after a restart.
    private var tcpRemotePriorities: [ObjectIdentifier: UInt32] = [:]
    private var remoteAddresses: [(address: SocketAddress, priority: UInt32)] = []
    private var pairs: [ICECandidatePair] = []
    private var transactions: [STUNTransactionID: ICETransaction] = [:]
    private var selected: ICECandidatePair?
    private var validRemotes: Set<SocketAddress> = []
    private var lastCheckSent: UInt64 = 0
    private var firstSuccessAt: UInt64?
    private var nominating: ICECandidatePair?
    private var lastConsent: UInt64 = 0
    private var nextConsentCheck: UInt64 = 0
    private var lastNow: UInt64 = 0
    private var random = SystemRandomNumberGenerator()
    /// The owning transport's timer deadline: woken by whatever can make a check or a timer due
    /// sooner than ``nextTimer(now:)`` said (new pairs, credentials, STUN input, a restart).
    var tickDeadline: TickDeadline?

    /// Creates an agent. `tieBreaker` defaults to a random value.
    public init(
        role: Role, localUfrag: String, localPassword: String,
        tieBreaker: UInt64 = UInt64.random(in: 0...UInt64.max)
    ) {
        self.role = role
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        self.tieBreaker = tieBreaker
    }

    /// Random ICE credentials: a 8-character ufrag and a 24-character password from the ice-char
    /// set (RFC 8839 requires at least 4 and 22).
    public static func randomCredentials() -> (ufrag: String, password: String) {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        var generator = SystemRandomNumberGenerator()
        func make(_ count: Int) -> String {
            String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
        }
        return (make(8), make(24))
    }

    private var isControlling: Bool { role == .controlling }
    private var isLite: Bool { role == .lite }

    // MARK: Candidates

    /// Adds a host candidate for `socket` (component 1, RFC 8445 §5.1.2 priority), or a relayed
    /// candidate when `socket` is a TURN relayed socket (`relatedAddress` is then the address the
    /// TURN server saw, or the local base).
    public func addLocalSocket(_ socket: UDPSocket, relatedAddress: SocketAddress? = nil) {
        guard !localSockets.contains(where: { $0.socket === socket }) else { return }
        // Earlier sockets are preferred; local preference stays within 16 bits.
        let localPreference = UInt32(max(0, 65535 - localSockets.count))
        let isRelay = socket.relay != nil
        // RFC 8445 §5.1.2.2: host 126, relayed 0.
        let priority = Self.priority(typePreference: isRelay ? 0 : 126, localPreference: localPreference)
        localSockets.append((socket, priority))
        let address = socket.localAddress
        localCandidates.append(
            ICECandidate(
                foundation: Self.foundation(for: (isRelay ? "relay" : "") + address.ip), component: 1,
                transport: "udp", priority: priority, address: address.ip, port: address.port,
                type: isRelay ? "relay" : "host", relatedAddress: isRelay ? (relatedAddress?.ip ?? "0.0.0.0") : nil,
                relatedPort: isRelay ? (relatedAddress?.port ?? 0) : nil))
        for remote in remoteAddresses {
            addPair(socket: socket, localPriority: priority, remote: remote.address, remotePriority: remote.priority)
        }
    }

    /// RFC 6544 §4.2 local preference of a TCP candidate: direction (active 6, passive 4) over
    /// 2^13, so UDP host candidates (local preference 65535) stay preferred.
    static func tcpPriority(passive: Bool) -> UInt32 {
        priority(typePreference: 126, localPreference: (passive ? 4 : 6) << 13 | 0x1FFF)
    }

    /// Advertises a passive ICE-TCP host candidate at `address` (RFC 6544); its connections join
    /// later through ``addICETCPSocket(_:remote:remotePriority:)``.
    public func addPassiveTCPCandidate(_ address: SocketAddress) {
        localCandidates.append(
            ICECandidate(
                foundation: Self.foundation(for: "tcp" + address.ip), component: 1, transport: "tcp",
                priority: Self.tcpPriority(passive: true), address: address.ip, port: address.port, type: "host",
                extensions: [.init(key: "tcptype", value: "passive")]))
    }

    /// Adds an ICE-TCP connection's socket, paired only with the peer at its other end: an
    /// accepted one on a server (its checks then arrive on it), or an active one the client
    /// opened to a passive candidate (which it then checks). It is not advertised.
    public func addICETCPSocket(_ socket: UDPSocket, remote: SocketAddress, remotePriority: UInt32) {
        guard !localSockets.contains(where: { $0.socket === socket }) else { return }
        let priority = Self.tcpPriority(passive: isLite)
        localSockets.append((socket, priority))
        tcpRemotes[ObjectIdentifier(socket)] = remote
        tcpRemotePriorities[ObjectIdentifier(socket)] = remotePriority
        if !isLite {
            addPair(socket: socket, localPriority: priority, remote: remote, remotePriority: remotePriority)
        }
    }

    /// RFC 8445 §5.1.2.1 priority for component 1.
    static func priority(typePreference: UInt32, localPreference: UInt32) -> UInt32 {
        (typePreference << 24) | ((localPreference & 0xFFFF) << 8) | (256 - 1)
    }

    /// Same base IP and type give the same foundation.
    static func foundation(for ip: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in ip.utf8 {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        return String(hash % 1_000_000_000)
    }

    /// Sets the peer's credentials (from its description). Checks start once they are known.
    public func setRemoteCredentials(ufrag: String, password: String) {
        remoteUfrag = ufrag
        remotePassword = password
        tickDeadline?.wake()
    }

    /// Adds a signalled remote candidate. Non-UDP candidates, other components and host names
    /// (such as mDNS `.local` names) are ignored.
    public func addRemoteCandidate(_ candidate: ICECandidate) {
        guard state != .closed, candidate.transport.lowercased() == "udp", candidate.component == 1,
            let address = SocketAddress(ip: candidate.address, port: candidate.port)
        else { return }
        // Every renegotiation hands over the whole remote description's candidates again: a
        // candidate already known is not stored twice (a live stream's subscribers renegotiate at
        // each stage invite, and the list grew by a candidate each time).
        if !remoteCandidates.contains(candidate) { remoteCandidates.append(candidate) }
        addRemoteAddress(address, priority: candidate.priority)
    }

    private func addRemoteAddress(_ address: SocketAddress, priority: UInt32) {
        if let index = remoteAddresses.firstIndex(where: { $0.address == address }) {
            remoteAddresses[index].priority = max(remoteAddresses[index].priority, priority)
            return
        }
        remoteAddresses.append((address, priority))
        for local in localSockets {
            addPair(socket: local.socket, localPriority: local.priority, remote: address, remotePriority: priority)
        }
    }

    @discardableResult
    private func addPair(socket: UDPSocket, localPriority: UInt32, remote: SocketAddress, remotePriority: UInt32)
        -> ICECandidatePair?
    {
        // Only same-family pairs can work; an ICE-TCP socket reaches only its own peer.
        guard socket.localAddress.isIPv6 == remote.isIPv6 else { return nil }
        if let only = tcpRemotes[ObjectIdentifier(socket)], only != remote { return nil }
        if let existing = pair(socket: socket, remote: remote) { return existing }
        let pair = ICECandidatePair(
            socket: socket, remote: remote, localPriority: localPriority, remotePriority: remotePriority)
        pairs.append(pair)
        tickDeadline?.wake()
        return pair
    }

    private func pair(socket: UDPSocket, remote: SocketAddress) -> ICECandidatePair? {
        pairs.first { $0.socket === socket && $0.remote == remote }
    }

    /// True if `address` completed a check with us or sent us an authenticated request: the
    /// caller may accept DTLS and media from it.
    public func isValidRemote(_ address: SocketAddress) -> Bool {
        selected?.remote == address || validRemotes.contains(address)
    }

    /// True if `address` is the remote end of one of our candidate pairs, checked or not yet: what
    /// comes from it may be kept until a check validates it (``isValidRemote(_:)``), never used before.
    public func isPairedRemote(_ address: SocketAddress) -> Bool {
        pairs.contains { $0.remote == address }
    }

    // MARK: Receive

    /// Handles a STUN datagram that arrived on `socket` from `from`. Returns false if the bytes are
    /// not STUN (the caller should demultiplex them elsewhere); true if consumed, even if dropped.
    public func handleSTUN(_ bytes: UnsafeRawBufferPointer, from: SocketAddress, socket: UDPSocket) -> Bool {
        guard STUNMessage.looksLikeSTUN(bytes) else { return false }
        guard state != .closed else { return true }
        var message: STUNMessage
        do {
            message = try STUNMessage.parse(bytes)
        } catch {
            counters.droppedMalformed &+= 1
            return true
        }
        message.attributes = Self.integrityCovered(message.attributes)
        if message.hasFingerprint && !STUNMessage.verifyFingerprint(bytes) {
            counters.droppedMalformed &+= 1
            return true
        }
        guard message.method == .binding else { return true }
        let now = EventLoop.now()
        tickDeadline?.wake()  // a response or a request can select, nominate or trigger a check
        switch message.messageClass {
        case .request:
            handleRequest(message, bytes: bytes, from: from, socket: socket, now: now)
        case .successResponse, .errorResponse:
            handleResponse(message, bytes: bytes, from: from, socket: socket, now: now)
        case .indication:
            break  // keepalives need no answer
        }
        return true
    }

    /// The attributes MESSAGE-INTEGRITY covers: those after it are ignored, except FINGERPRINT
    /// (RFC 8489 §14.5), so an on-path attacker cannot append USE-CANDIDATE or a role attribute.
    static func integrityCovered(_ attributes: [STUNAttribute]) -> [STUNAttribute] {
        guard
            let index = attributes.firstIndex(where: {
                if case .messageIntegrity = $0 { return true } else { return false }
            })
        else { return attributes }
        return Array(attributes[...index])
            + attributes[(index + 1)...].filter { if case .fingerprint = $0 { return true } else { return false } }
    }

    private func handleRequest(
        _ request: STUNMessage, bytes: UnsafeRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64
    ) {
        guard let username = request.username, request.hasMessageIntegrity else {
            counters.droppedUnknownUsername &+= 1
            sendError(400, "Bad Request", to: request, from: from, socket: socket)
            return
        }
        // USERNAME is "ourUfrag:theirUfrag" from our point of view.
        let expectedPrefix = localUfrag + ":"
        let usernameMatches =
            username.hasPrefix(expectedPrefix)
            && (remoteUfrag.map { username == expectedPrefix + $0 } ?? true)
        guard usernameMatches else {
            counters.droppedUnknownUsername &+= 1
            sendError(401, "Unauthenticated", to: request, from: from, socket: socket)
            return
        }
        guard STUNMessage.verifyIntegrity(bytes, key: Array(localPassword.utf8)) else {
            counters.droppedBadIntegrity &+= 1
            sendError(401, "Unauthenticated", to: request, from: from, socket: socket)
            return
        }

        // Role conflict, RFC 8445 §7.3.1.1.
        // A lite agent counts as controlled and never switches: the full peer must control.
        if isControlling, let theirs = request.iceControlling {
            if tieBreaker >= theirs {
                sendError(487, "Role Conflict", to: request, from: from, socket: socket, signed: true)
                return
            }
            switchRole(to: .controlled)
        } else if !isControlling, let theirs = request.iceControlled {
            if isLite || tieBreaker < theirs {
                sendError(487, "Role Conflict", to: request, from: from, socket: socket, signed: true)
                return
            }
            switchRole(to: .controlling)
        }

        // Answer.
        var attributes: [STUNAttribute] = []
        if let mapped = from.stunAddress { attributes.append(.xorMappedAddress(mapped)) }
        let response = STUNMessage(
            method: .binding, messageClass: .successResponse, transactionID: request.transactionID,
            attributes: attributes)
        socket.send(response.serialize(integrityKey: Array(localPassword.utf8), fingerprint: true), to: from)
        counters.requestsAnswered &+= 1
        validRemotes.insert(from)

        // Learn a peer-reflexive remote candidate, then find the pair.
        guard let local = localSockets.first(where: { $0.socket === socket }) else { return }
        let remotePriority = request.priority ?? Self.priority(typePreference: 110, localPreference: 65535)
        if !remoteAddresses.contains(where: { $0.address == from }) {
            remoteCandidates.append(
                ICECandidate(
                    foundation: Self.foundation(for: "prflx" + from.ip), component: 1, transport: "udp",
                    priority: remotePriority, address: from.ip, port: from.port, type: "prflx"))
            remoteAddresses.append((from, remotePriority))
        }
        guard
            let pair = addPair(
                socket: socket, localPriority: local.priority, remote: from, remotePriority: remotePriority)
        else { return }
        pair.lastValidRequest = now

        if isLite {
            lastConsent = now
            // Select the pair the peer nominates, or the first valid one until it does.
            if request.hasUseCandidate {
                pair.nominatedByPeer = true
                if selected !== pair { select(pair, now: now) }
            } else if selected == nil {
                select(pair, now: now)
            }
            if state == .disconnected { setState(.connected) }
            return
        }

        // Full agent: triggered check (RFC 8445 §7.3.1.4).
        if pair.state == .waiting || pair.state == .failed {
            pair.state = .waiting
            if !pair.triggered {
                pair.triggered = true
            }
        }
        if request.hasUseCandidate && role == .controlled {
            pair.nominatedByPeer = true
            if pair.state == .succeeded && selected !== pair {
                select(pair, now: now)
            }
        }
        if state == .new { setState(.checking) }
    }

    private func handleResponse(
        _ response: STUNMessage, bytes: UnsafeRawBufferPointer, from: SocketAddress, socket: UDPSocket, now: UInt64
    ) {
        guard let transaction = transactions[response.transactionID] else {
            counters.droppedUnmatchedResponse &+= 1
            return
        }
        let pair = transaction.pair
        // Responses must come back symmetric: from the address we sent to, to the socket we sent from.
        guard pair.remote == from, pair.socket === socket else {
            counters.droppedUnmatchedResponse &+= 1
            return
        }
        if response.messageClass == .errorResponse {
            transactions[response.transactionID] = nil
            counters.errorResponses &+= 1
            handleErrorResponse(response, transaction: transaction, now: now)
            return
        }
        guard STUNMessage.verifyIntegrity(bytes, key: transaction.key) else {
            counters.droppedBadIntegrity &+= 1
            return
        }
        transactions[response.transactionID] = nil
        counters.successResponses &+= 1
        validRemotes.insert(from)
        // A response to a request sent once times the path exactly (a retransmitted one is ambiguous).
        if transaction.transmissions == 1, now >= transaction.sentAt, pair === selected || selected == nil {
            roundTripTime = now - transaction.sentAt
        }

        switch transaction.kind {
        case .consent:
            if pair === selected {
                lastConsent = now
                if state == .disconnected { setState(.connected) }
            }
        case .check:
            pair.state = .succeeded
            if selected === pair { lastConsent = now }
            if firstSuccessAt == nil { firstSuccessAt = now }
            if isControlling {
                if transaction.useCandidate {
                    pair.nominated = true
                    if selected !== pair { select(pair, now: now) }
                }
            } else if pair.nominatedByPeer && selected !== pair {
                select(pair, now: now)
            }
        }
    }

    private func handleErrorResponse(_ response: STUNMessage, transaction: ICETransaction, now: UInt64) {
        let pair = transaction.pair
        if response.errorCode?.code == 487, transaction.kind == .check, !isLite {
            // The role we sent was wrong: take the other one (unless already done) and check again.
            switchRole(to: transaction.sentControlling ? .controlled : .controlling)
            pair.state = .waiting
            pair.triggered = true
            return
        }
        if transaction.kind == .check {
            pair.state = .failed
            if nominating === pair { nominating = nil }
            updateFailure()
        }
    }

    private func switchRole(to newRole: Role) {
        guard role != newRole, role != .lite else { return }
        role = newRole
        counters.roleSwitches &+= 1
        nominating = nil
        for pair in pairs { pair.nominateOnNextCheck = false }
    }

    private func sendError(
        _ code: Int, _ reason: String, to request: STUNMessage, from: SocketAddress, socket: UDPSocket,
        signed: Bool = false
    ) {
        let response = STUNMessage(
            method: .binding, messageClass: .errorResponse, transactionID: request.transactionID,
            attributes: [.errorCode(code: code, reason: reason)])
        socket.send(
            response.serialize(integrityKey: signed ? Array(localPassword.utf8) : nil, fingerprint: true), to: from)
        counters.errorResponsesSent &+= 1
    }

    // MARK: Selection and state

    private func select(_ pair: ICECandidatePair, now: UInt64) {
        selected = pair
        pendingReselect = nil
        validRemotes.insert(pair.remote)
        lastConsent = now
        scheduleConsent(now: now)
        onSelectedPair?(pair.socket, pair.remote)
        if state != .connected { setState(.connected) }
    }

    private func setState(_ newState: ICEState) {
        guard state != newState else { return }
        state = newState
        onStateChange?(newState)
    }

    private func updateFailure() {
        guard selected == nil, state == .checking || state == .new, !pairs.isEmpty else { return }
        let settled = pairs.allSatisfy { $0.state == .failed && !$0.triggered }
        if settled { setState(.failed) }
    }

    private func scheduleConsent(now: UInt64) {
        // RFC 7675 §5.1: uniformly within ±20 % of the interval.
        let base = timeouts.consentInterval
        let jitter = base / 5
        let low = base - jitter
        nextConsentCheck = now &+ low &+ UInt64.random(in: 0...(2 * jitter), using: &random)
    }

    // MARK: Timers

    /// The loop time from which ``tick(now:)`` has something to do, as of now: `now` (every tick)
    /// while checks, retransmissions or nomination are under way; else the next consent check or
    /// consent deadline (`UInt64.max` when none). Only input (STUN, candidates, credentials, a
    /// restart) can make work due sooner, and it wakes ``tickDeadline``.
    func nextTimer(now: UInt64) -> UInt64 {
        if state == .closed || state == .failed { return .max }
        var due = UInt64.max
        if selected != nil, state == .connected || state == .disconnected {
            due = lastConsent &+ (state == .connected ? timeouts.disconnectedAfter : timeouts.consentExpiry)
        }
        if isLite { return due }
        // Checks run every `checkInterval` until a pair is selected, then only triggered ones;
        // check transactions retransmit; more than 16 transactions are pruned at each tick.
        guard selected != nil, transactions.count <= 16, !pairs.contains(where: { $0.triggered }),
            !transactions.values.contains(where: { $0.kind == .check })
        else { return now }
        return min(due, nextConsentCheck)
    }

    /// Runs checks, retransmissions, nomination and consent. Call about every 10 ms on the loop
    /// thread (the agent is an `EventLoopTicker`).
    public func tick(now: UInt64) {
        lastNow = now
        guard state != .closed, state != .failed else { return }
        if isLite {
            checkConsentExpiry(now: now)
            return
        }
        retransmit(now: now)
        nominateIfReady(now: now)
        if now &- lastCheckSent >= timeouts.checkInterval {
            sendNextCheck(now: now)
        }
        if selected != nil {
            if now >= nextConsentCheck, let pair = selected {
                sendCheck(on: pair, kind: .consent, now: now)
                scheduleConsent(now: now)
            }
            checkConsentExpiry(now: now)
        }
        pruneTransactions(now: now)
    }

    private func checkConsentExpiry(now: UInt64) {
        guard selected != nil, state == .connected || state == .disconnected else { return }
        let silence = now &- lastConsent
        if silence >= timeouts.consentExpiry {
            // Always pass through disconnected, even when ticks were late.
            setState(.disconnected)
            setState(.failed)
        } else if silence >= timeouts.disconnectedAfter, state == .connected {
            setState(.disconnected)
        }
    }

    private func retransmit(now: UInt64) {
        var expired: [STUNTransactionID] = []
        for (id, transaction) in transactions where transaction.kind == .check && now >= transaction.nextRetransmit {
            if transaction.transmissions >= timeouts.maxTransmissions {
                expired.append(id)
                continue
            }
            var updated = transaction
            updated.transmissions += 1
            updated.rto = min(updated.rto * 2, timeouts.maxRTO)
            updated.nextRetransmit = now &+ updated.rto
            transactions[id] = updated
            transaction.pair.socket.send(transaction.request, to: transaction.pair.remote)
            counters.checksSent &+= 1
        }
        for id in expired {
            guard let transaction = transactions.removeValue(forKey: id) else { continue }
            if transaction.pair.state == .inProgress {
                transaction.pair.state = .failed
            }
            if nominating === transaction.pair { nominating = nil }
        }
        if !expired.isEmpty { updateFailure() }
    }

    private func pruneTransactions(now: UInt64) {
        // Consent transactions are not retransmitted; forget them once they cannot matter.
        guard transactions.count > 16 else { return }
        transactions = transactions.filter {
            $0.value.kind == .check || now &- $0.value.sentAt < timeouts.consentExpiry
        }
    }

    /// Controlling agent, regular nomination: once a pair has succeeded and either no better pair
    /// can still succeed or `nominationDelay` has passed, repeat the check with USE-CANDIDATE.
    /// A pair nominated in its first check (lite peer) that has not answered by then gives way to
    /// the best pair that did, rather than holding the connection until its checks time out.
    private func nominateIfReady(now: UInt64) {
        guard isControlling, selected == nil, let firstSuccessAt else { return }
        if let nominating {
            guard nominating.state == .inProgress, !nominating.nominateOnNextCheck,
                now &- firstSuccessAt >= timeouts.nominationDelay
            else { return }
            // Its retransmissions carry USE-CANDIDATE and would take the lite peer back to it.
            transactions = transactions.filter { $0.value.pair !== nominating }
            nominating.state = .failed
            self.nominating = nil
        }
        let succeeded = pairs.filter { $0.state == .succeeded }
        guard let best = succeeded.max(by: { $0.priority(controlling: true) < $1.priority(controlling: true) })
        else { return }
        let bestPriority = best.priority(controlling: true)
        let betterPending = pairs.contains {
            ($0.state == .waiting || $0.state == .inProgress) && $0.priority(controlling: true) > bestPriority
        }
        guard !betterPending || now &- firstSuccessAt >= timeouts.nominationDelay else { return }
        nominating = best
        best.nominateOnNextCheck = true
        best.triggered = true
    }

    /// Against a lite peer, the first check of the best pair that can still succeed nominates it.
    private func nominatesAtOnce(_ pair: ICECandidatePair) -> Bool {
        guard peerIsLite, selected == nil, nominating == nil || nominating === pair else { return false }
        let priority = pair.priority(controlling: true)
        return !pairs.contains { $0.state != .failed && $0.priority(controlling: true) > priority }
    }

    private func sendNextCheck(now: UInt64) {
        guard remotePassword != nil, remoteUfrag != nil else { return }
        // Triggered checks first, then the best waiting pair; ordinary checks stop once selected.
        let controlling = isControlling
        var candidate = pairs.filter { $0.triggered }
            .max { $0.priority(controlling: controlling) < $1.priority(controlling: controlling) }
        if candidate == nil, selected == nil {
            candidate = pairs.filter { $0.state == .waiting }
                .max { $0.priority(controlling: controlling) < $1.priority(controlling: controlling) }
        }
        guard let pair = candidate else { return }
        pair.triggered = false
        sendCheck(on: pair, kind: .check, now: now)
        if pair.state != .succeeded { pair.state = .inProgress }
        lastCheckSent = now
        if state == .new { setState(.checking) }
    }

    private func sendCheck(on pair: ICECandidatePair, kind: ICETransaction.Kind, now: UInt64) {
        guard let remoteUfrag, let remotePassword,
            let local = localSockets.first(where: { $0.socket === pair.socket })
        else { return }
        let useCandidate = kind == .check && isControlling && (pair.nominateOnNextCheck || nominatesAtOnce(pair))
        pair.nominateOnNextCheck = false
        if useCandidate { nominating = pair }
        var attributes: [STUNAttribute] = [
            .username(remoteUfrag + ":" + localUfrag),
            .priority(Self.priority(typePreference: 110, localPreference: (local.priority >> 8) & 0xFFFF)),
            isControlling ? .iceControlling(tieBreaker) : .iceControlled(tieBreaker),
        ]
        if useCandidate { attributes.append(.useCandidate) }
        let request = STUNMessage(method: .binding, messageClass: .request, attributes: attributes)
        let key = Array(remotePassword.utf8)
        let bytes = request.serialize(integrityKey: key, fingerprint: true)
        // Only one check transaction per pair is outstanding; a new check replaces the old one.
        if kind == .check {
            for (id, old) in transactions where old.pair === pair && old.kind == .check {
                transactions[id] = nil
            }
        }
        transactions[request.transactionID] = ICETransaction(
            pair: pair, kind: kind, request: bytes, useCandidate: useCandidate,
            sentControlling: isControlling, key: key,
            rto: timeouts.initialRTO, nextRetransmit: now &+ timeouts.initialRTO, sentAt: now)
        pair.socket.send(bytes, to: pair.remote)
        counters.checksSent &+= 1
    }

    // MARK: Lifecycle

    /// Restarts ICE with new local credentials (RFC 8445 §2.4). The selected pair stays in use
    /// until the new checks select one; set the peer's new credentials and candidates next.
    public func restart(localUfrag: String, localPassword: String) {
        guard state != .closed else { return }
        tickDeadline?.wake()
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        remoteUfrag = nil
        remotePassword = nil
        remoteCandidates = []
        remoteAddresses = []
        pairs = []
        transactions = [:]
        firstSuccessAt = nil
        nominating = nil
        if let selected {
            // Keep media flowing on the old pair; it is re-selected (or replaced) by the new checks.
            pairs.append(selected)
            selected.state = .waiting
            selected.nominated = false
            selected.nominatedByPeer = false
            self.selected = nil
            pendingReselect = (selected.socket, selected.remote)
        }
        // An ICE-TCP connection stays: its pair is checked again with the new credentials.
        if !isLite {
            for local in localSockets {
                let key = ObjectIdentifier(local.socket)
                guard !local.socket.isClosed, let remote = tcpRemotes[key] else { continue }
                addPair(
                    socket: local.socket, localPriority: local.priority, remote: remote,
                    remotePriority: tcpRemotePriorities[key] ?? 0)
            }
        }
        // Checking again: a restart whose checks all fail ends in `.failed` (RFC 8445 §2.4).
        if state != .new { setState(.checking) }
    }

    /// Why the agent is `.failed`, with the counts that tell a silent peer from one that refused:
    /// consent lost on a selected pair, or checks that no pair answered.
    public var failureDescription: String {
        let c = counters
        if selected != nil {
            return "ICE consent lost (no answer to consent checks for \(timeouts.consentExpiry / 1_000_000_000) s)"
        }
        var text = "ICE failed (no candidate pair answered: \(c.checksSent) checks sent"
        if c.successResponses > 0 { text += ", \(c.successResponses) answered" }
        if c.errorResponses > 0 { text += ", \(c.errorResponses) refused" }
        return text + ")"
    }

    /// True between ``restart(localUfrag:localPassword:)`` and the selection of a pair by the new
    /// checks (media keeps using the old pair meanwhile).
    public var isRestarting: Bool { selected == nil && pendingReselect != nil }

    /// Whether a pair is selected (not merely kept from before a restart).
    public var hasSelectedPair: Bool { selected != nil }

    /// The old selected pair during an ICE restart; `selectedPair` keeps reporting it.
    private var pendingReselect: (socket: UDPSocket, remote: SocketAddress)?

    /// Stops the agent: no more checks or answers. The caller removes it from the loop's tickers
    /// and closes the sockets it owns.
    public func close() {
        transactions = [:]
        pairs = []
        selected = nil
        pendingReselect = nil
        setState(.closed)
    }
}
