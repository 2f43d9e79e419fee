import RoomProtocol
import Testing

@Suite("Name escaping: one injective encoding for file names and Redis keys")
struct NameEscapingTests {
    /// The names of issue 31 that shared a file or a key before no longer do.
    @Test func namesThatCollidedBeforeStayApart() {
        #expect(NameEscaping.escape("cam.a") == "cam_2Ea")
        #expect(NameEscaping.escape("cam_a") == "cam_5Fa")
        #expect(NameEscaping.escape("cam-a") == "cam-a")
        #expect(NameEscaping.escape("v:pubsub") == "v_3Apubsub")
        let names = [
            "cam.a", "cam_a", "cam a", "cam/a", "cam:a", "cam_2Ea", "v", "v:pins", "v:pubsub", "é", "e\u{301}",
        ]
        #expect(Set(names.map(NameEscaping.escape)).count == names.count)
        #expect(Set(names.map(NameEscaping.fileName)).count == names.count)
    }

    /// Escaped names hold only `A-Za-z0-9-_`: no separator of a key or a path can appear.
    @Test func theOutputHasNoSeparators() {
        let hostile = "../a:b/c.d~e\u{0}\u{7F}ü日本"
        let escaped = NameEscaping.escape(hostile)
        #expect(
            escaped.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
                    || b == 0x5F
            })
    }

    /// Every name comes back from its escaping; strings escape() never writes are refused.
    @Test func escapingIsReversibleAndCanonical() {
        for name in ["", "a", "cam.a", "cam_a", "_", "__5F", "ü日本", "a b\tc", String(repeating: "x.", count: 300)] {
            #expect(NameEscaping.unescape(NameEscaping.escape(name)) == name)
        }
        #expect(NameEscaping.unescape("a_2") == nil)
        #expect(NameEscaping.unescape("a_2e") == nil, "lowercase hex is not canonical")
        #expect(NameEscaping.unescape("_61") == nil, "an escaped kept byte is a second spelling")
        #expect(NameEscaping.unescape("a.b") == nil)
        #expect(NameEscaping.unescape("_FF") == nil, "not UTF-8")
    }

    /// Long names get a bounded stem that still tells them apart.
    @Test func longNamesGetAShortStem() {
        let a = String(repeating: "é", count: 64)  // 128 bytes, 384 escaped
        let b = String(repeating: "é", count: 63) + "è"
        #expect(NameEscaping.fileName(a).utf8.count <= NameEscaping.maxFileStemBytes)
        #expect(NameEscaping.fileName(a) != NameEscaping.fileName(b))
        #expect(NameEscaping.fileName(a).contains("~"))
        #expect(NameEscaping.fileName("short") == "short")
    }
}
