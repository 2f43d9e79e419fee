import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The process's open-file limit (`ulimit -n`), which bounds how many clients a server can hold:
/// every signalling WebSocket is a descriptor, and so is every UDP socket unless media share one port.
public enum OpenFileLimit {
    /// What ``raise(wanted:)`` found and did.
    public struct Outcome: Sendable, Equatable {
        /// Soft limit before and after, and the hard limit.
        public var before: UInt64
        public var after: UInt64
        public var hard: UInt64
        /// A line for the log when the limit stays below `wanted`, nil otherwise.
        public var warning: String?
    }

    /// Raises the soft limit towards the hard limit (at most to `wanted`), as far as allowed.
    /// Returns a warning when the result stays below `wanted` (e.g. a hard limit of 1024).
    @discardableResult
    public static func raise(wanted: UInt64 = 65536) -> Outcome {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return Outcome(before: 0, after: 0, hard: 0, warning: "cannot read the open-file limit (ulimit -n)")
        }
        let before = UInt64(limit.rlim_cur)
        let hard = UInt64(limit.rlim_max)
        var after = before
        let target = min(wanted, hard)
        if target > before {
            var raised = limit
            raised.rlim_cur = rlim_t(target)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { after = target }
        }
        var warning: String?
        if after < wanted {
            warning =
                "the open-file limit is \(after) (hard limit \(hard)); each signalling connection needs one, so "
                + "the server holds fewer than \(after) participants. Raise it with `ulimit -n \(wanted)` "
                + "(or LimitNOFILE= in a systemd unit)."
        }
        return Outcome(before: before, after: after, hard: hard, warning: warning)
    }
}
