import CTurboJPEG

/// JPEG encoding of ``I420Image``s with libturbojpeg (4:2:0 chroma, so no colour conversion).
///
/// Not thread-safe: confine an instance to one thread, or make one per use (creation is cheap).
// Safe as used: confined to one thread (not thread-safe, see above); Sendable only to move it there.
public final class JPEGEncoder: @unchecked Sendable {
    private let handle: tjhandle

    /// Creates an encoder; throws when libturbojpeg cannot allocate its compressor.
    public init() throws {
        guard let h = tjInitCompress() else { throw MediaError.invalidArgument("tjInitCompress failed") }
        handle = h
    }

    deinit { tjDestroy(handle) }

    /// Encodes `image` as a baseline JPEG. `quality` is libjpeg's 1…100 scale.
    public func encode(_ image: I420Image, quality: Int = 85) throws -> [UInt8] {
        guard image.isConsistent else {
            throw MediaError.invalidArgument("inconsistent I420 image \(image.width)x\(image.height)")
        }
        guard (1...100).contains(quality) else { throw MediaError.invalidArgument("JPEG quality \(quality)") }
        var jpeg: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let result: Int32 = image.y.withUnsafeBufferPointer { y in
            image.u.withUnsafeBufferPointer { u in
                image.v.withUnsafeBufferPointer { v in
                    var planes: [UnsafePointer<UInt8>?] = [y.baseAddress, u.baseAddress, v.baseAddress]
                    var strides: [Int32] = [Int32(image.strideY), Int32(image.strideU), Int32(image.strideV)]
                    return ua_tj_compress_i420(
                        handle, &planes, Int32(image.width), &strides, Int32(image.height), &jpeg, &size,
                        Int32(quality))
                }
            }
        }
        defer { if let jpeg { tjFree(jpeg) } }
        guard result == 0, let jpeg, size > 0 else {
            throw MediaError.invalidArgument("tjCompressFromYUVPlanes failed: \(Self.lastError(handle))")
        }
        return [UInt8](UnsafeBufferPointer(start: jpeg, count: Int(size)))
    }

    static func lastError(_ handle: tjhandle) -> String {
        guard let message = tjGetErrorStr2(handle) else { return "unknown error" }
        return String(cString: message)
    }
}

/// Reads JPEG files back with libturbojpeg (tests and checks of captured images).
public enum JPEGDecoder {
    /// The size coded in a JPEG's header, or nil when `data` is not a JPEG libturbojpeg can read.
    public static func size(of data: [UInt8]) -> (width: Int, height: Int)? {
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var width: Int32 = 0
        var height: Int32 = 0
        var subsampling: Int32 = 0
        var colorspace: Int32 = 0
        let result = data.withUnsafeBufferPointer { p in
            tjDecompressHeader3(
                handle, p.baseAddress, UInt(p.count), &width, &height, &subsampling, &colorspace)
        }
        guard result == 0, width > 0, height > 0 else { return nil }
        return (Int(width), Int(height))
    }

    /// Decodes a JPEG fully to 8-bit grey (luma) pixels, row by row; nil when it cannot be decoded.
    public static func decodeLuma(_ data: [UInt8]) -> (width: Int, height: Int, pixels: [UInt8])? {
        guard let (width, height) = size(of: data), let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        var pixels = [UInt8](repeating: 0, count: width * height)
        let result = data.withUnsafeBufferPointer { src in
            pixels.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(
                    handle, src.baseAddress, UInt(src.count), dst.baseAddress, Int32(width), Int32(width),
                    Int32(height), Int32(TJPF_GRAY.rawValue), 0)
            }
        }
        guard result == 0 else { return nil }
        return (width, height, pixels)
    }
}

extension I420Image {
    /// The size that fits within `maxWidth` × `maxHeight` keeping the aspect ratio, never larger than
    /// the image. A nil bound does not constrain; both nil keeps the image size. Each side is ≥ 1.
    public func fittedSize(maxWidth: Int?, maxHeight: Int?) -> (width: Int, height: Int) {
        guard width > 0, height > 0 else { return (width, height) }
        let boundW = maxWidth.map { max(1, min($0, 1 << 20)) } ?? width
        let boundH = maxHeight.map { max(1, min($0, 1 << 20)) } ?? height
        if boundW >= width && boundH >= height { return (width, height) }
        // The side with the smaller ratio binds (compare boundW/width with boundH/height exactly).
        if boundW * height <= boundH * width {
            let h = (height * boundW + width / 2) / width
            return (boundW, min(boundH, max(1, h)))
        }
        let w = (width * boundH + height / 2) / height
        return (min(boundW, max(1, w)), boundH)
    }

    /// A copy reduced to `newWidth` × `newHeight` by averaging each destination pixel's source area.
    /// Sizes not smaller than the image return the image unchanged (it is never enlarged).
    public func scaledDown(toWidth newWidth: Int, height newHeight: Int) -> I420Image {
        guard isConsistent, newWidth > 0, newHeight > 0, newWidth < width || newHeight < height else { return self }
        let w = min(newWidth, width)
        let h = min(newHeight, height)
        var out = I420Image(width: w, height: h)
        Self.boxScale(y, width, height, strideY, into: &out.y, w, h, out.strideY)
        Self.boxScale(
            u, chromaWidth, chromaHeight, strideU, into: &out.u, out.chromaWidth, out.chromaHeight, out.strideU)
        Self.boxScale(
            v, chromaWidth, chromaHeight, strideV, into: &out.v, out.chromaWidth, out.chromaHeight, out.strideV)
        return out
    }

    private static func boxScale(
        _ src: [UInt8], _ sw: Int, _ sh: Int, _ sStride: Int, into dst: inout [UInt8], _ dw: Int, _ dh: Int,
        _ dStride: Int
    ) {
        guard sw > 0, sh > 0, dw > 0, dh > 0, src.count >= sStride * sh, dst.count >= dStride * dh else { return }
        src.withUnsafeBufferPointer { s in
            dst.withUnsafeMutableBufferPointer { d in
                for dy in 0..<dh {
                    let y0 = dy * sh / dh
                    let y1 = max(y0 + 1, (dy + 1) * sh / dh)
                    for dx in 0..<dw {
                        let x0 = dx * sw / dw
                        let x1 = max(x0 + 1, (dx + 1) * sw / dw)
                        var sum = 0
                        for sy in y0..<y1 {
                            let row = sy * sStride
                            for sx in x0..<x1 { sum += Int(s[row + sx]) }
                        }
                        let count = (y1 - y0) * (x1 - x0)
                        d[dy * dStride + dx] = UInt8(truncatingIfNeeded: (sum + count / 2) / count)
                    }
                }
            }
        }
    }
}
