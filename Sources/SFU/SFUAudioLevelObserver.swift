import RTC

/// Active-speaker selection over one group of microphones (a room), fed one sample per interval.
///
/// Rule: a microphone is *active* when its last `ssrc-audio-level` is at most ``activeLevel``
/// (-dBov, i.e. louder than -50 dBov) or carries the voice-activity flag. The loudest active mic
/// (lowest -dBov, ties broken by label) becomes the speaker once it has been the loudest in
/// ``confirmSamples`` consecutive samples; when no mic has been active for ``silenceSamples`` samples
/// the speaker becomes nil.
public struct SFUSpeakerDetector: Sendable {
    public static let activeLevel: UInt8 = 50
    public static let confirmSamples = 2
    public static let silenceSamples = 5

    /// The current speaker's label, nil when nobody speaks.
    public private(set) var speaker: String?
    private var candidate: String?
    private var candidateCount = 0
    private var silentCount = 0

    public init() {}

    /// Feeds one sample of every mic (`label`, level in -dBov, voice flag); returns the new speaker
    /// when it changed (`.some(nil)`: the speaker went silent), nil when it did not.
    public mutating func update(_ levels: [(label: String, level: UInt8, voice: Bool)]) -> String?? {
        var loudest: (label: String, level: UInt8)?
        for sample in levels where sample.voice || sample.level <= Self.activeLevel {
            if let l = loudest, (l.level, l.label) <= (sample.level, sample.label) { continue }
            loudest = (sample.label, sample.level)
        }
        guard let loudest else {
            candidate = nil
            candidateCount = 0
            silentCount += 1
            if speaker != nil, silentCount >= Self.silenceSamples {
                speaker = nil
                return .some(nil)
            }
            return nil
        }
        silentCount = 0
        if loudest.label == candidate {
            candidateCount += 1
        } else {
            candidate = loudest.label
            candidateCount = 1
        }
        if candidateCount >= Self.confirmSamples, speaker != loudest.label {
            speaker = loudest.label
            return .some(speaker)
        }
        return nil
    }
}

/// What the audio-level observer reads of a microphone: its latest level and whether it is gone.
/// ``SFUProducer`` keeps both up to date per packet (two stores), so observing costs nothing per packet.
protocol SFUAudioLevelSource: AnyObject {
    /// The last `ssrc-audio-level` (-dBov, 127 = silence) and voice flag; nil before any.
    var latestAudioLevel: (level: UInt8, voice: Bool)? { get }
    /// Closed sources leave their group at the next sample.
    var isClosed: Bool { get }
}

/// Pushes active-speaker changes (after mediasoup's AudioLevelObserver): on its loop's clock it samples
/// the microphones of every group each ``interval`` and calls ``onSpeakerChanged`` when a group's
/// speaker changes, instead of the room layer polling the levels across threads.
///
/// Loop-thread confined. A group lives while it has microphones or a speaker to clear, so removing
/// the last mic of a speaking room still ends with a `nil` speaker.
final class SFUAudioLevelObserver: EventLoopTicker {
    struct Member {
        let source: any SFUAudioLevelSource
        let id: String
        let label: String
    }
    struct Group {
        var members: [Member] = []
        var detector = SFUSpeakerDetector()
    }

    /// Spacing of the samples (ns).
    let interval: UInt64
    /// Called on the loop thread with the group and its new speaker's label (nil: silence).
    var onSpeakerChanged: (String, String?) -> Void
    private(set) var groups: [String: Group] = [:]
    private var nextSample: UInt64?

    init(interval: UInt64, onSpeakerChanged: @escaping (String, String?) -> Void) {
        self.interval = interval
        self.onSpeakerChanged = onSpeakerChanged
    }

    var isEmpty: Bool { groups.isEmpty }

    /// Observes `source` (known as `id`) in `group`, reported as `label`; a repeated id is ignored.
    func add(_ source: any SFUAudioLevelSource, id: String, group: String, label: String) {
        var g = groups[group] ?? Group()
        guard !g.members.contains(where: { $0.id == id }) else { return }
        g.members.append(Member(source: source, id: id, label: label))
        groups[group] = g
    }

    /// Stops observing the source `id` in every group.
    /// The source reported as `label` in `group` (the stream allocator finds the speaker's producer).
    func source(group: String, label: String) -> (any SFUAudioLevelSource)? {
        groups[group]?.members.first { $0.label == label }?.source
    }

    func remove(id: String) {
        for key in Array(groups.keys) { groups[key]?.members.removeAll { $0.id == id } }
    }

    func tick(now: UInt64) {
        guard let due = nextSample else {
            nextSample = now &+ interval
            return
        }
        guard now >= due else { return }
        nextSample = now &+ interval
        for key in Array(groups.keys) {
            guard var g = groups[key] else { continue }
            g.members.removeAll { $0.source.isClosed }
            var samples: [(label: String, level: UInt8, voice: Bool)] = []
            for m in g.members {
                if let l = m.source.latestAudioLevel { samples.append((m.label, l.level, l.voice)) }
            }
            let change = g.detector.update(samples)
            groups[key] = g.members.isEmpty && g.detector.speaker == nil ? nil : g
            if let change { onSpeakerChanged(key, change) }
        }
    }
}
