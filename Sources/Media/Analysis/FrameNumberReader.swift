/// Reads the frame number ``TestPatternSource`` burns into each picture as ``FrameCode`` blocks.
///
/// Each cell is judged by the mean luma of its central half (block edges are where a low-bitrate
/// encode and a scaler smear), against the midpoint of the two calibration cells. A picture whose
/// calibration cells lack contrast, or whose parity cells disagree, reads as nil rather than as a
/// wrong number: a black frame, a flash of another source, a badly damaged decode.
public enum FrameNumberReader {
    /// Least luma difference between the white and black calibration cells for a readable code
    /// (the drawn difference is 219).
    public static let minimumContrast = 60.0

    /// The frame number (modulo ``FrameCode/modulus``) in `image`, or nil when there is no readable code.
    public static func read(_ image: I420Image) -> Int? {
        guard image.isConsistent, image.width >= FrameCode.cellCount * 2, image.height >= 16 else { return nil }
        let strip = FrameCode.strip(width: image.width, height: image.height)
        let rowStart = strip.y + strip.height / 4
        let rowEnd = max(rowStart + 1, strip.y + strip.height - strip.height / 4)
        var means = [Double](repeating: 0, count: FrameCode.cellCount)
        image.y.withUnsafeBufferPointer { y in
            for cell in 0..<FrameCode.cellCount {
                let x0 = FrameCode.cellX(cell, width: image.width)
                let x1 = FrameCode.cellX(cell + 1, width: image.width)
                let inset = (x1 - x0) / 4
                let colStart = x0 + inset
                let colEnd = max(colStart + 1, x1 - inset)
                var sum = 0
                for row in rowStart..<rowEnd {
                    let base = row * image.strideY
                    for col in colStart..<colEnd { sum += Int(y[base + col]) }
                }
                means[cell] = Double(sum) / Double((rowEnd - rowStart) * (colEnd - colStart))
            }
        }
        guard means[0] - means[1] >= minimumContrast else { return nil }
        let threshold = (means[0] + means[1]) / 2
        var cells: UInt32 = 0
        for (cell, mean) in means.enumerated() where mean >= threshold { cells |= 1 << UInt32(cell) }
        return FrameCode.number(from: cells)
    }
}
