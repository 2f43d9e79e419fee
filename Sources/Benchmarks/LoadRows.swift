import Foundation
import LoadGen

#if canImport(Glibc)
    import Glibc
#endif

/// The load-mode rows of the report: subscribed tracks per core, RSS per subscriber bot, and a soak.
///
/// Both runs use ``LoadBenchmarkResult/runBenchmark(subscribers:publishers:duration:signalingURL:secret:)``
/// against an `understudy serve` child process on loopback.
enum LoadRows {
    struct Output {
        var summary: [BenchmarkReport.SummaryRow]
        var markdown: String
    }

    /// Workload sizes; the quick variant only checks that the harness works.
    struct Plan {
        var subscribers: Int
        var publishers: Int
        var seconds: Double
        var soakSubscribers: Int
        var soakPublishers: Int
        var soakSeconds: Double

        static let full = Plan(
            subscribers: 170, publishers: 3, seconds: 20, soakSubscribers: 50, soakPublishers: 2, soakSeconds: 600)
        static let quick = Plan(
            subscribers: 8, publishers: 2, seconds: 4, soakSubscribers: 4, soakPublishers: 1, soakSeconds: 20)
    }

    /// About 12 evenly spaced samples of an RSS series, as "seconds: MB" pairs.
    static func compactSeries(_ samples: [(seconds: Double, bytes: Int)]) -> String {
        let stride = max(1, samples.count / 12)
        return Swift.stride(from: 0, to: samples.count, by: stride).map { i in
            String(format: "%.0f: %.1f", samples[i].seconds, Double(samples[i].bytes) / 1_048_576)
        }.joined(separator: ", ")
    }

    /// Least-squares slope of `samples` (bytes per second).
    static func slope(_ samples: [(seconds: Double, bytes: Int)]) -> Double {
        guard samples.count >= 2 else { return 0 }
        let n = Double(samples.count)
        let mx = samples.reduce(0) { $0 + $1.seconds } / n
        let my = samples.reduce(0) { $0 + Double($1.bytes) } / n
        var sxy = 0.0
        var sxx = 0.0
        for s in samples {
            sxy += (s.seconds - mx) * (Double(s.bytes) - my)
            sxx += (s.seconds - mx) * (s.seconds - mx)
        }
        return sxx > 0 ? sxy / sxx : 0
    }

    /// Mean packets per second per track, over the time each track received media (its bitrate is
    /// averaged over that time, so duration = bytes × 8 ÷ bitrate).
    static func packetRates(_ tracks: [LoadReport.TrackResult]) -> (all: Double, video: Double, audio: Double) {
        func rate(_ list: [LoadReport.TrackResult]) -> Double {
            var packets = 0.0
            var seconds = 0.0
            for t in list where t.bytes > 0 && t.bitrateKbps > 0 {
                packets += Double(t.packets)
                seconds += Double(t.bytes) * 8 / (t.bitrateKbps * 1000)
            }
            return seconds > 0 ? packets / seconds : 0
        }
        return (rate(tracks), rate(tracks.filter { $0.kind == "video" }), rate(tracks.filter { $0.kind == "audio" }))
    }

    static func megabytes(_ bytes: Double) -> String { String(format: "%.1f MB", bytes / 1_048_576) }

    /// Runs one benchmark against a fresh `understudy serve` child process sized for it, so the load
    /// process's CPU and memory are the bots' alone (as with LiveKit's tester and a separate server).
    static func measure(subscribers: Int, publishers: Int, seconds: Double, qualityMetrics: Bool = true)
        async throws -> LoadBenchmarkResult
    {
        let server = try ServerProcess(maxParticipants: subscribers + publishers + 10)
        defer { server.stop() }
        return try await LoadBenchmarkResult.runBenchmark(
            subscribers: subscribers, publishers: publishers, duration: seconds, signalingURL: server.signalingURL,
            secret: ServerProcess.secret, qualityMetrics: qualityMetrics)
    }

    /// `understudy serve` (this same executable) on an ephemeral loopback port, all media on one UDP port.
    final class ServerProcess {
        static let secret = "bench-load-secret"
        let process = Process()
        let directory: String
        private(set) var signalingURL = ""

        struct Failure: Error, CustomStringConvertible { var description: String }

