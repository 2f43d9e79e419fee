import RTC
import RTCWire
import Synchronization

/// The media half of the room server: a selective forwarding unit in the style of mediasoup.
///
/// Each participant has up to two server-side connections, both ICE-lite:
/// - *publish*: the client offers its tracks, the SFU answers `a=setup:active` (it is the DTLS client
///   and sends its ClientHello right behind the response to the client's first check); each received
///   track becomes a producer.
/// - *subscribe*: the SFU offers one send transceiver per consumer (`a=setup:actpass`) and re-offers
///   when consumers are added or removed (``onRenegotiationNeeded``); the client answers, usually
///   `active`, which makes the SFU the DTLS server.
///
/// All connections live on one ``EventLoop`` owned by the SFU, so forwarding is a direct call chain on
/// that thread: publisher connection → producer → consumers → subscriber connections, with no
/// allocation, lock or task hop per packet. The `async` control calls hop onto the loop; the
/// `…OnLoop` ones run there (reached from elsewhere through ``onLoop(_:)``) and assert it in debug builds.
// Safe: loop-confined behind onLoop/async calls; on-loop methods assert the loop in debug builds.
public final class SFU: @unchecked Sendable {
    public let configuration: SFUConfiguration
    /// The loop every SFU connection runs on.
    public let loop: EventLoop

    /// Called on the loop thread when a participant's subscribe connection needs a new offer
    /// (consumers added or removed); the room layer should call ``subscriberOfferOnLoop(participantID:)``.
    public var onRenegotiationNeeded: (@Sendable (_ participantID: String) -> Void)? {
        get { renegotiationHandler.value }
        set { renegotiationHandler.value = newValue }
    }

    final class Participant {
        let id: String
        var publishConnection: PeerConnection?
        var subscribeConnection: PeerConnection?
        var producers: [SFUProducer] = []
        var producerByTransceiver: [ObjectIdentifier: SFUProducer] = [:]
        /// m-lines whose producer was closed: they stay in the session and never carry a new track.
        var retiredTransceivers: Set<ObjectIdentifier> = []
        var consumers: [SFUConsumer] = []
        var consumerByTransceiver: [ObjectIdentifier: SFUConsumer] = [:]
        /// The m-line of each producer and consumer (keyed by the unit's identity): the forwarding
        /// units know only their ports (``SFUUpstream``, ``SFUDownTrack``), the JSEP side knows m-lines.
        var transceiverOf: [ObjectIdentifier: RTPTransceiver] = [:]
        /// Transceivers included in the subscribe offer awaiting an answer (nil: none outstanding).
        var offered: Set<ObjectIdentifier>?
        var renegotiationPending = false
        /// The stream allocator of the subscribe connection and its video consumers, in the
        /// allocator's track order (SFUAllocation.swift).
        var allocator: SFUStreamAllocator
        var allocated: [SFUConsumer] = []
        /// A forced estimate (tests), bits per second.
        var estimateOverride: Int?
        /// Probe padding bytes owed (positive) or sent ahead (negative).
        var paddingCredit = 0
        var retiredProbeBytes: UInt64 = 0
        /// Whether the subscribe connection's estimate binds (it reported a decrease below what was
        /// sent; SFUAllocation.swift), when the allocator last ran, and whether an estimate change
        /// waits for the next tick.
        var constrained = false
        var lastAllocation: UInt64 = 0
        var estimateDirty = false
        /// The estimator reported a decrease since the allocator last ran: the allocator may run
        /// after the estimator has moved on to holding, and the decrease must still bind.
        var decreaseSeen = false
        init(id: String, allocator: SFUStreamAllocator.Configuration = .init()) {
            self.id = id
            self.allocator = SFUStreamAllocator(configuration: allocator)
        }
    }

    /// A callback that the loop thread reads while another thread may set it: one box per
    /// `on…` property, shared with the closures that call it. Read per event (a state change, a
    /// layer switch), never per packet, so a lock is cheap here.
    final class HandlerBox<Handler: Sendable>: Sendable {
        private let stored = Mutex<Handler?>(nil)
        var value: Handler? {
            get { stored.withLock { $0 } }
            set { stored.withLock { $0 = newValue } }
        }
    }

    /// Called on the loop thread each time one of a participant's connections changes state
    /// (`connected`, `disconnected`, `failed`, `closed`, …), so the room layer can watch a transport
    /// without asking for its state over and over.
    public var onConnectionStateChanged:
        (@Sendable (_ participantID: String, _ role: SFUConnectionRole, _ state: PeerConnectionState) -> Void)?
    {
        get { connectionStateHandler.value }
        set { connectionStateHandler.value = newValue }
    }

