import Testing

@testable import Signaling

@Suite("Reactor bounds")
struct ReactorTests {
    /// Connections arm far-off timers (idle pings, close timeouts) and cancel them; cancelled
    /// entries must not pile up in the heap.
    @Test func cancelledTimersDoNotAccumulate() {
        var heap = TimerHeap()
        let far: UInt64 = 1 << 40
        for id in UInt64(1)...10_000 {
            heap.insert(deadline: far + id, id: id, action: {})
            heap.cancel(id)
        }
        #expect(heap.storedCount <= 200)
        // Live timers survive a compaction and still fire in deadline order.
        var fired: [Int] = []
        for id in UInt64(20_001)...20_010 { heap.insert(deadline: id, id: id, action: {}) }
        for id in UInt64(30_001)...30_500 {
            heap.insert(deadline: far + id, id: id, action: {})
            heap.cancel(id)
        }
        #expect(heap.storedCount <= 200)
        var now: UInt64 = 20_000
        while fired.count < 10, now < 20_100 {
            now += 1
            while let action = heap.popDue(now: now) {
                action()
                fired.append(Int(now))
            }
        }
        #expect(fired == Array(20_001...20_010))
    }
}
