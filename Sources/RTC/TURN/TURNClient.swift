import COpenSSL
import RTCWire

/// A TURN client (RFC 8656) over UDP, TCP or TLS to the server: one UDP allocation on one TURN
/// server, whose relayed transport address becomes a `relay` ICE candidate.
///
/// It authenticates with long-term credentials (401 with REALM and NONCE, then signed requests;
/// 438 Stale Nonce retries with the new nonce), binds a channel to each peer it sends to (which
/// also installs the permission) and sends through Send indications until the binding is
/// confirmed, then through ChannelData. It refreshes the allocation before it expires and the
/// channel bindings (and with them the permissions) every 4 minutes, and releases the allocation
/// with a Refresh of lifetime 0 on close.
///
/// Confined to its loop's thread, like the `PeerConnection` it serves: media through the relay
/// costs one copy into a preallocated buffer (the 4-byte ChannelData header in front) and no
/// allocation.
// Safe: confined to its loop thread (see above); Sendable only to be handed to it.
public final class TURNClient: TURNLinkDelegate, EventLoopTicker, RelayedSocketTransport, @unchecked Sendable {
    /// Where the allocation stands.
    public enum State: Equatable, Sendable {
        case new, allocating, allocated
        case failed(String)
        case closed
    }

    /// The server and credentials.
    public let server: ICEServer
    /// The server's resolved address.
    public let serverAddress: SocketAddress
    public let loop: EventLoop
    /// The current state.
    public private(set) var state: State = .new
    /// The relayed socket (the `relay` candidate's base), once allocated.
    public private(set) var relayedSocket: UDPSocket?
    /// Our address as the server saw it (XOR-MAPPED-ADDRESS of the Allocate response).
    public private(set) var mappedAddress: SocketAddress?
    /// The local end of the link to the TURN server.
    public var localAddress: SocketAddress? { link?.localAddress }
    /// The link to the TURN server (UDP, TCP or TLS).
    var link: (any TURNServerLink)?
    /// Called on the loop thread once, when the allocation succeeds or fails.
    public var onAllocationDone: ((TURNClient) -> Void)?
    /// Counters for stats and tests.
    public private(set) var counters = TURNCounters()

    var realm: String?
    var nonce: String?
    var key: [UInt8]?
    var lifetime: UInt64 = 600_000_000_000
    var nextAllocationRefresh: UInt64 = 0
    var transactions: [STUNTransactionID: TURNTransaction] = [:]
    /// Peer → channel, and back. A channel is usable for ChannelData once `confirmed`.
    var channels: [SocketAddress: TURNChannel] = [:]
    var peersByChannel: [UInt16: SocketAddress] = [:]
    var nextChannel: UInt16 = 0x4000
    /// Set while a closed client waits for the answer to its release.
    var releaseDeadline: UInt64?
    /// ChannelData out and Data-indication payloads in, reused.
    let scratch: UnsafeMutableRawBufferPointer

    /// Creates a client for `server` at `serverAddress` (resolve it off the loop first).
    public init(server: ICEServer, serverAddress: SocketAddress, loop: EventLoop) {
        self.server = server
        self.serverAddress = serverAddress
        self.loop = loop
        scratch = .allocate(byteCount: EventLoop.slotSize + 64, alignment: 8)
    }

    deinit { scratch.deallocate() }

    // MARK: Allocation

    /// Opens the link to the server from `bindAddress` (port 0) and sends the first Allocate once
    /// the link is ready. Loop thread only.
    public func start(bindAddress: String) {
        loop.assertInLoop()
        guard state == .new else { return }
        let wildcard = serverAddress.isIPv6 ? "::" : "0.0.0.0"
        let sameFamily = SocketAddress(ip: bindAddress, port: 0)?.isIPv6 == serverAddress.isIPv6
        guard let bind = SocketAddress(ip: sameFamily ? bindAddress : wildcard, port: 0) else {
            fail("bad bind address \(bindAddress)")
            return
        }
        let newLink: any TURNServerLink
        switch server.transport {
        case .udp:
            let udp = TURNUDPLink(server: serverAddress, bindAddress: bind, loop: loop)
            udp.delegate = self
            newLink = udp
        case .tcp, .tls:
            let stream = TURNStreamLink(
                server: serverAddress, bindAddress: bind, loop: loop,
                tlsHost: server.transport == .tls ? server.host : nil)
            stream.delegate = self
            newLink = stream
        }
        link = newLink
        state = .allocating
        loop.addTicker(self)
        do { try newLink.open() } catch {
            fail("cannot reach the TURN server \(server.url): \(error)")
        }
    }