    let connectionStateHandler = HandlerBox<@Sendable (String, SFUConnectionRole, PeerConnectionState) -> Void>()

    /// Reports `connection`'s state changes as `role` of `participantID` (``onConnectionStateChanged``).
    func reportStates(of connection: PeerConnection, participantID: String, role: SFUConnectionRole) {
        let handler = connectionStateHandler
        connection.onStateChange = { state in handler.value?(participantID, role, state) }
    }

    /// Called on the loop thread when a consumer starts forwarding another simulcast layer of its
    /// producer (the first layer included): what the subscriber now receives. Not called for a
    /// single-layer producer.
    public var onLayerChanged:
        (@Sendable (_ subscriberID: String, _ producerID: String, _ quality: SFULayerQuality) -> Void)?
    {
        get { layerHandler.value }
        set { layerHandler.value = newValue }
    }

    let layerHandler = HandlerBox<@Sendable (String, String, SFULayerQuality) -> Void>()

    /// Called on the loop thread when a subscriber's answer refuses a consumer's m-line, because it
    /// does not accept the producer's codec (an H.264 producer and a VP8-only subscriber): the
    /// consumer forwards nothing, and the room layer tells the subscriber.
    public var onConsumerRefused:
        (@Sendable (_ subscriberID: String, _ producerID: String, _ codec: MediaCodec) -> Void)?
    {
        get { refusedHandler.value }
        set { refusedHandler.value = newValue }
    }

    let refusedHandler = HandlerBox<@Sendable (String, String, MediaCodec) -> Void>()

    /// A consumer switched layers (loop thread; a switch is rare, so this may allocate).
    func layerSwitched(_ consumer: SFUConsumer) {
        let order = consumer.producer.layersByQuality
        guard order.count > 1, let position = order.firstIndex(of: consumer.currentLayer) else { return }
        let quality: SFULayerQuality = position == 0 ? .low : position == order.count - 1 ? .high : .medium
        layerHandler.value?(consumer.subscriberID, consumer.producer.id, quality)
    }

    var participants: [String: Participant] = [:]
    /// Node-to-node media links by id (SFUPipe.swift).
    var pipes: [String: SFUPipe] = [:]
    var producers: [String: SFUProducer] = [:]
    /// The stream allocator's timer (created with the first video consumer), the subscribers with a
    /// probe under way, and the priorities it reads: pinned publishers and active speakers.
    var allocationTicker: SFUAllocationTicker?
    var probing: [Participant] = []
    /// Subscribers whose estimate changed since the last tick.
    var estimateChanged: [Participant] = []
    var nextAllocationKey = 0
    var pinnedParticipants: Set<String> = []
    var speakingParticipants: Set<String> = []
    var speakerByGroup: [String: String] = [:]
    var allocatorConfiguration: SFUStreamAllocator.Configuration { configuration.allocator }
    /// Live counters of open consumers and producers; read them on ``loop`` (totals: ``counterSnapshot()``).
    public internal(set) var counters = SFUCounters()
    /// Totals of closed consumers and producers, so global counters never go backwards.
    var retiredNACKsReceived: UInt64 = 0
    var retiredNACKsSent: UInt64 = 0
    var nextPortIndex = 0
    /// The shared socket when the port range is a single port (ICE-ufrag demultiplexing).
    var sharedPort: UDPPortMux?
    /// One DTLS identity for every connection of this SFU (generated once; nil falls back to one each).
    let certificate: DTLSCertificate?
    let renegotiationHandler = HandlerBox<@Sendable (String) -> Void>()
    var closed = false

    /// Creates an SFU with its own event loop thread.
    public convenience init(configuration: SFUConfiguration = SFUConfiguration()) {
        self.init(configuration: configuration, loop: EventLoop(name: configuration.loopName))
    }

    /// Creates an SFU, or throws when its event loop cannot be created (out of descriptors)
    /// instead of stopping the process.
    public static func make(configuration: SFUConfiguration) throws(EventLoopError) -> SFU {
        SFU(configuration: configuration, loop: try EventLoop.make(name: configuration.loopName))
    }

    private init(configuration: SFUConfiguration, loop: EventLoop) {
        self.configuration = configuration
        self.loop = loop
        self.certificate = try? DTLSCertificate.generate(commonName: "understudy-sfu")
    }

