import Foundation
import RoomServer
import Testing

/// Issue 32 item 9: the limit tables in `docs/protocol.md` ("9. Limits and abuse", "9a. Limits")
/// and the README's "Server limits" state the defaults of `RoomServerConfiguration`. Every table row
/// that names exactly one configuration key and gives a plain number as its default must give the
/// number the code has (the participant limit was 2000 in one table and 100 in the next).
@Suite("Documented limits match the configuration")
struct LimitsDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The default configuration as key → integer (the keys whose value is a number).
    static func defaults() throws -> [String: Int] {
        let data = try JSONEncoder().encode(RoomServerConfiguration())
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var numbers: [String: Int] = [:]
        for (key, value) in object {
            if let n = value as? NSNumber, !(value is Bool), n.doubleValue == n.doubleValue.rounded() {
                numbers[key] = n.intValue
            }
        }
        return numbers
    }

    /// Rows of the limit tables of `file` (second column "default") that name exactly one
    /// configuration key and whose default is a plain number, optionally followed by a parenthesis:
    /// (key, number, row).
    static func documentedDefaults(in file: String, keys: Set<String>) throws -> [(String, Int, String)] {
        let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
        var found: [(String, Int, String)] = []
        let plain = try Regex(#"^\s*(\d[\d,]*)\s*(\(.*\))?\s*$"#)
        let backticked = try Regex(#"`([A-Za-z][A-Za-z0-9]*)`"#)
        // Only tables whose second column is headed "default".
        var inLimitTable = false
        var previousWasTable = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            guard line.hasPrefix("|") else {
                previousWasTable = false
                continue
            }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            if !previousWasTable {
                inLimitTable = cells.count > 3 && cells[2].trimmingCharacters(in: .whitespaces) == "default"
            }
            previousWasTable = true
            guard inLimitTable, cells.count > 3 else { continue }
            let named = Set(line.matches(of: backticked).map { String($0.output[1].substring ?? "") })
                .intersection(keys)
            guard named.count == 1, let key = named.first,
                let match = cells[2].firstMatch(of: plain), let digits = match.output[1].substring,
                let value = Int(digits.replacingOccurrences(of: ",", with: ""))
            else { continue }
            found.append((key, value, String(line)))
        }
        return found
    }

    @Test func everyPlainDefaultInTheLimitTablesIsTheCodes() throws {
        let defaults = try Self.defaults()
        #expect(defaults["maxParticipantsPerRoom"] != nil)
        var checked: Set<String> = []
        for file in ["docs/protocol.md", "README.md"] {
            for (key, value, row) in try Self.documentedDefaults(in: file, keys: Set(defaults.keys)) {
                #expect(value == defaults[key], "\(file): \(row) (the code's default of \(key) is \(defaults[key]!))")
                checked.insert(key)
            }
        }
        // The rows that disagreed, and a few others, are among those checked.
        for key in ["maxParticipantsPerRoom", "maxRooms", "maxHTTPSessions", "maxTopicsPerParticipant"] {
            #expect(checked.contains(key), "no table row states the default of \(key)")
        }
    }
}
