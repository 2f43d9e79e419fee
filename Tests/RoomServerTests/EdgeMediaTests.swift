import Foundation
import RTCWire
import SFU
import Signaling
import Testing

@testable import RoomProtocol
@testable import RoomServer

/// The node-to-node messages of an edge member's media plane (docs/protocol.md, "Node to node"):
/// every call and event reads back as written, and bad input is a 3073 error, never a crash.
@Suite("EdgeMedia")
struct EdgeMediaTests {
    static let piped = SFUPipedProducer(
        producerID: "p-1", participantID: "stage/host", kind: .video, source: .webcam, codec: .vp8,
        codecParameters: [SDPParameter(key: "max-fr", value: "30"), SDPParameter(key: "flag")],
        rids: ["q", "h", "f"], ssrcs: [1, 2, 4_294_967_295], mid: "0", audioLevelExtensionID: 0,
        captureTimeExtensionID: 5)

    static let calls: [EdgeCall] = [
        .consume(producerId: "p-1", piped: piped, originPipe: "10.0.0.1:40000", offering: true),
        .consume(producerId: "p-1", piped: nil, originPipe: "[::1]:40000", offering: false),
        .publish(sdp: "v=0\r\n", sources: [.microphone, .webcam, .screen], originPipe: "10.0.0.1:1"),
        .restartPublish(sdp: "v=0\r\n"), .closeProducer(producerId: "p-2"), .closePublishConnection,
        .stopConsuming(producerId: "p-1"), .setQuality(producerId: "p-1", quality: .medium),
        .setViewport(producerId: "p-1", width: 640, height: 360), .offer, .answer(sdp: "v=0\r\n"),
        .restartIce(connection: .subscribe, ufrag: "abcd", pwd: String(repeating: "x", count: 22)),
        .restartIce(connection: .publish, ufrag: "abcd", pwd: String(repeating: "x", count: 22)), .close, .stats,
        .pin(participantKey: "stage/host", pinned: true),
    ]

    @Test func callsAndEventsReadBackAsWritten() throws {
        for (seq, call) in Self.calls.enumerated() {
            let text = EdgeWire.encode(call.json(seq: seq, key: "stage/a1-sub-1"))
            #expect(text.hasPrefix("edge:{"))
            let (readSeq, key, read) = try EdgeCall.parse(try EdgeWire.object(text))
            #expect(readSeq == seq && key == "stage/a1-sub-1" && read == call)
        }
        for event in [
            EdgeEvent.renegotiate, .layer(producerId: "p-1", quality: .low), .refused(producerId: "p-1", codec: .h264),
        ] {
            #expect(try EdgeEvent.parse(try EdgeWire.object(EdgeWire.encode(event.json))) == event)
        }
        #expect(EdgeWire.address("10.0.0.1:40000")?.port == 40000)
        #expect(EdgeWire.address("10.0.0.1") == nil && EdgeWire.address("host:1") == nil)
        #expect(EdgeWire.text(EdgeWire.address("[::1]:9")!) == "[::1]:9")
    }

