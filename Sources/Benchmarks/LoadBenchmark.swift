import Foundation
import LoadGen
import RoomServer

#if canImport(Glibc)
    import Glibc
#endif

/// What `make bench` reports about load mode: receive capacity per core, loss and memory per bot.
public struct LoadBenchmarkResult: Sendable {
    /// Audience bots in the run.
    public var subscribers: Int
    /// Publishing bots in the run.
    public var publishers: Int
    /// Consumers that received media (video and audio tracks at the subscriber bots).
    public var subscribedTracks: Int
    /// Length of the steady-state window measured (after every bot joined and media settled).
    public var windowSeconds: Double
    /// CPU seconds of the load generator's I/O threads over the window (every packet of every bot is
    /// handled there; the in-process server's threads are not counted).
    public var cpuSeconds: Double
    /// CPU seconds of the whole process over the window, server included.
    public var processCPUSeconds: Double
    /// Subscribed tracks ÷ cores of load-side CPU used (`cpuSeconds / windowSeconds`).
    public var tracksPerCore: Double
    /// Packets lost ÷ expected over the window, in percent, over every receiver.
    public var lossPercent: Double
    /// Packets every receiver got over the window.
    public var packetsReceived: Double = 0
    /// CPU nanoseconds of the I/O threads per packet received over the window: tracks per core at
    /// a given packet rate, without the loss of a starved run flattering it.
    public var nanosecondsPerPacket: Double { packetsReceived > 0 ? cpuSeconds / packetsReceived * 1e9 : 0 }
    /// Growth of the process's resident memory per subscriber bot, from before the bots joined to the
    /// end of the run. With the server in the same process this includes the server's per-consumer
    /// state (its send history), so it is an upper bound on the bot's own cost.
    public var rssPerSubscriberBotBytes: Int
    /// Resident memory over the run (seconds since the first join).
    public var rssSamples: [(seconds: Double, bytes: Int)]
    /// End-to-end media latency (abs-capture-time), median, in milliseconds.
    public var latencyP50Ms: Double?
    /// End-to-end media latency, 95th percentile, in milliseconds.
    public var latencyP95Ms: Double?
    /// The full report of the run.
    public var report: LoadReport

    /// Runs the benchmark against a server already running at `signalingURL` whose tokens are signed
    /// with `secret`: joins `publishers` simulcast publishers and `subscribers` audience bots (3x3
    /// layout, so each consumes every publisher's webcam and mic), lets media settle, then measures a
    /// steady-state window of `duration` seconds. The server must admit that many participants.
    /// `qualityMetrics` off runs the bots without received-quality measurements (their cost row).
    public static func runBenchmark(
        subscribers: Int, publishers: Int, duration: Double, signalingURL: String, secret: String,
        qualityMetrics: Bool = true
    ) async throws -> LoadBenchmarkResult {
        var config = LoadConfiguration(signalingURL: signalingURL, room: "bench")
        config.secret = secret
        config.qualityMetrics = qualityMetrics
        config.publishers = publishers
        config.subscribers = subscribers
        config.layout = .grid(3)
        config.joinRate = 50
        let settle = 3.0
        let ramp = Double(publishers + subscribers) / config.joinRate + 2
        config.duration = ramp + settle + duration
        let run = try LoadRun(configuration: config)  // encodes the shared media before the baseline
        let baselineRSS = residentBytes()
        let windowStart = ramp + settle
        let samples = ProgressLog()
        run.onProgress = { p in samples.add(p, cpu: Double(processCPUNanoseconds()) / 1e9) }
        let report = try await run.run()
        let log = samples.all
        guard let first = log.first(where: { $0.progress.elapsed >= windowStart }), let last = log.last,
            last.progress.elapsed > first.progress.elapsed
        else {
            throw LoadBenchmarkError.noSteadyStateWindow(
                elapsed: log.last?.progress.elapsed ?? 0, windowStart: windowStart)
        }
        let window = last.progress.elapsed - first.progress.elapsed
        let cpu = last.progress.loopCPUSeconds - first.progress.loopCPUSeconds
        let received = Double(last.progress.packetsReceived &- first.progress.packetsReceived)
        let lost = max(0, Double(last.progress.packetsLost - first.progress.packetsLost))
        let endRSS = report.rssSamples.last?.bytes ?? residentBytes()
        return LoadBenchmarkResult(
            subscribers: subscribers, publishers: publishers, subscribedTracks: report.subscribedTracks,
            windowSeconds: window, cpuSeconds: cpu, processCPUSeconds: last.cpu - first.cpu,
            tracksPerCore: cpu > 0 ? Double(report.subscribedTracks) / (cpu / window) : 0,
            lossPercent: received + lost > 0 ? lost / (received + lost) * 100 : 0, packetsReceived: received,
            rssPerSubscriberBotBytes: subscribers > 0 ? max(0, endRSS - baselineRSS) / subscribers : 0,
            rssSamples: report.rssSamples.map { (seconds: $0.seconds, bytes: $0.bytes) },
            latencyP50Ms: report.latencyMs.p50, latencyP95Ms: report.latencyMs.p95, report: report)
    }
}

extension LoadBenchmarkResult {
    /// Starts an in-process ``RoomServer`` on loopback (ephemeral ports, room size raised to fit)
    /// and runs ``runBenchmark(subscribers:publishers:duration:signalingURL:secret:)`` against it.
    ///
    /// The server shares the process, so ``rssPerSubscriberBotBytes`` includes its per-consumer
    /// memory; ``cpuSeconds`` counts only the load generator's threads.
    public static func runInProcess(subscribers: Int, publishers: Int, duration: Double) async throws
        -> LoadBenchmarkResult
    {
        var server = RoomServerConfiguration()
        server.listenPort = 0
        server.udpPortLow = 0
        server.udpPortHigh = 0
        server.secret = "load-benchmark-secret"
        server.maxParticipantsPerRoom = subscribers + publishers + 10
        let roomServer = RoomServer(configuration: server)
        try roomServer.start()
        defer { roomServer.stop() }
        return try await runBenchmark(
            subscribers: subscribers, publishers: publishers, duration: duration,
            signalingURL: roomServer.signalingURL, secret: "load-benchmark-secret")
    }
}

/// Resident bytes of this process.
private func residentBytes() -> Int { LiveStreamRows.sample(pid: getpid())?.rss ?? 0 }

/// Why the load benchmark measured nothing.
public enum LoadBenchmarkError: Error, CustomStringConvertible {
    /// The run ended before a steady-state window after the ramp and settling time could be measured.
    case noSteadyStateWindow(elapsed: Double, windowStart: Double)

    public var description: String {
        switch self {
        case .noSteadyStateWindow(let elapsed, let start):
            return
                "benchmark too short to measure a steady-state window (ran \(elapsed) s, window starts at \(start) s)"
        }
    }
}

/// Progress samples collected from the run's progress callback.
// Safe: the samples are guarded by `lock`.
private final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(progress: LoadProgress, cpu: Double)] = []
    func add(_ p: LoadProgress, cpu: Double) { lock.withLock { entries.append((p, cpu)) } }
    var all: [(progress: LoadProgress, cpu: Double)] { lock.withLock { entries } }
}
