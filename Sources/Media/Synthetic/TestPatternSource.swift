/// Draws the synthetic test picture: colour bars, a moving box, the frame number in large
/// seven-segment digits, the frame number again as a machine-readable strip of blocks
/// (``FrameCode``), and a full-white "flash" frame at every sync marker.
///
/// Rendering is deterministic in the frame index, so every layer of a simulcast set shows the
/// same content at its own resolution.
public struct TestPatternSource: Sendable {
    /// Picture width in pixels.
    public let width: Int
    /// Picture height in pixels.
    public let height: Int
    /// Frames per second.
    public let fps: Int
    /// Frames between sync markers (flash frames): `markerIntervalSeconds × fps`.
    public let markerInterval: Int

    /// Luma of a flash frame (video white).
    public static let flashLuma: UInt8 = 235

    /// Creates a source. `markerIntervalSeconds` is the spacing of flash frames (default 2 s).
    public init(width: Int = 640, height: Int = 360, fps: Int = 30, markerIntervalSeconds: Int = 2) {
        self.width = max(2, width & ~1)
        self.height = max(2, height & ~1)
        self.fps = max(1, fps)
        markerInterval = max(1, markerIntervalSeconds) * max(1, fps)
    }

    /// True when frame `index` is a sync-marker (flash) frame.
    public func isMarker(_ index: Int) -> Bool { index % markerInterval == 0 }

    /// Renders frame `index` into a new image.
    public func frame(at index: Int) -> I420Image {
        var image = I420Image(width: width, height: height)
        render(index, into: &image)
        return image
    }

    /// Renders frame `index` into `image`, which must be `width × height` and tightly packed.
    public func render(_ index: Int, into image: inout I420Image) {
        guard image.width == width, image.height == height, image.isConsistent else { return }
        if isMarker(index) {
            fill(&image.y, stride: image.strideY, x: 0, y: 0, w: width, h: height, value: Self.flashLuma)
            fill(&image.u, stride: image.strideU, x: 0, y: 0, w: image.chromaWidth, h: image.chromaHeight, value: 128)
            fill(&image.v, stride: image.strideV, x: 0, y: 0, w: image.chromaWidth, h: image.chromaHeight, value: 128)
            // The code too, so a flash frame has its number (its mean luma stays near 220).
            drawCode(index, into: &image)
            return
        }
        // Eight colour bars, darker than the flash so a marker frame stands out in mean luma.
        let bars: [(y: UInt8, u: UInt8, v: UInt8)] = [
            (150, 128, 128), (140, 44, 142), (120, 156, 44), (105, 72, 58),
            (80, 184, 198), (65, 100, 212), (45, 212, 114), (30, 128, 128),
        ]
        for (i, bar) in bars.enumerated() {
            let x0 = i * width / bars.count
            let x1 = (i + 1) * width / bars.count
            fill(&image.y, stride: image.strideY, x: x0, y: 0, w: x1 - x0, h: height, value: bar.y)
            fill(
                &image.u, stride: image.strideU, x: x0 / 2, y: 0, w: (x1 - x0 + 1) / 2, h: image.chromaHeight,
                value: bar.u)
            fill(
                &image.v, stride: image.strideV, x: x0 / 2, y: 0, w: (x1 - x0 + 1) / 2, h: image.chromaHeight,
                value: bar.v)
        }
        // A box sweeping left to right once per second, on the lower third.
        let box = max(4, height / 6)
        let travel = max(1, width - box)
        let bx = (index % fps) * travel / fps
        let by = height - box - height / 12
        fill(&image.y, stride: image.strideY, x: bx, y: by, w: box, h: box, value: 210)
        fill(&image.u, stride: image.strideU, x: bx / 2, y: by / 2, w: box / 2, h: box / 2, value: 90)
        fill(&image.v, stride: image.strideV, x: bx / 2, y: by / 2, w: box / 2, h: box / 2, value: 240)
        // Frame number on a black plate, top-left, and as blocks across the middle.
        drawNumber(index, into: &image)
        drawCode(index, into: &image)
    }

    /// Draws ``FrameCode`` cells for `index` across the strip, with neutral chroma under them.
    private func drawCode(_ index: Int, into image: inout I420Image) {
        let strip = FrameCode.strip(width: width, height: height)
        fill(
            &image.u, stride: image.strideU, x: 0, y: strip.y / 2, w: image.chromaWidth, h: (strip.height + 1) / 2,
            value: 128)
        fill(
            &image.v, stride: image.strideV, x: 0, y: strip.y / 2, w: image.chromaWidth, h: (strip.height + 1) / 2,
            value: 128)
        let cells = FrameCode.cells(for: index)
        for cell in 0..<FrameCode.cellCount {
            let x0 = FrameCode.cellX(cell, width: width)
            let x1 = FrameCode.cellX(cell + 1, width: width)
            fill(
                &image.y, stride: image.strideY, x: x0, y: strip.y, w: x1 - x0, h: strip.height,
                value: cells & (1 << cell) != 0 ? FrameCode.white : FrameCode.black)
        }
    }

