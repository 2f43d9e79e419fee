import RTCWire

/// Relayed candidates: one TURN allocation per configured ICE server, whose relayed socket joins
/// the ICE agent as a `relay` candidate when the allocation succeeds.
extension MediaTransport {
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
        defer { delegate?.transport(self, didReport: .progress) }  // ``PeerConnection/gatherRelayCandidates(timeout:)`` waits for this
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
    var relayCounters: [(server: String, state: TURNClient.State, counters: TURNCounters)] {
        turnClients.map { ($0.server.url, $0.state, $0.counters) }
    }

    /// Whether the selected pair's local candidate is a TURN relayed one.
    var isUsingRelay: Bool { ice?.selectedPair?.socket.relay != nil }
}
