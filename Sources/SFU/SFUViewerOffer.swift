import RTC
import RTCWire

// WHEP (WHIP/WHEPSession.swift): the viewer offers and the SFU answers, once. The normal subscribe
// flow is the other way round (the SFU offers and re-offers as consumers change).

extension SFU {
    /// Answers a viewer's receive-only offer with one consumer of each of `producerIDs` (loop thread).
    ///
    /// The consumers' send transceivers are added without mids, so the offer's m-lines of the same
    /// kind adopt them in order; an offered m-line with no producer stays inactive. The subscribe
    /// connection is never re-offered: a later ``consumeOnLoop(subscriber:producerID:quality:)`` for
    /// one of these producers finds its consumer here. Fails when the participant already has a
    /// subscribe connection.
    public func answerViewerOfferOnLoop(participantID: String, offer: SessionDescription, producerIDs: [String]) throws
        -> (answer: SessionDescription, consumers: [ConsumerInfo])
    {
        loop.assertInLoop()
        guard !closed else { throw SFUError.closed }
        let participant =
            participants[participantID] ?? Participant(id: participantID, allocator: configuration.allocator)
        guard participant.subscribeConnection == nil else {
            throw SFUError.negotiation("'\(participantID)' already has a subscribe connection")
        }
        var sources: [SFUProducer] = []
        for id in producerIDs {
            guard let producer = producers[id], !producer.closed else { throw SFUError.unknownProducer(id) }
            sources.append(producer)
        }
        participants[participantID] = participant
        let connection = try subscribeConnection(participant)
        var created: [SFUConsumer] = []
        for producer in sources {
            let transceiver = connection.addTransceiver(kind: producer.kind, direction: .sendonly)
            // Answer with the producer's own codec only: a viewer that did not offer it gets the
            // m-line rejected rather than packets of a codec it did not accept.
            transceiver.setCodecPreferences(
                [producer.codec], parameters: producer.codecParameters.map { [producer.codec: $0] } ?? [:])
            let consumer = SFUConsumer(
                id: sfuRandomID("c-"), subscriberID: participantID, producer: producer,
                track: SFUTransportDownTrack(transport: connection.transport, transceiver: transceiver))
            participant.consumers.append(consumer)
            participant.transceiverOf[ObjectIdentifier(consumer)] = transceiver
            participant.consumerByTransceiver[ObjectIdentifier(transceiver)] = consumer
            producer.consumers.append(consumer)
            created.append(consumer)
        }
        do {
            try connection.setRemoteDescription(offer, type: .offer)
            let answer = try connection.createAnswer()
            try connection.setLocalDescription(answer)
            return (answer, created.map { consumerInfo($0, renegotiationNeeded: false) })
        } catch {
            for consumer in created { retire(consumer) }
            participant.consumers.removeAll { c in created.contains { $0 === c } }
            participant.consumerByTransceiver = [:]
            for consumer in created { participant.transceiverOf[ObjectIdentifier(consumer)] = nil }
            participant.subscribeConnection?.onKeyframeRequest = nil
            participant.subscribeConnection?.onNACK = nil
            participant.subscribeConnection?.close()
            participant.subscribeConnection = nil
            if participant.publishConnection == nil { participants[participantID] = nil }
            throw SFUError.negotiation("\(error)")
        }
    }
}
