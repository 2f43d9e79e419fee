import Foundation
import Testing

@testable import Egress

/// The RTMP client's reading side on bytes real servers sent (the `rtmp` fuzz target's seeds, captured
/// from nginx-rtmp and `ffmpeg -listen 1` answering a publish and a play), whole and byte by byte, and on
/// chunk streams that break the rules.
@Suite struct RTMPChunkReaderTests {
    static let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fuzz/seeds/rtmp").standardizedFileURL

    func items(_ bytes: [UInt8], piece: Int) throws -> [RTMPChunkReader.Item] {
        var reader = RTMPChunkReader()
        var out: [RTMPChunkReader.Item] = []
        for start in stride(from: 0, to: bytes.count, by: piece) {
            reader.append(bytes[start..<min(bytes.count, start + piece)])
            while let item = try reader.next() { out.append(item) }
        }
        return out
    }

    func commands(_ items: [RTMPChunkReader.Item]) -> [String] {
        items.compactMap {
            guard case .message(let type, let payload) = $0, type == RTMPMessageType.commandAMF0 else { return nil }
            return (try? AMF0.decode(payload[...]))?.first?.string
        }
    }

    @Test(arguments: ["nginx-rtmp-publish", "ffmpeg-listen-publish"])
    func aServersAnswersToAPublishRead(seed: String) throws {
        let bytes = [UInt8](try Data(contentsOf: Self.seeds.appendingPathComponent(seed)))
        let whole = try items(bytes, piece: bytes.count)
        #expect(try items(bytes, piece: 1) == whole)
        // connect and createStream are answered, the publish starts.
        #expect(commands(whole).filter { $0 == "_result" }.count >= 2, "\(commands(whole))")
        #expect(commands(whole).contains("onStatus"))
    }

    @Test func nginxPlayingAStreamSendsMediaInChunksOfItsSize() throws {
        let bytes = [UInt8](try Data(contentsOf: Self.seeds.appendingPathComponent("nginx-rtmp-play")))
        var reader = RTMPChunkReader()
        reader.append(bytes[...])
        var media = 0
        while let item = try reader.next() {
            if case .message(let type, _) = item, type == RTMPMessageType.video || type == RTMPMessageType.audio {
                media += 1
            }
        }
        #expect(reader.chunkSize == 4096 && media > 10)
    }

    /// A 64 KiB message in 1-byte chunks (Set Chunk Size 1, then a type 0 chunk and 65,535 type 3
    /// ones) comes out whole, byte for byte, read whole and in pieces: the assembly appends in place
    /// (the `rtmp` fuzz target timed out when every chunk copied the message so far).
    @Test func aLargeMessageInOneByteChunksAssembles() throws {
        let length = 1 << 16
        let body = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var bytes: [UInt8] = [0x02, 0, 0, 0, 0, 0, 4, RTMPMessageType.setChunkSize, 0, 0, 0, 0, 0, 0, 0, 1]
        bytes += [0x03, 0, 0, 0, UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), 9, 1, 0, 0, 0]
        bytes.append(body[0])
        for b in body.dropFirst() { bytes += [0xC3, b] }
        let whole = try items(bytes, piece: bytes.count)
        #expect(whole == [.message(type: RTMPMessageType.video, payload: body)])
        #expect(try items(bytes, piece: 61) == whole)
    }

    @Test func ruleBreakersAreMalformedNotCrashes() {
        // A type 1 header on a chunk stream that never had a type 0 one.
        var reader = RTMPChunkReader()
        reader.append([0x43, 0, 0, 0, 0, 0, 4, 20][...])
        #expect(throws: RTMPChunkReader.Malformed.self) { try reader.next() }
        // A 2 MiB message.
        reader = RTMPChunkReader()
        reader.append([0x03, 0, 0, 0, 0x20, 0, 0, 20, 0, 0, 0, 0][...])
        #expect(throws: RTMPChunkReader.Malformed.self) { try reader.next() }
        // A 200-byte message, and mid-way a type 0 header that makes it 10 bytes.
        reader = RTMPChunkReader()
        reader.append([0x03, 0, 0, 0, 0, 0, 200, 20, 0, 0, 0, 0] + [UInt8](repeating: 5, count: 128))
        reader.append([0x03, 0, 0, 0, 0, 0, 10, 20, 0, 0, 0, 0][...])
        #expect(
            throws: RTMPChunkReader.Malformed(
                reason: "a new header shortens a message being assembled on chunk stream 3")
        ) {
            try reader.next()
        }
        // Set Chunk Size 0.
        reader = RTMPChunkReader()
        reader.append([0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0][...])
        #expect(throws: RTMPChunkReader.Malformed(reason: "Set Chunk Size 0")) { try reader.next() }
    }

    @Test func aPingRequestIsHandedUpWithItsTime() throws {
        var reader = RTMPChunkReader()
        reader.append([0x02, 0, 0, 0, 0, 0, 6, 4, 0, 0, 0, 0, 0, 6, 0, 0, 0x12, 0x34][...])
        #expect(try reader.next() == .ping(0x1234))
        #expect(try reader.next() == nil)
    }
}
