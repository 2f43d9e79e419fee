import Foundation
import Media
import RTC
import TestSupport
import Testing

@testable import SFU

/// The stream allocator wired into a real SFU (connections on loopback, the synthetic simulcast
/// publisher): the subscriber's estimate (forced here) decides the layer it receives, a pause stops
/// the video and a resume brings it back on a key frame, and the decisions show in the stats.
@Suite("SFU stream allocation", .serialized)
struct SFUAllocationTests {
    /// Waits (generously: a busy machine) until `predicate` holds for bob's video consumer.
    func waitFor(
        _ sfu: SFU, _ what: String, timeout: Double = 20, _ predicate: (SFUConsumerStats, SFUTransportStats?) -> Bool
    ) async throws -> SFUStats {
        let deadline = Date().addingTimeInterval(timeout)
        var stats = await sfu.stats()
        while Date() < deadline {
            stats = await sfu.stats()
            if let c = stats.consumers.first, predicate(c, stats.transports.first(where: { $0.participantID == "bob" }))
            {
                return stats
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("\(what) did not happen within \(timeout) s: \(stats.consumers) \(stats.transports)")
        return stats
    }

    @Test func theEstimatePicksTheLayerPausesAndResumes() async throws {
        var configuration = SFUConfiguration()
        configuration.allocator.holdDown = 1_000_000_000
        configuration.allocator.probing = false
        let setup = try await SFUForwardingSetup.start(
            "alloc", sfu: SFU(configuration: configuration), rids: ["q", "h", "f"], audio: false)
        let (sfu, subscriber) = (setup.sfu, setup.subscriber)
        let path = temporaryPath("allocation.webm")
        var rates: [Int] = []
        // The synthetic publisher's RIDs do not say the size (its "q" is the largest): by width.
        var ridsByQuality: [String] = []
        var pausedStats: SFUStats?
        var packetsWhilePaused: (UInt64, UInt64) = (0, 0)
        _ = try await subscriber.recordSubscription(with: sfu, participantID: "bob", path: path) {
            // The layer rates the allocator measured, lowest quality first.
            let measured = try await waitFor(sfu, "measured layer rates") { _, _ in true }
            try await Task.sleep(for: .seconds(1))
            let layers = (await sfu.stats().producers.first?.layers ?? []).sorted { $0.width < $1.width }
            ridsByQuality = layers.compactMap(\.rid)
            rates = layers.map(\.bitrate)
            _ = measured
            #expect(layers.count == 3 && layers.allSatisfy { $0.width > 0 }, "\(layers)")
            guard ridsByQuality.count == 3 else { return }
            let (low, top) = (ridsByQuality[0], ridsByQuality[2])
            // No estimate: the top layer, as asked.
            _ = try await waitFor(sfu, "the top layer without an estimate") { c, _ in c.currentRID == top }
            #expect(rates.count == 3 && rates.allSatisfy { $0 > 0 }, "measured \(rates)")
            guard rates.count == 3 else { return }
            // Room for the lowest layer only.
            let room = rates[0] + (rates[1] - rates[0]) / 4
            try await sfu.loop.submit { try sfu.setEstimateOverrideOnLoop(participantID: "bob", bitsPerSecond: room) }
            _ = try await waitFor(sfu, "the low layer at \(room) bit/s") { c, t in
                c.currentRID == low && c.allocatedRID == low && t?.estimate == room && t?.estimateBinds == true
            }
            try await Task.sleep(for: .seconds(1))
            // Nothing fits: paused, nothing forwarded.
            try await sfu.loop.submit { try sfu.setEstimateOverrideOnLoop(participantID: "bob", bitsPerSecond: 1_000) }
            pausedStats = try await waitFor(sfu, "a pause") { c, t in c.paused && t?.pausedConsumers == 1 }
            let before = pausedStats?.consumers.first?.packetsSent ?? 0
            try await Task.sleep(for: .seconds(1.5))
            let after = await sfu.stats().consumers.first?.packetsSent ?? 0
            packetsWhilePaused = (before, after)
            // Plenty: back to the top after the hold-down, on a key frame.
            try await sfu.loop.submit {
                try sfu.setEstimateOverrideOnLoop(participantID: "bob", bitsPerSecond: 50_000_000)
            }
            _ = try await waitFor(sfu, "the top layer again") { c, _ in c.currentRID == top && !c.paused }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(packetsWhilePaused.1 <= packetsWhilePaused.0 + 2, "packets sent while paused: \(packetsWhilePaused)")
        let stats = await sfu.stats()
        let transport = stats.transports.first { $0.participantID == "bob" }
        #expect((transport?.decreases ?? 0) >= 2, "\(String(describing: transport))")
        #expect((transport?.raises ?? 0) >= 1, "\(String(describing: transport))")
        #expect(stats.counters.pausedConsumers == 0)

        // The recording: the top layer, the low one, a gap, the top again; it decodes cleanly.
        let frames = try runToolText(
            "/usr/bin/ffprobe",
            ["-v", "error", "-select_streams", "v", "-show_entries", "frame=width,height", "-of", "csv=p=0", path])
        var sizes: [String] = []
        for line in frames.split(separator: "\n") where sizes.last != String(line) { sizes.append(String(line)) }
        // (A step down may pass the middle layer on its way: the layer rates are measured live.)
        #expect(sizes.first == "640,360" && sizes.last == "640,360" && sizes.contains("160,90"), "sizes: \(sizes)")
        #expect(sizes.firstIndex(of: "160,90") ?? 0 < sizes.lastIndex(of: "640,360") ?? 0, "sizes: \(sizes)")
        let decode = try ffmpegDecodeErrors(path)
        #expect(decode.isEmpty, "ffmpeg reported decode errors across the pause: \(decode)")
        await setup.close()
    }
}