    /// Each malformed message is refused with 3073 (ERROR_INVALID_PARAMETER) naming the problem.
    @Test func badMessagesAreRefusedWith3073() throws {
        let good = Self.calls[0].json(seq: 1, key: "stage/m").objectValue!
        func variant(_ change: (inout [String: JSONValue]) -> Void) -> String {
            var o = good
            change(&o)
            return EdgeWire.encode(.object(o))
        }
        var piped = Self.piped.edgeJSON.objectValue!
        func pipedVariant(_ key: String, _ value: JSONValue?) -> String {
            var p = piped
            p[key] = value
            return variant { $0["piped"] = .object(p) }
        }
        let bad: [String] = [
            "", "edge:", "edge:[1]", "edge:{", "{\"call\":\"offer\"}", "edge:\(String(repeating: " ", count: 300_000))",
            variant { $0["call"] = "explode" }, variant { $0["call"] = nil }, variant { $0["seq"] = -1 },
            variant { $0["seq"] = "1" }, variant { $0["key"] = "no-slash" }, variant { $0["key"] = 7 },
            variant { $0["producerId"] = nil }, variant { $0["producerId"] = "p-2" }, variant { $0["piped"] = "x" },
            variant { $0["originPipe"] = "nowhere" },
            variant { $0["originPipe"] = "10.0.0.1:0" }, pipedVariant("kind", "smell"), pipedVariant("source", "radio"),
            pipedVariant("codec", "mpeg2"), pipedVariant("ssrcs", []), pipedVariant("ssrcs", [0]),
            pipedVariant("ssrcs", [4_294_967_296]), pipedVariant("ssrcs", [1, 2, 3, 4, 5]),
            pipedVariant("rids", [""]), pipedVariant("fmtp", [["a"]]), pipedVariant("fmtp", "x"),
            pipedVariant("audioLevelExtensionId", 256), pipedVariant("producerId", nil), pipedVariant("mid", nil),
            EdgeWire.encode(["call": "setQuality", "seq": 1, "key": "r/p", "producerId": "p", "quality": 3]),
            EdgeWire.encode(["call": "setViewport", "seq": 1, "key": "r/p", "producerId": "p", "width": 0, "height": 1]
            ),
            EdgeWire.encode(["call": "restartIce", "seq": 1, "key": "r/p", "ufrag": "a"]),
            EdgeWire.encode([
                "call": "restartIce", "seq": 1, "key": "r/p", "connection": "both", "ufrag": "abcd", "pwd": "x",
            ]),
            EdgeWire.encode([
                "call": "publish", "seq": 1, "key": "r/p", "sdp": "v=0", "sources": ["radio"],
                "originPipe": "1.2.3.4:5",
            ]),
            EdgeWire.encode(["call": "publish", "seq": 1, "key": "r/p", "sdp": "v=0", "originPipe": "1.2.3.4:5"]),
            EdgeWire.encode(["call": "closeProducer", "seq": 1, "key": "r/p"]),
            EdgeWire.encode(["call": "pin", "seq": 1, "key": "r/p", "participantKey": "other/host", "pinned": true]),
            EdgeWire.encode(["call": "pin", "seq": 1, "key": "r/p", "participantKey": "r/host"]),
        ]
        piped = [:]
        for text in bad {
            #expect(throws: RoomError.self) { _ = try EdgeCall.parse(try EdgeWire.object(text)) }
            do {
                _ = try EdgeCall.parse(try EdgeWire.object(text))
            } catch {
                #expect(error.code == 3073, "\(text.prefix(80)): \(error)")
            }
        }
        for event in [["event": "nope"], ["event": "layer", "producerId": "p", "quality": 9], ["event": "refused"]]
            as [JSONValue]
        {
            #expect(throws: RoomError.self) { _ = try EdgeEvent.parse(event) }
        }
    }

    /// Random bytes after the prefix never crash the reader (seeded, so a failure repeats).
    @Test func randomMessagesNeverCrash() {
        var rng = SplitMix64(seed: 38)
        let pieces = [
            "{", "}", "[", "]", ",", ":", "\"call\"", "\"consume\"", "\"seq\"", "1", "-1", "\"key\"", "\"r/p\"",
            "\"piped\"", "\"ssrcs\"", "null", "true", "\"x\"", "1e400", "\"\\u0000\"",
        ]
        for _ in 0..<2000 {
            var text = "edge:{"
            for _ in 0..<Int(rng.next() % 24) { text += pieces[Int(rng.next() % UInt64(pieces.count))] }
            _ = try? EdgeCall.parse(try EdgeWire.object(text))
            _ = try? EdgeEvent.parse(try EdgeWire.object(text))
        }
    }

    @Test func edgeAudienceIsCountedPerRoomUpToItsShare() {
        let registry = EdgeRegistry()
        #expect(registry.admit(roomId: "stage", limit: 2))
        #expect(registry.admit(roomId: "stage", limit: 2))
        #expect(!registry.admit(roomId: "stage", limit: 2))
        #expect(registry.admit(roomId: "other", limit: 2))
        registry.release(roomId: "stage")
        #expect(registry.audienceByRoom == ["stage": 1, "other": 1])
        registry.release(roomId: "stage")
        registry.release(roomId: "other")
        #expect(registry.audienceByRoom.isEmpty)
    }

    @Test func edgeAudienceSettingIsCheckedAndReadFromTheConfigurationFile() throws {
        var c = RoomServerConfiguration()
        #expect(c.edgeAudience == 0 && c.validationProblem() == nil)
        c.edgeAudience = -1
        #expect(c.validationProblem() != nil)
        let read = try JSONDecoder().decode(RoomServerConfiguration.self, from: Data(#"{"edgeAudience": 150}"#.utf8))
        #expect(read.edgeAudience == 150)
    }
}
