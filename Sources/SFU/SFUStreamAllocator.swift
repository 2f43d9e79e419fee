/// Shares one subscriber transport's bandwidth estimate among its video consumers (issue 33, item 4).
///
/// A pure decision unit: the SFU fills in each track's inputs (priority, the highest layer the
/// subscriber asked for, the measured bitrate of each of the producer's layers), the audio rate and
/// the transport's estimate, calls ``allocate(now:)`` and applies each track's ``Track/target`` to
/// its consumer (which switches on the next key frame of that layer). It keeps only what it needs to
/// decide over time: when it last lowered or raised a layer, the hold-down before the next raise, and
/// the probe under way. No clock of its own and no I/O, so it runs on a synthetic clock in tests.
///
/// Layers are *positions* in quality order (0 = lowest); `-1` is paused (nothing forwarded). Audio is
/// never paused: its rate is taken off the estimate first.
///
/// The rules, in the order they apply on each run:
/// 1. **Fit** (``fit(budget:into:)``): tracks by priority (screen share, pinned, active speaker,
///    others; equal priorities in the order they were added) each get their lowest flowing layer if
///    it fits (a track already forwarding: if ``Configuration/pauseShare`` percent of it does, or
///    while the subscriber acknowledges nearly all that is sent), else pause (a track of one layer is never paused); then each, in the same order, climbs
///    as far as the rest of the budget and its own upper bound allow.
/// 2. **Step down at once**: a track above its fit goes down to it (a pause included) on this run;
///    while the estimator reports ``overloaded``, to what fits the budget itself (no tolerance), but
///    never to a pause: overload lowers layers (a starved receiver reads as overload too).
/// 3. **Step up slowly**: a raise waits ``Configuration/holdDown`` after any decrease (doubled after
///    each failed probe, up to ``Configuration/maxHoldDown``) and ``Configuration/stepInterval`` after
///    the last raise, goes one layer at a time, to the first track in priority order whose next layer
///    fits ``Configuration/raiseHeadroom`` percent of the budget together with every other track's
///    current layer.
/// 4. **Probe first**: when no raise fits, it asks for padding (``probeRate``) so that the estimator
///    can see whether the path carries the first deficient track's next layer; the probe succeeds when
///    the estimate makes room for that raise within ``Configuration/probeDuration``, and fails when
///    the time runs out, a step down happens meanwhile, or the estimator reports congestion (the
///    padding stops at once). A raise more than ``Configuration/maxProbeStep`` times the budget away
///    is probed in steps, each proven step's acknowledged rate the base of the next.
///
/// With no estimate (the subscriber sends no feedback) every track gets the highest flowing layer it
/// asked for, as before the allocator existed.
public struct SFUStreamAllocator: Sendable {
    /// Timings and margins, nanoseconds and percent.
    public struct Configuration: Sendable, Equatable {
        /// How often the SFU runs the allocator besides estimate changes.
        public var interval: UInt64 = 500_000_000
        /// No raise sooner than this after a decrease or a failed probe.
        public var holdDown: UInt64 = 2_000_000_000
        /// The hold-down after repeated failed probes grows up to this.
        public var maxHoldDown: UInt64 = 8_000_000_000
        /// No raise sooner than this after the previous raise.
        public var stepInterval: UInt64 = 1_000_000_000
        /// A raise must fit this share of the budget (the rest absorbs key frames and the estimate's noise).
        public var raiseHeadroom = 90
        /// A decision goes down only when the current layers overshoot the budget by more than this
        /// share: one decrease of a GCC estimator (to 0.85 × the acknowledged rate) on a busy machine
        /// moves nothing, a real bottleneck (decrease after decrease) does.
        public var decreaseTolerance = 20
        /// A track that is forwarding keeps its lowest layer while the budget covers this share of
        /// it, and pauses only below (a paused track resumes only when the whole layer fits). A
        /// pause is a freeze, and it feeds itself: with only audio acknowledged, the estimator's
        /// next decrease (0.85 × the acknowledged rate) falls to the audio rate (issue 33: a viewer
        /// behind 500 kbit/s and 1 % loss froze for 5 s on an estimate of 45 kbit/s).
        public var pauseShare = 50
        /// How long a probe may take to prove a raise, counted from the last time the estimate rose
        /// by ``probeProgress`` percent during it.
        public var probeDuration: UInt64 = 2_500_000_000
        public var probeProgress = 3
        /// The longest a probe may go on while the estimate climbs.
        public var maxProbeDuration: UInt64 = 20_000_000_000
        /// A probe's acknowledged rate counts only after this long (the rate is measured over half a second).
        public var minProbeTime: UInt64 = 1_000_000_000
        /// Padding asked for during a probe: the media rate after the raise plus this share, minus what
        /// is sent now. A padding probe is proven when ``raiseHeadroom`` of what was acknowledged holds
        /// the raise: at 15 % (× 0.9 × a lossy path's 99 %) that held only just, and a viewer behind
        /// 1 % loss stayed on its lowest layer for 20 s after the path was lifted.
        public var probeOvershoot = 25
        /// Whether to ask for probes at all (off: raises wait for the estimate alone).
        public var probing = true
        /// A padding probe asks for at most this many times the budget it starts from (the
        /// estimate, or the rate a probe proved). A raise further away is proven in steps, each
        /// step's acknowledged rate the next one's base, as libwebrtc probes at 2× and 3×: a
        /// probe of 15× into a shaped path fills its queue, the losses cut the estimate to the
        /// audio rate, and the viewer froze for seconds (issue 33).
        public var maxProbeStep = 3

