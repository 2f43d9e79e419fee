import Foundation
import Testing

@testable import Signaling

/// The native JSON parser and writer behind ``JSONValue``, checked against Foundation's
/// `JSONSerialization` (the reference they replaced) and against RFC 8259's grammar.
@Suite("JSON text")
struct JSONTextTests {
    /// What `JSONSerialization` makes of `text` (nil when it refuses it).
    func reference(_ text: String) -> JSONValue? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        else { return nil }
        return JSONValue(any: object)
    }

    @Test func agreesWithJSONSerializationOnValidDocuments() throws {
        let documents = [
            #"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#, #"  [ 1 , 2.5 , -3 , 0 , 1e3 , -2.5E-3 , 123456789012 ] "#,
            #""plain""#, #""esc \" \\ \/ \b \f \n \r \t""#, #""\u00e9\u4e2d\ud83d\ude00""#, #""ü✓ raw UTF-8""#,
            #"{"nested":[[[{"x":[]}]]],"empty":{}}"#, "-0", "0.000001", "9007199254740993", "1.7976931348623157e308",
        ]
        for text in documents {
            let mine = try JSONValue.parse(text)
            #expect(mine == reference(text), "\(text)")
        }
    }

    @Test func refusesWhatTheGrammarRefuses() {
        let invalid = [
            "", " ", "{", "[1,]", "{\"a\":1,}", "{a:1}", "[01]", "[1.]", "[.5]", "[1e]", "[+1]", "NaN", "[Infinity]",
            "tru", "nul", "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00 alone\"",
            "\"\\ud800\\u0041\"", "\"tab\tinside\"", "[1] 2", "{\"a\" 1}", "[1e999]",
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ]
        for text in invalid {
            #expect(throws: SignalEnvelopeError.self, "\(text.prefix(40))") { try JSONValue.parse(text) }
        }
        // Invalid UTF-8 inside a string.
        #expect(throws: SignalEnvelopeError.self) { try JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func writesCompactSortedTextThatParsesBack() throws {
        let value: JSONValue = [
            "z": 1, "a": [1.5, -2, 0, 1e21, 0.1], "m": ["k": nil, "b": true], "s": "quote\" back\\ nl\n ctl\u{1} /ü",
        ]
        let text = value.jsonString
        #expect(text.hasPrefix(#"{"a":[1.5,-2,0,"#))
        #expect(text.contains(#""s":"quote\" back\\ nl\n ctl\u0001 /ü""#))
        #expect(try JSONValue.parse(text) == value)
        #expect(reference(text) == value, "Foundation reads our text the same way")
        #expect(JSONValue.number(.nan).jsonString == "null")
        #expect(JSONValue.number(3).jsonString == "3")
    }

    /// The spellings issue 32 item 2 saw changed: key order, `1.50`, `1e2`, `-0.0`, an integer beyond
    /// 2^53, escapes and raw UTF-8.
    static let exactPayload =
        #"{"z":1.50,"a":1e2,"neg":-0.0,"big":12345678901234567890,"s":"\u00e9\/é","n":[ 1 , {"y":2,"x":1} ]}"#

    @Test func rawPathsKeepTheValueExactlyAsWritten() throws {
        let text = #"{"id":7,"method":"publish","data":{"topic":"t","payload":"# + Self.exactPayload + "  }}"
        let message = try JSONValue.parse(text, keepingRaw: JSONRawPaths([.key("data"), .key("payload")]))
        guard let data = message["data"] else {
            Issue.record("no data")
            return
        }
        #expect(data["payload"] == .raw(try RawJSON(validating: Self.exactPayload)))
        #expect(data["payload"]?.jsonString == Self.exactPayload)
        #expect(data["topic"] == "t", "members beside the raw one are parsed as usual")
        // Written back byte for byte inside a new message.
        let out = JSONValue.object(["method": "m", "data": ["payload": data["payload"]!]]).jsonString
        #expect(out == #"{"data":{"payload":"# + Self.exactPayload + "}," + #""method":"m"}"#)
        // Elements of arrays (pubsubHistory messages), and paths that lead nowhere.
        let history = #"{"data":{"messages":[{"payload":{"b":1.0,"a":2}},{"x":1},{"payload":[1e2]}]}}"#
        let paths = JSONRawPaths(
            [.key("data"), .key("messages"), .anyElement, .key("payload")], [.key("none"), .key("payload")])
        let parsed = try JSONValue.parse(history, keepingRaw: paths)
        #expect(parsed["data"]?["messages"]?[0]?["payload"]?.jsonString == #"{"b":1.0,"a":2}"#)
        #expect(parsed["data"]?["messages"]?[2]?["payload"]?.jsonString == "[1e2]")
        #expect(parsed["data"]?["messages"]?[1] == ["x": 1])
        // Without paths nothing changes.
        #expect(try JSONValue.parse(Self.exactPayload)["z"] == 1.5)
    }

    @Test func rawValuesAreCheckedByTheSameGrammar() throws {
        // Everything the parser refuses is refused inside a raw value too (not built, still checked).
        let invalid = [
            "", "{", "[1,]", "{\"a\":1,}", "{a:1}", "[01]", "[1.]", "[+1]", "NaN", "tru", "\"\\x\"", "\"\\ud800\"",
            "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"tab\tinside\"", "{\"a\" 1}", "[1e999]", "{\"a\":1} 2",
            String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
        ]
        for text in invalid {
            #expect(throws: SignalEnvelopeError.self, "\(text.prefix(40))") { try RawJSON(validating: text) }
            #expect(throws: SignalEnvelopeError.self, "\(text.prefix(40))") {
                try JSONValue.parse(#"{"p":"# + text + "}", keepingRaw: JSONRawPaths([.key("p")]))
            }
        }
        // Invalid UTF-8 (a lone continuation, overlong, surrogate, beyond U+10FFFF, cut short).
        for bad: [UInt8] in [[0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]] {
            let bytes = Array(#"{"p":""#.utf8) + bad + Array(#""}"#.utf8)
            #expect(throws: SignalEnvelopeError.self) {
                try JSONValue.parse(bytes, keepingRaw: JSONRawPaths([.key("p")]))
            }
        }
        // Valid multi-byte UTF-8 of every length passes.
        let ok = try JSONValue.parse(#"{"p":"é中😀 \ud83d\ude00"}"#, keepingRaw: JSONRawPaths([.key("p")]))
        #expect(ok["p"]?.jsonString == #""é中😀 \ud83d\ude00""#)
        #expect(try RawJSON(validating: " {\"a\":1}\n").text == #"{"a":1}"#)
        #expect(try RawJSON(validating: "[1]").isObject == false)
        #expect(try RawJSON(validating: Self.exactPayload).value["big"] == .number(12_345_678_901_234_567_890))
    }
}
