import Foundation
import RoomServer
import Signaling
import TestSupport
import Testing

@testable import RTC

/// Active-speaker detection from the publishers' real `ssrc-audio-level` extensions, as the SFU
/// reads them, broadcast as `speakerChanged`.
@Suite(.serialized) struct MediaSpeakerTests {
    /// Sets the level (-dBov) and voice flag every later audio packet of `peer` carries.
    func speak(_ peer: RoomMediaPeer, level: UInt8, voice: Bool) async {
        let pc = peer.publishConnection
        await pc.loop.submit {
            for t in pc.transceivers where t.kind == .audio {
                for sender in t.senders {
                    sender.audioLevel = level
                    sender.voiceActivity = voice
                }
            }
        }
    }

    @Test func loudestMicBecomesSpeakerAndSilenceClearsIt() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "speaker", participant: "alice")
        let carol = try await RoomMediaPeer.join(server, room: "speaker", participant: "carol")
        let bob = try await RoomMediaPeer.join(server, room: "speaker", participant: "bob", mode: "RECV_ONLY")
        try await alice.publish()
        try await carol.publish()
        // Both silent (the default level 127): nobody speaks.
        try await Task.sleep(for: .seconds(1.2))
        #expect(bob.signaling.notifications("speakerChanged").isEmpty)

        await speak(carol, level: 40, voice: false)
        await speak(alice, level: 20, voice: true)
        let first = try await bob.signaling.notification("speakerChanged")
        #expect(first["participantId"]?.stringValue == "alice", "the louder mic wins: \(first)")

        await speak(alice, level: 127, voice: false)
        let second = try await bob.signaling.notification("speakerChanged")
        #expect(second["participantId"]?.stringValue == "carol", "carol is the only active mic: \(second)")

        await speak(carol, level: 127, voice: false)
        let third = try await bob.signaling.notification("speakerChanged")
        #expect(third["participantId"]?.isNull == true, "silence clears the speaker: \(third)")

        await alice.close()
        await carol.close()
        await bob.close()
    }

    /// The SFU's observer keeps sampling a room whose speaking mic went away, so the speaker is
    /// cleared (the polled detector stopped with the last mic and left a stale speaker).
    @Test func theSpeakerIsClearedWhenTheSpeakingMicLeaves() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        let alice = try await RoomMediaPeer.join(server, room: "speaker-leaves", participant: "alice")
        let bob = try await RoomMediaPeer.join(
            server, room: "speaker-leaves", participant: "bob", mode: "RECV_ONLY")
        try await alice.publish()
        await speak(alice, level: 10, voice: true)
        let first = try await bob.signaling.notification("speakerChanged", seconds: 10)
        #expect(first["participantId"]?.stringValue == "alice")

        await alice.close()
        let cleared = try await bob.signaling.notification("speakerChanged", seconds: 10) {
            $0["participantId"]?.isNull == true
        }
        #expect(cleared["participantId"]?.isNull == true)
        await bob.close()
    }
}
