import RTC
import RTCWire

/// The stream allocator on the SFU's loop (issue 33, item 4): one ``SFUStreamAllocator`` per
/// subscribe connection, fed with its estimate, its consumers' priorities and upper bounds and the
/// producers' measured layer rates; its decisions become each video consumer's target layer or pause.
///
/// It runs every ``SFUStreamAllocator/Configuration/interval`` (the layer rates are measured then too)
/// and at once for a subscriber whose estimate changed; a probe's padding goes out on every loop tick
/// (10 ms). A run allocates nothing while the consumers stay the same.
final class SFUAllocationTicker: EventLoopTicker {
    unowned(unsafe) let sfu: SFU
    private var nextRun: UInt64 = 0
    private var lastRun: UInt64 = 0
    private var lastPad: UInt64 = 0

    init(sfu: SFU) { self.sfu = sfu }

    func tick(now: UInt64) {
        if now >= nextRun {
            let elapsed = lastRun == 0 ? 0 : now &- lastRun
            lastRun = now
            nextRun = now &+ sfu.allocatorConfiguration.interval
            if elapsed > 0 {
                for producer in sfu.producers.values { producer.measureRates(elapsed: elapsed) }
            }
            for participant in sfu.participants.values where !participant.allocated.isEmpty {
                sfu.allocate(participant, now: now)
            }
        }
        // Estimates that changed since the last tick (reported from the send path, where a
        // decision must not run: it is in the middle of forwarding).
        // One that ran less than 100 ms ago waits for a later tick (kept, not dropped: a decrease
        // dropped here was seen only at the next periodic run, by then often 'holding', and bound late).
        var i = 0
        while i < sfu.estimateChanged.count {
            let participant = sfu.estimateChanged[i]
            if !participant.allocated.isEmpty, now &- participant.lastAllocation < 100_000_000 {
                i += 1
                continue
            }
            sfu.estimateChanged.remove(at: i)
            participant.estimateDirty = false
            if !participant.allocated.isEmpty { sfu.allocate(participant, now: now) }
        }
        let dt = lastPad == 0 ? 0 : now &- lastPad
        lastPad = now
        guard dt > 0, !sfu.probing.isEmpty else { return }
        for participant in sfu.probing { sfu.pad(participant, elapsed: min(dt, 100_000_000), now: now) }
    }
}

extension SFU {
    /// Adds a video consumer to its subscriber's allocator (control path).
    func addToAllocator(_ consumer: SFUConsumer, _ participant: Participant) {
        guard consumer.producer.kind == .video else { return }
        nextAllocationKey &+= 1
        consumer.allocationKey = nextAllocationKey
        participant.allocator.add(.init(key: nextAllocationKey, maxLayer: consumer.preferredPosition))
        participant.allocated.append(consumer)
        if allocationTicker == nil {
            let ticker = SFUAllocationTicker(sfu: self)
            allocationTicker = ticker
            loop.addTicker(ticker)
        }
    }

    /// Takes a consumer out of its subscriber's allocator (control path).
    func removeFromAllocator(_ consumer: SFUConsumer) {
        guard consumer.producer.kind == .video, let participant = participants[consumer.subscriberID] else { return }
        participant.allocator.remove(key: consumer.allocationKey)
        participant.allocated.removeAll { $0 === consumer }
        if participant.allocator.probeRate == 0 { probing.removeAll { $0 === participant } }
    }

