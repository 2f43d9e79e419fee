import Foundation
import Media
import RoomProtocol
import Signaling

/// Recording file names for every recorder of the package (the agents, the scenario bots): one
/// escaping of names, files created exclusively (issue 31 item 2).
public enum RecordingFiles {
    /// Creates a new, empty file for `name`'s recording in `directory` and returns its path:
    /// `STEM.EXT` with STEM the one escaping of names (``NameEscaping/fileName(_:)``), or
    /// `STEM.N.EXT` when that file exists (an existing file is never truncated).
    public static func create(in directory: String, for name: String, ext: String) throws(MediaError) -> String {
        try AgentManifest.createRecordingFile(in: directory, for: name, ext: ext)
    }
}

/// What both agents (the room agent and the Janus agent) write beside their recordings: the
/// recording files' names, timestamps and the manifest itself, so that the two manifests read alike.
enum AgentManifest {
    /// Creates a new, empty file for `name`'s recording in `directory` and returns its path:
    /// `STEM.EXT`, where STEM is the one escaping of names (``NameEscaping/fileName(_:)``), so that
    /// distinct names never share a file. The file is created exclusively (`O_EXCL`): an existing
    /// file, from another participant, an earlier run or anyone else, is never truncated; the name
    /// then gets the first free suffix `STEM.1.EXT`, `STEM.2.EXT`… (an escaping has no `.`, so a
    /// suffixed name is never another name's first choice).
    static func createRecordingFile(in directory: String, for name: String, ext: String) throws(MediaError) -> String {
        let stem = NameEscaping.fileName(name)
        for attempt in 0..<1000 {
            let file = attempt == 0 ? "\(stem).\(ext)" : "\(stem).\(attempt).\(ext)"
            let path = (directory as NSString).appendingPathComponent(file)
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 {
                close(fd)
                return path
            }
            guard errno == EEXIST else { throw .cannotOpen(path: path, errno: errno) }
        }
        throw .cannotOpen(path: (directory as NSString).appendingPathComponent("\(stem).*.\(ext)"), errno: EEXIST)
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