    /// Runs `body` on the SFU's loop thread and returns its result: the one way in, from any other
    /// thread, to the on-loop methods (`consumeOnLoop`, `subscriberOfferOnLoop`, …), each of which
    /// asserts in debug builds that it runs on ``loop``. Several calls in one `body` take one hop.
    ///
    /// Throws what `body` throws, or ``EventLoopError/shutDown(name:)`` once the loop has stopped.
    @discardableResult
    public func onLoop<T: Sendable>(_ body: @escaping @Sendable (SFU) throws -> T) async throws -> T {
        try await loop.submit { [self] in try body(self) }
    }

    // MARK: Publishing

    /// Answers a participant's publish offer; every received m-line becomes a producer.
    ///
    /// A later offer from the same participant renegotiates the same connection and creates producers
    /// for new m-lines only.
    ///
    /// - Parameter sources: the source of each new track in m-line order; when absent, audio is
    ///   `mic`, the first video `webcam` and later videos `screen`.
    public func publish(
        participantID: String, offer: SessionDescription, sources: [SFUMediaSource]? = nil
    ) async throws -> (answer: SessionDescription, producers: [ProducerInfo]) {
        try await loop.submit { [self] in
            try publishOnLoop(participantID: participantID, offer: offer, sources: sources)
        }
    }

    /// ``publish(participantID:offer:sources:)`` on the loop thread (an edge publishes its guests'
    /// tracks from its node-to-node handler, which runs there).
    public func publishOnLoop(
        participantID: String, offer: SessionDescription, sources: [SFUMediaSource]? = nil
    ) throws -> (answer: SessionDescription, producers: [ProducerInfo]) {
        loop.assertInLoop()
        do {
            guard !closed else { throw SFUError.closed }
            let participant =
                participants[participantID] ?? Participant(id: participantID, allocator: configuration.allocator)
            participants[participantID] = participant
            let connection: PeerConnection
            let isNew = participant.publishConnection == nil
            if let existing = participant.publishConnection {
                connection = existing
            } else {
                connection = try makeConnection()
                participant.publishConnection = connection
                reportStates(of: connection, participantID: participantID, role: .publish)
                connection.onRTP = { [unowned participant] transceiver, rid, packet in
                    participant.producerByTransceiver[ObjectIdentifier(transceiver)]?.receive(rid: rid, packet)
                }
            }
            let answer: SessionDescription
            do {
                try connection.setRemoteDescription(offer, type: .offer)
                answer = try connection.createAnswer()
                try connection.setLocalDescription(answer)
            } catch {
                // A connection that never negotiated gives its port back at once.
                if isNew { dropPublishConnection(participant) }
                throw SFUError.negotiation("\(error)")
            }
            var created: [ProducerInfo] = []
            var videoCount = participant.producers.filter { $0.kind == .video }.count
            for t in connection.transceivers where t.currentDirection == .recvonly || t.currentDirection == .sendrecv {
                let key = ObjectIdentifier(t)
                guard participant.producerByTransceiver[key] == nil, !participant.retiredTransceivers.contains(key)
                else { continue }
                let source: SFUMediaSource
                if let sources, created.count < sources.count {
                    source = sources[created.count]
                } else if t.kind == .audio {
                    source = .microphone
                } else {
                    source = videoCount == 0 ? .webcam : .screen
                }
                if t.kind == .video { videoCount += 1 }
                let producer = SFUProducer(
                    id: sfuRandomID("p-"), participantID: participantID, kind: t.kind, source: source,
                    mid: t.mid ?? "", rids: t.remoteRIDs,
                    upstream: SFUTransportUpstream(transport: connection.transport, transceiver: t),
                    audioLevelExtensionID: t.negotiatedExtensionID(RTPExtensionURI.audioLevel) ?? 0,
                    captureTimeExtensionID: t.negotiatedExtensionID(AbsCaptureTime.uri) ?? 0,
                    dependencyDescriptorExtensionID: t.negotiatedExtensionID(RTPExtensionURI.dependencyDescriptor) ?? 0,
                    sfu: self,
                    codec: t.codec, codecParameters: t.codecParameters)
                participant.producers.append(producer)
                participant.transceiverOf[ObjectIdentifier(producer)] = t
                participant.producerByTransceiver[ObjectIdentifier(t)] = producer
                producers[producer.id] = producer
                created.append(producer.info)
            }
            return (answer, created)
        }
    }

    /// Closes a participant's publish connection when it carries no producer (its port and its ICE,
    /// DTLS and SRTP state are freed): when the room refuses what a first offer published, and when a
    /// guest goes back to the audience and asks for it. Returns true when a connection was closed.
    @discardableResult
    public func closePublishConnectionIfUnused(_ participantID: String) async -> Bool {
        await loop.submit { [self] in closePublishConnectionIfUnusedOnLoop(participantID) }
    }