    /// The subscribe connection's estimate as the allocator should use it, bits per second (nil: none;
    /// every consumer then gets the layer it asks for). A test may force one
    /// (``setEstimateOverrideOnLoop(participantID:bitsPerSecond:)``).
    ///
    /// The estimator starts at its start rate and climbs about 8 % a second, so until it has met the
    /// path's limit its figure is a lower bound of the path, not the path: a fresh subscriber would
    /// otherwise get low layers for tens of seconds on a link that carries them all. The estimate
    /// binds once it reports a decrease (delay overuse, loss or lost feedback) below what is being
    /// sent, and stops binding when every consumer is back at the layer it asked for with room to spare.
    func estimate(of participant: Participant) -> Int? {
        if let forced = participant.estimateOverride { return forced }
        guard let e = participant.subscribeConnection?.bandwidthEstimate, e.source != .none else {
            participant.constrained = false
            return nil
        }
        if participant.constrained {
            let a = participant.allocator
            if a.probe == nil, a.demandMet, e.state != .decreasing,
                a.allocatedRate <= e.targetBitrate / 100 * a.configuration.raiseHeadroom
            {
                participant.constrained = false
                return nil
            }
            return e.targetBitrate
        }
        // Overload (heavy loss on a full queue) binds as soon as less than is sent fits: it is no noise.
        let tolerance = e.overloaded ? 0 : participant.allocator.configuration.decreaseTolerance
        guard e.state == .decreasing || participant.decreaseSeen,
            e.targetBitrate + e.targetBitrate / 100 * tolerance < participant.allocator.allocatedRate
        else { return nil }
        participant.constrained = true
        return e.targetBitrate
    }

    /// The subscribe connection's estimator reported a change (loop thread, possibly in the middle of
    /// sending): the allocation runs on the next tick.
    func estimateChanged(_ participant: Participant) {
        if participant.subscribeConnection?.bandwidthEstimate?.state == .decreasing { participant.decreaseSeen = true }
        guard !participant.estimateDirty, !participant.allocated.isEmpty else { return }
        participant.estimateDirty = true
        estimateChanged.append(participant)
    }

    func priority(of consumer: SFUConsumer) -> SFUStreamAllocator.Priority {
        let producer = consumer.producer
        if producer.source == .screen { return .screen }
        if pinnedParticipants.contains(producer.participantID) { return .pinned }
        if speakingParticipants.contains(producer.participantID) { return .speaker }
        return .normal
    }

    /// One run of `participant`'s allocator: inputs in, decisions out to its consumers.
    func allocate(_ participant: Participant, now: UInt64) {
        participant.lastAllocation = now
        // In place on the participant (a class): no copy of the allocator's arrays.
        participant.allocator.estimate = estimate(of: participant)
        participant.decreaseSeen = false
        if participant.estimateOverride == nil, let e = participant.subscribeConnection?.bandwidthEstimate {
            participant.allocator.acknowledgedRate = e.acknowledgedBitrate
            participant.allocator.congested = e.state == .decreasing
            participant.allocator.overloaded = e.overloaded
        } else {
            participant.allocator.acknowledgedRate = 0
            participant.allocator.congested = false
            participant.allocator.overloaded = false
        }
        var audio = 0
        for consumer in participant.consumers where consumer.producer.kind == .audio {
            audio += consumer.producer.totalBitrate
        }
        participant.allocator.audioRate = audio
        var padding = false
        for (i, consumer) in participant.allocated.enumerated() {
            participant.allocator.update(
                i, priority: priority(of: consumer), maxLayer: consumer.preferredPosition,
                rates: consumer.producer.ratesByQuality)
            if !consumer.paused && consumer.hasForwarded || consumer.track.canPad { padding = true }
        }
        participant.allocator.paddingAvailable = padding
        participant.allocator.allocate(now: now)
        let overloaded = participant.allocator.overloaded
        for (i, consumer) in participant.allocated.enumerated() {
            consumer.allocate(position: participant.allocator.tracks[i].target, now: now, overloaded: overloaded)
        }
        let isProbing = probing.contains { $0 === participant }
        if participant.allocator.probeRate > 0, !isProbing {
            probing.append(participant)
        } else if participant.allocator.probeRate == 0, isProbing {
            probing.removeAll { $0 === participant }
        }
    }