        /// `environment` adds variables to the server's (an A/B switch such as `UNDERSTUDY_TRANSPORT_CC=0`).
        init(maxParticipants: Int, environment: [String: String] = [:]) throws {
            directory = NSTemporaryDirectory() + "understudy-bench-server-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let config = directory + "/server.json"
            // `UNDERSTUDY_BENCH_SERVER_CONFIG` (a JSON object) adds server settings, to compare them.
            var settings: [String: Any] = ["maxParticipantsPerRoom": maxParticipants]
            if let extra = ProcessInfo.processInfo.environment["UNDERSTUDY_BENCH_SERVER_CONFIG"] {
                guard let object = try JSONSerialization.jsonObject(with: Data(extra.utf8)) as? [String: Any] else {
                    throw Failure(description: "UNDERSTUDY_BENCH_SERVER_CONFIG is not a JSON object")
                }
                settings.merge(object) { _, new in new }
            }
            try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: config))
            let log = directory + "/serve.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            if !environment.isEmpty {
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            }
            process.arguments = [
                "serve", "--listen", "127.0.0.1:0", "--udp-port", "\(try Self.freeUDPPort())", "--config", config,
                "--secret", Self.secret,
            ]
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            process.standardError = handle
            process.standardOutput = handle
            try process.run()
            // The port is in the first log line: "serve: listening on http://127.0.0.1:PORT (…".
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline && process.isRunning {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                if let range = text.range(of: "listening on http://127.0.0.1:") {
                    let port = text[range.upperBound...].prefix { $0.isNumber }
                    if !port.isEmpty {
                        signalingURL = "ws://127.0.0.1:\(port)"
                        return
                    }
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            stop()
            throw Failure(description: "understudy serve did not start: \(output)")
        }

        /// A UDP port nobody uses now (bound, read back, released).
        static func freeUDPPort() throws -> UInt16 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket() failed") }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { throw Failure(description: "cannot bind a UDP port") }
            return UInt16(bigEndian: address.sin_port)
        }

        func stop() {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// - Parameter bareUnprotectNanos: the receive-path benchmark's bare `srtp_unprotect` cost in this
    ///   run, which gives the crypto-only ceiling of tracks per core as a same-run anchor.
    static func run(quick: Bool, bareUnprotectNanos: Double, progress: @escaping @Sendable (String) -> Void)
        async throws -> Output
    {
        var plan = quick ? Plan.quick : Plan.full
        // `UNDERSTUDY_BENCH_LOAD_SOAK_SECONDS=N` sets the soak's length (0 skips it), to rerun the rows.
        if let seconds = ProcessInfo.processInfo.environment["UNDERSTUDY_BENCH_LOAD_SOAK_SECONDS"].flatMap(Double.init),
            seconds >= 0, seconds.isFinite
        {
            plan.soakSeconds = seconds
        }
        var summary: [BenchmarkReport.SummaryRow] = []
        var md = "## Load mode: subscribed tracks per core, RSS per subscriber bot, soak\n\n"

        progress(
            "bench:   load: \(plan.publishers) publishers, \(plan.subscribers) subscribers, "
                + "\(Int(plan.seconds)) s window")
        do {
            let r = try await measure(subscribers: plan.subscribers, publishers: plan.publishers, seconds: plan.seconds)
            let rates = packetRates(r.report.tracks)
            let packetsPerTrackSecond = rates.all
            let ceiling = 1e9 / max(1, packetsPerTrackSecond * bareUnprotectNanos)
            progress(
                String(
                    format: "bench:   %d tracks, %.0f tracks per core, loss %.3f %%, %.2f MB RSS per subscriber",
                    r.subscribedTracks, r.tracksPerCore, r.lossPercent, Double(r.rssPerSubscriberBotBytes) / 1_048_576))
            let lossOK = r.lossPercent < 0.5
            // A figure taken at 0.5 % loss or more does not count as meeting the target.
            let tracksVerdict =
                lossOK
                ? BenchmarkReport.atLeast(r.tracksPerCore, 1000)
                : String(format: "misses the target: loss %.2f %% is not below 0.5 %%", r.lossPercent)
            summary.append(
                BenchmarkReport.SummaryRow(
                    metric: "subscribed tracks per core at < 0.5 % loss", target: "≥ 1,000 (LiveKit: about 310)",
                    measured: String(format: "%.0f (loss %.2f %%)", r.tracksPerCore, r.lossPercent),
                    verdict: tracksVerdict))
            let rssVerdict = BenchmarkReport.atMost(Double(r.rssPerSubscriberBotBytes), 2 * 1_048_576)
            summary.append(
                BenchmarkReport.SummaryRow(
                    metric: "RSS per subscriber bot", target: "≤ 2 MB",
                    measured: megabytes(Double(r.rssPerSubscriberBotBytes)), verdict: rssVerdict))
            md += "| metric | value |\n|---|---|\n"
            md += "| bots | \(r.publishers) simulcast publishers, \(r.subscribers) subscribers (3x3 grid layout) |\n"
            md += "| subscribed tracks receiving media | \(r.subscribedTracks) |\n"
            md += String(format: "| measured window | %.1f s |\n", r.windowSeconds)
            md += String(
                format: "| packets per second per track, while receiving | %.1f (video %.1f, audio %.1f) |\n",
                rates.all, rates.video, rates.audio)
            md += String(
                format: "| packets per second per core of the load generator | %.0f |\n",
                r.tracksPerCore * packetsPerTrackSecond)
            md += String(
                format:
                    "| load generator I/O threads CPU | %.2f s (%.2f cores); whole load process: %.2f s |\n",
                r.cpuSeconds, r.cpuSeconds / max(0.001, r.windowSeconds), r.processCPUSeconds)
            md += String(format: "| packet loss over the window | %.3f %% |\n", r.lossPercent)
            if let p50 = r.latencyP50Ms, let p95 = r.latencyP95Ms {
                md += String(
                    format: "| end-to-end media latency (abs-capture-time) | p50 %.1f ms, p95 %.1f ms |\n", p50, p95)
            }
            md += String(
                format: "| **subscribed tracks per core** (target ≥ 1,000) | **%.0f** — %@ |\n", r.tracksPerCore,
                tracksVerdict)
            md += "| anchor: LiveKit's load tester (published) | about 310 tracks per core |\n"
            md += String(
                format: "| anchor: crypto-only ceiling in this run (1 core ÷ (packets per track-second × bare "
                    + "`srtp_unprotect`)) | %.0f tracks per core; measured is %.0f %% of it |\n", ceiling,
                r.tracksPerCore / max(1, ceiling) * 100)
            md += String(
                format: "| **RSS per subscriber bot** (target ≤ 2 MB) | **%@** — %@ |\n\n",
                megabytes(Double(r.rssPerSubscriberBotBytes)), rssVerdict)
            md += """
                Method: `understudy serve` as a separate child process on loopback (media on one shared
                UDP port) and the load generator (`LoadBenchmarkResult.runBenchmark`, the engine of
                `understudy load`) in this process. Publishers send the synthetic simulcast VP8 + Opus loop;
                every subscriber bot consumes every publisher's camera and microphone (3x3 grid layout),
                without decoding, as in LiveKit's load tester. The packets per track depend on the layer the
                grid layout selects and on how fast the publishers and the server manage to send on this
                machine, so they are shown: tracks per core is only comparable between runs with similar
                packet rates. After all bots joined and media settled, a steady window is measured. Tracks
                per core = subscribed tracks ÷ (CPU seconds of the load generator's I/O threads ÷ window
                seconds); the server process is not counted. Loss = packets lost ÷ expected over every
                receiver in the window. RSS per subscriber bot = growth of the load process's resident
                memory from before the bots joined to the end, ÷ subscribers (the publisher bots live in
                the same process, so this slightly overstates a subscriber's own memory).
                The crypto-only ceiling uses the bare `srtp_unprotect` cost measured in the
                receive-path section of this run: it is what one core could do if a track cost nothing
                but decrypting its packets.


                """
        } catch {
            progress("bench:   load benchmark failed: \(error)")
            for (metric, target) in [
                ("subscribed tracks per core at < 0.5 % loss", "≥ 1,000 (LiveKit: about 310)"),
                ("RSS per subscriber bot", "≤ 2 MB"),
            ] {
                summary.append(.notMeasured(metric, target: target, error: error))
            }
            md += "Not measured in this run: \(error)\n\n"
        }

        do {
            progress("bench:   what the quality metrics cost: off and on, alternating")
            let cost = try await QualityCostRow.run(
                pairs: quick ? 1 : 2, publishers: plan.publishers, subscribers: plan.subscribers,
                seconds: plan.seconds, progress: progress)
            summary.append(
                BenchmarkReport.SummaryRow(
                    metric: "received-quality metrics cost: load tracks per core, on ÷ off", target: "≥ 0.95",
                    measured: String(
                        format: "%.3f (%.0f vs %.0f ns per packet)", cost.ratio, cost.nanosecondsPerPacket.on,
                        cost.nanosecondsPerPacket.off),
                    verdict: BenchmarkReport.atLeast(cost.ratio, 0.95)))
            md += QualityCostRow.section(cost)
        } catch {
            progress("bench:   quality metrics cost failed: \(error)")
            summary.append(
                .notMeasured(
                    "received-quality metrics cost: load tracks per core, on ÷ off", target: "≥ 0.95", error: error))
            md += "Quality metrics cost not measured in this run: \(error)\n\n"
        }

        progress(
            "bench:   soak: \(plan.soakPublishers) publishers, \(plan.soakSubscribers) subscribers, "
                + "\(Int(plan.soakSeconds)) s")
        md += "### Soak: RSS over \(Int(plan.soakSeconds)) s\n\n"
        guard plan.soakSeconds > 0 else {
            md += "Skipped in this run (`UNDERSTUDY_BENCH_LOAD_SOAK_SECONDS=0`).\n\n"
            return Output(summary: summary, markdown: md)
        }
        do {
            let soak = try await measure(
                subscribers: plan.soakSubscribers, publishers: plan.soakPublishers, seconds: plan.soakSeconds)
            // The steady part: from when the measured window started (the run's last `window` seconds).
            let end = soak.rssSamples.last?.seconds ?? 0
            let steady = soak.rssSamples.filter { $0.seconds >= end - soak.windowSeconds }
            let perSecond = slope(steady)
            let mean = steady.isEmpty ? 0 : steady.reduce(0.0) { $0 + Double($1.bytes) } / Double(steady.count)
            let growth = perSecond * soak.windowSeconds
            let share = mean > 0 ? growth / mean * 100 : 0
            let flat = abs(share) < 2
            let verdict =
                flat
                ? "meets the target (fitted change below 2 % of RSS)"
                : String(format: "misses the target: RSS grows %.1f %% over the window", share)
            summary.append(
                BenchmarkReport.SummaryRow(
                    metric: "RSS over a soak", target: "flat",
                    measured: String(
                        format: "%+.2f MB/min over %.0f s (%+.1f %%)", perSecond * 60 / 1_048_576, soak.windowSeconds,
                        share), verdict: verdict))
            md += "| metric | value |\n|---|---|\n"
            md += "| bots | \(soak.publishers) publishers, \(soak.subscribers) subscribers, "
            md += "\(soak.subscribedTracks) tracks |\n"
            md += String(format: "| steady window | %.0f s, %d RSS samples |\n", soak.windowSeconds, steady.count)
            md += "| RSS min / mean / max in the window | "
            md += "\(megabytes(Double(steady.map(\.bytes).min() ?? 0))) / \(megabytes(mean)) / "
            md += "\(megabytes(Double(steady.map(\.bytes).max() ?? 0))) |\n"
            md += String(
                format:
                    "| **least-squares slope** | **%+.3f MB per minute** (%+.2f %% of RSS over the window) — %@ |\n",
                perSecond * 60 / 1_048_576, share, verdict)
            md += String(format: "| packet loss over the window | %.3f %% |\n\n", soak.lossPercent)
            md += "RSS samples (seconds since the first join: MB): \(compactSeries(steady)).\n\n"
            md += """
                Method: the same load set-up, smaller, held for the soak's length. The process's resident
                memory is sampled during the run; the slope is a least-squares fit over the steady window
                (after joins and settling). Flat means the fitted change over the window is below 2 % of
                the mean RSS; the anchor is the process's own RSS at the start of that window.


                """
        } catch {
            progress("bench:   soak failed: \(error)")
            summary.append(.notMeasured("RSS over a soak", target: "flat", error: error))
            md += "Not measured in this run: \(error)\n\n"
        }
        return Output(summary: summary, markdown: md)
    }
}
