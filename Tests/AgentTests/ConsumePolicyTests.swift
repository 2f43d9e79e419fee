import AgentTestSupport
import Dispatch
import Foundation
import Media
import RTCWire
import TestSupport
import Testing

@testable import Agent
@testable import Understudy

/// Issue 34 point 1: `ConsumePolicy`, one of the parts the room agent, the Janus agent and the
/// scenario participants share.
@Suite("ConsumePolicy: participants, modes and maxVideo to kinds wanted")
struct ConsumePolicyTests {
    typealias C = ConsumePolicy.Candidate
    static let both: Set<MediaKind> = [.audio, .video]
    /// In join order: a on stage, b in the audience, c on stage, d on stage (Janus display "dee").
    static let room = [
        C(id: "a", onStage: true), C(id: "b", onStage: false), C(id: "c", onStage: true),
        C(id: "d", aliases: ["dee"], onStage: true),
    ]

    struct Row: Sendable, CustomStringConvertible {
        var policy: ConsumePolicy
        var kinds: Set<MediaKind> = ConsumePolicyTests.both
        var maxVideo: Int?
        var holding: Set<String> = []
        var expected: [String: Set<MediaKind>]
        var description: String {
            "\(policy) kinds \(kinds.map(\.rawValue).sorted()) max \(maxVideo as Any) holding \(holding.sorted())"
        }
    }

    static let rows: [Row] = [
        Row(policy: .all, expected: ["a": both, "b": both, "c": both, "d": both]),
        Row(policy: .stage, expected: ["a": both, "c": both, "d": both]),
        Row(policy: .none, expected: [:]),
        Row(policy: .all, kinds: [.audio], expected: ["a": [.audio], "b": [.audio], "c": [.audio], "d": [.audio]]),
        Row(policy: .stage, kinds: [.video], expected: ["a": [.video], "c": [.video], "d": [.video]]),
        // Ids, and a Janus display name as an alias; unknown ids are skipped.
        Row(policy: .ids(["c", "zz", "dee"]), expected: ["c": both, "d": both]),
        // Webcam slots go in join order, only on stage; audio is not limited.
        Row(policy: .all, maxVideo: 1, expected: ["a": both, "b": [.audio], "c": [.audio], "d": [.audio]]),
        Row(policy: .all, maxVideo: 2, expected: ["a": both, "b": [.audio], "c": both, "d": [.audio]]),
        Row(policy: .all, maxVideo: 0, expected: ["a": [.audio], "b": [.audio], "c": [.audio], "d": [.audio]]),
        Row(policy: .all, maxVideo: -3, expected: ["a": [.audio], "b": [.audio], "c": [.audio], "d": [.audio]]),
        // A slot held stays held: the newcomer order does not take it away.
        Row(
            policy: .all, maxVideo: 1, holding: ["d"],
            expected: ["a": [.audio], "b": [.audio], "c": [.audio], "d": both]),
        // An audience member holding a slot cannot keep it (nobody off stage sends a webcam).
        Row(
            policy: .all, maxVideo: 1, holding: ["b"],
            expected: ["a": both, "b": [.audio], "c": [.audio], "d": [.audio]]),
        // With ids, their order decides the slots.
        Row(policy: .ids(["d", "c", "a"]), maxVideo: 2, expected: ["a": [.audio], "c": both, "d": both]),
        Row(policy: .ids(["b"]), maxVideo: 1, expected: ["b": [.audio]]),
    ]

    @Test(arguments: rows) func wanted(_ row: Row) {
        let got = row.policy.wanted(Self.room, kinds: row.kinds, maxVideo: row.maxVideo, holdingVideo: row.holding)
        #expect(got == row.expected)
    }

    @Test func picksFollowsThePolicy() {
        #expect(ConsumePolicy.stage.picks(C(id: "x", onStage: true)))
        #expect(!ConsumePolicy.stage.picks(C(id: "x", onStage: false)))
        #expect(ConsumePolicy.ids(["dee"]).picks(Self.room[3]))
        // An empty display name matches nothing.
        #expect(!ConsumePolicy.ids([""]).picks(C(id: "7", aliases: [""], onStage: true)))
        #expect(!ConsumePolicy.none.picks(Self.room[0]))
    }
}
