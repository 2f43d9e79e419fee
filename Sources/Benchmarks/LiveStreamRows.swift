import Foundation
import LoadGen

#if canImport(Glibc)
    import Glibc
#endif

/// The live-stream rows (issue 11): one room with a stage (a simulcast VP8 + Opus host and two audio
/// hosts) and a large `RECV_ONLY` audience joining at 50/s, `understudy serve` in its own process and
/// `understudy load` (this process) beside it, stage invites every 10 s.
enum LiveStreamRows {
    /// Goals of the row (docs/benchmarks.md).
    struct Goals {
        static let joinP95Ms = 1000.0
        static let firstKeyframeP95Ms = 1500.0
        static let lossPercent = 0.5
        static let inviteMs = 500.0
        static let bytesPerMember = 150.0 * 1024
        /// The audience the issue asks one 2-core machine to carry, generator included.
        static let audience = 1000
    }

    /// One run at one audience size.
    struct Run {
        var audience: Int
        var report: LoadReport
        var serverRSSBeforeBytes: Int
        var serverRSSPeakBytes: Int
        var serverCores: Double
        var consumeFailures: Int
        var disconnects: Int
        /// Loss over the window after the ramp (and 4 s of settling) to the end, in percent.
        var steadyLoss: Double?
        /// The server SFU loop's send-path counters over the whole run (`understudy_udp_*`).
        var sends: SFUProcessRow.SendCounters?
        /// The generator (this process) over the steady window: CPU in cores, and packets received per
        /// second by all its bots.
        var generatorCores: Double = 0
        var generatorPacketsPerSecond: Double = 0
        /// Generator CPU per received packet (µs) and per audience member (ms of CPU per second).
        var generatorMicrosecondsPerPacket: Double? {
            generatorPacketsPerSecond > 0 ? generatorCores / generatorPacketsPerSecond * 1e6 : nil
        }
        var generatorMillisecondsPerMember: Double { generatorCores / Double(audience) * 1e3 }
        /// Both processes' CPU over the steady window, split into user space and the kernel, in cores.
        var serverSplit = CoreSplit()
        var generatorSplit = CoreSplit()
        /// The server's resident bytes over the steady window (seconds since the run started).
        var serverRSSSteady: [(seconds: Double, bytes: Int)] = []
        /// The server allocator's live bytes over the steady window (`understudy_process_heap_in_use_bytes`,
        /// every 5 s): level while RSS rises means fragmentation, rising means something is kept.
        var serverHeapSteady: [(seconds: Double, bytes: Int)] = []
        /// Packets each audience member receives per second in the steady window.
        var packetsPerMemberPerSecond: Double { generatorPacketsPerSecond / Double(audience) }

        var joinFailures: Int { report.joinFailures }
        var joinP95: Double? { report.joinLatencyMs.p95 }
        var keyframeP95: Double? { report.timeToFirstKeyframeMs.p95 }
        var inviteP95: Double? { report.modeChanges.latencyMs.p95 }
        var bytesPerMember: Double { Double(max(0, serverRSSPeakBytes - serverRSSBeforeBytes)) / Double(audience) }
        var membersPerCore: Double { serverCores > 0 ? Double(audience) / serverCores : 0 }
        var rosterOK: Bool { report.rosterCheck.map { $0.mismatched == 0 } ?? false }

        /// The goals this run misses (empty: it holds them all).
        var misses: [String] {
            var out: [String] = []
            if joinFailures > 0 { out.append("\(joinFailures) join failures") }
            if consumeFailures > 0 { out.append("\(consumeFailures) consume failures") }
            if disconnects > 0 { out.append("\(disconnects) disconnects") }
            if (joinP95 ?? .infinity) > Goals.joinP95Ms { out.append("join p95") }
            if (keyframeP95 ?? .infinity) > Goals.firstKeyframeP95Ms { out.append("first keyframe p95") }
            if (steadyLoss ?? .infinity) >= Goals.lossPercent { out.append("loss") }
            if (inviteP95 ?? .infinity) > Goals.inviteMs { out.append("invites") }
            if bytesPerMember > Goals.bytesPerMember { out.append("memory") }
            if !rosterOK { out.append("roster") }
            return out
        }
    }