        public init() {}
    }

    /// Priority classes, highest first.
    public enum Priority: Int, Sendable, Comparable {
        case normal = 0
        case speaker = 1
        case pinned = 2
        case screen = 3

        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    /// Measured bitrates of up to six layers, bits per second, lowest first (0: not flowing): three
    /// simulcast layers, or the rungs of a scalable stream (L3T3: S0 at three frame rates, S1, S2).
    /// Inline, so that filling it in allocates nothing.
    public struct LayerRates: Sendable, Equatable {
        public static let capacity = 6
        private var r0 = 0, r1 = 0, r2 = 0, r3 = 0, r4 = 0, r5 = 0
        /// Layers the producer has (flowing or not).
        public var count = 0

        public init() {}

        public init(_ rates: [Int]) {
            count = min(rates.count, Self.capacity)
            for (i, r) in rates.prefix(Self.capacity).enumerated() { self[i] = r }
        }

        public subscript(i: Int) -> Int {
            get {
                switch i {
                case 0: return r0
                case 1: return r1
                case 2: return r2
                case 3: return r3
                case 4: return r4
                case 5: return r5
                default: return 0
                }
            }
            set {
                switch i {
                case 0: r0 = newValue
                case 1: r1 = newValue
                case 2: r2 = newValue
                case 3: r3 = newValue
                case 4: r4 = newValue
                case 5: r5 = newValue
                default: break
                }
            }
        }

        /// Whether no layer has been measured yet (a producer that just started).
        var unmeasured: Bool { (0..<count).allSatisfy { self[$0] <= 0 } }
    }

    /// One video consumer of the transport.
    public struct Track: Sendable, Equatable {
        /// The caller's key for this track (the allocator never reads it).
        public var key: Int
        public var priority: Priority = .normal
        /// The highest layer position the subscriber asked for (`setQuality`/`setViewPort`).
        public var maxLayer: Int = 0
        public var rates = LayerRates()
        /// The decision: the layer position to forward, -1 paused. ``unset`` until the first run.
        public internal(set) var target = SFUStreamAllocator.unset

        public init(key: Int, priority: Priority = .normal, maxLayer: Int = 0, rates: LayerRates = LayerRates()) {
            self.key = key
            self.priority = priority
            self.maxLayer = maxLayer
            self.rates = rates
        }

