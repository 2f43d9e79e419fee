import Foundation
import LoadGen
import Signaling

/// The SFU row as a user would measure it (issue 15): the whole `understudy serve` process in a steady
/// room of simulcast publishers and ≥ 100 subscribers from `understudy load` (3x3 grid layout), its
/// forwarded packets per second divided by the cores the process used over the window.
enum SFUProcessRow {
    struct Result {
        var publishers: Int
        var subscribers: Int
        var windowSeconds: Double
        /// Packets the server forwarded to consumers over the window (its `/metrics` counter).
        var packetsForwarded: Double
        /// CPU seconds of the whole server process over the window (/proc).
        var serverCPUSeconds: Double
        var lossPercent: Double
        /// The window's CPU by thread (the SFU loop vs the rest) and user vs system.
        var split: ProcessCPUSplit
        /// The loop thread's `perf` samples per ``LoopProfile`` category (nil without perf).
        var loopProfile: [String: Int]?
        /// The SFU loop's send path over the window (its `/metrics` counters).
        var sends: SendCounters
        /// Whether UDP GSO was allowed in the server (`UNDERSTUDY_UDP_GSO`).
        var segmentation: Bool
        /// CPU seconds of this process (the load generator: every bot's receive path) over the window.
        var generatorCPUSeconds = 0.0

        var packetsPerSecond: Double { windowSeconds > 0 ? packetsForwarded / windowSeconds : 0 }
        var serverCores: Double { windowSeconds > 0 ? serverCPUSeconds / windowSeconds : 0 }
        var packetsPerSecondPerCore: Double { serverCPUSeconds > 0 ? packetsForwarded / serverCPUSeconds : 0 }
        /// CPU nanoseconds per forwarded packet.
        func nanosecondsPerPacket(_ seconds: Double) -> Double {
            packetsForwarded > 0 ? seconds / packetsForwarded * 1e9 : 0
        }
    }

    /// The room server's SFU event loop names its thread after itself (`MediaSignaling`).
    static let loopThreadName = "room-sfu"

    /// The server's send-path counters (`understudy_udp_*` in `/metrics`).
    struct SendCounters {
        var systemCalls = 0.0
        var messages = 0.0
        var datagrams = 0.0
        var segmentedMessages = 0.0
        var segmentedDatagrams = 0.0

        static func - (a: SendCounters, b: SendCounters) -> SendCounters {
            SendCounters(
                systemCalls: a.systemCalls - b.systemCalls, messages: a.messages - b.messages,
                datagrams: a.datagrams - b.datagrams, segmentedMessages: a.segmentedMessages - b.segmentedMessages,
                segmentedDatagrams: a.segmentedDatagrams - b.segmentedDatagrams)
        }
    }

    /// The server's `/metrics`, name → value (comment lines skipped).
    static func metrics(_ signalingURL: String) async throws -> [Substring: Double] {
        let http = signalingURL.replacingOccurrences(of: "ws://", with: "http://") + "/metrics"
        let response = try await HTTPClient.request("GET", try HTTPURL(http), timeout: 10)
        let text = String(decoding: response.body, as: UTF8.self)
        var values: [Substring: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { values[parts[0]] = value }
        }
        return values
    }

    /// One value of the server's `/metrics` (nil when it has no such line).
    static func gauge(_ name: String, _ signalingURL: String) async throws -> Double? {
        try await metrics(signalingURL)[Substring(name)]
    }

    /// Reads the forwarded-packets counter and the send-path counters from the server's `/metrics`.
    static func counters(_ signalingURL: String) async throws -> (forwarded: Double, sends: SendCounters) {
        let values = try await metrics(signalingURL)
        guard let forwarded = values["understudy_rtp_packets_forwarded_total"] else {
            throw LoadRows.ServerProcess.Failure(description: "no forwarded-packets counter in /metrics")
        }
        let sends = SendCounters(
            systemCalls: values["understudy_udp_send_calls_total"] ?? 0,
            messages: values["understudy_udp_messages_sent_total"] ?? 0,
            datagrams: values["understudy_udp_datagrams_sent_total"] ?? 0,
            segmentedMessages: values["understudy_udp_gso_messages_total"] ?? 0,
            segmentedDatagrams: values["understudy_udp_gso_datagrams_total"] ?? 0)
        return (forwarded, sends)
    }

