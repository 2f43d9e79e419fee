import RTC
import Testing

@testable import SFU

/// The SFU's on-loop methods run on its loop: through ``SFU/onLoop(_:)`` they work, and a
/// deliberate call from another thread stops the process in a debug build.
@Suite(.timeLimit(.minutes(2))) struct SFULoopConfinementTests {
    @Test func onLoopIsTheFrontDoor() async throws {
        let sfu = SFU()
        await #expect(throws: SFUError.unknownProducer("p-none")) {
            try await sfu.onLoop { try $0.consumeOnLoop(subscriber: "bob", producerID: "p-none") }
        }
        await sfu.shutdown()
        // After shutdown the loop refuses: the front door says so instead of running the call.
        await #expect(throws: EventLoopError.self) {
            try await sfu.onLoop { try $0.stopConsumingOnLoop(subscriber: "bob", producerID: "p-none") }
        }
    }

    #if DEBUG
        @Test func onLoopMethodCalledOffTheLoopStopsTheProcess() async {
            await #expect(processExitsWith: .failure) {
                let sfu = SFU()
                _ = try? sfu.consumeOnLoop(subscriber: "bob", producerID: "p-none")
            }
        }
    #endif
}
