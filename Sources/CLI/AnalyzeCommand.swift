import Foundation
import Media

// `understudy analyze FILE`: full-reference checks of a recording of the synthetic media.

func runAnalyze(_ args: [String]) async {
    await runCommand("analyze") {
        let a = try Arguments(args, help: Help.analyze)
        guard let path = a.positionals.first else { throw Arguments.Failure.missingPositional("the recording FILE") }
        guard a.positionals.count == 1 else { throw Arguments.Failure.unexpected(a.positionals[1]) }
        var fps = 30
        if let text = a.value("--fps") {
            guard let value = Int(text), (1...120).contains(value) else {
                throw Arguments.Failure.badValue("--fps", "'\(text)' is not a frame rate of 1 to 120")
            }
            fps = value
        }
        let quality = try RecordingQuality.analyze(path: path, fps: fps)
        if a.flag("--json") {
            try printJSON(quality)
        } else {
            print(analyzeText(quality), terminator: "")
        }
    }
}

/// The human-readable report.
func analyzeText(_ q: RecordingQuality) -> String {
    let v = q.video
    func ms(_ value: Double) -> String { String(format: "%.0f ms", value) }
    func stats(_ s: VideoQualityReport.Stats?, _ format: String) -> String {
        guard let s else { return "n/a (no frame number read)" }
        return
            "mean \(String(format: format, s.mean))  min \(String(format: format, s.min))  p5 \(String(format: format, s.p5))"
    }
    func spans(_ list: [VideoQualityAnalyzer.Span]) -> String {
        guard !list.isEmpty else { return "none" }
        let total = list.reduce(0) { $0 + $1.durationMs }
        let shown = list.prefix(5).map { "\(ms($0.startMs))+\(ms($0.durationMs))" }.joined(separator: ", ")
        return "\(list.count), \(ms(total)) in all (\(shown)\(list.count > 5 ? ", …" : ""))"
    }
    var out = "\(q.path): \(q.videoCodec) \(v.sizes.joined(separator: ", "))\(q.truncated ? " (truncated file)" : "")\n"
    out += "  frames      \(v.frames) decoded, \(v.undecodable) undecodable, \(v.numbered) with a frame number"
    if let first = v.firstFrameNumber, let last = v.lastFrameNumber { out += " (\(first) … \(last))" }
    out += "\n"
    out +=
        "  sequence    \(v.dropped) dropped, \(v.skipped) skipped by the sender, \(v.repeated) repeated, \(v.outOfOrder) out of order (source \(v.fps) fps)\n"
    out += "  PSNR (dB)   \(stats(v.psnr, "%.2f"))\n"
    out += "  SSIM        \(stats(v.ssim, "%.4f"))\n"
    out += "  freezes     \(spans(v.freezes))\n"
    out += "  black       \(spans(v.blackSpans))\n"
    if let offset = q.avOffsetMs {
        out +=
            "  A/V offset  \(String(format: "%+.1f ms", offset)) (audio late when positive; \(q.syncPairs) flash/beep pairs)\n"
    } else {
        out += "  A/V offset  n/a (\(v.flashTimesMs.count) flashes, \(q.beepOnsetsMs.count) beeps, none paired)\n"
    }
    return out
}
