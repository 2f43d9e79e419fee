#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Full-reference picture quality of a decoded picture against its source: PSNR and SSIM, computed
/// as ffmpeg's `psnr` and `ssim` filters compute them, so the numbers compare with theirs.
///
/// - **PSNR** per plane is `10·log10(255² / MSE)`; the overall value uses the MSE of all three planes
///   weighted by their sample counts (ffmpeg's `average`). Identical planes give ``maximumPSNR``
///   (ffmpeg prints `inf`), so means and JSON stay finite.
/// - **SSIM** is on luma: 8x8 windows stepped by 4 pixels, each scored
///   `(2·μx·μy + C1)(2·σxy + C2) / ((μx² + μy² + C1)(σx² + σy² + C2))` with unbiased (÷63)
///   variances, averaged over the windows. The constants are ffmpeg's (from x264): `C2 = (0.03·255)²`
///   and, as its integer form scales it, `C1 = (0.01·255)² / 64`.
public enum PictureQuality {
    /// PSNR of identical pictures (dB).
    public static let maximumPSNR = 100.0

    /// PSNR of one picture against its reference, in dB.
    public struct PSNR: Sendable, Equatable {
        /// Luma.
        public var y: Double
        /// Cb.
        public var u: Double
        /// Cr.
        public var v: Double
        /// All three planes, weighted by sample count.
        public var average: Double
    }

    /// Why two pictures cannot be compared.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The pictures differ in size, or one is not ``I420Image/isConsistent``.
        case mismatched(reference: String, decoded: String)
        public var description: String {
            switch self {
            case .mismatched(let r, let d): return "cannot compare a \(d) picture with a \(r) reference"
            }
        }
    }

    /// PSNR of `decoded` against `reference` (same size, both consistent).
    public static func psnr(_ decoded: I420Image, reference: I420Image) throws(Failure) -> PSNR {
        try check(decoded, reference)
        let ySSE = sse(decoded.y, decoded.strideY, reference.y, reference.strideY, decoded.width, decoded.height)
        let cw = decoded.chromaWidth
        let ch = decoded.chromaHeight
        let uSSE = sse(decoded.u, decoded.strideU, reference.u, reference.strideU, cw, ch)
        let vSSE = sse(decoded.v, decoded.strideV, reference.v, reference.strideV, cw, ch)
        let lumaCount = Double(decoded.width * decoded.height)
        let chromaCount = Double(cw * ch)
        return PSNR(
            y: decibels(Double(ySSE) / lumaCount), u: decibels(Double(uSSE) / chromaCount),
            v: decibels(Double(vSSE) / chromaCount),
            average: decibels(Double(ySSE + uSSE + vSSE) / (lumaCount + 2 * chromaCount)))
    }

    /// Luma SSIM of `decoded` against `reference` (same size, both consistent), 0…1.
    public static func ssim(_ decoded: I420Image, reference: I420Image) throws(Failure) -> Double {
        try check(decoded, reference)
        let width = decoded.width
        let height = decoded.height
        guard width >= 8, height >= 8 else {
            // Too small for one 8x8 window: 1 for identical luma, else 0.
            return decoded.y == reference.y ? 1 : 0
        }
        let c1 = 416.0  // Int(.01² · 255² · 64 + .5), as ffmpeg rounds it
        let c2 = 235_963.0  // Int(.03² · 255² · 64 · 63 + .5)
        var total = 0.0
        var windows = 0
        decoded.y.withUnsafeBufferPointer { a in
            reference.y.withUnsafeBufferPointer { b in
                var wy = 0
                while wy + 8 <= height {
                    var wx = 0
                    while wx + 8 <= width {
                        var sa = 0
                        var sb = 0
                        var saa = 0
                        var sbb = 0
                        var sab = 0
                        for row in wy..<(wy + 8) {
                            let ra = row * decoded.strideY
                            let rb = row * reference.strideY
                            for col in wx..<(wx + 8) {
                                let x = Int(a[ra + col])
                                let y = Int(b[rb + col])
                                sa += x
                                sb += y
                                saa += x * x
                                sbb += y * y
                                sab += x * y
                            }
                        }
                        // ffmpeg's (x264's) integer form, sums scaled by 64.
                        let vars = Double((saa + sbb) * 64 - sa * sa - sb * sb)
                        let covar = Double(sab * 64 - sa * sb)
                        let s12 = Double(sa * sb)
                        total +=
                            (2 * s12 + c1) * (2 * covar + c2)
                            / ((Double(sa * sa + sb * sb) + c1) * (vars + c2))
                        windows += 1
                        wx += 4
                    }
                    wy += 4
                }
            }
        }
        return total / Double(windows)
    }

    /// 10·log10(255²/mse), ``maximumPSNR`` for a zero error.
    static func decibels(_ mse: Double) -> Double {
        mse <= 0 ? maximumPSNR : min(maximumPSNR, 10 * log10(255 * 255 / mse))
    }

    private static func check(_ a: I420Image, _ b: I420Image) throws(Failure) {
        guard a.isConsistent, b.isConsistent, a.width == b.width, a.height == b.height else {
            throw .mismatched(reference: "\(b.width)x\(b.height)", decoded: "\(a.width)x\(a.height)")
        }
    }

    /// Sum of squared differences over a `width × height` region of two planes.
    private static func sse(_ a: [UInt8], _ sa: Int, _ b: [UInt8], _ sb: Int, _ width: Int, _ height: Int) -> Int {
        var total = 0
        a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in
                for row in 0..<height {
                    let ra = row * sa
                    let rb = row * sb
                    for col in 0..<width {
                        let d = Int(pa[ra + col]) - Int(pb[rb + col])
                        total += d * d
                    }
                }
            }
        }
        return total
    }
}