    /// Probe padding for one loop tick: `elapsed` nanoseconds at the allocator's probe rate, sent as
    /// copies of the packets most recently sent on the probed consumer (or another forwarding one).
    func pad(_ participant: Participant, elapsed: UInt64, now: UInt64) {
        let rate = participant.allocator.probeRate
        guard rate > 0 else { return }
        participant.paddingCredit += Int(UInt64(rate) &* elapsed / 8_000_000_000)
        guard participant.paddingCredit > 0 else { return }
        var preferred: SFUConsumer?
        if let probe = participant.allocator.probe, participant.allocated.indices.contains(probe.track) {
            preferred = participant.allocated[probe.track]
        }
        // Copies of media just sent where a consumer forwards (fewer, larger packets), else
        // padding-only packets (every video paused: nothing to copy).
        var sent = preferred?.sendProbePadding(bytes: participant.paddingCredit, now: now) ?? 0
        if sent == 0 {
            for consumer in participant.allocated where consumer !== preferred {
                sent = consumer.sendProbePadding(bytes: participant.paddingCredit, now: now)
                if sent > 0 { break }
            }
        }
        if sent == 0 {
            for consumer in participant.allocated where consumer.track.canPad {
                sent = consumer.track.sendPadding(bytes: participant.paddingCredit, now: now)
                consumer.probeBytes &+= UInt64(sent)
                if sent > 0 { break }
            }
        }
        // Credit not spent now is not saved up into a burst later.
        participant.paddingCredit = sent > 0 ? participant.paddingCredit - sent : 0
        participant.paddingCredit = max(-4_000, min(participant.paddingCredit, 4_000))
    }

    // MARK: Public control (loop thread)

    /// Marks a publisher as pinned in the room: its video comes before others' in every subscriber's
    /// allocation (after screen shares). Call on ``loop``.
    public func setPinnedOnLoop(participantID: String, pinned: Bool) {
        loop.assertInLoop()
        if pinned {
            pinnedParticipants.insert(participantID)
        } else {
            pinnedParticipants.remove(participantID)
        }
    }

    /// Forces `participantID`'s subscribe estimate (bits per second; nil: back to its estimator's), for
    /// tests and experiments. Runs its allocation at once. Call on ``loop``.
    public func setEstimateOverrideOnLoop(participantID: String, bitsPerSecond: Int?) throws {
        loop.assertInLoop()
        guard let participant = participants[participantID] else {
            throw SFUError.unknownParticipant(participantID)
        }
        participant.estimateOverride = bitsPerSecond
        if !participant.allocated.isEmpty { allocate(participant, now: EventLoop.now()) }
    }

    /// The active speaker of a group changed (the observer's report, on the loop): its webcam gets
    /// the speaker's priority in every allocation.
    func speakerChanged(group: String, label: String?) {
        if let previous = speakerByGroup[group] { speakingParticipants.remove(previous) }
        speakerByGroup[group] = nil
        guard let label, let producer = audioLevelObserver?.source(group: group, label: label) as? SFUProducer
        else { return }
        speakerByGroup[group] = producer.participantID
        speakingParticipants.insert(producer.participantID)
    }

    /// The allocator's view of one subscribe connection, for stats.
    func transportStats(_ participant: Participant) -> SFUTransportStats {
        let a = participant.allocator
        return SFUTransportStats(
            participantID: participant.id,
            estimate: participant.estimateOverride ?? participant.subscribeConnection?.bandwidthEstimate?.targetBitrate,
            estimateBinds: a.estimate != nil, allocatedBitrate: a.allocatedRate,
            probeBitrate: a.probeRate, videoConsumers: participant.allocated.count,
            pausedConsumers: participant.allocated.filter(\.paused).count, raises: a.raises,
            decreases: a.decreases, probes: a.probes, failedProbes: a.failedProbes,
            overloadDecreases: a.overloadDecreases,
            probeBytes: participant.allocated.reduce(0) { $0 &+ $1.probeBytes } &+ participant.retiredProbeBytes)
    }
}