    private func drawNumber(_ number: Int, into image: inout I420Image) {
        let digits = Array(String(max(0, number)))
        let digitH = max(7, height / 4)
        let digitW = digitH / 2
        let gap = max(1, digitW / 4)
        let margin = max(1, height / 20)
        let plateW = digits.count * (digitW + gap) + gap
        let plateH = digitH + 2 * gap
        fill(&image.y, stride: image.strideY, x: margin, y: margin, w: plateW, h: plateH, value: 16)
        fill(
            &image.u, stride: image.strideU, x: margin / 2, y: margin / 2, w: (plateW + 1) / 2, h: (plateH + 1) / 2,
            value: 128)
        fill(
            &image.v, stride: image.strideV, x: margin / 2, y: margin / 2, w: (plateW + 1) / 2, h: (plateH + 1) / 2,
            value: 128)
        for (i, ch) in digits.enumerated() {
            guard let d = ch.wholeNumberValue else { continue }
            drawDigit(d, x: margin + gap + i * (digitW + gap), y: margin + gap, w: digitW, h: digitH, into: &image)
        }
    }

    /// Segment bits: a=1 (top), b=2, c=4, d=8 (bottom), e=16, f=32, g=64 (middle).
    private static let segments: [UInt8] = [0x3F, 0x06, 0x5B, 0x4F, 0x66, 0x6D, 0x7D, 0x07, 0x7F, 0x6F]

    private func drawDigit(_ d: Int, x: Int, y: Int, w: Int, h: Int, into image: inout I420Image) {
        let mask = Self.segments[d]
        let t = max(1, h / 10)
        let half = h / 2
        let rects: [(Int, Int, Int, Int)] = [
            (t, 0, w - 2 * t, t),  // a
            (w - t, t, t, half - t),  // b
            (w - t, half, t, half - t),  // c
            (t, h - t, w - 2 * t, t),  // d
            (0, half, t, half - t),  // e
            (0, t, t, half - t),  // f
            (t, half - t / 2, w - 2 * t, t),  // g
        ]
        for (bit, r) in rects.enumerated() where mask & (1 << bit) != 0 {
            fill(&image.y, stride: image.strideY, x: x + r.0, y: y + r.1, w: r.2, h: r.3, value: 235)
        }
    }

    /// Fills a clipped rectangle of one plane.
    private func fill(_ plane: inout [UInt8], stride: Int, x: Int, y: Int, w: Int, h: Int, value: UInt8) {
        let rows = plane.count / max(1, stride)
        let x0 = max(0, x)
        let y0 = max(0, y)
        let x1 = min(stride, x + w)
        let y1 = min(rows, y + h)
        guard x1 > x0, y1 > y0 else { return }
        plane.withUnsafeMutableBufferPointer { p in
            guard let base = p.baseAddress else { return }
            for row in y0..<y1 { (base + row * stride + x0).update(repeating: value, count: x1 - x0) }
        }
    }
}

/// The frame number as a row of large black/white blocks across the middle of the test picture:
/// the machine-readable twin of the seven-segment digits, readable by ``FrameNumberReader`` after a
/// low-bitrate encode and at 160x90.
///
/// The strip spans the picture's full width, `height / 8` tall, from `7·height / 16` (between the
/// digits and the moving box). It has ``cellCount`` equal cells, left to right: a white and a black
/// calibration cell, the frame number modulo 4096 as 12 bits (most significant first), then the
/// parity of the even-numbered and of the odd-numbered data bits. All geometry is proportional to
/// the picture size, so a picture scaled after rendering reads the same.
public enum FrameCode {
    /// Cells across the strip.
    public static let cellCount = 16
    /// Data bits: frame numbers are carried modulo `2^dataBits`.
    public static let dataBits = 12
    /// Frame numbers wrap at this value.
    public static let modulus = 1 << dataBits
    /// Luma of a 1 cell (and of the white calibration cell).
    public static let white: UInt8 = 235
    /// Luma of a 0 cell (and of the black calibration cell).
    public static let black: UInt8 = 16

    /// The strip's rows in a `width × height` picture.
    public static func strip(width: Int, height: Int) -> (y: Int, height: Int) {
        (y: height * 7 / 16, height: max(2, height / 8))
    }

    /// Left edge of cell `cell` (`cellCount` gives the right edge of the last one).
    public static func cellX(_ cell: Int, width: Int) -> Int { cell * width / cellCount }

    /// The cells of frame `index`: bit `c` set when cell `c` is white.
    public static func cells(for index: Int) -> UInt32 {
        let number = UInt32(((index % modulus) + modulus) % modulus)
        var cells: UInt32 = 1  // cell 0 white, cell 1 black
        var evenParity: UInt32 = 0
        var oddParity: UInt32 = 0
        for bit in 0..<dataBits {
            let value = (number >> UInt32(dataBits - 1 - bit)) & 1
            cells |= value << UInt32(2 + bit)
            if bit % 2 == 0 { evenParity ^= value } else { oddParity ^= value }
        }
        return cells | evenParity << UInt32(2 + dataBits) | oddParity << UInt32(3 + dataBits)
    }

    /// The frame number in `cells`, or nil when the calibration or a parity cell disagrees.
    public static func number(from cells: UInt32) -> Int? {
        guard cells & 0b11 == 0b01 else { return nil }
        var number = 0
        var evenParity: UInt32 = 0
        var oddParity: UInt32 = 0
        for bit in 0..<dataBits {
            let value = (cells >> UInt32(2 + bit)) & 1
            number = number << 1 | Int(value)
            if bit % 2 == 0 { evenParity ^= value } else { oddParity ^= value }
        }
        guard (cells >> UInt32(2 + dataBits)) & 1 == evenParity, (cells >> UInt32(3 + dataBits)) & 1 == oddParity
        else { return nil }
        return number
    }
}
