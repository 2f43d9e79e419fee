internal import CYUV
public import Media

/// The composite's picture: one I420 canvas, reused frame after frame, that tiles are filled and
/// scaled into with libyuv (`I420Rect`, `I420Scale`), and names drawn on.
///
/// The planes are three arrays kept by the canvas (not an ``I420Image`` held whole), so one plane can
/// be written while another is: ``image`` wraps them without a copy for the encoder, and once that
/// picture is released the next draw writes in place again.
///
/// Not thread-safe: confine an instance to one thread (the compositor's).
public final class CompositeCanvas {
    /// Canvas width (even).
    public let width: Int
    /// Canvas height (even).
    public let height: Int
    private var y: [UInt8]
    private var u: [UInt8]
    private var v: [UInt8]

    /// Video black in BT.601 limited range.
    public static let black: (y: UInt8, u: UInt8, v: UInt8) = (16, 128, 128)
    /// A tile with no picture yet (a participant without video, or before its first key frame).
    public static let placeholder: (y: UInt8, u: UInt8, v: UInt8) = (48, 128, 128)

    /// A black canvas. Throws for a size that is odd, under 2×2 or over 16383 (what the encoders take).
    public init(width: Int, height: Int) throws {
        guard width >= 2, height >= 2, width <= 16383, height <= 16383, width % 2 == 0, height % 2 == 0 else {
            throw MediaError.invalidArgument("canvas \(width)x\(height) (need even, 2…16383)")
        }
        self.width = width
        self.height = height
        y = [UInt8](repeating: Self.black.y, count: width * height)
        u = [UInt8](repeating: Self.black.u, count: width * height / 4)
        v = [UInt8](repeating: Self.black.v, count: width * height / 4)
    }

    /// The canvas as a picture (the planes shared, not copied).
    public var image: I420Image {
        I420Image(
            width: width, height: height, y: y, u: u, v: v, strideY: width, strideU: width / 2, strideV: width / 2)
    }

    /// The luma at a pixel (tests and checks).
    public func luma(x: Int, y row: Int) -> UInt8 { y[row * width + x] }

    /// Fills `rect` (clipped to the canvas) with one colour.
    public func fill(_ rect: PixelRect, color: (y: UInt8, u: UInt8, v: UInt8)) {
        guard let r = clip(rect) else { return }
        let cw = width / 2
        y.withUnsafeMutableBufferPointer { py in
            u.withUnsafeMutableBufferPointer { pu in
                v.withUnsafeMutableBufferPointer { pv in
                    _ = I420Rect(
                        py.baseAddress, Int32(width), pu.baseAddress, Int32(cw), pv.baseAddress, Int32(cw),
                        Int32(r.x), Int32(r.y), Int32(r.width), Int32(r.height), Int32(color.y), Int32(color.u),
                        Int32(color.v))
                }
            }
        }
    }

    /// Scales `picture` into `rect`, keeping its aspect: the rest of the rect is black (letterbox or
    /// pillarbox). Throws for an inconsistent picture or when libyuv refuses the scale.
    public func draw(_ picture: I420Image, in rect: PixelRect) throws {
        guard let drawn = try picture.withPlanes({ try draw($0, in: rect) }) else {
            throw MediaError.invalidArgument("picture \(picture.width)x\(picture.height) with short planes")
        }
        return drawn
    }

    /// Scales borrowed planes (a decoder's own buffer) into `rect` straight away, keeping the
    /// aspect as ``draw(_:in:)-(I420Image,_)`` does: no intermediate picture. Throws when libyuv refuses the scale.
    public func draw(_ picture: I420Planes, in rect: PixelRect) throws {
        guard picture.width > 0, picture.height > 0, let rect = clip(rect),
            let target = CompositeLayout.fit(pictureWidth: picture.width, pictureHeight: picture.height, in: rect)
        else { return }
        if target != rect { fill(rect, color: Self.black) }
        let cw = width / 2
        let status = y.withUnsafeMutableBufferPointer { py in
            u.withUnsafeMutableBufferPointer { pu in
                v.withUnsafeMutableBufferPointer { pv in
                    I420Scale(
                        picture.y, Int32(picture.strideY), picture.u, Int32(picture.strideU), picture.v,
                        Int32(picture.strideV), Int32(picture.width), Int32(picture.height),
                        py.baseAddress! + target.y * width + target.x, Int32(width),
                        pu.baseAddress! + target.y / 2 * cw + target.x / 2, Int32(cw),
                        pv.baseAddress! + target.y / 2 * cw + target.x / 2, Int32(cw),
                        Int32(target.width), Int32(target.height), kFilterBilinear)
                }
            }
        }
        guard status == 0 else { throw MediaError.invalidArgument("I420Scale failed (\(status))") }
    }