    /// One run: `publishers` simulcast publishers and `subscribers` grid subscribers join at 50/s, media
    /// settles for 4 s, then a window of `seconds` is measured.
    static func run(
        publishers: Int, subscribers: Int, seconds: Double, serverEnvironment: [String: String] = [:]
    ) async throws -> Result {
        let server = try LoadRows.ServerProcess(
            maxParticipants: publishers + subscribers + 10, environment: serverEnvironment)
        defer { server.stop() }
        let pid = server.process.processIdentifier
        var config = LoadConfiguration(signalingURL: server.signalingURL, room: "sfu-bench")
        config.secret = LoadRows.ServerProcess.secret
        config.publishers = publishers
        config.subscribers = subscribers
        config.layout = .grid(3)
        config.joinRate = 50
        let windowStart = Double(publishers + subscribers) / config.joinRate + 2 + 4
        // The window ends 1 s before the bots leave.
        config.duration = windowStart + seconds + 1
        let run = try LoadRun(configuration: config)
        let url = server.signalingURL
        let measuring = Task {
            try await Task.sleep(nanoseconds: UInt64(windowStart * 1e9))
            let started = Date()
            guard let cpu0 = LiveStreamRows.sample(pid: pid)?.cpu else { throw CancellationError() }
            let threads0 = ThreadCPUSample.read(pid: pid)
            let counters0 = try await counters(url)
            let generator0 = processCPUNanoseconds()
            // perf samples the loop thread over the same window, when it is installed.
            let loopTID = threads0.first { $0.value.name == loopThreadName }?.key
            let profiling = Task { loopTID == nil ? nil : await LoopProfile.record(tid: loopTID!, seconds: seconds) }
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            guard let cpu1 = LiveStreamRows.sample(pid: pid)?.cpu else { throw CancellationError() }
            let threads1 = ThreadCPUSample.read(pid: pid)
            let counters1 = try await counters(url)
            let generatorSeconds = Double(processCPUNanoseconds() - generator0) / 1e9
            let window = Date().timeIntervalSince(started)
            let split = ProcessCPUSplit.between(threads0, threads1, loopThreadName: loopThreadName)
            return (
                window, counters1.forwarded - counters0.forwarded, cpu1 - cpu0, split, await profiling.value,
                counters1.sends - counters0.sends, generatorSeconds
            )
        }
        let report = try await run.run()
        let (window, packets, cpu, split, profile, sends, generatorSeconds) = try await measuring.value
        let lost = report.ticks.last.map { Double(max(0, $0.packetsLost)) } ?? 0
        let received = report.ticks.last.map { Double($0.packetsReceived) } ?? 0
        return Result(
            publishers: publishers, subscribers: subscribers, windowSeconds: window, packetsForwarded: packets,
            serverCPUSeconds: cpu, lossPercent: received + lost > 0 ? lost / (received + lost) * 100 : 0,
            split: split, loopProfile: profile, sends: sends,
            segmentation: ProcessInfo.processInfo.environment["UNDERSTUDY_UDP_GSO"] != "0",
            generatorCPUSeconds: generatorSeconds)
    }

    /// The report's lines on the send path: datagrams per system call and per GSO message.
    static func sendTable(_ r: Result) -> String {
        let s = r.sends
        func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.2f", a / b) : "none sent" }
        var text =
            "The SFU loop's sends over the window (UDP GSO \(r.segmentation ? "on" : "off: UNDERSTUDY_UDP_GSO=0")):\n\n"
        text += "| send path | value |\n|---|---|\n"
        text += String(format: "| datagrams sent | %.0f |\n", s.datagrams)
        text += String(format: "| send system calls (sendmmsg, sendmsg) | %.0f |\n", s.systemCalls)
        text += "| datagrams per send system call | \(ratio(s.datagrams, s.systemCalls)) |\n"
        text += "| datagrams per message (a GSO message counts once) | \(ratio(s.datagrams, s.messages)) |\n"
        text += String(
            format: "| GSO messages | %.0f, carrying %.0f datagrams (%.1f %% of all) |\n", s.segmentedMessages,
            s.segmentedDatagrams, s.datagrams > 0 ? s.segmentedDatagrams / s.datagrams * 100 : 0)
        text += "| datagrams per GSO message | \(ratio(s.segmentedDatagrams, s.segmentedMessages)) |\n\n"
        return text
    }

    /// The report's table of where the window's CPU went, in nanoseconds per forwarded packet.
    static func splitTable(_ r: Result) -> String {
        let s = r.split
        func row(_ label: String, _ seconds: Double) -> String {
            let share = s.total > 0 ? seconds / s.total * 100 : 0
            return String(format: "| %@ | %.0f ns (%.0f %%) |\n", label, r.nanosecondsPerPacket(seconds), share)
        }
        var text = "Where the CPU went (per forwarded packet; share of the process):\n\n"
        text += "| part | CPU per forwarded packet |\n|---|---|\n"
        text += row("whole process", s.total)
        text += row("user space (all threads)", s.user)
        text += row("kernel (all threads)", s.system)
        text += row("SFU loop thread, user space", s.loopUser)
        text += row("SFU loop thread, kernel (sendmmsg, recvmmsg, epoll)", s.loopSystem)
        text += row("other threads (signalling, HTTP, tasks): user", s.otherUser)
        text += row("other threads: kernel", s.otherSystem)
        text += "\n"
        guard let profile = r.loopProfile, case let samples = profile.values.reduce(0, +), samples > 0 else {
            return text + "(`perf` is not installed: no split of the loop thread by activity.)\n\n"
        }
        let loopSeconds = s.loopUser + s.loopSystem
        text += "The SFU loop thread by activity (`perf` samples: \(samples)):\n\n"
        text += "| activity | CPU per forwarded packet | share of the loop thread |\n|---|---|---|\n"
        for category in LoopProfile.categories {
            let n = profile[category] ?? 0
            guard n > 0 else { continue }
            let share = Double(n) / Double(samples)
            text += String(
                format: "| %@ | %.0f ns | %.1f %% |\n", category, r.nanosecondsPerPacket(loopSeconds * share),
                share * 100)
        }
        return text + "\n"
    }
}