    func linkReady() {
        guard state == .allocating, transactions.isEmpty else { return }
        sendAllocate()
    }

    func linkFailed(_ reason: String) {
        link = nil
        if releaseDeadline != nil {
            finishRelease()
            return
        }
        fail("TURN server \(server.url): \(reason)")
        if state != .closed {
            // The allocation is gone with the link (a stream's allocation lives as long as it).
            let relayed = relayedSocket
            relayedSocket = nil
            relayed?.close()
        }
    }

    private func sendAllocate() {
        // RFC 8656 §7.1: REQUESTED-TRANSPORT UDP; DONT-FRAGMENT is not needed.
        send(method: .allocate, attributes: [.requestedTransport(17), .lifetime(600)], kind: .allocate)
    }

    /// Fails the allocation (or the client) with `reason`.
    func fail(_ reason: String) {
        guard state != .closed else { return }
        let wasAllocating = state == .allocating || state == .new
        state = .failed(reason)
        counters.lastError = reason
        if wasAllocating { finishAllocation() }
    }

    private func finishAllocation() {
        let done = onAllocationDone
        onAllocationDone = nil
        done?(self)
    }

    /// Releases the allocation (Refresh with LIFETIME 0) and closes the relayed socket. Loop thread
    /// only. The link to the server stays open until the release is answered (a 438 Stale Nonce is
    /// answered once more with the new nonce) or ``releaseTimeout`` passes.
    public func close() {
        loop.assertInLoop()
        guard state != .closed else { return }
        let release = state == .allocated && key != nil && link != nil
        state = .closed
        transactions = [:]
        let relayed = relayedSocket
        relayedSocket = nil
        relayed?.close()
        if release {
            releaseDeadline = EventLoop.now() &+ Self.releaseTimeout
            send(method: .refresh, attributes: [.lifetime(0)], kind: .release)
        } else {
            finishRelease()
        }
        finishAllocation()
    }

    /// How long a closed client waits for the answer to its release.
    static let releaseTimeout: UInt64 = 2_000_000_000

    /// Ends the release: the link closes (after flushing) and the ticks stop.
    private func finishRelease() {
        releaseDeadline = nil
        transactions = [:]
        loop.removeTicker(self)
        link?.close()
        link = nil
    }

    // MARK: Requests

    /// Sends a request (signed once credentials are known) and tracks it for retransmission.
    func send(
        method: STUNMethod, attributes: [STUNAttribute], kind: TURNTransaction.Kind, peer: SocketAddress? = nil,
        authenticationAttempts: Int = 0
    ) {
        guard let link else { return }
        var all = attributes
        if let key, let realm, let nonce {
            all += [.username(server.username), .realm(realm), .nonce(nonce)]
            let message = STUNMessage(method: method, messageClass: .request, attributes: all)
            let bytes = message.serialize(integrityKey: key, fingerprint: false)
            track(
                message, bytes: bytes, kind: kind, attributes: attributes, peer: peer, attempts: authenticationAttempts)
            bytes.withUnsafeBytes { link.send($0) }
        } else {
            let message = STUNMessage(method: method, messageClass: .request, attributes: all)
            let bytes = message.serialize(integrityKey: nil, fingerprint: false)
            track(
                message, bytes: bytes, kind: kind, attributes: attributes, peer: peer, attempts: authenticationAttempts)
            bytes.withUnsafeBytes { link.send($0) }
        }
        counters.requestsSent &+= 1
    }

    private func track(
        _ message: STUNMessage, bytes: [UInt8], kind: TURNTransaction.Kind, attributes: [STUNAttribute],
        peer: SocketAddress?, attempts: Int
    ) {
        let now = EventLoop.now()
        transactions[message.transactionID] = TURNTransaction(
            kind: kind, method: message.method, attributes: attributes, peer: peer, bytes: bytes,
            authenticationAttempts: attempts, rto: Self.initialRTO, nextRetransmit: now &+ Self.initialRTO)
    }