    /// ``closePublishConnectionIfUnused(_:)`` on the loop thread.
    @discardableResult
    public func closePublishConnectionIfUnusedOnLoop(_ participantID: String) -> Bool {
        loop.assertInLoop()
        guard let participant = participants[participantID], participant.producers.isEmpty,
            participant.publishConnection != nil
        else { return false }
        dropPublishConnection(participant)
        return true
    }

    /// Closes producer `producerID` on the loop thread (as ``closeProducer(_:)``); false when unknown.
    @discardableResult
    public func closeProducerOnLoop(_ producerID: String) -> Bool {
        loop.assertInLoop()
        guard let producer = producers[producerID] else { return false }
        removeProducer(producer)
        return true
    }

    func dropPublishConnection(_ participant: Participant) {
        participant.publishConnection?.onRTP = nil
        participant.publishConnection?.close()
        participant.publishConnection = nil
        for p in participant.producers { participant.transceiverOf[ObjectIdentifier(p)] = nil }
        participant.producerByTransceiver = [:]
        participant.retiredTransceivers = []
        if participant.subscribeConnection == nil, participant.consumers.isEmpty {
            participants[participant.id] = nil
        }
    }

    /// Stops forwarding a producer and removes it from every subscriber (renegotiation follows).
    public func closeProducer(_ producerID: String) async throws {
        try await loop.submit { [self] in
            guard let producer = producers[producerID] else { throw SFUError.unknownProducer(producerID) }
            removeProducer(producer)
        }
    }

    // MARK: Subscribing

    /// Forwards a producer to `subscriber`: adds a send transceiver to its subscribe connection
    /// (created on first use). The subscriber must then renegotiate; ``onRenegotiationNeeded`` fires too.
    /// On the loop thread (from elsewhere through ``onLoop(_:)``).
    public func consumeOnLoop(subscriber: String, producerID: String, quality: SFULayerQuality = .high) throws
        -> ConsumerInfo
    {
        loop.assertInLoop()
        do {
            guard !closed else { throw SFUError.closed }
            guard let producer = producers[producerID], !producer.closed else {
                throw SFUError.unknownProducer(producerID)
            }
            let participant =
                participants[subscriber] ?? Participant(id: subscriber, allocator: configuration.allocator)
            participants[subscriber] = participant
            if let existing = participant.consumers.first(where: { $0.producer === producer }) {
                return consumerInfo(existing, renegotiationNeeded: false)
            }
            let connection = try subscribeConnection(participant)
            let transceiver: RTPTransceiver
            if let free = connection.transceivers.first(where: {
                $0.kind == producer.kind && $0.isReusable
                    && participant.consumerByTransceiver[ObjectIdentifier($0)] == nil
            }) {
                // The m-line of a track this subscriber no longer receives carries the new one (under
                // a new mid): a live stream's offers stay the size of its stage, however many guests
                // came and went.
                connection.reuseTransceiver(free, direction: .sendonly)
                transceiver = free
            } else {
                transceiver = connection.addTransceiver(kind: producer.kind, direction: .sendonly)
                connection.assignMids()
            }
            // The subscriber is offered exactly the producer's codec (and H.264 profile): it either
            // accepts it or refuses the m-line (reported through onConsumerRefused), never gets
            // another codec's packets.
            transceiver.setCodecPreferences(
                [producer.codec], parameters: producer.codecParameters.map { [producer.codec: $0] } ?? [:])
            let consumer = SFUConsumer(
                id: sfuRandomID("c-"), subscriberID: subscriber, producer: producer,
                track: SFUTransportDownTrack(transport: connection.transport, transceiver: transceiver))
            consumer.quality = quality
            consumer.updateTarget()
            participant.consumers.append(consumer)
            participant.transceiverOf[ObjectIdentifier(consumer)] = transceiver
            participant.consumerByTransceiver[ObjectIdentifier(transceiver)] = consumer
            producer.consumers.append(consumer)
            addToAllocator(consumer, participant)
            needsRenegotiation(participant)
            return consumerInfo(consumer, renegotiationNeeded: true)
        }
    }

