import Foundation

/// Where a server process spends its CPU: per thread, user vs system, from `/proc/PID/task/*/stat`.
///
/// Read at the start and the end of a measuring window; the difference tells the SFU's loop thread
/// (named after its event loop, `room-sfu`) from the signalling, HTTP and task threads.
struct ThreadCPUSample: Equatable {
    var name: String
    /// CPU seconds in user space and in the kernel since the thread started.
    var user: Double
    var system: Double

    /// Every thread of `pid` by thread id (empty when the process is gone).
    static func read(pid: Int32) -> [Int32: ThreadCPUSample] {
        let base = "/proc/\(pid)/task"
        guard let tids = try? FileManager.default.contentsOfDirectory(atPath: base) else { return [:] }
        var threads: [Int32: ThreadCPUSample] = [:]
        for tid in tids {
            guard let id = Int32(tid),
                let stat = try? String(contentsOfFile: "\(base)/\(tid)/stat", encoding: .utf8),
                let sample = parse(stat: stat)
            else { continue }
            threads[id] = sample
        }
        return threads
    }

    /// Parses one `/proc/.../stat` line: the name between the parentheses (it may hold spaces and
    /// parentheses itself), then utime and stime, the 14th and 15th fields, in clock ticks.
    static func parse(stat: String, ticksPerSecond: Double = Double(sysconf(Int32(_SC_CLK_TCK)))) -> ThreadCPUSample? {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")"), open < close else {
            return nil
        }
        let name = String(stat[stat.index(after: open)..<close])
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]), ticksPerSecond > 0
        else { return nil }
        return ThreadCPUSample(name: name, user: utime / ticksPerSecond, system: stime / ticksPerSecond)
    }
}

/// The CPU of a window split by thread group and by user vs system time.
struct ProcessCPUSplit: Equatable {
    /// The SFU's event-loop thread: receive, forward, SRTP, RTCP, timers and the `sendmmsg` calls.
    var loopUser = 0.0
    var loopSystem = 0.0
    /// Every other thread: signalling (WebSocket), HTTP (`/metrics`), Swift tasks.
    var otherUser = 0.0
    var otherSystem = 0.0

    var total: Double { loopUser + loopSystem + otherUser + otherSystem }
    var user: Double { loopUser + otherUser }
    var system: Double { loopSystem + otherSystem }

    /// The difference between two samples of the same process; `loopThreadName` picks the loop thread
    /// (threads that ended within the window are left out; they carry no steady-state work).
    static func between(
        _ start: [Int32: ThreadCPUSample], _ end: [Int32: ThreadCPUSample], loopThreadName: String
    ) -> ProcessCPUSplit {
        var split = ProcessCPUSplit()
        for (tid, last) in end {
            let first = start[tid] ?? ThreadCPUSample(name: last.name, user: 0, system: 0)
            let user = max(0, last.user - first.user)
            let system = max(0, last.system - first.system)
            if last.name == loopThreadName {
                split.loopUser += user
                split.loopSystem += system
            } else {
                split.otherUser += user
                split.otherSystem += system
            }
        }
        return split
    }
}

/// The loop thread's CPU by activity, from `perf record` call stacks sampled over the window
/// (only when `perf` is installed; it is a diagnosis, not a figure the row is judged by).
enum LoopProfile {
    /// The activities a sample is charged to, in the order the report lists them.
    static let categories = [
        "kernel: sendmmsg (UDP send + loopback delivery)", "kernel: recvmmsg", "kernel: epoll and other",
        "SRTP (protect/unprotect)", "SFU forwarding (fan-out, rewrite, RTP header, batch copy)",
        "RTCP (reports, NACK, PLI)", "timers (loop tick)", "publisher receive (RTP receiver)",
        "queued control work (signalling on the loop)", "other",
    ]

