import Testing

@testable import SFU

/// A microphone as the observer sees it: the level its last packet carried.
final class FakeMic: SFUAudioLevelSource {
    var latestAudioLevel: (level: UInt8, voice: Bool)?
    var isClosed = false
    init(_ level: UInt8? = nil, voice: Bool = false) { latestAudioLevel = level.map { ($0, voice) } }
}

@Suite("SFU audio-level observer") struct SFUAudioLevelObserverTests {
    static let ms: UInt64 = 1_000_000

    /// An observer whose events are collected, on a synthetic clock that starts at 1 s.
    final class Harness {
        var events: [(group: String, speaker: String?)] = []
        var now: UInt64 = 1_000 * ms
        var started = false
        lazy var observer = SFUAudioLevelObserver(interval: 300 * ms) { [unowned self] group, speaker in
            events.append((group, speaker))
        }
        /// Advances the clock by `samples` intervals, ticking every 10 ms as a loop would.
        func run(samples: Int) {
            if !started {
                started = true
                observer.tick(now: now)  // the first tick schedules the first sample
            }
            let end = now + UInt64(samples) * 300 * ms
            while now < end {
                now += 10 * ms
                observer.tick(now: now)
            }
        }
    }

    @Test func theLoudestActiveMicIsPushedOnceConfirmed() {
        let h = Harness()
        let alice = FakeMic(127)
        let carol = FakeMic(127)
        h.observer.add(alice, id: "p1", group: "room", label: "alice")
        h.observer.add(carol, id: "p2", group: "room", label: "carol")
        h.run(samples: 4)
        #expect(h.events.isEmpty, "silent mics make no speaker")

        carol.latestAudioLevel = (40, false)
        alice.latestAudioLevel = (20, true)
        h.run(samples: 1)
        #expect(h.events.isEmpty, "one sample is not enough to confirm")
        h.run(samples: 1)
        #expect(h.events.count == 1)
        #expect(h.events.last?.group == "room" && h.events.last?.speaker == "alice")
        h.run(samples: 5)
        #expect(h.events.count == 1, "no repeat while nothing changes")

        alice.latestAudioLevel = (127, false)
        h.run(samples: 2)
        #expect(h.events.last?.speaker == "carol")
        carol.latestAudioLevel = (127, false)
        h.run(samples: 4)
        #expect(h.events.count == 2, "silence needs five samples")
        h.run(samples: 1)
        #expect(h.events.count == 3)
        #expect(h.events.last.map { $0.speaker == nil } == true)
    }

    @Test func groupsAreIndependentAndTiesGoToTheFirstLabel() {
        let h = Harness()
        let a = FakeMic(30)
        let b = FakeMic(30)
        let c = FakeMic(10)
        h.observer.add(b, id: "b", group: "one", label: "bob")
        h.observer.add(a, id: "a", group: "one", label: "ann")
        h.observer.add(c, id: "c", group: "two", label: "cat")
        h.run(samples: 2)
        let byGroup = Dictionary(uniqueKeysWithValues: h.events.map { ($0.group, $0.speaker) })
        #expect(byGroup == ["one": "ann", "two": "cat"])
    }

    @Test func aClosedSpeakerLeavesItsGroupAndTheGroupEndsSilent() {
        let h = Harness()
        let mic = FakeMic(10, voice: true)
        h.observer.add(mic, id: "m", group: "room", label: "solo")
        h.observer.add(mic, id: "m", group: "room", label: "solo")
        #expect(h.observer.groups["room"]?.members.count == 1, "a repeated add is ignored")
        h.run(samples: 2)
        #expect(h.events.last?.speaker == "solo")
        mic.isClosed = true
        h.run(samples: 5)
        #expect(h.events.count == 2)
        #expect(h.events.last.map { $0.speaker == nil } == true)
        #expect(h.observer.isEmpty, "a group without mics or speaker is dropped")
        h.run(samples: 10)
        #expect(h.events.count == 2)
    }

    @Test func aMicWithoutLevelsCountsAsSilent() {
        let h = Harness()
        h.observer.add(FakeMic(), id: "x", group: "room", label: "x")
        h.run(samples: 10)
        #expect(h.events.isEmpty)
        #expect(h.observer.groups["room"] != nil, "kept while its mic is open")
    }
}