    /// Stops forwarding a producer to `subscriber`; its m-line becomes inactive at the next offer.
    /// On the loop thread.
    public func stopConsumingOnLoop(subscriber: String, producerID: String) throws {
        loop.assertInLoop()
        do {
            guard let participant = participants[subscriber] else { throw SFUError.unknownParticipant(subscriber) }
            guard let consumer = participant.consumers.first(where: { $0.producer.id == producerID }) else {
                throw SFUError.notConsuming(subscriber: subscriber, producerID: producerID)
            }
            removeConsumer(consumer, from: participant)
        }
    }

    /// Creates the (re-)offer for a participant's subscribe connection. On the loop thread.
    public func subscriberOfferOnLoop(participantID: String) throws -> SessionDescription {
        loop.assertInLoop()
        do {
            guard let participant = participants[participantID] else {
                throw SFUError.unknownParticipant(participantID)
            }
            guard let connection = participant.subscribeConnection, !connection.transceivers.isEmpty else {
                throw SFUError.nothingToOffer(participantID)
            }
            do {
                let offer = try connection.createOffer()
                try connection.setLocalDescription(offer)
                participant.offered = Set(connection.transceivers.map { ObjectIdentifier($0) })
                participant.renegotiationPending = false
                return offer
            } catch {
                throw SFUError.negotiation("\(error)")
            }
        }
    }

    /// Applies the subscriber's answer, on the loop thread.
    ///
    /// Returns true when consumers changed while the offer was out: the answer then asked for another
    /// round (``onRenegotiationNeeded``), which a caller on the loop may make at once.
    @discardableResult
    public func subscriberAnswerOnLoop(participantID: String, answer: SessionDescription) throws -> Bool {
        loop.assertInLoop()
        do {
            guard let participant = participants[participantID], let connection = participant.subscribeConnection
            else { throw SFUError.unknownParticipant(participantID) }
            guard participant.offered != nil else { throw SFUError.noPendingOffer(participantID) }
            do { try connection.setRemoteDescription(answer, type: .answer) } catch {
                throw SFUError.negotiation("\(error)")
            }
            // A consumer whose m-line the answer refused (the subscriber does not take the producer's
            // codec) is reported, not forwarded into the void.
            for consumer in participant.consumers where !consumer.refusedReported {
                guard let t = participant.transceiverOf[ObjectIdentifier(consumer)],
                    participant.offered?.contains(ObjectIdentifier(t)) == true, t.isReusable
                else { continue }
                consumer.refusedReported = true
                counters.consumersRefused &+= 1
                refusedHandler.value?(participantID, consumer.producer.id, consumer.producer.codec)
            }
            participant.offered = nil
            guard participant.renegotiationPending else { return false }
            participant.renegotiationPending = false
            renegotiationHandler.value?(participantID)
            return true
        }
    }

    // MARK: Layers

    /// Sets the simulcast quality `subscriber` receives of `producerID`; the switch happens on the
    /// next key frame of the new layer, which is requested from the publisher. On the loop thread.
    public func setPreferredLayerOnLoop(subscriber: String, producerID: String, quality: SFULayerQuality) throws {
        loop.assertInLoop()
        try withConsumerOnLoop(subscriber, producerID) { consumer in
            consumer.quality = quality
            consumer.viewport = nil
            retarget(consumer)
        }
    }

    /// Picks the smallest layer whose resolution covers `width`×`height` (the largest when none
    /// does). On the loop thread.
    public func setViewportOnLoop(subscriber: String, producerID: String, width: Int, height: Int) throws {
        loop.assertInLoop()
        try withConsumerOnLoop(subscriber, producerID) { consumer in
            consumer.viewport = (max(0, width), max(0, height))
            retarget(consumer)
        }
    }

    // MARK: Participants

    /// Closes both connections of a participant, its producers (removed from every subscriber) and
    /// its consumers.
    public func closeParticipant(_ participantID: String) async {
        await loop.submit { [self] in closeParticipantOnLoop(participantID) }
    }

    /// ``closeParticipant(_:)`` on the loop thread (an edge closes its members' subscribe
    /// connections from its node-to-node handler, which runs there).
    public func closeParticipantOnLoop(_ participantID: String) {
        loop.assertInLoop()
        do {
            guard let participant = participants.removeValue(forKey: participantID) else { return }
            probing.removeAll { $0 === participant }
            estimateChanged.removeAll { $0 === participant }
            participant.subscribeConnection?.onBandwidthEstimate = nil
            for p in participant.producers { removeProducer(p) }
            for c in participant.consumers { retire(c) }
            participant.consumers = []
            participant.consumerByTransceiver = [:]
            participant.publishConnection?.onRTP = nil
            participant.publishConnection?.close()
            participant.subscribeConnection?.onKeyframeRequest = nil
            participant.subscribeConnection?.onNACK = nil
            participant.subscribeConnection?.close()
        }
    }

