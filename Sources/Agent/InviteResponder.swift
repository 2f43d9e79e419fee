import Foundation
import Understudy

/// Follows stage invites (docs/spec/change-mode.md): once its participant joined, it subscribes to
/// `REQUEST_TO_JOIN_AS_HOST_<own id>`, decides each invite by its ``Policy`` and answers an accepted
/// one with `changeMode`, one answer after the other. The room agent and the scenario participants
/// both use it.
// Safe: `room` and `listening` are guarded by `lock`; the rest is immutable or its own lock's.
public final class InviteResponder: PubSubMessageListener, @unchecked Sendable {
    /// Which stage invites are followed.
    public enum Policy: Sendable, Equatable {
        /// Invites from participants whose token holds `allow_mod`, as the server vouches for it on
        /// each message (`senderIsModerator`): the default, since anyone may publish an invite. Being
        /// on stage is no proof: any `allow_join` participant can put itself there with `changeMode`.
        case trusted
        /// Every invite.
        case yes
        /// None.
        case no
        /// Only invites sent by these participant ids.
        case from([String])

        /// Whether an invite sent as `message` is followed.
        public func accepts(_ message: PubSubMessage) -> Bool {
            switch self {
            // Only what the server vouches for (issue 31 item 9): a mode is something a participant
            // gives itself, `allow_mod` in its token is not.
            case .trusted: return message.senderIsModerator
            case .yes: return true
            case .no: return false
            case .from(let ids): return ids.contains(message.senderId)
            }
        }
    }

    /// What became of one invite.
    public enum Outcome: Sendable, Equatable {
        /// Followed: the mode change was asked for.
        case accepted(Mode)
        /// Refused by the policy.
        case refused(Mode)
        /// No mode could be read from the message.
        case unreadable
    }

    /// The invite topic of `participantId`.
    public static func topic(for participantId: String) -> String { "REQUEST_TO_JOIN_AS_HOST_\(participantId)" }

    public let policy: Policy
    private let log: @Sendable (String) -> Void
    private let decided: @Sendable (PubSubMessage, Outcome) -> Void
    private let lock = NSLock()
    private weak var room: Room?
    private var listening = false
    /// The answers (`changeMode`), one after another.
    private let answers = SerialTasks()

    /// - Parameters:
    ///   - log: one line per decision and failure.
    ///   - decided: hears of every message on the invite topic and what was decided (event queue).
    public init(
        policy: Policy, log: @escaping @Sendable (String) -> Void,
        decided: @escaping @Sendable (PubSubMessage, Outcome) -> Void = { _, _ in }
    ) {
        self.policy = policy
        self.log = log
        self.decided = decided
    }

    /// Whether the subscription to the invite topic is in place.
    public var isListening: Bool { lock.withLock { listening } }

    /// Subscribes to the invite topic of `room`'s local participant; call once joined (again after
    /// each join). A failure is logged: the participant then simply follows no invites.
    public func listen(on room: Room) async {
        let topic = Self.topic(for: room.localParticipant.id)
        lock.withLock {
            self.room = room
            listening = false
        }
        do {
            try await room.pubSub.subscribe(topic: topic, listener: self)
            lock.withLock { listening = true }
            log("listening for stage invites on \(topic)")
        } catch {
            log("cannot subscribe to \(topic): \(error)")
        }
    }

    /// The room was left: no subscription any more.
    public func roomLeft() { lock.withLock { listening = false } }

    /// Waits until every invite answered so far has its `changeMode` done (or failed).
    public func finishAnswers() async { await answers.drain() }

    public func onMessageReceived(_ message: PubSubMessage) {
        guard let room = lock.withLock({ room }), message.topic == Self.topic(for: room.localParticipant.id) else {
            return
        }
        guard let mode = Self.requestedMode(message) else {
            log("ignored invite from \(message.senderId): no mode in '\(message.message)'")
            decided(message, .unreadable)
            return
        }
        guard policy.accepts(message) else {
            log("refused invite from \(message.senderId) to \(mode.rawValue)")
            decided(message, .refused(mode))
            return
        }
        log("accepting invite from \(message.senderId) to \(mode.rawValue)")
        decided(message, .accepted(mode))
        answers.enqueue { [log] in
            do {
                try await room.changeMode(mode)
                log("changed own mode to \(mode.rawValue)")
            } catch {
                log("changeMode(\(mode.rawValue)) after an invite failed: \(error)")
            }
        }
    }

    /// The mode named by the message text, or by a `mode` field / string in its JSON payload.
    public static func requestedMode(_ message: PubSubMessage) -> Mode? {
        let text = message.message.trimmingCharacters(in: .whitespacesAndNewlines)
        if let m = Mode(rawValue: text) { return m }
        guard let json = message.payloadJSON, let data = json.data(using: .utf8),
            let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        else { return nil }
        if let s = value as? String { return Mode(rawValue: s) }
        if let d = value as? [String: Any], let s = d["mode"] as? String { return Mode(rawValue: s) }
        return nil
    }
}
