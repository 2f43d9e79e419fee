import RTC
import RTCWire

/// Which of a participant's two server connections an ICE restart is for.
public enum SFUConnectionRole: String, Sendable {
    case publish, subscribe
}

extension SFU {
    /// ICE restart of an existing connection without SDP (the room protocol's `restartIce`): the
    /// connection takes the client's new credentials and makes fresh ones of its own, which a shared
    /// UDP port learns at once. DTLS, SRTP, producers and consumers are untouched, so forwarding
    /// resumes with the same SSRCs and sequence numbers once the client's checks succeed.
    ///
    /// - Returns: the server's new ufrag and password.
    public func restartICE(
        participantID: String, connection role: SFUConnectionRole, remoteUfrag: String, remotePassword: String
    ) async throws -> (ufrag: String, password: String) {
        try await loop.submit { [self] in
            try restartICEOnLoop(
                participantID: participantID, connection: role, remoteUfrag: remoteUfrag,
                remotePassword: remotePassword)
        }
    }

    /// ``restartICE(participantID:connection:remoteUfrag:remotePassword:)`` on the loop thread.
    public func restartICEOnLoop(
        participantID: String, connection role: SFUConnectionRole, remoteUfrag: String, remotePassword: String
    ) throws -> (ufrag: String, password: String) {
        loop.assertInLoop()
        do {
            guard !closed else { throw SFUError.closed }
            guard let participant = participants[participantID] else {
                throw SFUError.unknownParticipant(participantID)
            }
            let found = role == .publish ? participant.publishConnection : participant.subscribeConnection
            guard let connection = found else {
                throw SFUError.negotiation("no \(role.rawValue) connection to restart")
            }
            do {
                let fresh = try connection.restartICE()
                try connection.setRemoteICECredentials(ufrag: remoteUfrag, password: remotePassword)
                return fresh
            } catch {
                throw SFUError.negotiation("ICE restart failed: \(error)")
            }
        }
    }

    /// ICE restart of the publish connection by SDP: a re-offer with new credentials. Same as a
    /// renegotiating ``publish(participantID:offer:sources:)``, which already keeps every producer;
    /// the answer carries the server's fresh credentials.
    ///
    /// The re-offer must keep the negotiated m-lines: one that adds an m-line is refused, since the
    /// room would never learn of the track it carries (publish new tracks with `produce`).
    /// ``restartPublishICE(participantID:offer:)`` on the loop thread.
    public func restartPublishICEOnLoop(participantID: String, offer: SessionDescription) throws -> SessionDescription {
        loop.assertInLoop()
        guard let connection = participants[participantID]?.publishConnection else {
            throw SFUError.negotiation("no publish connection to restart")
        }
        let known = Set(connection.transceivers.compactMap(\.mid))
        let offered = offer.media.map { $0.mid ?? "" }
        guard offered.count <= known.count, offered.allSatisfy({ known.contains($0) }) else {
            throw SFUError.restartAddsMLines
        }
        return try publishOnLoop(participantID: participantID, offer: offer).answer
    }

    public func restartPublishICE(participantID: String, offer: SessionDescription) async throws -> SessionDescription {
        let known: Set<String>? = await loop.submit { [self] in
            participants[participantID]?.publishConnection.map { Set($0.transceivers.compactMap(\.mid)) }
        }
        guard let known else { throw SFUError.negotiation("no publish connection to restart") }
        let offered = offer.media.map { $0.mid ?? "" }
        guard offered.count <= known.count, offered.allSatisfy({ known.contains($0) }) else {
            throw SFUError.restartAddsMLines
        }
        return try await publish(participantID: participantID, offer: offer).answer
    }
}