    /// Closes every connection and stops the loop thread.
    public func shutdown() async {
        let ids = await loop.submit { [self] in Array(participants.keys) }
        for id in ids { await closeParticipant(id) }
        await loop.submit { [self] in
            for id in Array(pipes.keys) { closePipeOnLoop(id: id) }
            closed = true
            sharedPort?.close()
            sharedPort = nil
            if let observer = audioLevelObserver { loop.removeTicker(observer) }
            audioLevelObserver = nil
            if let ticker = allocationTicker { loop.removeTicker(ticker) }
            allocationTicker = nil
            probing = []
        }
        loop.shutdown()
    }

    // MARK: Observability

    /// Counters of every producer and consumer, and the global totals.
    public func stats() async -> SFUStats {
        await loop.submit { [self] in
            let producerStats = producers.values.sorted { $0.id < $1.id }.map { $0.stats() }
            var consumerStats: [SFUConsumerStats] = []
            for p in participants.values.sorted(by: { $0.id < $1.id }) {
                for c in p.consumers { consumerStats.append(c.stats()) }
            }
            var totals = counters
            totals.nacksReceived = retiredNACKsReceived + consumerStats.reduce(0) { $0 + $1.nacksReceived }
            totals.nacksSent = retiredNACKsSent + producerStats.reduce(0) { $0 + $1.nacksSent }
            totals.producers = producerStats.count
            totals.consumers = consumerStats.count
            var transports: [SFUTransportStats] = []
            for p in participants.values {
                if p.publishConnection != nil { totals.publishConnections += 1 }
                if p.subscribeConnection != nil { totals.subscribeConnections += 1 }
                for c in [p.publishConnection, p.subscribeConnection] {
                    totals.transportFeedbackSent &+= c?.counters.transportFeedbackSent ?? 0
                    totals.transportFeedbackReceived &+= c?.counters.transportFeedbackReceived ?? 0
                    totals.rembReceived &+= c?.counters.rembReceived ?? 0
                    totals.rembSent &+= c?.counters.rembSent ?? 0
                }
                if let estimate = p.subscribeConnection?.bandwidthEstimate {
                    totals.subscriberEstimates += 1
                    totals.subscriberEstimateBitrate &+= UInt64(estimate.targetBitrate)
                    if estimate.state == .decreasing { totals.subscriberEstimatesDecreasing += 1 }
                }
                guard p.subscribeConnection != nil || !p.allocated.isEmpty else { continue }
                let t = transportStats(p)
                transports.append(t)
                totals.pausedConsumers += t.pausedConsumers
                totals.allocationRaises &+= t.raises
                totals.allocationDecreases &+= t.decreases
                totals.probes &+= t.probes
                totals.failedProbes &+= t.failedProbes
                totals.allocationOverloadDecreases &+= t.overloadDecreases
                totals.probeBytes &+= t.probeBytes
            }
            transports.sort { $0.participantID < $1.participantID }
            let pipeStats = pipes.values.map { $0.stats() }.sorted { $0.id < $1.id }
            totals.pipes = pipeStats.count
            for p in pipeStats.map(\.counters) {
                totals.pipePacketsSent &+= p.packetsSent
                totals.pipePacketsReceived &+= p.packetsReceived
                totals.pipeRetransmissions &+= p.retransmissions
                totals.pipePLIsReceived &+= p.plisReceived
                totals.pipeDatagramsDropped &+=
                    p.droppedUnknownAddress &+ p.droppedMalformed &+ p.droppedUnknownSSRC &+ p.droppedOversize
            }
            return SFUStats(
                counters: totals, producers: producerStats, consumers: consumerStats, transports: transports,
                pipes: pipeStats)
        }
    }

    /// Global counters only (cheap enough for every `/metrics` scrape).
    public func counterSnapshot() async -> SFUCounters { await stats().counters }

    // MARK: Active speaker

    /// Called on the loop thread when the active speaker of a group of observed microphones changes:
    /// the group and the new speaker's label (nil: everyone went silent). See
    /// ``observeAudioLevelOnLoop(producerID:group:label:)``.
    public var onSpeakerChanged: (@Sendable (_ group: String, _ label: String?) -> Void)? {
        get { speakerHandler.value }
        set { speakerHandler.value = newValue }
    }

    let speakerHandler = HandlerBox<@Sendable (String, String?) -> Void>()

    /// Samples every observed microphone each 300 ms on this loop; created with the first observation.
    var audioLevelObserver: SFUAudioLevelObserver?

