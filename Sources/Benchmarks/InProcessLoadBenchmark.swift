import LoadGen
import RoomServer

extension LoadBenchmarkResult {
    /// Starts an in-process ``RoomServer`` on loopback (ephemeral ports, room size raised to fit)
    /// and runs ``runBenchmark(subscribers:publishers:duration:signalingURL:secret:)`` against it.
    ///
    /// The server shares the process, so ``rssPerSubscriberBotBytes`` includes its per-consumer
    /// memory; ``cpuSeconds`` counts only the load generator's threads. (It lives here, not in
    /// `LoadGen`, so that the load generator does not depend on the room server.)
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