    /// Draws `text` at the bottom left of `rect` in white on a grey box, in a 5×7 bitmap font scaled
    /// to the tile (2× from 360 pixels of tile height). Characters the font lacks show as `?`; the
    /// text is cut where the tile ends.
    public func label(_ text: String, in rect: PixelRect) {
        guard let rect = clip(rect), !text.isEmpty else { return }
        let scale = rect.height >= 360 ? 3 : (rect.height >= 160 ? 2 : 1)
        let advance = 6 * scale
        let pad = 2 * scale
        let boxH = CompositeLayout.even(7 * scale + 2 * pad)
        let maxChars = max(0, (rect.width - 2 * pad) / advance)
        let glyphs = text.unicodeScalars.prefix(maxChars)
        guard !glyphs.isEmpty, boxH + 2 <= rect.height else { return }
        let boxW = CompositeLayout.even(glyphs.count * advance + 2 * pad)
        let box = PixelRect(
            x: rect.x + CompositeLayout.even(pad), y: rect.y + rect.height - boxH - CompositeLayout.even(pad),
            width: min(boxW, rect.width - CompositeLayout.even(pad)), height: boxH)
        fill(box, color: (40, 128, 128))
        y.withUnsafeMutableBufferPointer { py in
            var x0 = box.x + pad
            for scalar in glyphs {
                let rows = BitmapFont.glyph(scalar)
                for (row, bits) in rows.enumerated() {
                    for col in 0..<5 where bits & (0x10 >> col) != 0 {
                        for dy in 0..<scale {
                            let yy = box.y + pad + row * scale + dy
                            let start = yy * width + x0 + col * scale
                            for dx in 0..<scale { py[start + dx] = 235 }
                        }
                    }
                }
                x0 += advance
            }
        }
    }

    private func clip(_ r: PixelRect) -> PixelRect? {
        let x = max(0, r.x) & ~1
        let y0 = max(0, r.y) & ~1
        let w = CompositeLayout.even(min(r.x + r.width, width) - x)
        let h = CompositeLayout.even(min(r.y + r.height, height) - y0)
        guard w >= 2, h >= 2 else { return nil }
        return PixelRect(x: x, y: y0, width: w, height: h)
    }
}

/// A 5×7 pixel font of the printable ASCII a name needs: digits, letters (lower case drawn as upper
/// case) and `-_.:@'()`; any other character is drawn as `?`.
enum BitmapFont {
    /// Seven rows per glyph, the five low bits of each (bit 4 the leftmost pixel).
    static func glyph(_ s: Unicode.Scalar) -> [UInt8] {
        var c = s
        if (0x61...0x7A).contains(c.value) { c = Unicode.Scalar(c.value - 32)! }
        return table[Character(c)] ?? table["?"]!
    }

    private static let table: [Character: [UInt8]] = [
        " ": [0, 0, 0, 0, 0, 0, 0],
        "0": [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], "1": [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
        "2": [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], "3": [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
        "4": [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], "5": [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
        "6": [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], "7": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
        "8": [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], "9": [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
        "A": [0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11], "B": [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
        "C": [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E], "D": [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C],
        "E": [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F], "F": [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
        "G": [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F], "H": [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
        "I": [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E], "J": [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
        "K": [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11], "L": [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
        "M": [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11], "N": [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
        "O": [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], "P": [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        "Q": [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D], "R": [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
        "S": [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E], "T": [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        "U": [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E], "V": [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
        "W": [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A], "X": [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
        "Y": [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04], "Z": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        "-": [0, 0, 0, 0x1F, 0, 0, 0], "_": [0, 0, 0, 0, 0, 0, 0x1F], ".": [0, 0, 0, 0, 0, 0x0C, 0x0C],
        ":": [0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0], "@": [0x0E, 0x11, 0x17, 0x15, 0x17, 0x10, 0x0E],
        "'": [0x04, 0x04, 0x08, 0, 0, 0, 0], "(": [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
        ")": [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08], "?": [0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04],
    ]
}
