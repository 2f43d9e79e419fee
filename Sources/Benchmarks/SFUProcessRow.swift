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

        var packetsPerSecond: Double { windowSeconds > 0 ? packetsForwarded / windowSeconds : 0 }
        var serverCores: Double { windowSeconds > 0 ? serverCPUSeconds / windowSeconds : 0 }
        var packetsPerSecondPerCore: Double { serverCPUSeconds > 0 ? packetsForwarded / serverCPUSeconds : 0 }
    }

    /// Reads one counter from the server's `/metrics` text.
    static func forwardedPackets(_ signalingURL: String) async throws -> Double {
        let http = signalingURL.replacingOccurrences(of: "ws://", with: "http://") + "/metrics"
        let response = try await HTTPClient.request("GET", try HTTPURL(http), timeout: 10)
        let text = String(decoding: response.body, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("understudy_rtp_packets_forwarded_total ") {
            if let value = Double(line.split(separator: " ").last ?? "") { return value }
        }
        throw LoadRows.ServerProcess.Failure(description: "no forwarded-packets counter in /metrics")
    }

    /// One run: `publishers` simulcast publishers and `subscribers` grid subscribers join at 50/s, media
    /// settles for 4 s, then a window of `seconds` is measured.
    static func run(publishers: Int, subscribers: Int, seconds: Double) async throws -> Result {
        let server = try LoadRows.ServerProcess(maxParticipants: publishers + subscribers + 10)
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
            let packets0 = try await forwardedPackets(url)
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            guard let cpu1 = LiveStreamRows.sample(pid: pid)?.cpu else { throw CancellationError() }
            let packets1 = try await forwardedPackets(url)
            return (Date().timeIntervalSince(started), packets1 - packets0, cpu1 - cpu0)
        }
        let report = try await run.run()
        let (window, packets, cpu) = try await measuring.value
        let lost = report.ticks.last.map { Double(max(0, $0.packetsLost)) } ?? 0
        let received = report.ticks.last.map { Double($0.packetsReceived) } ?? 0
        return Result(
            publishers: publishers, subscribers: subscribers, windowSeconds: window, packetsForwarded: packets,
            serverCPUSeconds: cpu, lossPercent: received + lost > 0 ? lost / (received + lost) * 100 : 0)
    }
}
