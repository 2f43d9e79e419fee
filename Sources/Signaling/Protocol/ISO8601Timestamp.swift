import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// UTC timestamps in ISO 8601 (`2026-12-03T06:32:18Z`, or `…18.125Z` with milliseconds).
///
/// Written here with `gmtime_r` rather than through `ISO8601DateFormatter`: on Linux that class
/// builds its CoreFoundation formatter lazily through ICU, which is not safe from several threads
/// at once (swift-corelibs-foundation #4566, #5533), and log lines and manifests are written from
/// several threads.
public enum ISO8601Timestamp {
    /// `date` in UTC; with `milliseconds`, three fractional digits.
    public static func string(_ date: Date = Date(), milliseconds: Bool = false) -> String {
        let since1970 = date.timeIntervalSince1970
        var seconds = time_t(since1970.rounded(.down))
        var millis = Int(((since1970 - Double(seconds)) * 1000).rounded(.down))
        if millis >= 1000 {
            seconds += 1
            millis -= 1000
        }
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "1970-01-01T00:00:00Z" }
        var text = pad(Int(parts.tm_year) + 1900, 4) + "-" + pad(Int(parts.tm_mon) + 1, 2) + "-"
        text += pad(Int(parts.tm_mday), 2) + "T" + pad(Int(parts.tm_hour), 2) + ":" + pad(Int(parts.tm_min), 2)
        text += ":" + pad(Int(parts.tm_sec), 2)
        if milliseconds { text += "." + pad(millis, 3) }
        return text + "Z"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
