/// Packets received and lost, judged as a loss fraction once a window holds enough of both: at least
/// `minimumPackets` packets and `micros` of time. ``LossBasedController`` judges a second at a time,
/// ``OverloadDetector`` a tenth of one. Allocation-free.
struct LossWindow {
    let minimumPackets: Int
    let micros: Int64
    private var received = 0
    private var lost = 0
    private var start: Int64?

    init(minimumPackets: Int, micros: Int64) {
        self.minimumPackets = minimumPackets
        self.micros = micros
    }

    /// Adds one feedback message's counts. Returns the window's loss fraction (0…1) when it closes,
    /// and a new window starts at `nowMicros`; nil while it is still open.
    mutating func add(received newlyReceived: Int, lost newlyLost: Int, nowMicros: Int64) -> Double? {
        received += newlyReceived
        lost += newlyLost
        let began = start ?? nowMicros
        start = began
        guard received + lost >= minimumPackets, nowMicros - began >= micros else { return nil }
        let fraction = Double(lost) / Double(received + lost)
        restart(nowMicros: nowMicros)
        return fraction
    }

    /// Forgets the counts so far; a new window starts at `nowMicros`.
    mutating func restart(nowMicros: Int64) {
        received = 0
        lost = 0
        start = nowMicros
    }
}
