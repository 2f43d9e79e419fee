import Egress
import Media
import Testing

@Suite struct CompositeCanvasTests {
    @Test func refusesOddOrEmptySizes() {
        #expect(throws: MediaError.self) { try CompositeCanvas(width: 13, height: 8) }
        #expect(throws: MediaError.self) { try CompositeCanvas(width: 0, height: 8) }
    }

    @Test func drawsAPictureLetterboxedIntoItsTile() throws {
        let canvas = try CompositeCanvas(width: 640, height: 360)
        // A 4:3 picture of luma 200 into the right half (320x360): 320x240 centred, black above and below.
        let picture = I420Image(width: 160, height: 120, fillY: 200, fillU: 90, fillV: 240)
        let tile = PixelRect(x: 320, y: 0, width: 320, height: 360)
        try canvas.draw(picture, in: tile)
        #expect(canvas.luma(x: 480, y: 180) == 200)
        #expect(canvas.luma(x: 321, y: 61) == 200)
        #expect(canvas.luma(x: 480, y: 10) == 16)  // letterbox
        #expect(canvas.luma(x: 480, y: 350) == 16)
        #expect(canvas.luma(x: 100, y: 180) == 16)  // the other tile untouched
        let image = canvas.image
        #expect(image.u[90 * 320 + 240] == 90 && image.v[90 * 320 + 240] == 240)
        #expect(image.u[90 * 320 + 100] == 128)
    }

    @Test func scalesUpAndDown() throws {
        let canvas = try CompositeCanvas(width: 1280, height: 720)
        try canvas.draw(
            I420Image(width: 1920, height: 1080, fillY: 100), in: PixelRect(x: 0, y: 0, width: 320, height: 180))
        try canvas.draw(
            I420Image(width: 64, height: 36, fillY: 150), in: PixelRect(x: 640, y: 360, width: 640, height: 360))
        #expect(canvas.luma(x: 160, y: 90) == 100)
        #expect(canvas.luma(x: 960, y: 540) == 150)
        #expect(canvas.luma(x: 500, y: 500) == 16)
    }

    /// Planes lent by a decoder have padded rows (stride > width): only the visible width is drawn.
    @Test func drawsBorrowedPlanesWithPaddedRows() throws {
        let canvas = try CompositeCanvas(width: 64, height: 64)
        // 16x16 visible in rows of 48: the padding is 250 (white), the picture 90.
        var y = [UInt8](repeating: 250, count: 48 * 16)
        for row in 0..<16 { for x in 0..<16 { y[row * 48 + x] = 90 } }
        let u = [UInt8](repeating: 128, count: 32 * 8)
        let v = [UInt8](repeating: 128, count: 32 * 8)
        try y.withUnsafeBufferPointer { py in
            try u.withUnsafeBufferPointer { pu in
                try v.withUnsafeBufferPointer { pv in
                    let planes = I420Planes(
                        width: 16, height: 16, y: py.baseAddress!, u: pu.baseAddress!, v: pv.baseAddress!,
                        strideY: 48, strideU: 32, strideV: 32)
                    try canvas.draw(planes, in: PixelRect(x: 0, y: 0, width: 64, height: 64))
                }
            }
        }
        for (x, yy) in [(1, 1), (62, 62), (32, 32), (63, 0)] { #expect(canvas.luma(x: x, y: yy) == 90) }
    }

    @Test func refusesAPictureWithShortPlanes() throws {
        let canvas = try CompositeCanvas(width: 64, height: 64)
        var bad = I420Image(width: 32, height: 32)
        bad.y = [0, 1, 2]
        #expect(throws: MediaError.self) { try canvas.draw(bad, in: PixelRect(x: 0, y: 0, width: 32, height: 32)) }
    }

    @Test func labelsDrawWhiteGlyphsOnAGreyBox() throws {
        let canvas = try CompositeCanvas(width: 640, height: 360)
        let tile = PixelRect(x: 0, y: 0, width: 320, height: 180)
        canvas.fill(tile, color: (y: 100, u: 128, v: 128))
        canvas.label("Ann-1", in: tile)
        var white = 0
        var box = 0
        for y in 0..<180 {
            for x in 0..<320 {
                switch canvas.luma(x: x, y: y) {
                case 235: white += 1
                case 40: box += 1
                default: break
                }
            }
        }
        #expect(white > 50 && box > 200, "white \(white) box \(box)")
        // Bottom left only: the top of the tile is untouched, and nothing outside the tile.
        #expect(canvas.luma(x: 10, y: 10) == 100)
        #expect(canvas.luma(x: 400, y: 170) == 16)
        // A name far longer than the tile is cut, never drawn outside it.
        canvas.label(String(repeating: "W", count: 500), in: PixelRect(x: 0, y: 180, width: 64, height: 40))
        #expect(canvas.luma(x: 100, y: 215) == 16)
    }
}
