import RTCWire

/// Whose media a participant core consumes, and the one pure rule that turns the room's
/// participants into the kinds wanted from each: used by ``RoomAgent``, ``JanusAgent`` and the
/// scenario participants alike.
public enum ConsumePolicy: Sendable, Equatable {
    /// Every remote participant (those that do not send simply contribute nothing).
    case all
    /// Exactly the remote participants on stage (`SEND_AND_RECV`; for Janus, its publishers).
    case stage
    /// Nobody.
    case none
    /// Only these participants (by id, or by any of a candidate's ``Candidate/aliases``), in this
    /// order of preference.
    case ids([String])

    /// One remote participant as the policy sees it.
    public struct Candidate: Sendable, Equatable {
        /// The key of the result.
        public var id: String
        /// Other names an ``ConsumePolicy/ids(_:)`` entry may use for it (a Janus display name).
        public var aliases: [String]
        /// Whether it is on stage, the only place a webcam can come from.
        public var onStage: Bool

        /// A candidate.
        public init(id: String, aliases: [String] = [], onStage: Bool) {
            self.id = id
            self.aliases = aliases
            self.onStage = onStage
        }

        func answers(to name: String) -> Bool { id == name || (!name.isEmpty && aliases.contains(name)) }
    }

    /// Whether `candidate` qualifies at all.
    public func picks(_ candidate: Candidate) -> Bool {
        switch self {
        case .all: return true
        case .none: return false
        case .stage: return candidate.onStage
        case .ids(let names): return names.contains { candidate.answers(to: $0) }
        }
    }

    /// The kinds wanted now from each candidate (those wanting nothing are absent).
    ///
    /// Audio goes to every qualifying candidate. Webcam slots (`maxVideo`; nil: no limit) go first to
    /// those in `holdingVideo` (a slot is never taken away for a newcomer), then in the policy's order
    /// (the ``ids(_:)`` list, else the order of `candidates`, which callers give in join order), and
    /// only to candidates on stage when limited.
    ///
    /// - Parameters:
    ///   - candidates: the remote participants, in join order.
    ///   - kinds: the kinds consumed at all.
    ///   - maxVideo: at most this many webcams.
    ///   - holdingVideo: ids whose webcam is consumed now.
    public func wanted(
        _ candidates: [Candidate], kinds: Set<MediaKind>, maxVideo: Int?, holdingVideo: Set<String> = []
    ) -> [String: Set<MediaKind>] {
        let ordered: [Candidate]
        if case .ids(let names) = self {
            var seen = Set<String>()
            ordered = names.compactMap { name in
                guard let c = candidates.first(where: { $0.answers(to: name) }), seen.insert(c.id).inserted else {
                    return nil
                }
                return c
            }
        } else {
            ordered = candidates.filter(picks)
        }
        var wanted: [String: Set<MediaKind>] = [:]
        if kinds.contains(.audio) {
            for c in ordered { wanted[c.id, default: []].insert(.audio) }
        }
        guard kinds.contains(.video) else { return wanted }
        guard let limit = maxVideo else {
            for c in ordered { wanted[c.id, default: []].insert(.video) }
            return wanted
        }
        let eligible = ordered.filter(\.onStage)
        let chosen =
            eligible.filter { holdingVideo.contains($0.id) } + eligible.filter { !holdingVideo.contains($0.id) }
        for c in chosen.prefix(max(0, limit)) { wanted[c.id, default: []].insert(.video) }
        return wanted
    }
}