        /// The highest layer this track may have: its bound, and a flowing layer (any, while none was measured).
        var ceiling: Int {
            let top = min(maxLayer, rates.count - 1)
            if rates.unmeasured { return top }
            var l = top
            while l >= 0, rates[l] <= 0 { l -= 1 }
            return l
        }

        /// The next flowing layer above `layer` up to the ceiling (nil: none).
        func next(above layer: Int) -> Int? {
            let top = ceiling
            var l = layer + 1
            while l <= top {
                if rates.unmeasured || rates[l] > 0 { return l }
                l += 1
            }
            return nil
        }

        /// The cost of forwarding `layer` (0 when paused or unmeasured).
        func cost(_ layer: Int) -> Int { layer >= 0 && !rates.unmeasured ? max(0, rates[layer]) : 0 }
    }

    /// A probe under way: which raise it is meant to prove, until when, and the estimate it started
    /// from. A *media* probe (no padding available) raises the track at once and proves it by the
    /// media itself: while it runs, the track is lowered only when the estimate falls below where it
    /// started.
    public struct Probe: Sendable, Equatable {
        public var track: Int
        public var layer: Int
        public var until: UInt64
        public var startEstimate: Int
        public var media: Bool
        /// The highest estimate seen during the probe: while it keeps climbing the probe goes on
        /// (the estimator rises a few percent a second), up to ``Configuration/maxProbeDuration``.
        public var bestEstimate: Int = 0
        public var started: UInt64 = 0
        /// A step toward a raise further than ``Configuration/maxProbeStep`` allows: the video
        /// rate (media and padding) it shows the path, bits per second (0: not a step).
        public var step: Int = 0
    }

    /// A track not allocated yet.
    public static let unset = -2

    public var configuration: Configuration
    /// The tracks, in the order they were added (ties of priority keep it).
    public private(set) var tracks: [Track] = []
    /// The transport's estimate, bits per second (nil: none; every track gets what it asks for).
    public var estimate: Int?
    /// What the subscriber acknowledged receiving lately, bits per second (0: unknown), and whether
    /// the estimator reports congestion now (it is decreasing). A padding probe whose bytes are
    /// acknowledged proves its raise at once: the estimator's own climb (a few percent a second)
    /// would take tens of seconds to get there.
    public var acknowledgedRate = 0
    public var congested = false
    /// The estimator reports overload (``BandwidthEstimate/overloaded``): heavy loss on a full queue,
    /// and an estimate cut to what arrived. The layers then go down to what fits the budget without
    /// ``Configuration/decreaseTolerance``: that slack is for a GCC estimate's noise, and a layer
    /// kept in it keeps the queue full and loses the key frames of the switch.
    public var overloaded = false
    /// The rate a probe proved (acknowledged without congestion), bits per second: the budget is
    /// never below it until the estimator reports congestion.
    public private(set) var provenRate = 0
    /// What the transport's audio consumers take, bits per second (never paused).
    public var audioRate = 0
    /// Padding the transport should send now, bits per second (0: none).
    public private(set) var probeRate = 0
    /// Whether the transport can pad now (a video consumer is forwarding). Without padding a probe
    /// raises the track and lets its own media prove the layer.
    public var paddingAvailable = true
    public private(set) var probe: Probe?
    /// Counters for stats: raises, decreases, probes started and probes that failed.
    public private(set) var raises: UInt64 = 0
    public private(set) var decreases: UInt64 = 0
    public private(set) var probes: UInt64 = 0
    public private(set) var failedProbes: UInt64 = 0
    /// Decreases decided while the estimator reported ``overloaded`` (counted in ``decreases`` too).
    public private(set) var overloadDecreases: UInt64 = 0

    private var lastDecrease: UInt64?
    private var lastRaise: UInt64?
    private var hold: UInt64
    // Scratch, sized with the tracks: a run allocates nothing.
    private var order: [Int] = []
    private var fitted: [Int] = []

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        hold = configuration.holdDown
    }

