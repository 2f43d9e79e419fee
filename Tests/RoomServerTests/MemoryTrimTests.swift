import Foundation
import Testing

@testable import RoomServer

@Suite struct MemoryTrimTests {
    @Test func freedMemoryGoesBackToTheKernel() {
        // Many small blocks freed with every hundredth kept: the arena cannot shrink from its top,
        // so only a trim gives the free pages back (as after a live stream's guests left).
        let size = 512
        var blocks: [UnsafeMutableRawPointer] = []
        blocks.reserveCapacity(100_000)
        for _ in 0..<100_000 {
            let block = malloc(size)!
            memset(block, 0xA5, size)
            blocks.append(block)
        }
        var kept: [UnsafeMutableRawPointer] = []
        for (i, block) in blocks.enumerated() {
            if i % 100 == 0 { kept.append(block) } else { free(block) }
        }
        #expect(MemoryTrim.trimNow(), "about 50 MB were free in the arena: a trim returns some of it")
        for block in kept { free(block) }
    }

    @Test func theArenaCapIsSetUnlessTheEnvironmentSetsIt() {
        // The operator's MALLOC_ARENA_MAX wins: nothing is set.
        #expect(!MemoryTrim.limitArenas(to: 2, environment: ["MALLOC_ARENA_MAX": "4"]))
        // glibc accepts the option (mallopt returns 1; 0 for an option it does not know).
        #expect(MemoryTrim.limitArenas(to: ProcessInfo.processInfo.activeProcessorCount * 8, environment: [:]))
    }

    @Test func heapTotalsAreReadAfterTheLastArena() throws {
        let xml = """
            <malloc version="1">
            <heap nr="0">
            <sizes>
            </sizes>
            <total type="fast" count="1" size="10"/>
            <total type="rest" count="2" size="20"/>
            <system type="current" size="1000"/>
            <system type="max" size="1000"/>
            </heap>
            <total type="fast" count="3" size="100"/>
            <total type="rest" count="4" size="4000"/>
            <total type="mmap" count="1" size="500000"/>
            <system type="current" size="20000"/>
            <system type="max" size="30000"/>
            <aspace type="total" size="20000"/>
            </malloc>
            """
        #expect(MemoryTrim.parseTotals(xml) == MemoryTrim.HeapUsage(inUse: 20000 - 100 - 4000 + 500000, arenas: 20000))
        #expect(MemoryTrim.parseTotals("<malloc version=\"1\"></malloc>") == nil)
        #expect(MemoryTrim.parseTotals("not xml") == nil)
    }

    @Test func liveAllocationsShowInTheHeapInUse() throws {
        let before = try #require(MemoryTrim.heapUsage())
        // 256 MB kept live: far more than other tests in this process free meanwhile.
        let blocks = (0..<4096).map { _ -> UnsafeMutableRawPointer in
            let block = malloc(65536)!
            memset(block, 1, 65536)
            return block
        }
        let during = try #require(MemoryTrim.heapUsage())
        for block in blocks { free(block) }
        #expect(during.inUse - before.inUse >= 128 << 20, "\(before) → \(during)")
        #expect(during.arenas > 0)
    }
}