    /// Adds the audio producer `producerID` to the active-speaker group `group` (e.g. a room), reported
    /// as `label` in ``onSpeakerChanged``. Call on ``loop``. The producer leaves its group when it closes.
    public func observeAudioLevelOnLoop(producerID: String, group: String, label: String) throws {
        loop.assertInLoop()
        guard !closed else { throw SFUError.closed }
        guard let producer = producers[producerID], !producer.closed, producer.kind == .audio else {
            throw SFUError.unknownProducer(producerID)
        }
        let observer: SFUAudioLevelObserver
        if let existing = audioLevelObserver {
            observer = existing
        } else {
            let handler = speakerHandler
            observer = SFUAudioLevelObserver(interval: 300 * 1_000_000) { [unowned self] group, label in
                speakerChanged(group: group, label: label)
                handler.value?(group, label)
            }
            audioLevelObserver = observer
            loop.addTicker(observer)
        }
        observer.add(producer, id: producerID, group: group, label: label)
    }

    /// Connection state of a participant's publish and subscribe connections (nil where none exists).
    public func connectionStates(participantID: String) async -> (
        publish: PeerConnectionState?, subscribe: PeerConnectionState?
    ) {
        await loop.submit { [self] in
            let p = participants[participantID]
            return (p?.publishConnection?.state, p?.subscribeConnection?.state)
        }
    }

    // MARK: Internals (loop thread)

    func serverConfiguration(port: UInt16 = 0, mux: UDPPortMux? = nil) -> PeerConnectionConfiguration {
        // Answering `active` (RFC 5763 §5) makes the SFU the DTLS client of every connection whose
        // offer it answers: being ICE-lite, it starts the handshake on the check that selects its
        // pair, so the peer connects after two round trips instead of three.
        var c = PeerConnectionConfiguration(
            bindAddresses: configuration.mediaAddresses, port: port, iceLite: true, answerDTLSRole: .client,
            cname: "understudy-sfu", portMux: mux)
        c.maxRemoteSSRCs = configuration.maxSSRCsPerConnection
        // Consumers answer NACKs from their producer's shared buffer (SFURetransmission.swift).
        c.senderHistory = false
        return c
    }

    /// A server-side connection with its sockets bound: every connection on one shared port when the
    /// range is a single port, else on the next free port of the range, or ephemeral.
    func makeConnection() throws -> PeerConnection {
        loop.assertInLoop()
        if let range = configuration.portRange, range.lowerBound == range.upperBound {
            do {
                if sharedPort == nil {
                    guard
                        let address = SocketAddress(
                            ip: configuration.mediaAddresses.first ?? "127.0.0.1", port: range.lowerBound)
                    else { throw SFUError.negotiation("bad media address") }
                    sharedPort = try UDPPortMux(loop: loop, bindTo: address, iceTCP: configuration.iceTCP)
                    sharedPort?.socket?.measureReceiveQueue(shedMediaOlderThan: configuration.staleMediaAfter)
                }
                let connection = try PeerConnection(
                    loop: loop, configuration: serverConfiguration(mux: sharedPort), certificate: certificate)
                try connection.bindSockets()
                return connection
            } catch let error as SFUError {
                throw error
            } catch {
                throw SFUError.negotiation("cannot open a connection on port \(range.lowerBound): \(error)")
            }
        }
        guard let range = configuration.portRange else {
            do {
                let connection = try PeerConnection(
                    loop: loop, configuration: serverConfiguration(), certificate: certificate)
                try connection.bindSockets()
                return connection
            } catch {
                throw SFUError.negotiation("cannot open a connection: \(error)")
            }
        }
        let count = Int(range.upperBound) - Int(range.lowerBound) + 1
        for step in 0..<count {
            let port = UInt16(Int(range.lowerBound) + (nextPortIndex + step) % count)
            guard
                let connection = try? PeerConnection(
                    loop: loop, configuration: serverConfiguration(port: port), certificate: certificate)
            else {
                continue
            }
            do {
                try connection.bindSockets()
                nextPortIndex = (nextPortIndex + step + 1) % count
                return connection
            } catch {
                connection.close()
            }
        }
        throw SFUError.noFreePort
    }