    // MARK: Tracks (control path)

    /// Adds a track; it gets a layer on the next run.
    public mutating func add(_ track: Track) {
        var t = track
        t.target = Self.unset
        tracks.append(t)
        order.append(0)
        fitted.append(0)
    }

    /// Removes the track with `key` (a probe for it ends).
    public mutating func remove(key: Int) {
        guard let i = tracks.firstIndex(where: { $0.key == key }) else { return }
        tracks.remove(at: i)
        order.removeLast()
        fitted.removeLast()
        if let p = probe {
            if p.track == i {
                endProbe()
            } else if p.track > i {
                probe?.track = p.track - 1
            }
        }
    }

    /// The inputs of track `index` (priority, upper bound, measured rates), set in place.
    public mutating func update(_ index: Int, priority: Priority, maxLayer: Int, rates: LayerRates) {
        tracks[index].priority = priority
        tracks[index].maxLayer = maxLayer
        tracks[index].rates = rates
    }

    /// The index of the track with `key`.
    public func index(key: Int) -> Int? { tracks.firstIndex { $0.key == key } }

    /// Whether every track has the highest flowing layer it asks for.
    public var demandMet: Bool { tracks.allSatisfy { $0.target >= $0.ceiling } }

    /// The media rate of the current decisions, bits per second (audio included).
    public var allocatedRate: Int {
        var total = audioRate
        for t in tracks where t.target >= 0 { total += t.cost(t.target) }
        return total
    }

    // MARK: Deciding

    /// Decides every track's layer for `now`. Returns true when some target changed.
    @discardableResult
    public mutating func allocate(now: UInt64) -> Bool {
        guard let estimate else {
            endProbe()
            var changed = false
            for i in tracks.indices {
                let ceiling = tracks[i].ceiling
                if tracks[i].target != ceiling {
                    tracks[i].target = ceiling
                    changed = true
                }
            }
            return changed
        }
        sortByPriority()
        if congested { provenRate = 0 }
        let budget = max(0, max(estimate, provenRate) - audioRate)
        var changed = false
        if tracks.contains(where: { $0.target == Self.unset }) {
            // A new track starts at what fits beside the others: no reason to wait for it. When the
            // path holds it below what it asks for, that counts as a decrease for the hold-down.
            fit(budget: budget, overloaded: overloaded)
            for i in tracks.indices where tracks[i].target == Self.unset {
                tracks[i].target = fitted[i]
                changed = true
                if fitted[i] < tracks[i].ceiling { lastDecrease = now }
            }
        }
        // The subscriber acknowledges (nearly) all that is sent now: the path carries the current
        // layers, whatever the estimate says, so no forwarding track is paused on this run. Nor is any
        // track on an overloaded path: overload lowers layers, and the cut to what arrived while the queue
        // drained paused a viewer the overload had just moved to its lowest layer (a 3 s freeze); a
        // starved receiver (a busy machine dropping on its own socket) reads as overload too, and paused
        // tracks that had not started yet.
        let carried = acknowledgedRate > 0 && acknowledgedRate >= allocatedRate / 100 * 90
        fit(
            budget: overloaded ? budget : budget + budget / 100 * configuration.decreaseTolerance,
            unproven: probe?.media == true ? probe?.track ?? -1 : -1, carried: carried || overloaded,
            overloaded: overloaded)
        var decreased = false
        if let p = probe, p.media, estimate >= p.startEstimate, fitted[p.track] < p.layer {
            // A media probe holds its layer while the estimate has not fallen.
            fitted[p.track] = min(p.layer, tracks[p.track].ceiling)
        }
        for i in tracks.indices {
            let fitting = fitted[i]
            let target = tracks[i].target
            if fitting < target {
                tracks[i].target = fitting
                changed = true
                // Below what the subscriber now allows: the path, not a new preference.
                if fitting < min(target, tracks[i].ceiling) { decreased = true }
            }
        }
        if decreased {
            decreases &+= 1
            if overloaded { overloadDecreases &+= 1 }
            lastDecrease = now
            if probe != nil { probeFailed(now: now) }
            return true
        }
        if raise(budget: budget, now: now) { changed = true }
        return changed
    }

