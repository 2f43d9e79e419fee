import Egress
import Media
import Testing

/// The TS muxer's bytes against values computed by hand (and, for the PSI, the tables ffmpeg's muxer
/// writes for the same program): PAT/PMT with their CRC_32, a PES header with PTS and PCR, ADTS, the
/// stuffing of a short last packet and the continuity counters.
@Suite struct MPEGTSMuxerTests {
    /// AAC-LC, 48 kHz, mono: object type 2, rate index 3, one channel.
    static let asc: [UInt8] = [0x11, 0x88]

    /// The packets of `bytes`, each checked for its sync byte and size.
    func packets(_ bytes: [UInt8]) -> [[UInt8]] {
        #expect(bytes.count % 188 == 0)
        return stride(from: 0, to: bytes.count, by: 188).map { Array(bytes[$0..<($0 + 188)]) }
    }

    func pid(_ packet: [UInt8]) -> Int { Int(packet[1] & 0x1F) << 8 | Int(packet[2]) }

    @Test func crcOfMPEGSectionsIsTheMPEG2One() {
        // CRC-32/MPEG-2 of "123456789" is 0x0376E6E7 (the catalogue's check value).
        #expect(CRC32MSB.update(0xFFFF_FFFF, Array("123456789".utf8)) == 0x0376_E6E7)
    }

