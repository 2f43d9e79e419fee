import Testing

@testable import RTC
@testable import RTCWire

/// One side of an ICE test: a socket whose STUN goes to an agent, ticked by the loop.
/// Everything is touched on the loop thread only.
private final class ICEEndpoint: DatagramHandler, EventLoopTicker, @unchecked Sendable {
    var agent: ICEAgent!
    var socket: UDPSocket!
    var states: [ICEState] = []
    var selections: [SocketAddress] = []
    /// Checks this agent had sent when it first selected a pair.
    var checksAtFirstSelection: UInt64?
    var notSTUN = 0

    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        if agent?.handleSTUN(UnsafeRawBufferPointer(data), from: from, socket: socket) != true { notSTUN += 1 }
    }

    func tick(now: UInt64) { agent?.tick(now: now) }
}

/// Stores whole datagrams (for tests that play a raw peer).
private final class RawSTUNPeer: DatagramHandler, @unchecked Sendable {
    var datagrams: [[UInt8]] = []
    func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
        datagrams.append(Array(data))
    }
}

private func candidate(of endpoint: ICEEndpoint) -> ICECandidate {
    endpoint.agent.localCandidates[0]
}

/// Builds two endpoints on `loop`, exchanges credentials and (for full agents) candidates.
private func makeEndpoints(
    loop: EventLoop, roles: (ICEAgent.Role, ICEAgent.Role), tieBreakers: (UInt64, UInt64)? = nil,
    wrongPasswordForB: Bool = false, timeouts: ICETimeouts = ICETimeouts(), aKnowsBIsLite: Bool = false,
    silentCandidateForA: Bool = false
) async throws -> (ICEEndpoint, ICEEndpoint) {
    let a = ICEEndpoint()
    let b = ICEEndpoint()
    let socketA = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: a)
    let socketB = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: b)
    await loop.submit {
        for (endpoint, socket, role, tie) in [
            (a, socketA, roles.0, tieBreakers?.0), (b, socketB, roles.1, tieBreakers?.1),
        ] {
            let credentials = ICEAgent.randomCredentials()
            let agent =
                tie.map {
                    ICEAgent(
                        role: role, localUfrag: credentials.ufrag, localPassword: credentials.password, tieBreaker: $0)
                } ?? ICEAgent(role: role, localUfrag: credentials.ufrag, localPassword: credentials.password)
            agent.timeouts = timeouts
            agent.addLocalSocket(socket)
            agent.onStateChange = { [unowned endpoint] in endpoint.states.append($0) }
            agent.onSelectedPair = { [unowned endpoint, unowned agent] _, remote in
                endpoint.selections.append(remote)
                if endpoint.checksAtFirstSelection == nil {
                    endpoint.checksAtFirstSelection = agent.counters.checksSent
                }
            }
            endpoint.agent = agent
            endpoint.socket = socket
            loop.addTicker(endpoint)
        }
        a.agent.peerIsLite = aKnowsBIsLite
        a.agent.setRemoteCredentials(
            ufrag: b.agent.localUfrag, password: wrongPasswordForB ? "wrongwrongwrongwrongwrong" : b.agent.localPassword
        )
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        // A lite agent learns its peer from the checks; full agents get the peer's candidate.
        if silentCandidateForA {
            // Port 9 on loopback, above b's priority: nothing listens, so its checks are never answered.
            var silent = candidate(of: b)
            silent.port = 9
            silent.priority += 1
            a.agent.addRemoteCandidate(silent)
        }
        if roles.0 != .lite { a.agent.addRemoteCandidate(candidate(of: b)) }
        if roles.1 != .lite { b.agent.addRemoteCandidate(candidate(of: a)) }
    }
    return (a, b)
}

private func bothConnected(_ a: ICEEndpoint, _ b: ICEEndpoint) -> @Sendable () -> Bool {
    { a.agent.state == .connected && b.agent.state == .connected }
}

/// Closes both agents on their loop.
private func closeAgents(_ loop: EventLoop, _ a: ICEEndpoint, _ b: ICEEndpoint) async {
    await loop.submit {
        a.agent.close()
        b.agent.close()
    }
}

/// Checks that each side selected the other's socket address on its own socket.
private func expectAgreement(_ loop: EventLoop, _ a: ICEEndpoint, _ b: ICEEndpoint) async {
    let ok = await loop.submit {
        guard let pairA = a.agent.selectedPair, let pairB = b.agent.selectedPair else { return false }
        return pairA.socket === a.socket && pairA.remote == b.socket.localAddress
            && pairB.socket === b.socket && pairB.remote == a.socket.localAddress
            && a.agent.isValidRemote(b.socket.localAddress) && b.agent.isValidRemote(a.socket.localAddress)
            && !a.agent.isValidRemote(SocketAddress(ip: "127.0.0.1", port: 9)!)
    }
    #expect(ok)
}