    static let initialRTO: UInt64 = 500_000_000
    static let maxTransmissions = 7

    // MARK: Receive

    func linkReceived(_ data: UnsafeMutableRawBufferPointer) {
        guard state != .closed || releaseDeadline != nil else { return }
        let bytes = UnsafeRawBufferPointer(data)
        if state == .closed {
            // Releasing: only the answer to the release matters.
            if STUNMessage.looksLikeSTUN(bytes), let message = try? STUNMessage.parse(bytes),
                message.messageClass == .successResponse || message.messageClass == .errorResponse
            {
                handleResponse(message, bytes: bytes)
            }
            return
        }
        if TURNChannelData.looksLikeChannelData(bytes) {
            guard let (channel, payload) = TURNChannelData.parse(bytes), let peer = peersByChannel[channel],
                let relayedSocket
            else {
                counters.droppedMalformed &+= 1
                return
            }
            relayedSocket.deliverRelayed(UnsafeMutableRawBufferPointer(rebasing: data[payload]), from: peer)
            return
        }
        guard STUNMessage.looksLikeSTUN(bytes), let message = try? STUNMessage.parse(bytes) else {
            counters.droppedMalformed &+= 1
            return
        }
        switch message.messageClass {
        case .indication:
            handleIndication(message)
        case .successResponse, .errorResponse:
            handleResponse(message, bytes: bytes)
        case .request:
            counters.droppedMalformed &+= 1
        }
    }

    private func handleIndication(_ message: STUNMessage) {
        // A Data indication carries a peer's datagram before its channel is bound.
        guard message.method == .data, let peerSTUN = message.xorPeerAddress, let peer = SocketAddress(peerSTUN),
            let payload = message.data, payload.count <= scratch.count, let relayedSocket
        else {
            counters.droppedMalformed &+= 1
            return
        }
        payload.withUnsafeBytes { scratch.copyMemory(from: $0) }
        relayedSocket.deliverRelayed(UnsafeMutableRawBufferPointer(rebasing: scratch[0..<payload.count]), from: peer)
    }

    private func handleResponse(_ response: STUNMessage, bytes: UnsafeRawBufferPointer) {
        guard let transaction = transactions[response.transactionID] else {
            counters.droppedMalformed &+= 1
            return
        }
        if response.messageClass == .errorResponse, let error = response.errorCode {
            transactions[response.transactionID] = nil
            handleError(error.code, error.reason, response: response, transaction: transaction)
            return
        }
        guard response.messageClass == .successResponse else { return }
        // Success responses to signed requests must be signed with our key (RFC 8489 §9.2.4).
        if let key, !STUNMessage.verifyIntegrity(bytes, key: key) {
            counters.droppedBadIntegrity &+= 1
            return
        }
        transactions[response.transactionID] = nil
        let now = EventLoop.now()
        switch transaction.kind {
        case .allocate:
            guard state == .allocating, let relayedSTUN = response.xorRelayedAddress,
                let relayed = SocketAddress(relayedSTUN)
            else {
                fail("Allocate succeeded without a usable XOR-RELAYED-ADDRESS")
                return
            }
            mappedAddress = response.xorMappedAddress.flatMap { SocketAddress($0) }
            scheduleRefresh(lifetime: response.lifetime, now: now)
            relayedSocket = UDPSocket(relay: self, relayedAddress: relayed, loop: loop)
            state = .allocated
            counters.allocations &+= 1
            finishAllocation()
        case .refresh:
            scheduleRefresh(lifetime: response.lifetime, now: now)
            counters.refreshes &+= 1
        case .channelBind:
            guard let peer = transaction.peer, var channel = channels[peer] else { return }
            channel.confirmed = true
            channel.nextRefresh = now &+ Self.bindingRefreshInterval
            channels[peer] = channel
            counters.channelBinds &+= 1
        case .release:
            finishRelease()
        }
    }

