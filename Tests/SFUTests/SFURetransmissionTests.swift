import RTCWire
import Testing

@testable import SFU

/// The shared per-producer retransmission buffer and each consumer's sequencer, with synthetic packets.
@Suite("SFU shared retransmission buffer")
struct SFURetransmissionTests {
    func payload(_ seq: UInt16, size: Int = 100) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: Int(seq) &+ $0) }
    }

    @Test func theBufferReturnsWhatWasStoredUntilItsSlotIsReused() {
        let buffer = SFUPacketBuffer(capacity: 8)
        for seq in UInt16(100)..<108 {
            payload(seq).withUnsafeBytes { buffer.store(sequenceNumber: seq, payload: $0) }
        }
        for seq in UInt16(100)..<108 {
            #expect(buffer.payload(sequenceNumber: seq).map(Array.init) == payload(seq))
        }
        #expect(buffer.payload(sequenceNumber: 99) == nil, "never stored")
        // 108 takes the slot of 100.
        payload(108).withUnsafeBytes { buffer.store(sequenceNumber: 108, payload: $0) }
        #expect(buffer.payload(sequenceNumber: 100) == nil)
        #expect(buffer.payload(sequenceNumber: 108).map(Array.init) == payload(108))
    }

    @Test func sequenceNumbersWrapAndOversizedPayloadsAreNotKept() {
        let buffer = SFUPacketBuffer(capacity: 16)
        for seq in [UInt16(65534), 65535, 0, 1] {
            payload(seq).withUnsafeBytes { buffer.store(sequenceNumber: seq, payload: $0) }
        }
        for seq in [UInt16(65534), 65535, 0, 1] {
            #expect(buffer.payload(sequenceNumber: seq).map(Array.init) == payload(seq))
        }
        payload(2, size: SFUPacketBuffer.slotBytes + 1).withUnsafeBytes { buffer.store(sequenceNumber: 2, payload: $0) }
        #expect(buffer.payload(sequenceNumber: 2) == nil)
    }

    @Test func theSequencerMapsOutgoingNumbersBackToSourcePackets() {
        var sequencer = SFUSequencer(capacity: 64)
        // Layer 0 up to a switch, then layer 2 with a different offset.
        for i in UInt16(0)..<10 {
            sequencer.record(
                outgoing: 1000 &+ i, source: 5000 &+ i, layer: i < 5 ? 0 : 2, timestamp: 90_000 &+ UInt32(i) * 3000,
                marker: i % 5 == 4,
                rewrite: i < 5
                    ? .none : RTPPayloadRewrite(pictureIDOffset: 2, pictureIDIs15Bit: true, pictureID: 300 &+ i))
        }
        let early = sequencer.resendable(outgoing: 1003, now: 1_000_000, minimumInterval: 50_000_000)
        #expect(early?.source == 5003)
        #expect(early?.layer == 0)
        #expect(early?.rewrite.isEmpty == true)
        let late = sequencer.resendable(outgoing: 1009, now: 1_000_000, minimumInterval: 50_000_000)
        #expect(late?.source == 5009)
        #expect(late?.layer == 2)
        #expect(late?.marker == true)
        let lateTimestamp: UInt32 = 90_000 + 9 * 3000
        #expect(late?.timestamp == lateTimestamp)
        #expect(late?.rewrite.pictureIDOffset == 2 && late?.rewrite.pictureID == 309)
        #expect(sequencer.resendable(outgoing: 999, now: 1_000_000, minimumInterval: 50_000_000) == nil)
    }

    @Test func aRepeatedNACKWithinTheIntervalIsNotResentTwice() {
        var sequencer = SFUSequencer(capacity: 16)
        sequencer.record(outgoing: 7, source: 70, layer: 0, timestamp: 1, marker: false, rewrite: .none)
        #expect(sequencer.resendable(outgoing: 7, now: 1_000, minimumInterval: 50_000_000) != nil)
        #expect(sequencer.resendable(outgoing: 7, now: 20_000_000, minimumInterval: 50_000_000) == nil)
        #expect(sequencer.resendable(outgoing: 7, now: 60_000_000, minimumInterval: 50_000_000) != nil)
        // An entry overwritten by a later packet no longer answers for the old number.
        sequencer.record(outgoing: 23, source: 230, layer: 0, timestamp: 2, marker: false, rewrite: .none)
        #expect(sequencer.resendable(outgoing: 7, now: 200_000_000, minimumInterval: 50_000_000) == nil)
    }

    @Test func aSequencerEntryIsSixteenBytes() {
        // 512 per video consumer: each byte here is half a kilobyte per audience member.
        #expect(MemoryLayout<SFUSequencer.Entry>.stride == 16)
    }

    @Test func resendIntervalsHoldAcrossTheStampWrap() {
        var sequencer = SFUSequencer(capacity: 16)
        sequencer.record(outgoing: 3, source: 30, layer: 1, timestamp: 9, marker: true, rewrite: .none)
        // Just before the 16-bit stamp (units of 2^20 ns) wraps, and just after it.
        let beforeWrap: UInt64 = (1 << 36) - 10_000_000
        #expect(sequencer.resendable(outgoing: 3, now: beforeWrap, minimumInterval: 50_000_000) != nil)
        #expect(sequencer.resendable(outgoing: 3, now: beforeWrap + 30_000_000, minimumInterval: 50_000_000) == nil)
        #expect(sequencer.resendable(outgoing: 3, now: beforeWrap + 60_000_000, minimumInterval: 50_000_000) != nil)
    }

    @Test func serverConnectionsKeepNoPerConsumerHistory() {
        let sfu = SFU(configuration: SFUConfiguration(mediaAddresses: ["127.0.0.1"], portRange: nil, loopName: "t"))
        defer { sfu.loop.shutdown() }
        #expect(sfu.serverConfiguration().senderHistory == false)
    }
}
