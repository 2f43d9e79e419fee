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
}
