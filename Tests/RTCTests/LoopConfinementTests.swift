import RTCWire
import Testing

@testable import RTC

/// Loop-only state is checked: ``LoopBound`` in every build, the loop-only entry points
/// (``EventLoop/assertInLoop(file:line:)``) in debug builds. A deliberate off-loop call must stop
/// the process, which an exit test observes from outside.
@Suite(.timeLimit(.minutes(2))) struct LoopConfinementTests {
    @Test func onLoopAndAfterShutdownAreConfined() async {
        let loop = EventLoop(name: "confined")
        #expect(!loop.isConfinedHere, "the test's thread is not the loop's")
        let inside = await loop.submit { loop.isConfinedHere }
        #expect(inside)
        loop.shutdown()
        // The loop thread is gone for good: late work runs on the caller, one call at a time.
        #expect(loop.isConfinedHere)
    }

    @Test func loopBoundValueIsReadAndWrittenOnItsLoop() async {
        let loop = EventLoop(name: "bound")
        let box = LoopBound(1, loop: loop)
        let seen = await loop.submit { () -> Int in
            box.value += 41
            return box.value
        }
        #expect(seen == 42)
        loop.shutdown()
    }

    @Test func loopBoundValueTouchedOffItsLoopStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let loop = EventLoop(name: "bound-off")
            let box = LoopBound(1, loop: loop)
            _ = box.value
        }
    }

    #if DEBUG
        @Test func peerConnectionCalledOffItsLoopStopsTheProcess() async throws {
            let result = try await #require(
                processExitsWith: .failure, observing: [\.standardErrorContent]
            ) {
                let loop = EventLoop(name: "pc-off")
                let pc = try PeerConnection(loop: loop)
                // Loop-only: the test's thread is not the loop thread.
                _ = pc.addTransceiver(kind: .audio, direction: .sendonly)
            }
            // Stopped by the confinement check itself, naming the loop and the call site.
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("called off event loop 'pc-off'"))
            #expect(message.contains("PeerConnection.swift"))
        }

        @Test func peerConnectionCalledOnItsLoopRuns() async throws {
            let loop = EventLoop(name: "pc-on")
            let pc = try PeerConnection(loop: loop)
            let offer = try await loop.submit { () throws -> SessionDescription in
                pc.addTransceiver(kind: .audio, direction: .sendonly)
                return try pc.createOffer()
            }
            #expect(offer.media.count == 1)
            await loop.submit { pc.close() }
            loop.shutdown()
        }

        @Test func mediaPumpAttachedOffItsConnectionsLoopStopsTheProcess() async throws {
            let result = try await #require(
                processExitsWith: .failure, observing: [\.standardErrorContent]
            ) {
                let loop = EventLoop(name: "pump-off")
                let pc = try PeerConnection(loop: loop)
                let pump = MediaPump(connection: pc, video: nil, videoSource: nil, audio: nil, audioSource: nil)
                pump.attach()
            }
            let message = String(decoding: result.standardErrorContent, as: UTF8.self)
            #expect(message.contains("called off event loop 'pump-off'"))
            #expect(message.contains("MediaPump.swift"))
        }

        @Test func receiverCalledOffItsTransportsLoopStopsTheProcess() async {
            await #expect(processExitsWith: .failure) {
                let loop = EventLoop(name: "rx-off")
                let receiver = RTPReceiver(ssrc: 1, codec: .vp8, payloadType: 96, localSSRC: 2)
                // As the transport's stream listener binds it.
                receiver.loop = loop
                receiver.requestKeyframe()
            }
        }
    #endif
}