    @Test func patAndPMTAreTheTablesFFmpegWritesForTheSameProgram() throws {
        #expect(
            MPEGTSMuxer.patSection == [
                0x00, 0xB0, 0x0D, 0x00, 0x01, 0xC1, 0x00, 0x00, 0x00, 0x01, 0xF0, 0x00, 0x2A, 0xB1, 0x04, 0xB2,
            ])
        #expect(
            MPEGTSMuxer.pmtSection == [
                0x02, 0xB0, 0x17, 0x00, 0x01, 0xC1, 0x00, 0x00, 0xE1, 0x00, 0xF0, 0x00, 0x1B, 0xE1, 0x00, 0xF0, 0x00,
                0x0F, 0xE1, 0x01, 0xF0, 0x00, 0x2F, 0x44, 0xB9, 0x9B,
            ])
        var muxer = try MPEGTSMuxer(audioSpecificConfig: Self.asc)
        muxer.writeTables()
        let p = packets(muxer.bytes)
        #expect(p.count == 2)
        #expect(Array(p[0][0..<5]) == [0x47, 0x40, 0x00, 0x10, 0x00])
        #expect(Array(p[1][0..<5]) == [0x47, 0x50, 0x00, 0x10, 0x00])
        #expect(p[0][21...].allSatisfy { $0 == 0xFF })
        // The next tables continue each PID's counter.
        muxer.drain { _ in }
        muxer.writeTables()
        #expect(packets(muxer.bytes).map { $0[3] } == [0x11, 0x11])
    }

    @Test func videoPESCarriesPTSPCRAndADelimiter() throws {
        var muxer = try MPEGTSMuxer(audioSpecificConfig: Self.asc)
        // An IDR slice NAL of 10 bytes at time 0: PTS 90000 (the 1 s offset), PCR 81000.
        let nal: [UInt8] = [0, 0, 0, 1, 0x65, 1, 2, 3, 4, 5]
        muxer.writeVideo(nal, ptsMicros: 0, keyframe: true)
        let p = packets(muxer.bytes)
        #expect(p.count == 1)
        let packet = p[0]
        // PUSI, PID 0x100, adaptation field + payload, counter 0.
        #expect(Array(packet[0..<4]) == [0x47, 0x41, 0x00, 0x30])
        // PES: 9 + 5 bytes of header, 6 of AUD, 10 of data = 30 bytes; the adaptation field fills the rest.
        let fieldLength = Int(packet[4])
        #expect(fieldLength == 184 - 30 - 1)
        // Random access and PCR flags; PCR base 81000 = 0x13C68.
        #expect(Array(packet[5..<12]) == [0x50, 0x00, 0x00, 0x9E, 0x34, 0x7E, 0x00])
        #expect(packet[12..<(5 + fieldLength)].allSatisfy { $0 == 0xFF })
        let pes = Array(packet[(5 + fieldLength)...])
        #expect(
            pes == [
                0x00, 0x00, 0x01, 0xE0, 0x00, 0x00, 0x80, 0x80, 0x05, 0x21, 0x00, 0x05, 0xBF, 0x21,
                0x00, 0x00, 0x00, 0x01, 0x09, 0xF0,
            ] + nal)
        // An access unit that starts with its own delimiter gets no second one.
        muxer.drain { _ in }
        muxer.writeVideo([0, 0, 0, 1, 0x09, 0xF0] + nal, ptsMicros: 33_333, keyframe: false)
        let again = packets(muxer.bytes)[0]
        #expect(again[3] == 0x31)
        #expect(Array(again.suffix(16)) == [0x00, 0x00, 0x00, 0x01, 0x09, 0xF0] + nal)
    }

    @Test func audioPESHasItsLengthAndAnADTSHeader() throws {
        var muxer = try MPEGTSMuxer(audioSpecificConfig: Self.asc)
        let frame = [UInt8](repeating: 0xAB, count: 100)
        frame.withUnsafeBytes { muxer.writeAudio($0, ptsMicros: 0) }
        let packet = packets(muxer.bytes)[0]
        #expect(Array(packet[0..<4]) == [0x47, 0x41, 0x01, 0x30])
        // 14 + 7 + 100 bytes of PES: 63 of adaptation field (its length byte, flags, 61 of stuffing).
        #expect(packet[4] == 62 && packet[5] == 0x00)
        let pes = Array(packet[67...])
        // PES_packet_length: 3 + 5 + 7 + 100 = 115.
        #expect(
            Array(pes[0..<14]) == [0x00, 0x00, 0x01, 0xC0, 0x00, 0x73, 0x80, 0x80, 0x05, 0x21, 0x00, 0x05, 0xBF, 0x21])
        // ADTS: MPEG-4, no CRC, LC, 48 kHz, mono, frame length 107.
        #expect(Array(pes[14..<21]) == [0xFF, 0xF1, 0x4C, 0x40, 0x0D, 0x7F, 0xFC])
        #expect(pes[21...].allSatisfy { $0 == 0xAB })
    }

    @Test func longPESSpansPacketsWithRunningCountersAndAOneByteStuffing() throws {
        var muxer = try MPEGTSMuxer(audioSpecificConfig: Self.asc)
        // 14 header + 6 AUD + n data with the first packet's 8-byte adaptation field: 176 + 184 + 183 bytes
        // leaves a last packet short by one byte, stuffed with an adaptation field of length 0.
        let n = 176 + 184 + 183 - 20
        var au: [UInt8] = [0, 0, 0, 1, 0x41]
        au += [UInt8](repeating: 0x77, count: n - au.count)
        for i in 0..<20 { muxer.writeVideo(au, ptsMicros: Int64(i) * 33_333, keyframe: i == 0) }
        let p = packets(muxer.bytes)
        #expect(p.count == 60)
        for (i, packet) in p.enumerated() {
            #expect(packet[0] == 0x47 && pid(packet) == 0x100)
            #expect(Int(packet[3] & 0x0F) == i % 16)
        }
        #expect(p[2][3] == 0x32 && p[2][4] == 0x00)
        #expect(p[1][3] == 0x11)
        // The first packet of a later, non-key PES has a PCR but no random access flag.
        #expect(p[3][5] == 0x10)
    }

    @Test func configsADTSCannotCarryAreRefused() {
        #expect(throws: MediaError.self) { try MPEGTSMuxer(audioSpecificConfig: [0x11]) }
        // Object type 5 (SBR) has no ADTS profile.
        #expect(throws: MediaError.self) { try MPEGTSMuxer(audioSpecificConfig: [0x29, 0x88]) }
    }
}