@Suite struct ICEAgentTests {
    @Test func credentialsAndHostCandidate() async throws {
        let (ufrag, password) = ICEAgent.randomCredentials()
        let iceChars = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        #expect(ufrag.count >= 4 && password.count >= 22)
        #expect((ufrag + password).allSatisfy { iceChars.contains($0) })
        #expect(ICEAgent.randomCredentials().password != password)

        let loop = EventLoop(name: "cand")
        defer { loop.shutdown() }
        let socket = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: RawSTUNPeer())
        let host = await loop.submit { () -> ICECandidate in
            let agent = ICEAgent(role: .controlling, localUfrag: ufrag, localPassword: password)
            agent.addLocalSocket(socket)
            agent.addRemoteCandidate(
                ICECandidate(foundation: "1", priority: 1, address: "abcd.local", port: 9, type: "host"))
            agent.addRemoteCandidate(
                ICECandidate(
                    foundation: "2", transport: "tcp", priority: 1, address: "127.0.0.1", port: 9, type: "host"))
            #expect(agent.remoteCandidates.isEmpty)
            // Renegotiations hand the same candidates over again: each is kept once.
            let peer = ICECandidate(foundation: "3", priority: 7, address: "127.0.0.1", port: 9, type: "host")
            for _ in 0..<3 { agent.addRemoteCandidate(peer) }
            agent.addRemoteCandidate(
                ICECandidate(foundation: "4", priority: 5, address: "127.0.0.1", port: 10, type: "host"))
            #expect(agent.remoteCandidates.map(\.port) == [9, 10])
            return agent.localCandidates[0]
        }
        // (2^24)*126 + (2^8)*65535 + (256 - 1)
        #expect(host.priority == 2_130_706_431)
        #expect(host.type == "host" && host.transport == "udp" && host.component == 1)
        #expect(host.address == "127.0.0.1" && host.port == socket.localAddress.port)
    }

    @Test func controllingAndControlledConnectAndAgree() async throws {
        let loop = EventLoop(name: "ice-full")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .controlled))
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        await expectAgreement(loop, a, b)
        let (statesA, statesB, selectionsB) = await loop.submit { (a.states, b.states, b.selections) }
        #expect(statesA.first == .checking && statesA.last == .connected)
        #expect(statesB.last == .connected)
        #expect(selectionsB.count == 1)
    }

    @Test func fullAndLiteConnectAndAgree() async throws {
        let loop = EventLoop(name: "ice-lite")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .lite))
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        await expectAgreement(loop, a, b)
        let liteChecks = await loop.submit { b.agent.counters.checksSent }
        #expect(liteChecks == 0)
        let learned = await loop.submit { b.agent.remoteCandidates.map(\.type) }
        #expect(learned == ["prflx"])
    }

    /// Told that its peer is lite, a controlling agent nominates in its first check: selected after one
    /// check where regular nomination takes two (a check, then the nominating one).
    @Test func againstALitePeerTheFirstCheckNominates() async throws {
        let loop = EventLoop(name: "ice-lite-nominate")
        defer { loop.shutdown() }
        for knowsLite in [true, false] {
            let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .lite), aKnowsBIsLite: knowsLite)
            #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
            await expectAgreement(loop, a, b)
            let checks = await loop.submit { a.checksAtFirstSelection }
            #expect(checks == (knowsLite ? 1 : 2), "checks before selection, peer known lite: \(knowsLite)")
            await closeAgents(loop, a, b)
        }
    }

    /// A pair nominated in its first check that never answers gives way to one that did, well before
    /// its own checks time out (the first retransmission here would come after a minute).
    @Test func aLitePeersBestPairThatNeverAnswersGivesWayToOneThatDid() async throws {
        let loop = EventLoop(name: "ice-lite-silent")
        defer { loop.shutdown() }
        var timeouts = ICETimeouts()
        timeouts.initialRTO = 60_000_000_000
        let (a, b) = try await makeEndpoints(
            loop: loop, roles: (.controlling, .lite), timeouts: timeouts, aKnowsBIsLite: true, silentCandidateForA: true
        )
        #expect(await IOTestSupport.wait(loop, seconds: 30, bothConnected(a, b)))
        await expectAgreement(loop, a, b)
        await closeAgents(loop, a, b)
    }

    @Test func wrongPasswordNeverConnectsAndCountsDrops() async throws {
        let loop = EventLoop(name: "ice-badpw")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .controlled), wrongPasswordForB: true)
        // A's checks are rejected with 401, so its only pair fails.
        #expect(await IOTestSupport.wait(loop) { a.agent.state == .failed })
        try await Task.sleep(nanoseconds: 300_000_000)
        let (statesA, statesB, badIntegrity, selected) = await loop.submit {
            (
                a.states, b.states, b.agent.counters.droppedBadIntegrity,
                a.agent.selectedPair == nil && b.agent.selectedPair == nil
            )
        }
        #expect(!statesA.contains(.connected))
        #expect(!statesB.contains(.connected))
        #expect(badIntegrity > 0)
        #expect(selected)
    }

    @Test func consentFailsWhenThePeerGoesSilent() async throws {
        var timeouts = ICETimeouts()
        timeouts.consentInterval = 30_000_000
        timeouts.disconnectedAfter = 400_000_000
        timeouts.consentExpiry = 800_000_000
        let loop = EventLoop(name: "ice-consent")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .controlled), timeouts: timeouts)
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        // Consent keeps the connection up while the peer answers.
        try await Task.sleep(nanoseconds: 500_000_000)
        let (stillConnected, consentAnswers) = await loop.submit {
            (a.agent.state == .connected, b.agent.counters.requestsAnswered)
        }
        #expect(stillConnected)
        #expect(consentAnswers > 5)
        await loop.submit { b.agent.close() }
        #expect(await IOTestSupport.wait(loop) { a.agent.state == .failed })
        let states = await loop.submit { a.states }
        #expect(states.suffix(3) == [.connected, .disconnected, .failed])
    }

    @Test func liteAgentFailsWhenChecksStop() async throws {
        var timeouts = ICETimeouts()
        timeouts.consentInterval = 30_000_000
        timeouts.disconnectedAfter = 400_000_000
        timeouts.consentExpiry = 800_000_000
        let loop = EventLoop(name: "ice-lite-consent")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .lite), timeouts: timeouts)
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        await loop.submit { a.agent.close() }
        #expect(await IOTestSupport.wait(loop) { b.agent.state == .failed })
        let states = await loop.submit { b.states }
        #expect(states.suffix(3) == [.connected, .disconnected, .failed])
    }

    @Test(arguments: [ICEAgent.Role.controlling, .controlled])
    func roleConflictResolvesByTieBreaker(bothRole: ICEAgent.Role) async throws {
        let loop = EventLoop(name: "ice-conflict")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (bothRole, bothRole), tieBreakers: (100, 50))
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        await expectAgreement(loop, a, b)
        let (roleA, roleB, switches) = await loop.submit {
            (a.agent.role, b.agent.role, a.agent.counters.roleSwitches + b.agent.counters.roleSwitches)
        }
        // The larger tie-breaker controls.
        #expect(roleA == .controlling)
        #expect(roleB == .controlled)
        #expect(switches == 1)
    }

    @Test func rejectsUnauthenticatedAndMalformedRequests() async throws {
        let loop = EventLoop(name: "ice-reject")
        defer { loop.shutdown() }
        let endpoint = ICEEndpoint()
        let raw = RawSTUNPeer()
        let agentSocket = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: endpoint)
        let rawSocket = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: raw)
        let badUsername = STUNMessage(
            messageClass: .request, attributes: [.username("nobody:peer"), .priority(1), .iceControlling(1)])
        let goodUsernameBadKey = STUNMessage(
            messageClass: .request, attributes: [.username("ufrag:peer"), .priority(1), .iceControlling(1)])
        let valid = STUNMessage(
            messageClass: .request, attributes: [.username("ufrag:peer"), .priority(1), .iceControlling(1)])
        await loop.submit {
            let agent = ICEAgent(role: .controlled, localUfrag: "ufrag", localPassword: "local-password-0123456789")
            agent.addLocalSocket(agentSocket)
            endpoint.agent = agent
            let to = agentSocket.localAddress
            rawSocket.send(
                badUsername.serialize(integrityKey: Array("local-password-0123456789".utf8), fingerprint: true), to: to)
            rawSocket.send(goodUsernameBadKey.serialize(integrityKey: Array("nope".utf8), fingerprint: true), to: to)
            var corrupted = valid.serialize(integrityKey: Array("local-password-0123456789".utf8), fingerprint: true)
            corrupted[corrupted.count - 1] ^= 0xFF  // FINGERPRINT no longer matches
            rawSocket.send(corrupted, to: to)
            rawSocket.send(
                valid.serialize(integrityKey: Array("local-password-0123456789".utf8), fingerprint: true), to: to)
            rawSocket.send([0x01, 0x02, 0x03], to: to)  // not STUN: left to the caller
        }
        #expect(await IOTestSupport.wait(loop) { raw.datagrams.count >= 3 && endpoint.notSTUN == 1 })
        let (responses, counters, learned) = await loop.submit {
            (
                raw.datagrams.compactMap { $0.withUnsafeBytes { try? STUNMessage.parse($0) } },
                endpoint.agent.counters, endpoint.agent.isValidRemote(rawSocket.localAddress)
            )
        }
        #expect(responses.count == 3)
        #expect(responses.first { $0.transactionID == badUsername.transactionID }?.errorCode?.code == 401)
        #expect(responses.first { $0.transactionID == goodUsernameBadKey.transactionID }?.errorCode?.code == 401)
        let success = try #require(responses.first { $0.transactionID == valid.transactionID })
        #expect(success.messageClass == .successResponse)
        #expect(success.xorMappedAddress.flatMap { SocketAddress($0) } == rawSocket.localAddress)
        #expect(counters.droppedUnknownUsername == 1)
        #expect(counters.droppedBadIntegrity == 1)
        #expect(counters.droppedMalformed == 1)
        #expect(counters.requestsAnswered == 1)
        #expect(learned)
    }

    /// Attributes appended after MESSAGE-INTEGRITY are not covered by it: an ICE-CONTROLLED added
    /// there must not cause a role conflict (487); the signed part alone is answered.
    @Test func attributesAfterMessageIntegrityAreIgnored() async throws {
        let loop = EventLoop(name: "ice-after-mi")
        defer { loop.shutdown() }
        let endpoint = ICEEndpoint()
        let raw = RawSTUNPeer()
        let agentSocket = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: endpoint)
        let rawSocket = try loop.openUDP(bindTo: IOTestSupport.loopback, handler: raw)
        let password = "local-password-0123456789"
        let request = STUNMessage(messageClass: .request, attributes: [.username("ufrag:peer"), .priority(1)])
        var bytes = request.serialize(integrityKey: Array(password.utf8), fingerprint: false)
        // ICE-CONTROLLED (0x8029) with the largest tie-breaker, after MESSAGE-INTEGRITY.
        bytes += [0x80, 0x29, 0x00, 0x08] + [UInt8](repeating: 0xFF, count: 8)
        let length = bytes.count - 20
        bytes[2] = UInt8(length >> 8)
        bytes[3] = UInt8(length & 0xFF)
        let datagram = bytes
        await loop.submit {
            let agent = ICEAgent(role: .controlled, localUfrag: "ufrag", localPassword: password, tieBreaker: 1)
            agent.addLocalSocket(agentSocket)
            endpoint.agent = agent
            rawSocket.send(datagram, to: agentSocket.localAddress)
        }
        #expect(await IOTestSupport.wait(loop) { raw.datagrams.count >= 1 })
        let (response, role) = await loop.submit {
            (raw.datagrams.first.flatMap { $0.withUnsafeBytes { try? STUNMessage.parse($0) } }, endpoint.agent.role)
        }
        #expect(response?.messageClass == .successResponse)
        #expect(response?.errorCode == nil)
        #expect(role == .controlled)
    }

    @Test func iceRestartKeepsThePairAndSelectsAgain() async throws {
        let loop = EventLoop(name: "ice-restart")
        defer { loop.shutdown() }
        let (a, b) = try await makeEndpoints(loop: loop, roles: (.controlling, .controlled))
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        let keptDuringRestart = await loop.submit { () -> Bool in
            let newA = ICEAgent.randomCredentials()
            let newB = ICEAgent.randomCredentials()
            a.agent.restart(localUfrag: newA.ufrag, localPassword: newA.password)
            b.agent.restart(localUfrag: newB.ufrag, localPassword: newB.password)
            let kept = a.agent.selectedPair?.remote == b.socket.localAddress
            a.agent.setRemoteCredentials(ufrag: newB.ufrag, password: newB.password)
            b.agent.setRemoteCredentials(ufrag: newA.ufrag, password: newA.password)
            a.agent.addRemoteCandidate(candidate(of: b))
            b.agent.addRemoteCandidate(candidate(of: a))
            return kept
        }
        #expect(keptDuringRestart)
        #expect(await IOTestSupport.wait(loop) { a.selections.count == 2 && b.selections.count == 2 })
        #expect(await IOTestSupport.wait(loop, bothConnected(a, b)))
        await expectAgreement(loop, a, b)
    }
}
