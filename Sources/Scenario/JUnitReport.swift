import Foundation
import Signaling

extension ScenarioResult {
    /// The run as JUnit XML: one `<testsuite>` for the scenario, one `<testcase>` per step and
    /// expectation with its time, `<failure>` or `<skipped>`, and the bots' event log in `<system-out>`.
    public func junitXML(timestamp: Date = Date()) -> String { Self.junitXML([self], timestamp: timestamp) }

    /// Several runs in one JUnit document, one `<testsuite>` each.
    public static func junitXML(_ results: [ScenarioResult], timestamp: Date = Date()) -> String {
        let all = results.flatMap(\.cases)
        let stamp = ISO8601Timestamp.string(timestamp)
        var x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        x += "<testsuites name=\"understudy scenario\" tests=\"\(all.count)\" "
        x += "failures=\"\(all.filter { $0.status == .failed }.count)\" errors=\"0\" "
        x += "skipped=\"\(all.filter { $0.status == .skipped }.count)\" "
        x += "time=\"\(seconds(results.reduce(0) { $0 + $1.seconds }))\">\n"
        for r in results { x += r.junitSuite(stamp: stamp) }
        x += "</testsuites>\n"
        return x
    }

    private func junitSuite(stamp: String) -> String {
        let failed = cases.filter { $0.status == .failed }.count
        let skipped = cases.filter { $0.status == .skipped }.count
        let time = Self.seconds(seconds)
        var x =
            "  <testsuite name=\"\(Self.escape(name))\" tests=\"\(cases.count)\" failures=\"\(failed)\" errors=\"0\" "
        x += "skipped=\"\(skipped)\" time=\"\(time)\" timestamp=\"\(stamp)\" file=\"\(Self.escape(path))\">\n"
        let classname = Self.escape("scenario." + name)
        for c in cases {
            x += "    <testcase classname=\"\(classname)\" name=\"\(Self.escape(c.field + " " + c.title))\" "
            x += "time=\"\(Self.seconds(c.seconds))\" file=\"\(Self.escape(path))\" line=\"\(c.line)\""
            switch c.status {
            case .passed:
                x += "/>\n"
            case .failed:
                let m = Self.escape(c.message ?? "failed")
                x += ">\n      <failure message=\"\(m)\" type=\"ExpectationFailed\">\(m)</failure>\n    </testcase>\n"
            case .skipped:
                x += ">\n      <skipped message=\"\(Self.escape(c.message ?? "skipped"))\"/>\n    </testcase>\n"
            }
        }
        x += "    <system-out>\(Self.escape(eventLog.joined(separator: "\n")))</system-out>\n"
        x += "  </testsuite>\n"
        return x
    }

    static func seconds(_ s: Double) -> String { String(format: "%.3f", s) }

    /// Escapes markup and drops characters XML 1.0 cannot carry at all.
    static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for u in s.unicodeScalars {
            switch u {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(u)
            default:
                let v = u.value
                let allowed = (v >= 0x20 && v <= 0xD7FF) || (v >= 0xE000 && v <= 0xFFFD) || v >= 0x10000
                if allowed { out.unicodeScalars.append(u) } else { out += "\u{FFFD}" }
            }
        }
        return out
    }
}