    /// One raise (as many layers of one track as fit), or a probe for one, when the hold-downs allow it.
    private mutating func raise(budget: Int, now: UInt64) -> Bool {
        if let last = lastDecrease, now &- last < hold {
            endProbe()
            return false
        }
        var budget = budget
        let current = allocatedRate - audioRate
        if let p = probe, !congested, now &- p.started >= configuration.minProbeTime, acknowledgedRate > audioRate {
            // The path carried the padding (or, for a media probe, the raised layer itself): what was
            // acknowledged is proven, whatever the estimate says.
            let t = tracks[p.track]
            let after = p.media ? current : current - t.cost(t.target) + t.cost(p.layer)
            // Padding: the raise must fit the headroom of what got through. Media: nearly all of it
            // got through (the acknowledged rate is measured on the wire, the layer rates at the source).
            let carried =
                p.media
                ? acknowledgedRate - audioRate >= after / 100 * 90
                : (acknowledgedRate - audioRate) / 100 * configuration.raiseHeadroom >= after
            if carried {
                provenRate = max(provenRate, acknowledgedRate)
                budget = max(budget, acknowledgedRate - audioRate)
                if p.media {
                    endProbe()
                    hold = configuration.holdDown
                }
            } else if p.step > 0, acknowledgedRate - audioRate >= p.step / 100 * 90 {
                // The step got through: its rate is the base of the next one, after the step interval.
                provenRate = max(provenRate, acknowledgedRate)
                endProbe()
                hold = configuration.holdDown
                lastRaise = now
                return false
            }
        }
        if let p = probe, !p.media, congested {
            // The padding overloads the path: stop it at once, before its losses cut the estimate further.
            probeFailed(now: now)
            return false
        }
        let limit = budget / 100 * configuration.raiseHeadroom
        if var p = probe, let estimate, estimate > p.bestEstimate + p.bestEstimate / 100 * configuration.probeProgress,
            now &- p.started < configuration.maxProbeDuration
        {
            // The estimator follows the probe: give it the time to get there.
            p.bestEstimate = estimate
            p.until = max(p.until, now &+ configuration.probeDuration)
            probe = p
        }
        if let p = probe {
            if p.media, current <= limit {
                // The estimate now carries what the media probe raised: proven.
                endProbe()
                hold = configuration.holdDown
            } else if now >= p.until {
                probeFailed(now: now)
                guard p.media else { return false }
                // The estimate never made room for the raised layer: back to what fits.
                fit(budget: budget, unproven: p.track)
                guard fitted[p.track] < tracks[p.track].target else { return false }
                tracks[p.track].target = fitted[p.track]
                decreases &+= 1
                return true
            }
        }
        if let last = lastRaise, now &- last < configuration.stepInterval { return false }
        var firstDeficient: (track: Int, layer: Int)?
        for i in order {
            let t = tracks[i]
            guard let next = t.next(above: t.target) else { continue }
            if firstDeficient == nil { firstDeficient = (i, next) }
            let others = current - t.cost(t.target)
            if others + t.cost(next) <= limit {
                // The estimate already makes room: climb as far as it does, no probe needed.
                var layer = next
                while let above = t.next(above: layer), others + t.cost(above) <= limit { layer = above }
                tracks[i].target = layer
                raises &+= 1
                lastRaise = now
                if probe != nil {
                    endProbe()
                    hold = configuration.holdDown  // the path carried it: back to the short hold
                }
                return true
            }
        }
        guard probe == nil else { return false }
        guard configuration.probing, let wanted = firstDeficient else { return false }
        let t = tracks[wanted.track]
        let after = current - t.cost(t.target) + t.cost(wanted.layer)
        probes &+= 1
        guard paddingAvailable else {
            // Nothing to pad with (every video paused): the raise itself is the probe.
            probe = Probe(
                track: wanted.track, layer: wanted.layer, until: now &+ configuration.probeDuration,
                startEstimate: estimate ?? 0, media: true, bestEstimate: estimate ?? 0, started: now)
            tracks[wanted.track].target = wanted.layer
            raises &+= 1
            lastRaise = now
            return true
        }
        // Pad up to the rate the raise would need, plus the overshoot, so that the estimator sees it;
        // a raise too far from the budget is shown in steps.
        let wantedGoal = after + after / 100 * configuration.probeOvershoot
        let stepLimit = max(budget, current) * configuration.maxProbeStep
        let goal = min(wantedGoal, stepLimit)
        probeRate = max(0, goal - current)
        probe = Probe(
            track: wanted.track, layer: wanted.layer, until: now &+ configuration.probeDuration,
            startEstimate: estimate ?? 0, media: false, bestEstimate: estimate ?? 0, started: now,
            step: goal < wantedGoal ? goal : 0)
        return false
    }

