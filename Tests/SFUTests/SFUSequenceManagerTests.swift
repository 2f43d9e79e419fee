import Testing

@testable import SFU

/// The down track's sequence manager alone, with synthetic sequence numbers: switches, drops,
/// reordering and wrap.
@Suite("SFU sequence manager")
struct SFUSequenceManagerTests {
    @Test func theFirstSourcePassesThroughAndASwitchContinuesAfterTheNewestSent() {
        var m = SFUSequenceManager()
        m.sync(65_533)
        for input in [UInt16(65_533), 65_534, 65_535, 0, 1] { #expect(m.input(input) == input) }
        // Another layer, its own sequence space.
        m.sync(40_000)
        #expect(m.input(40_000) == 2)
        #expect(m.input(40_001) == 3)
        // Reordered: 40_003 before 40_002. Each maps as it would have in order.
        #expect(m.input(40_003) == 5)
        #expect(m.input(40_002) == 4)
        #expect(m.maxOutput == 5)
    }

    @Test func packetsOlderThanTheSwitchPointAreRefused() {
        var m = SFUSequenceManager()
        m.sync(100)
        _ = m.input(100)
        m.sync(5_000)
        #expect(m.input(5_000) == 101)
        #expect(m.input(4_999) == nil, "would reuse a number of the old layer")
        #expect(m.input(4_990) == nil)
        #expect(m.input(5_001) == 102)
        // A repair of a packet already sent maps to the same number again (fills the subscriber's hole).
        #expect(m.input(5_000) == 101)
    }

    @Test func droppedPacketsLeaveNoHoleAndReorderedOnesStillMapRight() {
        var m = SFUSequenceManager()
        m.sync(1_000)
        #expect(m.input(1_000) == 1_000)
        m.drop(1_001)  // e.g. padding: never forwarded
        m.drop(1_002)
        #expect(m.input(1_003) == 1_001)
        #expect(m.input(1_005) == 1_003, "1_004 is missing (loss): its number stays free for it")
        #expect(m.input(1_004) == 1_002, "the late packet takes the number it left")
        #expect(m.input(1_001) == nil, "a dropped packet is never sent, even when repaired")
        m.drop(1_006)
        #expect(m.input(1_007) == 1_004)
        // A drop older than what was already mapped cannot close its gap: it is ignored.
        m.drop(1_003)
        #expect(m.input(1_008) == 1_005)
    }

    @Test func dropsAcrossTheWrapAndManyDropsStayCorrect() {
        var m = SFUSequenceManager()
        m.sync(65_530)
        var expected: UInt16 = 65_530
        var input: UInt16 = 65_530
        // Every other packet dropped, 600 times: more than the remembered drops, across the wrap.
        for _ in 0..<600 {
            #expect(m.input(input) == expected)
            m.drop(input &+ 1)
            input &+= 2
            expected &+= 1
        }
        #expect(m.maxOutput == expected &- 1)
    }

    @Test func aSwitchAfterDropsContinuesFromTheNewestOutput() {
        var m = SFUSequenceManager()
        m.sync(10)
        _ = m.input(10)
        m.drop(11)
        _ = m.input(12)  // → 11
        m.sync(900)
        #expect(m.input(900) == 12)
        #expect(m.input(901) == 13)
    }
}
