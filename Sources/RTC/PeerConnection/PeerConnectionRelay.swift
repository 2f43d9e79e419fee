import RTCWire

/// Relayed candidates: one TURN allocation per configured ICE server, whose relayed socket joins
/// the ICE agent as a `relay` candidate when the allocation succeeds.
extension PeerConnection {
    /// Allocates on every configured TURN server and waits until each allocation succeeded or
    /// failed, or `timeout` passed, so that the next offer or answer lists the relayed candidates
    /// (this stack does not trickle). Host names are resolved here, off the loop. Without ICE
    /// servers it returns at once. Call it before ``createOffer(iceRestart:)`` or
    /// ``createAnswer()``; a connection that skips it still gathers relays with numeric
    /// addresses, adding them to its checks once they are allocated.
    public func gatherRelayCandidates(timeout seconds: Double = 5) async {
        let servers = configuration.iceServers
        guard !servers.isEmpty else { return }
        let resolved = UncheckedBox(servers.map { ($0, $0.resolve()) })
        guard loop.execute({ self.startRelays(resolved.value) }) else { return }
        // Woken by each allocation's outcome (`relayAllocationDone`); a timeout just ends the wait.
        try? await waitFor("TURN allocations", timeout: seconds) { [self] _ in
            closed || !turnClients.contains { $0.state == .new || $0.state == .allocating } ? .success(()) : nil
        }
    }

    /// Starts one TURN client per server (once). Loop thread only.
    func startRelays(_ servers: [(ICEServer, SocketAddress?)]) {
        guard turnClients.isEmpty, !closed, !servers.isEmpty, configuration.portMux == nil else { return }
        let bindAddress = configuration.bindAddresses.first ?? "0.0.0.0"
        for (server, address) in servers {
            guard let address else {
                relayErrors.append("\(server.url): cannot resolve \(server.host)")
                continue
            }
            let client = TURNClient(server: server, serverAddress: address, loop: loop)
            client.onAllocationDone = { [weak self] client in self?.relayAllocationDone(client) }
            turnClients.append(client)
            client.start(bindAddress: bindAddress)
        }
    }

    func relayAllocationDone(_ client: TURNClient) {
        defer { notifyStateWaiters() }  // ``gatherRelayCandidates(timeout:)`` waits for this
        guard !closed else { return }
        guard let relayed = client.relayedSocket else {
            if case .failed(let reason) = client.state { relayErrors.append("\(client.server.url): \(reason)") }
            return
        }
        relayed.handler = self
        ice?.addLocalSocket(relayed, relatedAddress: client.mappedAddress)
    }

    /// The relayed candidates' state, for error messages (empty without ICE servers).
    var relaySummary: String {
        guard !turnClients.isEmpty || !relayErrors.isEmpty else { return "" }
        let allocated = turnClients.filter { $0.state == .allocated }.count
        var text = "; TURN: \(allocated) of \(configuration.iceServers.count) allocated"
        if !relayErrors.isEmpty { text += " (" + relayErrors.joined(separator: "; ") + ")" }
        return text
    }

    /// The TURN clients' counters, per server URL.
    public var relayCounters: [(server: String, state: TURNClient.State, counters: TURNCounters)] {
        turnClients.map { ($0.server.url, $0.state, $0.counters) }
    }

    /// Whether the selected pair's local candidate is a TURN relayed one.
    public var isUsingRelay: Bool { ice?.selectedPair?.socket.relay != nil }
}