    private func handleError(
        _ code: Int, _ reason: String, response: STUNMessage, transaction: TURNTransaction
    ) {
        switch code {
        case 401 where key == nil, 438:
            // First contact (401) or a stale nonce (438): retry with the server's realm and nonce.
            guard let nonce = response.nonce else {
                fail("TURN \(code) without a NONCE")
                return
            }
            if let realm = response.realm {
                if self.realm != realm || key == nil {
                    self.realm = realm
                    key = Self.longTermKey(username: server.username, realm: realm, password: server.credential)
                }
            }
            guard realm != nil else {
                fail("TURN 401 without a REALM")
                return
            }
            self.nonce = nonce
            counters.authenticationRetries &+= 1
            // Each request is retried a few times at most (a 401 then a 438 is the usual worst);
            // a long session meets a stale nonce at every refresh, so the limit is per request.
            guard transaction.authenticationAttempts < 3 else {
                if transaction.kind == .release {
                    finishRelease()
                } else {
                    fail("TURN server keeps refusing our credentials (\(code) \(reason))")
                }
                return
            }
            send(
                method: transaction.method, attributes: transaction.attributes, kind: transaction.kind,
                peer: transaction.peer, authenticationAttempts: transaction.authenticationAttempts + 1)
        default:
            switch transaction.kind {
            case .allocate:
                fail("TURN Allocate refused: \(code) \(reason)")
            case .refresh:
                fail("TURN Refresh refused: \(code) \(reason)")
            case .channelBind:
                // Forget the binding; the next send to that peer tries again with a fresh channel.
                if let peer = transaction.peer, let channel = channels.removeValue(forKey: peer) {
                    peersByChannel[channel.number] = nil
                }
                counters.lastError = "ChannelBind refused: \(code) \(reason)"
            case .release:
                finishRelease()
            }
        }
    }

    private func scheduleRefresh(lifetime seconds: UInt32?, now: UInt64) {
        let life = UInt64(seconds ?? 600) * 1_000_000_000
        lifetime = life
        // Refresh a minute before expiry, or at half-life for short lifetimes.
        nextAllocationRefresh = now &+ max(life / 2, life &- min(life, 60_000_000_000))
    }

    /// Channel bindings last 10 minutes and permissions 5 (RFC 8656 §9, §12): rebinding every 4
    /// minutes keeps both.
    static let bindingRefreshInterval: UInt64 = 240_000_000_000

    // MARK: Send (the relayed socket's transport)

    public func sendRelayed(_ bytes: UnsafeRawBufferPointer, to peer: SocketAddress) {
        guard state == .allocated, let link else { return }
        if let channel = channels[peer], channel.confirmed,
            bytes.count + TURNChannelData.headerLength + 3 <= scratch.count
        {
            TURNChannelData.writeHeader(into: scratch, channel: channel.number, length: bytes.count)
            if let base = bytes.baseAddress, bytes.count > 0 {
                (scratch.baseAddress! + TURNChannelData.headerLength).copyMemory(from: base, byteCount: bytes.count)
            }
            var length = TURNChannelData.headerLength + bytes.count
            if link.isStream {
                // Streams pad ChannelData to a multiple of 4 (RFC 8656 §12.5); UDP does not need to.
                while length % 4 != 0 {
                    scratch[length] = 0
                    length += 1
                }
            }
            link.send(UnsafeRawBufferPointer(start: scratch.baseAddress, count: length))
            counters.channelDataSent &+= 1
            return
        }
        if channels[peer] == nil { bindChannel(to: peer) }
        // Until the binding is confirmed: a Send indication (dropped by the server until the
        // permission the ChannelBind installs exists; ICE retransmits its checks).
        guard let peerSTUN = peer.stunAddress else { return }
        let indication = STUNMessage(
            method: .send, messageClass: .indication, attributes: [.xorPeerAddress(peerSTUN), .data(Array(bytes))])
        indication.serialize(integrityKey: nil, fingerprint: false).withUnsafeBytes { link.send($0) }
        counters.sendIndications &+= 1
    }

    private func bindChannel(to peer: SocketAddress) {
        guard let peerSTUN = peer.stunAddress, peersByChannel.count <= Int(TURNChannelData.validChannels.count) else {
            return
        }
        while peersByChannel[nextChannel] != nil {
            nextChannel = nextChannel == TURNChannelData.validChannels.upperBound ? 0x4000 : nextChannel + 1
        }
        let number = nextChannel
        nextChannel = nextChannel == TURNChannelData.validChannels.upperBound ? 0x4000 : nextChannel + 1
        channels[peer] = TURNChannel(number: number, confirmed: false, nextRefresh: .max)
        peersByChannel[number] = peer
        send(
            method: .channelBind, attributes: [.channelNumber(number), .xorPeerAddress(peerSTUN)], kind: .channelBind,
            peer: peer)
    }