    /// CPU of one process in cores, in user space and in the kernel.
    struct CoreSplit {
        var user = 0.0
        var system = 0.0
        var total: Double { user + system }
        /// CPU time per packet in µs at `packetsPerSecond`.
        func microseconds(perPacketAt packetsPerSecond: Double) -> (user: Double, system: Double) {
            packetsPerSecond > 0 ? (user / packetsPerSecond * 1e6, system / packetsPerSecond * 1e6) : (0, 0)
        }
    }

    /// Resident bytes and CPU seconds (user, kernel and their sum) of another process, from /proc.
    static func sample(pid: Int32) -> (rss: Int, cpu: Double, user: Double, system: Double)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kb = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        // Fields after the parenthesized command: utime and stime are the 14th and 15th fields.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return (kb * 1024, (utime + stime) / ticks, utime / ticks, stime / ticks)
    }

    /// Runs one live stream of `audience` viewers for `seconds` after the ramp.
    static func run(audience: Int, steadySeconds: Double, inviteEvery: Double) async throws -> Run {
        let server = try LoadRows.ServerProcess(maxParticipants: audience + 10)
        defer { server.stop() }
        let pid = server.process.processIdentifier
        var config = LoadConfiguration(signalingURL: server.signalingURL, room: "live")
        config.secret = LoadRows.ServerProcess.secret
        config.publishers = 1
        config.audioPublishers = 2
        config.subscribers = audience
        config.layout = .speaker
        config.joinRate = 50
        config.inviteEvery = inviteEvery
        config.duration = Double(audience + 3) / config.joinRate + 4 + steadySeconds
        let before = sample(pid: pid)
        let samples = SampleLog()
        let generator = SampleLog()
        let run = try LoadRun(configuration: config)
        let started = Date()
        run.onProgress = { _ in
            let seconds = Date().timeIntervalSince(started)
            if let s = sample(pid: pid) { samples.add(seconds, s.rss, s.user, s.system) }
            if let s = sample(pid: getpid()) { generator.add(seconds, s.rss, s.user, s.system) }
        }
        let signalingURL = server.signalingURL
        let heapSampler = Task { () -> [(seconds: Double, bytes: Int)] in
            var heap: [(seconds: Double, bytes: Int)] = []
            while !Task.isCancelled {
                if let bytes = try? await SFUProcessRow.gauge("understudy_process_heap_in_use_bytes", signalingURL) {
                    heap.append((Date().timeIntervalSince(started), Int(bytes)))
                }
                try? await Task.sleep(nanoseconds: 5_000_000_000)
            }
            return heap
        }
        let report = try await run.run()
        heapSampler.cancel()
        let heap = await heapSampler.value
        let sends = try? await SFUProcessRow.counters(server.signalingURL).sends
        let log = samples.all
        // The steady window: after the ramp and 4 s of settling (stage invites keep changing the
        // track count, so the generic steady-state finder would never settle).
        let from = Double(audience + 3) / config.joinRate + 4
        var steadyLoss: Double?
        if let a = report.ticks.first(where: { $0.seconds >= from }), let b = report.ticks.last, b.seconds > a.seconds {
            let lost = Double(b.packetsLost - a.packetsLost)
            let received = Double(b.packetsReceived &- a.packetsReceived)
            steadyLoss = received + lost > 0 ? max(0, lost) / (received + lost) * 100 : nil
        }
        func split(_ log: [SampleLog.Entry]) -> CoreSplit {
            let window = log.filter { $0.seconds >= from }
            guard let a = window.first, let b = window.last, b.seconds > a.seconds else { return CoreSplit() }
            let seconds = b.seconds - a.seconds
            return CoreSplit(user: (b.user - a.user) / seconds, system: (b.system - a.system) / seconds)
        }
        let serverSplit = split(log)
        let generatorSplit = split(generator.all)
        var packetsPerSecond = 0.0
        if let a = report.ticks.first(where: { $0.seconds >= from }), let b = report.ticks.last, b.seconds > a.seconds {
            packetsPerSecond = Double(b.packetsReceived &- a.packetsReceived) / (b.seconds - a.seconds)
        }
        return Run(
            audience: audience, report: report, serverRSSBeforeBytes: before?.rss ?? 0,
            serverRSSPeakBytes: log.map(\.rss).max() ?? 0, serverCores: serverSplit.total,
            consumeFailures: report.errors.filter { $0.kind.hasPrefix("consume") }.reduce(0) { $0 + $1.count },
            disconnects: report.errors.filter { $0.kind == "disconnected" }.reduce(0) { $0 + $1.count },
            steadyLoss: steadyLoss, sends: sends, generatorCores: generatorSplit.total,
            generatorPacketsPerSecond: packetsPerSecond, serverSplit: serverSplit, generatorSplit: generatorSplit,
            serverRSSSteady: log.filter { $0.seconds >= from }.map { ($0.seconds, $0.rss) },
            serverHeapSteady: heap.filter { $0.seconds >= from })
    }

    // Safe: the samples are guarded by `lock`.
    final class SampleLog: @unchecked Sendable {
        typealias Entry = (seconds: Double, rss: Int, user: Double, system: Double)
        private let lock = NSLock()
        private var entries: [Entry] = []
        func add(_ seconds: Double, _ rss: Int, _ user: Double, _ system: Double) {
            lock.withLock { entries.append((seconds, rss, user, system)) }
        }
        var all: [Entry] { lock.withLock { entries } }
    }

    static func ms(_ v: Double?) -> String { v.map { String(format: "%.0f ms", $0) } ?? "–" }

    static func run(quick: Bool, progress: @escaping @Sendable (String) -> Void) async
        -> (summary: [BenchmarkReport.SummaryRow], markdown: String)
    {
        // The goal size last; smaller sizes show where the goals stop holding (the knee).
        // `UNDERSTUDY_BENCH_LIVE_SIZES=500,750` runs only those sizes (to study one size).
        let chosen = ProcessInfo.processInfo.environment["UNDERSTUDY_BENCH_LIVE_SIZES"].map {
            $0.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter { $0 > 0 }
        }
        let sizes = chosen.flatMap { $0.isEmpty ? nil : $0 } ?? (quick ? [20] : [250, 350, 500, 750, 1000])
        var md = "## Live stream: a stage and a large audience in one room\n\n"
        var runs: [Run] = []
        for size in sizes {
            progress("bench:   live stream: 3 hosts, \(size) in the audience")
            do {
                let r = try await run(audience: size, steadySeconds: quick ? 4 : 20, inviteEvery: quick ? 3 : 10)
                progress(
                    String(
                        format: "bench:   %d joined, join p95 %@, first key p95 %@, loss %.2f %%, %.0f KB/member",
                        r.report.joinedParticipants, ms(r.joinP95), ms(r.keyframeP95), r.steadyLoss ?? -1,
                        r.bytesPerMember / 1024))
                // Studying chosen sizes: the generator's whole report (steps to the first key frame…).
                if chosen != nil { progress(r.report.table()) }
                runs.append(r)
            } catch {
                progress("bench:   live stream of \(size) failed: \(error)")
                md += "Audience of \(size): not measured: \(error)\n\n"
            }
        }
        var summary: [BenchmarkReport.SummaryRow] = []
        guard let goal = runs.last(where: { $0.audience == sizes.last }) else {
            summary.append(
                .notMeasured("live stream: audience members per server core", target: "1,000 members on 2 cores"))
            return (summary, md)
        }
        let knee = runs.filter { $0.misses.isEmpty }.map(\.audience).max()
        summary.append(
            BenchmarkReport.SummaryRow(
                metric: "live stream: audience members per server core",
                target: "1,000 members, goals held (LiveKit: about 190 per core)",
                measured: String(
                    format: "%.0f (%d members on %.2f cores)", goal.membersPerCore, goal.audience, goal.serverCores),
                verdict: goal.misses.isEmpty ? "meets the goals" : "misses: " + goal.misses.joined(separator: ", ")))
        summary.append(
            BenchmarkReport.SummaryRow(
                metric: "live stream: server memory per audience member", target: "≤ 150 KB",
                measured: String(format: "%.0f KB", goal.bytesPerMember / 1024),
                verdict: BenchmarkReport.atMost(goal.bytesPerMember, Goals.bytesPerMember)))
        md += "| audience | joined | join / consume failures, disconnects | join p95 | first keyframe p95 "
        md += "| steady loss | invite p95 | roster | server cores | members per core | server KB per member "
        md += "| goals |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        for r in runs {
            md += "| \(r.audience) | \(r.report.joinedParticipants)/\(r.report.plannedParticipants) "
            md +=
                "| \(r.joinFailures) / \(r.consumeFailures), \(r.disconnects) | \(ms(r.joinP95)) | \(ms(r.keyframeP95)) "
            md += String(format: "| %@ ", r.steadyLoss.map { String(format: "%.2f %%", $0) } ?? "–")
            md += "| \(ms(r.inviteP95)) (\(r.report.modeChanges.promotions) promoted) "
            md += "| \(r.report.rosterCheck.map { "\($0.checked - $0.mismatched)/\($0.checked)" } ?? "–") "
            md += String(
                format: "| %.2f | %.0f | %.0f | %@ |\n", r.serverCores, r.membersPerCore, r.bytesPerMember / 1024,
                r.misses.isEmpty ? "held" : "missed: " + r.misses.joined(separator: ", "))
        }
        md += "\n"
        // The send path (UDP GSO, issue 15) in its own lines, apart from the goals table.
        let gso = ProcessInfo.processInfo.environment["UNDERSTUDY_UDP_GSO"] != "0"
        md += "The server's sends over each whole run (UDP GSO \(gso ? "on" : "off: UNDERSTUDY_UDP_GSO=0")): "
        md += runs.map { r -> String in
            guard let c = r.sends, c.systemCalls > 0, c.datagrams > 0 else { return "\(r.audience): not read" }
            return String(
                format: "%d: %.1f datagrams per send call, %.0f %% in GSO messages of %.2f", r.audience,
                c.datagrams / c.systemCalls, c.segmentedDatagrams / c.datagrams * 100,
                c.segmentedMessages > 0 ? c.segmentedDatagrams / c.segmentedMessages : 0)
        }.joined(separator: "; ")
        md += ".\n\n"
        // The generator's own cost (issue 11: it shares the two cores with the server).
        md += "The generator (this process) over each steady window: "
        md += runs.map { r -> String in
            String(
                format:
                    "%d: %.2f cores, %.0f packets/s received, %@ µs per packet, %.2f ms of CPU per member per second",
                r.audience, r.generatorCores, r.generatorPacketsPerSecond,
                r.generatorMicrosecondsPerPacket.map { String(format: "%.1f", $0) } ?? "–",
                r.generatorMillisecondsPerMember)
        }.joined(separator: "; ")
        md += ".\n\n"
        // The CPU budget: what each delivered packet costs both processes, and what the goal size would
        // need at the cost and packet rate of the largest run that lost nothing (issue 11's 1,000 members,
        // generator included, on this machine's cores).
        func costs(_ r: Run) -> (server: (user: Double, system: Double), generator: (user: Double, system: Double)) {
            (
                r.serverSplit.microseconds(perPacketAt: r.generatorPacketsPerSecond),
                r.generatorSplit.microseconds(perPacketAt: r.generatorPacketsPerSecond)
            )
        }
        md += "Where the CPU goes, over each steady window (µs per packet delivered to the audience, user + kernel): "
        md += runs.map { r -> String in
            let c = costs(r)
            return String(
                format: "%d: server %.1f + %.1f, generator %.1f + %.1f (%.0f packets/s per member)", r.audience,
                c.server.user, c.server.system, c.generator.user, c.generator.system, r.packetsPerMemberPerSecond)
        }.joined(separator: "; ")
        md += ".\n\n"
        if let reference = runs.filter({ ($0.steadyLoss ?? .infinity) < Goals.lossPercent }).max(by: {
            $0.audience < $1.audience
        }), reference.audience < Goals.audience {
            let c = costs(reference)
            let rate = Double(Goals.audience) * reference.packetsPerMemberPerSecond
            let kernel = c.server.system + c.generator.system
            let all = kernel + c.server.user + c.generator.user
            md += String(
                format:
                    "At the cost and packet rate of %d members (the largest run without loss), %d members would "
                    + "need %.2f cores, %.2f of them in the kernel alone, of this machine's %d.\n\n",
                reference.audience, Goals.audience, rate * all / 1e6, rate * kernel / 1e6,
                ProcessInfo.processInfo.activeProcessorCount)
        }
        md +=
            knee.map { "**Knee in this run: \($0) audience members** (the largest size where every goal held).\n\n" }
            ?? "**No size held every goal in this run.**\n\n"
        // Memory per member includes the server's fixed cost, which small audiences cannot amortize.
        if let soft = runs.filter({ $0.misses.allSatisfy { $0 == "memory" } }).map(\.audience).max() {
            md += "Largest size where every goal but memory held: **\(soft)**.\n\n"
        }
        md += """
            Goals (issue 11): 0 join and consume failures and 0 server-side disconnects; join →
            `onRoomJoined` p95 ≤ 1 s and first keyframe p95 ≤ 1.5 s over the whole ramp; loss < 0.5 % in
            the steady window; stage invites take effect in < 500 ms; ≤ 150 KB of server memory per
            audience member, flat over 10 minutes (the soak below); every audience member learnt every
            join, leave and mode change ("roster").
            Anchor: LiveKit publishes about 3,000 subscribers of one publisher on 16 cores (about 190 per
            core).

            Method: `understudy serve` in its own child process (media on one shared UDP port), the load
            generator in this process: one host publishing simulcast VP8 (3 layers) + Opus, two hosts
            with Opus, then the audience joining at 50/s in `RECV_ONLY` with protocol 2, each consuming
            the stage in the speaker layout (host webcam at 1280x720, every mic). Every 10 s one audience
            member is invited on stage over PubSub (`changeMode` + publish) and the previous one sent
            back. Server memory per member = peak RSS of the server process during the run minus its RSS
            before the first join, ÷ audience. Server cores = process CPU time over the steady window ÷
            its length; members per core = audience ÷ that. Both processes share this two-core machine,
            so the generator's own receive work (about as large as the server's) competes with the
            server: on a dedicated server the per-core figure would be higher. What bounds the knee
            (each member receives about 210 packets/s, a forwarded packet costs several µs of the
            SFU's one loop thread and about as much in the generator, and past saturation the shared
            socket queues seconds of datagrams that joins and key frames wait behind): see
            docs/load-testing.md, "What bounds the knee at 500–750 members".


            """
        let (soakSummary, soakMarkdown) = await soak(
            audience: knee ?? sizes.min() ?? 20, atTheKnee: knee != nil, quick: quick, progress: progress)
        summary += soakSummary
        md += soakMarkdown
        return (summary, md)
    }

    /// The issue's "flat over 10 minutes": one live stream at `audience` (the knee, or the smallest
    /// size when none held) held for
    /// `UNDERSTUDY_BENCH_LIVE_SOAK_SECONDS` (600 s; 0 skips it) with stage invites every 10 s, the
    /// server's RSS fitted over the steady window as in the load soak (flat: a change below 2 %).
    static func soak(audience: Int, atTheKnee: Bool, quick: Bool, progress: @escaping @Sendable (String) -> Void) async
        -> (summary: [BenchmarkReport.SummaryRow], markdown: String)
    {
        let configured = ProcessInfo.processInfo.environment["UNDERSTUDY_BENCH_LIVE_SOAK_SECONDS"].flatMap(Double.init)
        let seconds = configured ?? (quick ? 12 : 600)
        guard seconds > 0 else { return ([], "") }
        progress("bench:   live stream soak: \(audience) in the audience for \(Int(seconds)) s")
        var md = "### Live stream held for \(Int(seconds)) s: server memory\n\n"
        let metric = "live stream: server memory over a long stream (invites every 10 s)"
        do {
            let r = try await run(audience: audience, steadySeconds: seconds, inviteEvery: quick ? 3 : 10)
            let steady = r.serverRSSSteady
            let window = (steady.last?.seconds ?? 0) - (steady.first?.seconds ?? 0)
            let perSecond = LoadRows.slope(steady)
            let mean = steady.isEmpty ? 0 : steady.reduce(0.0) { $0 + Double($1.bytes) } / Double(steady.count)
            let share = mean > 0 ? perSecond * window / mean * 100 : 0
            let perMemberAtEnd = Double(max(0, (steady.last?.bytes ?? 0) - r.serverRSSBeforeBytes)) / Double(audience)
            let flat = steady.count >= 3 && abs(share) < 2
            let withinGoal = perMemberAtEnd <= Goals.bytesPerMember
            var misses: [String] = []
            if !flat { misses.append(String(format: "RSS grows %.1f %% over the window", share)) }
            if !withinGoal { misses.append(String(format: "%.0f KB per member", perMemberAtEnd / 1024)) }
            let promoted = r.report.modeChanges.promotions
            let measured = String(
                format: "%+.2f MB/min over %.0f s (%+.1f %%), %.0f KB per member at the end (%d members, %d promoted)",
                perSecond * 60 / 1_048_576, window, share, perMemberAtEnd / 1024, audience, promoted)
            progress("bench:   \(measured)")
            let verdict = misses.isEmpty ? "meets the target" : "misses: " + misses.joined(separator: ", ")
            md += "| metric | value |\n|---|---|\n"
            let which = atTheKnee ? "the knee of the sweep above" : "no size held every goal: the smallest"
            md += "| audience | \(audience) (\(which)), \(promoted) promoted over the run |\n"
            md += String(format: "| steady window | %.0f s, %d RSS samples |\n", window, steady.count)
            md += String(
                format:
                    "| **least-squares slope** | **%+.3f MB per minute** (%+.2f %% of RSS over the window) — %@ |\n",
                perSecond * 60 / 1_048_576, share, verdict)
            md += String(format: "| server memory per member at the end | %.0f KB |\n", perMemberAtEnd / 1024)
            md += String(format: "| steady loss | %@ |\n", r.steadyLoss.map { String(format: "%.3f %%", $0) } ?? "–")
            md +=
                "| failures | \(r.joinFailures) joins, \(r.consumeFailures) consumes, \(r.disconnects) disconnects |\n"
            let heap = r.serverHeapSteady
            if heap.count >= 3 {
                let heapPerSecond = LoadRows.slope(heap)
                let heapWindow = heap[heap.count - 1].seconds - heap[0].seconds
                let heapMean = heap.reduce(0.0) { $0 + Double($1.bytes) } / Double(heap.count)
                md += String(
                    format:
                        "| server heap in use (glibc), slope | %+.3f MB per minute (%+.2f %% of the heap over the window; RSS less heap is the allocator's free and fragmented pages, thread stacks and code) |\n",
                    heapPerSecond * 60 / 1_048_576, heapMean > 0 ? heapPerSecond * heapWindow / heapMean * 100 : 0)
            }
            md += "\nServer RSS (seconds since the run started: MB): \(LoadRows.compactSeries(steady)).\n\n"
            if heap.count >= 3 {
                md += "Server heap in use (seconds since the run started: MB): \(LoadRows.compactSeries(heap)).\n\n"
            }
            md += """
                Method: the row's set-up at the knee, held after the ramp with a stage invite every 10 s
                (each guest is sent back when the next is invited, so every member's subscribe connection
                keeps taking and dropping tracks). Flat means the least-squares change over the steady
                window is below 2 % of the server's mean RSS; per member is RSS at the end minus RSS
                before the first join, ÷ audience. The heap in use is glibc's count of live allocations
                (`malloc_info`), read from the server's `/metrics` every 5 s.


                """
            return (
                [
                    BenchmarkReport.SummaryRow(
                        metric: metric, target: "flat, ≤ 150 KB per member", measured: measured, verdict: verdict)
                ], md
            )
        } catch {
            progress("bench:   live stream soak failed: \(error)")
            md += "Not measured: \(error)\n\n"
            return (
                [
                    BenchmarkReport.SummaryRow.notMeasured(metric, target: "flat, ≤ 150 KB per member")
                ], md
            )
        }
    }
}