    /// Samples `tid` for `seconds` with call graphs; nil when perf is missing or fails.
    static func record(tid: Int32, seconds: Double) async -> [String: Int]? {
        let perf = "/usr/bin/perf"
        guard FileManager.default.isExecutableFile(atPath: perf) else { return nil }
        let data = NSTemporaryDirectory() + "understudy-sfu-perf-\(UUID().uuidString).data"
        defer { try? FileManager.default.removeItem(atPath: data) }
        // Stopped by timeout(1) with SIGINT, on which perf writes its data and ends.
        let timeout = "/usr/bin/timeout"
        guard FileManager.default.isExecutableFile(atPath: timeout) else { return nil }
        let recorded = await run(
            timeout,
            ["-s", "INT", "\(seconds)", perf, "record", "-q", "-F", "499", "-g", "-t", "\(tid)", "-o", data],
            acceptedStatuses: [0, 124])
        guard recorded != nil else { return nil }
        guard let script = await run(perf, ["script", "-i", data, "-F", "ip,sym,dso"]) else { return nil }
        return classify(perfScript: script)
    }

    /// Counts the samples of `perf script -F ip,sym,dso` output per category (blank-line separated
    /// stacks, leaf first).
    static func classify(perfScript: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        var frames: [(symbol: Substring, kernel: Bool)] = []
        func flush() {
            guard !frames.isEmpty else { return }
            counts[category(frames), default: 0] += 1
            frames.removeAll(keepingCapacity: true)
        }
        for line in perfScript.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty {
                flush()
                continue
            }
            // "<ip> <symbol> (<dso>)"
            let parts = trimmed.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            // The symbol and its library: an unsymbolized libcrypto frame still names libcrypto.
            let rest = parts[1]
            frames.append((rest, rest.contains("[kernel")))
        }
        flush()
        return counts
    }

    static func category(_ frames: [(symbol: Substring, kernel: Bool)]) -> String {
        if frames[0].kernel {
            let syscall = frames.first { !$0.kernel }?.symbol ?? ""
            if syscall.contains("sendmmsg") || syscall.contains("sendto") || syscall.contains("sendmsg") {
                return categories[0]
            }
            if syscall.contains("recvmmsg") { return categories[1] }
            return categories[2]
        }
        // Charged to the innermost frame that names an activity (a retain inside SRTP is SRTP's).
        for frame in frames where !frame.kernel {
            let s = frame.symbol
            if s.contains("SRTP") || s.contains("CRYPTO_") || s.contains("EVP_") || s.contains("OSSL_")
                || s.contains("libcrypto")
            {
                return categories[3]
            }
            if s.contains("RTCP") || s.contains("handleNACK") || s.contains("keyframeRequested") {
                return categories[5]
            }
            if s.contains("tick") && !s.contains("ticket") { return categories[6] }
            if s.contains("runPendingWork") { return categories[8] }
            if s.contains("SFUConsumer") || s.contains("SFUProducer") || s.contains("sendForwarded")
                || s.contains("enqueueSend")
            {
                return categories[4]
            }
            if s.contains("RTPReceiver") { return categories[7] }
        }
        return categories[9]
    }

    /// Runs a tool to completion off the cooperative pool; its standard output, or nil on failure.
    private static func run(_ tool: String, _ arguments: [String], acceptedStatuses: Set<Int32> = [0]) async
        -> String?
    {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                // A child inherits the spawning thread's signal mask, and this process's threads block
                // nearly every signal (SIGALRM, SIGINT, SIGCHLD): timeout(1) and perf would never stop.
                // This short-lived thread spawns with none blocked.
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                let process = Process()
                process.executableURL = URL(fileURLWithPath: tool)
                process.arguments = arguments
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                do { try process.run() } catch {
                    continuation.resume(returning: nil)
                    return
                }
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                let succeeded =
                    process.terminationReason == .exit && acceptedStatuses.contains(process.terminationStatus)
                continuation.resume(returning: succeeded ? String(decoding: data, as: UTF8.self) : nil)
            }
        }
    }
}