    public func relayedSocketClosed() {
        close()
    }

    // MARK: Timers

    public func tick(now: UInt64) {
        if let releaseDeadline {
            if now >= releaseDeadline {
                finishRelease()
                return
            }
        } else {
            guard state == .allocating || state == .allocated else { return }
        }
        var expired: [STUNTransactionID] = []
        for (id, transaction) in transactions where now >= transaction.nextRetransmit {
            if transaction.transmissions >= Self.maxTransmissions {
                expired.append(id)
                continue
            }
            var updated = transaction
            updated.transmissions += 1
            updated.rto = min(updated.rto * 2, 8_000_000_000)
            updated.nextRetransmit = now &+ updated.rto
            transactions[id] = updated
            // A stream is reliable: only the timeout runs (RFC 8489 §6.2.2), nothing is resent.
            guard let link, !link.isStream else { continue }
            transaction.bytes.withUnsafeBytes { link.send($0) }
            counters.retransmissions &+= 1
        }
        for id in expired {
            guard let transaction = transactions.removeValue(forKey: id) else { continue }
            switch transaction.kind {
            case .allocate, .refresh: fail("TURN server \(server.url) did not answer")
            case .channelBind:
                if let peer = transaction.peer, let channel = channels.removeValue(forKey: peer) {
                    peersByChannel[channel.number] = nil
                }
            case .release: finishRelease()
            }
        }
        guard state == .allocated else { return }
        if now >= nextAllocationRefresh {
            nextAllocationRefresh = now &+ lifetime / 2  // until the response reschedules it
            send(method: .refresh, attributes: [.lifetime(600)], kind: .refresh)
        }
        for (peer, channel) in channels where channel.confirmed && now >= channel.nextRefresh {
            var updated = channel
            updated.nextRefresh = now &+ Self.bindingRefreshInterval
            channels[peer] = updated
            if let peerSTUN = peer.stunAddress {
                send(
                    method: .channelBind, attributes: [.channelNumber(channel.number), .xorPeerAddress(peerSTUN)],
                    kind: .channelBind, peer: peer)
            }
        }
    }

    // MARK: Credentials

    /// The long-term credential key: MD5(username ":" realm ":" password) (RFC 8489 §9.2.2).
    public static func longTermKey(username: String, realm: String, password: String) -> [UInt8] {
        let input = Array("\(username):\(realm):\(password)".utf8)
        var digest = [UInt8](repeating: 0, count: 16)
        var length: UInt32 = 0
        _ = input.withUnsafeBytes { raw in
            EVP_Digest(raw.baseAddress, raw.count, &digest, &length, EVP_md5(), nil)
        }
        return digest
    }
}

/// Counters of a ``TURNClient``.
public struct TURNCounters: Sendable, Equatable {
    public var requestsSent: UInt64 = 0
    public var retransmissions: UInt64 = 0
    public var authenticationRetries: UInt64 = 0
    public var allocations: UInt64 = 0
    public var refreshes: UInt64 = 0
    public var channelBinds: UInt64 = 0
    public var sendIndications: UInt64 = 0
    public var channelDataSent: UInt64 = 0
    public var droppedMalformed: UInt64 = 0
    public var droppedBadIntegrity: UInt64 = 0
    /// The last failure or refusal, for diagnostics.
    public var lastError: String?
    public init() {}
}

/// A channel bound (or being bound) to one peer.
struct TURNChannel {
    let number: UInt16
    var confirmed: Bool
    var nextRefresh: UInt64
}

/// One outstanding TURN request.
struct TURNTransaction {
    enum Kind { case allocate, refresh, channelBind, release }
    let kind: Kind
    let method: STUNMethod
    /// The attributes before the credentials, to re-send after a 401/438.
    let attributes: [STUNAttribute]
    let peer: SocketAddress?
    let bytes: [UInt8]
    /// How often this request was already re-sent after a 401 or 438.
    var authenticationAttempts = 0
    var transmissions = 1
    var rto: UInt64
    var nextRetransmit: UInt64
}
