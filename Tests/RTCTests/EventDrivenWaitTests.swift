import Synchronization
import Testing

@testable import RTC

/// Work handed to a loop after it shut down fails at once; work accepted before always runs.
@Suite(.timeLimit(.minutes(2))) struct EventLoopShutdownTests {
    @Test func executeAfterShutdownIsRefused() {
        let loop = EventLoop(name: "late-execute")
        loop.shutdown()
        let ran = Atomic<Bool>(false)
        let accepted = loop.execute { ran.store(true, ordering: .relaxed) }
        #expect(accepted == false)
        let didRun = ran.load(ordering: .relaxed)
        #expect(didRun == false)
    }

    @Test func throwingSubmitAfterShutdownThrows() async {
        let loop = EventLoop(name: "late-submit")
        loop.shutdown()
        await #expect(throws: EventLoopError.shutDown(name: "late-submit")) {
            try await loop.submit { () throws -> Int in 1 }
        }
    }

    @Test func nonThrowingSubmitAfterShutdownRunsOnTheCaller() async {
        // No loop thread is left to run it, and nothing waits for one: the caller runs it.
        let loop = EventLoop(name: "late-inline")
        loop.shutdown()
        let onLoop = await loop.submit { loop.isInLoop }
        #expect(onLoop == false)
    }

    @Test func workQueuedWhileStoppingStillRuns() {
        // A job that runs during the final drain queues another one: it is accepted and runs
        // before shutdown() returns (the loop closes its queue only once it is empty).
        let loop = EventLoop(name: "drain")
        let accepted = Atomic<Bool>(false)
        let ran = Atomic<Bool>(false)
        loop.execute {
            accepted.store(loop.execute { ran.store(true, ordering: .relaxed) }, ordering: .relaxed)
        }
        loop.shutdown()
        let (wasAccepted, didRun) = (accepted.load(ordering: .relaxed), ran.load(ordering: .relaxed))
        #expect(wasAccepted)
        #expect(didRun)
    }

    @Test func submissionsRacingShutdownEachEitherRunOrThrow() async {
        let loop = EventLoop(name: "race")
        let outcomes = await withTaskGroup(of: Bool?.self) { group in
            for i in 0..<200 {
                group.addTask {
                    do {
                        return try await loop.submit { () throws -> Int in i } == i
                    } catch let error as EventLoopError {
                        return error == .shutDown(name: "race") ? false : nil
                    } catch {
                        return nil
                    }
                }
                if i == 100 {
                    group.addTask {
                        loop.shutdown()
                        return false
                    }
                }
            }
            var all: [Bool?] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        // Every wait ended (none hung), with its own result or the shutdown error.
        #expect(outcomes.count == 201)
        #expect(!outcomes.contains(nil))
    }

    @Test func connectWaitEndsWhenTheLoopStops() async throws {
        let loop = EventLoop(name: "pc-stop")
        let pc = try PeerConnection(loop: loop)
        // An offer starts ICE, so the connection now waits on the loop's timers.
        try await loop.submit { () throws in
            pc.addTransceiver(kind: .audio, direction: .sendonly)
            _ = try pc.createOffer()
        }
        let wait = Task { () async -> PeerConnectionError? in
            do throws(PeerConnectionError) { try await pc.waitUntilConnected(timeout: 600) } catch { return error }
            return nil
        }
        // The wait is registered once the loop ran it (work runs in order); then the loop stops.
        _ = try await loop.submit { () throws -> Bool in true }
        loop.shutdown()
        let ended = await wait.value
        #expect(ended == .closed)
    }

    @Test func restartWaitEndsWhenTheConnectionCloses() async throws {
        let loop = EventLoop(name: "pc-restart-close")
        defer { loop.shutdown() }
        let pc = try PeerConnection(loop: loop)
        try await loop.submit { () throws in
            pc.addTransceiver(kind: .audio, direction: .sendonly)
            _ = try pc.createOffer()
        }
        let wait = Task { () async -> PeerConnectionError? in
            do throws(PeerConnectionError) { try await pc.waitUntilFullyConnected(timeout: 600) } catch {
                return error
            }
            return nil
        }
        _ = try await loop.submit { () throws -> Bool in true }
        await loop.submit { pc.close() }
        let ended = await wait.value
        #expect(ended == .closed)
    }

    @Test func connectWaitOnAStoppedLoopThrows() async throws {
        let loop = EventLoop(name: "pc-late")
        let pc = try PeerConnection(loop: loop)
        loop.shutdown()
        await #expect(throws: PeerConnectionError.closed) { try await pc.waitUntilConnected(timeout: 600) }
    }
}

/// Waits on a connection end with the event that settles them, not with a poll or a timer.
@Suite(.timeLimit(.minutes(2))) struct PeerConnectionWaitTests {
    @Test func relayGatheringEndsWithTheAllocationsOutcome() async throws {
        // Nothing listens on 127.0.0.1:1: the TCP link is refused and the allocation fails at once;
        // the wait ends on that failure, long before its timeout.
        var configuration = PeerConnectionConfiguration()
        configuration.iceServers = [
            ICEServer(host: "127.0.0.1", port: 1, transport: .tcp, username: "u", credential: "p")
        ]
        let loop = EventLoop(name: "relay-wait")
        defer { loop.shutdown() }
        let pc = try PeerConnection(loop: loop, configuration: configuration)
        await pc.gatherRelayCandidates(timeout: 600)
        let summary = await loop.submit { pc.transport.relaySummary }
        #expect(summary.contains("0 of 1 allocated"), "\(summary)")
        #expect(summary.contains("127.0.0.1"), "\(summary)")
    }
}
