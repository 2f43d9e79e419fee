/// Sustained heavy loss on a full queue, judged over short windows: the path carries far less than
/// is sent, now, and the acknowledged rate is what it carries (issue 33).
///
/// GCC's own signals are slow for this: the loss-based controller judges a second at a time (so
/// that one key frame's burst into a tail-drop queue is not a 40 % loss), and a delay-based decrease
/// goes to 0.85 × a half-second acknowledged rate that still holds the rate before the drop. A
/// viewer whose path fell to a third of what the SFU sent needed about a second and several
/// decreases before the allocator moved to a layer that fits, and each intermediate layer's key
/// frame was lost on the way: its video froze for up to 3 s.
///
/// Overload is two short windows in a row that each lost ``heavyLoss`` or more of their packets, or
/// one that lost ``severeLoss``, while the delay detector saw overuse within ``overuseMemoryMicros``
/// (the losses come from a queue that filled, not from a lossy link); or two in a row that lost
/// ``severeLoss``, whatever the delay said. One burst fills one window, not two. It clears on the first
/// window that loses less than ``LossBasedController/highLoss`` once ``holdMicros`` have passed.
/// Allocation-free.
struct OverloadDetector {
    static let windowMicros: Int64 = 100_000
    static let minimumPackets = 10
    static let heavyLoss = 0.25
    static let heavyWindows = 2
    /// A window that lost this share alone is overload (with the overuse), and two in a row are
    /// even without it: a path that fell to 40 % of what is sent loses it in every window, while
    /// on a busy machine the delay detector's threshold may have adapted past what a short queue
    /// adds (a viewer's 92 % loss went unseen for a second), and random loss that heavy twice in a
    /// row is a path that does not carry what is sent either.
    static let severeLoss = 0.6
    static let overuseMemoryMicros: Int64 = 1_000_000
    /// Overload holds at least this long after the last overloaded window: the allocator must see it
    /// (it runs at most every 100 ms), and a tail-drop queue's losses come in bursts, so one window
    /// that lost little while the path is still overloaded must not clear it.
    static let holdMicros: Int64 = 500_000

    /// Whether the path is overloaded now.
    private(set) var overloaded = false
    /// The loss fraction of the last judged window, 0…1.
    private(set) var windowLoss = 0.0
    private var window = LossWindow(minimumPackets: OverloadDetector.minimumPackets, micros: windowMicros)
    private var heavyInARow = 0
    private var severeInARow = 0
    private var lastOveruse: Int64?
    private var lastOverloaded: Int64 = 0

    init() {}

    /// Takes one feedback message's counts, and whether the delay detector saw overuse in it.
    /// Returns true when a window closed overloaded (each one after the first two in a row, too).
    mutating func update(received newlyReceived: Int, lost newlyLost: Int, overuse: Bool, nowMicros: Int64) -> Bool {
        if overuse { lastOveruse = nowMicros }
        guard let fraction = window.add(received: newlyReceived, lost: newlyLost, nowMicros: nowMicros) else {
            return false
        }
        windowLoss = fraction
        heavyInARow = windowLoss >= Self.heavyLoss ? heavyInARow + 1 : 0
        severeInARow = windowLoss >= Self.severeLoss ? severeInARow + 1 : 0
        if windowLoss < LossBasedController.highLoss, nowMicros - lastOverloaded >= Self.holdMicros {
            overloaded = false
        }
        let queued = lastOveruse.map { nowMicros - $0 <= Self.overuseMemoryMicros } ?? false
        guard (queued && (heavyInARow >= Self.heavyWindows || severeInARow > 0)) || severeInARow >= Self.heavyWindows
        else { return false }
        overloaded = true
        lastOverloaded = nowMicros
        return true
    }
}
