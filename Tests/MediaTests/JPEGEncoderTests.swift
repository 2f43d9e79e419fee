import Foundation
import Media
import TestSupport
import Testing

@Suite("JPEG encoder")
struct JPEGEncoderTests {
    /// Left half dark, right half bright, so scaling and decoding keep a measurable structure.
    private func halves(width: Int, height: Int) -> I420Image {
        var image = I420Image(width: width, height: height, fillY: 40)
        for row in 0..<height {
            for col in (width / 2)..<width { image.y[row * image.strideY + col] = 220 }
        }
        return image
    }

    @Test func encodedJPEGDecodesBackWithTheSameSizeAndContent() throws {
        let image = halves(width: 320, height: 180)
        let jpeg = try JPEGEncoder().encode(image, quality: 90)
        #expect(jpeg.starts(with: [0xFF, 0xD8]))  // SOI
        #expect(jpeg.suffix(2).elementsEqual([0xFF, 0xD9]))  // EOI
        let decoded = try #require(JPEGDecoder.decodeLuma(jpeg))
        #expect(decoded.width == 320 && decoded.height == 180)
        let left = Int(decoded.pixels[90 * 320 + 40])
        let right = Int(decoded.pixels[90 * 320 + 280])
        #expect(abs(left - 40) < 12, "left \(left)")
        #expect(abs(right - 220) < 12, "right \(right)")
    }

    @Test func ffprobeReadsTheJPEGAsAnImageOfTheRightSize() throws {
        let jpeg = try JPEGEncoder().encode(halves(width: 161, height: 97))  // odd sizes too
        let path = temporaryPath("jpeg-\(UUID().uuidString).jpg")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(jpeg).write(to: URL(fileURLWithPath: path))
        let probe = try runTool(
            "/usr/bin/ffprobe",
            [
                "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height", "-of",
                "csv=p=0", path,
            ])
        #expect(probe.status == 0, "\(probe.err)")
        #expect(probe.out.trimmingCharacters(in: .whitespacesAndNewlines) == "mjpeg,161,97")
    }

    @Test func fittingScalesDownKeepingAspectAndNeverUp() {
        let image = I420Image(width: 640, height: 360)
        #expect(image.fittedSize(maxWidth: nil, maxHeight: nil) == (640, 360))
        #expect(image.fittedSize(maxWidth: 1280, maxHeight: 720) == (640, 360))  // never enlarged
        #expect(image.fittedSize(maxWidth: 320, maxHeight: nil) == (320, 180))
        #expect(image.fittedSize(maxWidth: nil, maxHeight: 90) == (160, 90))
        #expect(image.fittedSize(maxWidth: 320, maxHeight: 100) == (178, 100))  // height binds
        #expect(image.fittedSize(maxWidth: 1, maxHeight: 1) == (1, 1))
    }

    @Test func scalingDownAveragesAndKeepsTheStructure() throws {
        let scaled = halves(width: 320, height: 180).scaledDown(toWidth: 160, height: 90)
        #expect(scaled.width == 160 && scaled.height == 90 && scaled.isConsistent)
        #expect(scaled.y[45 * scaled.strideY + 20] == 40)
        #expect(scaled.y[45 * scaled.strideY + 140] == 220)
        let unchanged = halves(width: 32, height: 16).scaledDown(toWidth: 64, height: 64)
        #expect(unchanged.width == 32 && unchanged.height == 16)
        let jpeg = try JPEGEncoder().encode(scaled)
        #expect(JPEGDecoder.size(of: jpeg).map { [$0.width, $0.height] } == [160, 90])
    }

    @Test func badInputIsRefusedWithoutTrapping() throws {
        let encoder = try JPEGEncoder()
        var broken = I420Image(width: 16, height: 16)
        broken.y = [1, 2, 3]
        #expect(throws: MediaError.self) { try encoder.encode(broken) }
        #expect(throws: MediaError.self) { try encoder.encode(I420Image(width: 16, height: 16), quality: 0) }
        #expect(JPEGDecoder.size(of: [0xFF, 0xD8, 0x00]) == nil)
        #expect(JPEGDecoder.decodeLuma([]) == nil)
    }
}
