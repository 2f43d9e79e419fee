import Foundation
import Signaling

/// What both agents (the room agent and the Janus agent) write beside their recordings: file-safe
/// names, timestamps and the manifest itself, so that the two manifests read alike.
enum AgentManifest {
    /// `id` with everything but letters, digits, `-` and `_` replaced by `_`.
    static func fileSafe(_ id: String) -> String {
        String(id.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
    }

    /// Now, in ISO 8601 with fractional seconds.
    static func timestamp() -> String {
        ISO8601Timestamp.string(milliseconds: true)
    }

    /// Writes `manifest` to `path` as pretty JSON with sorted keys, atomically (a reader never sees
    /// half a file); a failure is logged, not thrown (the recordings go on).
    static func write(_ manifest: [String: Any], to path: String, log: (String) -> Void) {
        do {
            let data = try JSONSerialization.data(withJSONObject: manifest, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            log("cannot write manifest: \(error)")
        }
    }
}
