/// An 8-bit planar YUV 4:2:0 image (I420): a full-size Y plane and quarter-size U and V planes.
public struct I420Image: Sendable, Equatable {
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int
    /// Luma plane, `strideY × height` bytes.
    public var y: [UInt8]
    /// Cb plane, `strideU × chromaHeight` bytes.
    public var u: [UInt8]
    /// Cr plane, `strideV × chromaHeight` bytes.
    public var v: [UInt8]
    /// Bytes per row of `y`.
    public var strideY: Int
    /// Bytes per row of `u`.
    public var strideU: Int
    /// Bytes per row of `v`.
    public var strideV: Int

    /// Width of the chroma planes.
    public var chromaWidth: Int { (width + 1) / 2 }
    /// Height of the chroma planes.
    public var chromaHeight: Int { (height + 1) / 2 }

    /// Creates a tightly packed image filled with one colour (default: video black).
    public init(width: Int, height: Int, fillY: UInt8 = 16, fillU: UInt8 = 128, fillV: UInt8 = 128) {
        let w = max(width, 0)
        let h = max(height, 0)
        self.width = w
        self.height = h
        strideY = w
        strideU = (w + 1) / 2
        strideV = (w + 1) / 2
        y = [UInt8](repeating: fillY, count: w * h)
        u = [UInt8](repeating: fillU, count: strideU * ((h + 1) / 2))
        v = [UInt8](repeating: fillV, count: strideV * ((h + 1) / 2))
    }

    /// Creates an image from existing planes. The caller guarantees the planes match the strides.
    public init(width: Int, height: Int, y: [UInt8], u: [UInt8], v: [UInt8], strideY: Int, strideU: Int, strideV: Int) {
        self.width = width
        self.height = height
        self.y = y
        self.u = u
        self.v = v
        self.strideY = strideY
        self.strideU = strideU
        self.strideV = strideV
    }

    /// True when every plane is large enough for its stride and the image size.
    public var isConsistent: Bool {
        width > 0 && height > 0 && strideY >= width && strideU >= chromaWidth && strideV >= chromaWidth
            && y.count >= strideY * height && u.count >= strideU * chromaHeight && v.count >= strideV * chromaHeight
    }

    /// Copies plane `plane` (0 Y, 1 U, 2 V), its visible width per row, into an encoder's buffer
    /// of row pitch `stride`. The caller guarantees ``isConsistent`` and a buffer that large.
    func copyPlane(_ plane: Int, to dst: UnsafeMutablePointer<UInt8>, stride dstStride: Int) {
        let (src, srcStride, rows, cols) =
            plane == 0
            ? (y, strideY, height, width)
            : (plane == 1 ? u : v, plane == 1 ? strideU : strideV, chromaHeight, chromaWidth)
        src.withUnsafeBufferPointer { s in
            guard let sb = s.baseAddress else { return }
            for r in 0..<rows { (dst + r * dstStride).update(from: sb + r * srcStride, count: cols) }
        }
    }

    /// Mean luma over the visible area (0…255).
    public var meanLuma: Double {
        guard width > 0, height > 0, y.count >= strideY * height else { return 0 }
        var sum = 0
        for row in 0..<height {
            let start = row * strideY
            for i in start..<(start + width) { sum &+= Int(y[i]) }
        }
        return Double(sum) / Double(width * height)
    }
}

/// An I420 picture's planes borrowed from their owner (a decoder's frame buffer, an ``I420Image``),
/// valid only inside the closure that hands them out: how a picture is drawn without a copy.
public struct I420Planes {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Luma, `strideY × height` bytes.
    public let y: UnsafePointer<UInt8>
    /// Cb, `strideU × ((height + 1) / 2)` bytes.
    public let u: UnsafePointer<UInt8>
    /// Cr, `strideV × ((height + 1) / 2)` bytes.
    public let v: UnsafePointer<UInt8>
    /// Bytes per row of `y`.
    public let strideY: Int
    /// Bytes per row of `u`.
    public let strideU: Int
    /// Bytes per row of `v`.
    public let strideV: Int

    /// Wraps planes the caller keeps alive (and at least this large) while the value is used.
    public init(
        width: Int, height: Int, y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>,
        strideY: Int, strideU: Int, strideV: Int
    ) {
        self.width = width
        self.height = height
        self.y = y
        self.u = u
        self.v = v
        self.strideY = strideY
        self.strideU = strideU
        self.strideV = strideV
    }
}

extension I420Image {
    /// Lends this image's planes to `body`; nil (body not called) when the image is not
    /// ``isConsistent``.
    public func withPlanes<R>(_ body: (I420Planes) throws -> R) rethrows -> R? {
        guard isConsistent else { return nil }
        return try y.withUnsafeBufferPointer { py in
            try u.withUnsafeBufferPointer { pu in
                try v.withUnsafeBufferPointer { pv in
                    try body(
                        I420Planes(
                            width: width, height: height, y: py.baseAddress!, u: pu.baseAddress!, v: pv.baseAddress!,
                            strideY: strideY, strideU: strideU, strideV: strideV))
                }
            }
        }
    }
}