    private mutating func probeFailed(now: UInt64) {
        failedProbes &+= 1
        lastDecrease = now
        hold = min(configuration.maxHoldDown, hold &* 2)
        endProbe()
    }

    private mutating func endProbe() {
        probe = nil
        probeRate = 0
    }

    /// ``order`` := track indices by priority (highest first), stable; insertion sort, in place.
    private mutating func sortByPriority() {
        for i in tracks.indices { order[i] = i }
        var i = 1
        while i < order.count {
            let item = order[i]
            var j = i - 1
            while j >= 0, tracks[order[j]].priority < tracks[item].priority {
                order[j + 1] = order[j]
                j -= 1
            }
            order[j + 1] = item
            i += 1
        }
    }

    /// What ``fit(budget:)`` found last, one layer per track (-1 paused).
    public var fitting: [Int] { fitted }

    /// The layers that fit `budget` (bits per second) by priority, into ``fitting`` (one per track; -1
    /// paused): each track's lowest flowing layer first, then each one as high as the rest allows.
    /// `unproven`: a track whose layer a media probe raised and nothing proved yet (no pause
    /// hysteresis for it).
    /// `carried`: the path acknowledged the current layers, so a forwarding track keeps its lowest one.
    mutating func fit(budget: Int, unproven: Int = -1, carried: Bool = false, overloaded: Bool = false) {
        var left = budget
        for i in order {
            let t = tracks[i]
            let ceiling = t.ceiling
            var lowest = -1
            if ceiling >= 0 {
                lowest = 0
                while lowest < ceiling, !t.rates.unmeasured, t.rates[lowest] <= 0 { lowest += 1 }
            }
            // A track of one layer is never paused: the SFU cannot adapt it, and a busy machine's
            // scheduling delay reads as a queue, which would cut a recording bot's only video (as
            // mediasoup's simple consumers, it stays out of the sharing); its rate is charged first.
            // Pause hysteresis: a forwarding track keeps its lowest layer down to pauseShare of it.
            let forwarding = t.target >= 0 && i != unproven
            let needed = forwarding ? t.cost(lowest) / 100 * configuration.pauseShare : t.cost(lowest)
            if lowest >= 0, needed <= left || t.rates.count <= 1 || (forwarding && carried) || overloaded {
                fitted[i] = lowest
                left -= t.cost(lowest)
            } else {
                fitted[i] = -1
            }
        }
        for i in order where fitted[i] >= 0 {
            let t = tracks[i]
            while let next = t.next(above: fitted[i]) {
                let extra = t.cost(next) - t.cost(fitted[i])
                guard extra <= left else { break }
                left -= extra
                fitted[i] = next
            }
        }
    }
}
