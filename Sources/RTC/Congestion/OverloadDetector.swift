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
/// (the losses come from a queue that filled, not from a lossy link); one burst fills one window,
/// not two. It clears on the first
/// window that loses less than ``LossBasedController/highLoss`` once ``holdMicros`` have passed.
/// Allocation-free.
struct OverloadDetector {
    static let windowMicros: Int64 = 100_000
    static let minimumPackets = 10
    static let heavyLoss = 0.25
    static let heavyWindows = 2
    /// A window that lost this share alone is overload (with the overuse): a burst into a full
    /// tail-drop queue loses that much only when the rest of the window is small, and a path
    /// that fell to half of what is sent or less loses it in every window.
    static let severeLoss = 0.5
    static let overuseMemoryMicros: Int64 = 1_000_000
    /// Overload holds at least this long after the last overloaded window: the allocator must see it
    /// (it runs at most every 100 ms), and a tail-drop queue's losses come in bursts, so one window
    /// that lost little while the path is still overloaded must not clear it.
    static let holdMicros: Int64 = 500_000

    /// Whether the path is overloaded now.
    private(set) var overloaded = false
    /// The loss fraction of the last judged window, 0…1.
    private(set) var windowLoss = 0.0
    private var received = 0
    private var lost = 0
    private var windowStart: Int64?
    private var heavyInARow = 0
    private var lastOveruse: Int64?
    private var lastOverloaded: Int64 = 0

    init() {}

    /// Takes one feedback message's counts, and whether the delay detector saw overuse in it.
    /// Returns true when a window closed overloaded (each one after the first two in a row, too).
    mutating func update(received newlyReceived: Int, lost newlyLost: Int, overuse: Bool, nowMicros: Int64) -> Bool {
        if overuse { lastOveruse = nowMicros }
        received += newlyReceived
        lost += newlyLost
        let start = windowStart ?? nowMicros
        windowStart = start
        guard received + lost >= Self.minimumPackets, nowMicros - start >= Self.windowMicros else { return false }
        windowLoss = Double(lost) / Double(received + lost)
        received = 0
        lost = 0
        windowStart = nowMicros
        heavyInARow = windowLoss >= Self.heavyLoss ? heavyInARow + 1 : 0
        if windowLoss < LossBasedController.highLoss, nowMicros - lastOverloaded >= Self.holdMicros {
            overloaded = false
        }
        guard heavyInARow >= Self.heavyWindows || windowLoss >= Self.severeLoss, let seen = lastOveruse,
            nowMicros - seen <= Self.overuseMemoryMicros
        else { return false }
        overloaded = true
        lastOverloaded = nowMicros
        return true
    }
}
