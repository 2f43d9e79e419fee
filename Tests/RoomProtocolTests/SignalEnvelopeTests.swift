import Foundation
import RoomProtocol
import Signaling
import Testing

@Suite("SignalEnvelope")
struct SignalEnvelopeTests {
    @Test func parsesTheThreeShapes() throws {
        #expect(
            try SignalEnvelope.parse(
                #"{"id":1,"method":"join","data":{"name":"a","n":2.5,"ok":true,"x":null,"l":[1,"b"]}}"#)
                == .request(id: 1, method: "join", data: ["name": "a", "n": 2.5, "ok": true, "x": nil, "l": [1, "b"]]))
        #expect(
            try SignalEnvelope.parse(#"{"id":"r7","ok":true,"data":{}}"#) == .response(id: "r7", result: .success([:])))
        #expect(
            try SignalEnvelope.parse(
                #"{"id":2,"ok":false,"error":{"code":4002,"name":"INVALID_TOKEN","message":"expired"}}"#)
                == .response(
                    id: 2, result: .failure(RoomError(code: 4002, name: "INVALID_TOKEN", message: "expired"))))
        #expect(
            try SignalEnvelope.parse(#"{"method":"peerJoined","data":{"id":"p"}}"#)
                == .notification(method: "peerJoined", data: ["id": "p"]))
        // data is optional and defaults to an empty object.
        #expect(try SignalEnvelope.parse(#"{"method":"ping"}"#) == .notification(method: "ping", data: [:]))
    }

    @Test func booleansAndNumbersStayDistinct() throws {
        let v = try JSONValue.parse(#"[true,false,0,1,1.5,-3]"#)
        #expect(v == [true, false, 0, 1, 1.5, -3])
        #expect(v[0]?.boolValue == true && v[2]?.intValue == 0 && v[4]?.intValue == nil)
    }

    @Test func serializationRoundTrips() throws {
        let messages: [SignalEnvelope] = [
            .request(
                id: 5, method: "publish",
                data: ["sdp": "v=0\r\n", "tracks": ["a", "v"], "nested": ["deep": [nil, false]]]),
            .response(id: 5, result: .success(["answer": "x/y"])),
            .response(id: "abc", result: .failure(RoomError(code: 4008, name: "INVALID_PERMISSIONS", message: "no"))),
            .notification(method: "left", data: ["id": "ü✓"]),
        ]
        for m in messages {
            #expect(try SignalEnvelope.parse(m.text) == m)
        }
        #expect(SignalEnvelope.request(id: 1, method: "m", data: [:]).text == #"{"data":{},"id":1,"method":"m"}"#)
    }

    @Test func malformedInputGivesTypedErrors() {
        let cases: [(String, Bool)] = [
            ("", true), ("{", true), ("not json", true), ("[1,2]", false), ("42", false), (#"{"id":1}"#, false),
            (#"{"id":1,"method":5}"#, false), (#"{"id":1,"method":""}"#, false), (#"{"ok":true}"#, false),
            (#"{"id":1,"ok":"yes"}"#, false), (#"{"id":1,"ok":false}"#, false),
            (#"{"id":1,"ok":false,"error":{"code":"x"}}"#, false),
            (#"{"id":[1],"method":"m"}"#, false), (#"{"id":1.5,"method":"m"}"#, false),
        ]
        for (text, isJSONError) in cases {
            do {
                _ = try SignalEnvelope.parse(text)
                Issue.record("accepted \(text)")
            } catch {
                if case .malformedJSON = error {
                    #expect(isJSONError, "\(text)")
                } else {
                    #expect(!isJSONError, "\(text)")
                }
            }
        }
    }

    @Test func jsonValueIsCodable() throws {
        let value: JSONValue = ["a": [1, 2.5, "s", true, nil], "b": ["c": "d"]]
        let data = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
    }

    /// Found by the fuzzer: an integer above 2^53 went out as `5.5555555555552557e+17`, which
    /// Foundation's parser reads back one ulp off, so a relayed payload changed.
    @Test func largeIntegersSurviveARoundTrip() throws {
        for text in ["555555555555525551", "-9223372036854775808", "9007199254740993", "123456789012345678"] {
            let message = try SignalEnvelope.parse(#"{"method":"m","data":{"n":\#(text)}}"#)
            #expect(try SignalEnvelope.parse(message.text) == message, "for \(text)")
        }
    }

    /// Nesting is parsed in linear time (it was quadratic: 500 levels cost 0.4 s of CPU); the depth
    /// limit of the JSON parser (512) turns deeper input into an error, not a crash.
    @Test func deepNestingParsesOrFailsCleanly() throws {
        let nested = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        let message = try SignalEnvelope.parse(#"{"id":1,"method":"m","data":{"a":\#(nested)}}"#)
        guard case .request(_, _, let data) = message else {
            Issue.record("not a request")
            return
        }
        var depth = 0
        var value = data["a"]
        while let array = value?.arrayValue {
            depth += 1
            value = array.first
        }
        #expect(depth == 500)
        let tooDeep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: SignalEnvelopeError.self) {
            try SignalEnvelope.parse(#"{"id":1,"method":"m","data":\#(tooDeep)}"#)
        }
    }
}