    func subscribeConnection(_ participant: Participant) throws -> PeerConnection {
        if let existing = participant.subscribeConnection { return existing }
        let connection = try makeConnection()
        connection.onKeyframeRequest = { [unowned participant] transceiver in
            participant.consumerByTransceiver[ObjectIdentifier(transceiver)]?.keyframeRequested(now: EventLoop.now())
        }
        connection.onNACK = { [unowned participant] transceiver, sequenceNumbers, now in
            participant.consumerByTransceiver[ObjectIdentifier(transceiver)]?.handleNACK(sequenceNumbers, now: now)
        }
        connection.onBandwidthEstimate = { [unowned self, unowned participant] _ in estimateChanged(participant) }
        participant.subscribeConnection = connection
        reportStates(of: connection, participantID: participant.id, role: .subscribe)
        return connection
    }

    func needsRenegotiation(_ participant: Participant) {
        if participant.offered != nil {
            participant.renegotiationPending = true  // asked again once the outstanding answer arrives
        } else {
            renegotiationHandler.value?(participant.id)
        }
    }

    func consumerInfo(_ c: SFUConsumer, renegotiationNeeded: Bool) -> ConsumerInfo {
        ConsumerInfo(
            id: c.id, producerID: c.producer.id, subscriberID: c.subscriberID, publisherID: c.producer.participantID,
            kind: c.producer.kind, source: c.producer.source,
            mid: participants[c.subscriberID]?.transceiverOf[ObjectIdentifier(c)]?.mid ?? "",
            renegotiationNeeded: renegotiationNeeded)
    }

    /// Runs `body` on a consumer, on the loop thread.
    func withConsumerOnLoop(_ subscriber: String, _ producerID: String, _ body: (SFUConsumer) -> Void) throws {
        loop.assertInLoop()
        do {
            guard let participant = participants[subscriber] else { throw SFUError.unknownParticipant(subscriber) }
            guard let consumer = participant.consumers.first(where: { $0.producer.id == producerID }) else {
                throw SFUError.notConsuming(subscriber: subscriber, producerID: producerID)
            }
            body(consumer)
        }
    }

    func retarget(_ consumer: SFUConsumer) { consumer.retarget(now: EventLoop.now()) }

    func removeConsumer(_ consumer: SFUConsumer, from participant: Participant) {
        loop.assertInLoop()
        retire(consumer)
        participant.consumers.removeAll { $0 === consumer }
        guard let transceiver = participant.transceiverOf.removeValue(forKey: ObjectIdentifier(consumer)) else {
            needsRenegotiation(participant)
            return
        }
        participant.consumerByTransceiver[ObjectIdentifier(transceiver)] = nil
        // m-lines are never removed. The first one is the BUNDLE tag whose transport the others
        // share (RFC 8843 §7.2.1): rejecting it moves the tag, which not every stack follows, so it
        // only goes inactive and is never reused (as mediasoup-client does). The others
        // are rejected (port 0); once the subscriber has answered that, a later consumer of the same
        // kind recycles the m-line with a new mid (consumeOnLoop). Reusing the old mid made aiortc
        // keep its ended track and raise no new one (issue 32).
        if let connection = participant.subscribeConnection, connection.transceivers.first !== transceiver {
            connection.stopTransceiver(transceiver)
        } else {
            transceiver.direction = .inactive
        }
        needsRenegotiation(participant)
    }

    func retire(_ consumer: SFUConsumer) {
        removeFromAllocator(consumer)
        participants[consumer.subscriberID]?.retiredProbeBytes &+= consumer.probeBytes
        consumer.closed = true
        consumer.producer.consumers.removeAll { $0 === consumer }
        retiredNACKsReceived &+= consumer.track.senderStats?.nacksReceived ?? 0
    }

    func removeProducer(_ producer: SFUProducer) {
        loop.assertInLoop()
        guard !producer.closed else { return }
        for consumer in producer.consumers {
            if let subscriber = participants[consumer.subscriberID] {
                removeConsumer(consumer, from: subscriber)
            } else {
                retire(consumer)
            }
        }
        retiredNACKsSent &+= producer.stats().nacksSent
        for tap in producer.pipeTaps { tap.pipe.remove(producerID: producer.id) }
        // Its receive streams (a reorder buffer of some 375 KB per video encoding) go now, not with
        // the connection: a guest back in the audience keeps that for the next invite.
        producer.upstream.stopReceiving()
        producer.closed = true
        producer.consumers = []
        producers[producer.id] = nil
        if let owner = participants[producer.participantID] {
            owner.producers.removeAll { $0 === producer }
            if let transceiver = owner.transceiverOf.removeValue(forKey: ObjectIdentifier(producer)) {
                owner.producerByTransceiver[ObjectIdentifier(transceiver)] = nil
                owner.retiredTransceivers.insert(ObjectIdentifier(transceiver))
            }
        }
    }
}
