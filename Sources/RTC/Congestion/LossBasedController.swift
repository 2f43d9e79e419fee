import Foundation

/// GCC's loss-based control, on the losses transport-cc feedback reports (or a receiver report's
/// fraction lost): below 2 % the rate grows 8 % per second, from 2 to 10 % it holds, above 10 % it
/// drops by half the loss fraction (at most once per 300 ms + RTT, so one burst is one cut).
///
/// Losses are judged over at least ``minimumPackets`` packets, so that one lost packet of a quiet
/// stream is not a 50 % loss, and over at least ``windowMicros``, as libwebrtc judges a receiver
/// report's fraction lost (about one a second): a tail-drop queue (`tbf`) loses a burst of a key
/// frame at once, and judged per feedback message (every 50–100 ms) that burst alone read as 30–50 %
/// loss and cut the rate again and again on a link with 1 % loss.
struct LossBasedController {
    static let minimumPackets = 20
    static let windowMicros: Int64 = 1_000_000
    static let lowLoss = 0.02
    static let highLoss = 0.10
    static let increasePerSecond = 1.08

    private(set) var bitrate: Double
    /// The loss fraction of the last judged window, 0…1.
    private(set) var lossFraction = 0.0
    /// True when the last judged window decreased the rate.
    private(set) var decreased = false
    /// True once losses cut the rate.
    private(set) var hasDecreased = false
    let minBitrate: Double
    let maxBitrate: Double
    var rttMs = 200.0
    private var window = LossWindow(minimumPackets: LossBasedController.minimumPackets, micros: windowMicros)
    private var lastIncrease: Int64?
    private var lastDecrease: Int64?

    init(startBitrate: Int, minBitrate: Int, maxBitrate: Int) {
        bitrate = Double(startBitrate)
        self.minBitrate = Double(minBitrate)
        self.maxBitrate = Double(maxBitrate)
    }

    /// Takes the counts of one feedback message. Returns the rate.
    @discardableResult
    mutating func update(received newlyReceived: Int, lost newlyLost: Int, nowMicros: Int64) -> Double {
        decreased = false
        guard let fraction = window.add(received: newlyReceived, lost: newlyLost, nowMicros: nowMicros) else {
            return bitrate
        }
        lossFraction = fraction
        if lossFraction < Self.lowLoss {
            let dt = min(Double(nowMicros - (lastIncrease ?? nowMicros)) / 1e6, 1.0)
            bitrate = bitrate * pow(Self.increasePerSecond, dt) + 1_000 * dt
            lastIncrease = nowMicros
        } else if lossFraction > Self.highLoss {
            lastIncrease = nowMicros
            let interval = Int64((300 + rttMs) * 1000)
            if lastDecrease.map({ nowMicros - $0 >= interval }) ?? true {
                bitrate *= 1 - 0.5 * lossFraction
                lastDecrease = nowMicros
                decreased = true
                hasDecreased = true
            }
        } else {
            lastIncrease = nowMicros
        }
        bitrate = min(max(bitrate, minBitrate), maxBitrate)
        return bitrate
    }

    /// Keeps the loss-based rate within `ceiling` (the delay-based rate), so that it grows from
    /// what is actually sent rather than running far ahead on a loss-free path.
    mutating func cap(at ceiling: Double) { bitrate = max(min(bitrate, ceiling), minBitrate) }

    /// Sets the rate from outside (a cut after feedback stopped).
    mutating func set(_ value: Double) { bitrate = min(max(value, minBitrate), maxBitrate) }

    /// The rate was cut for the losses seen so far (an overload): they are accounted for, and the
    /// window starts again, so that they do not cut the rate a second time once the sender has
    /// dropped to what fits.
    mutating func restartWindow(nowMicros: Int64) {
        window.restart(nowMicros: nowMicros)
        lastDecrease = nowMicros
        hasDecreased = true
    }

    /// The path carried `carried` bits/s while the last judged window lost little: the rate is at
    /// least that (see ``AIMDRateController/raise(toCarried:)``).
    mutating func raise(toCarried carried: Double) {
        guard lossFraction < Self.lowLoss, carried > bitrate else { return }
        bitrate = min(carried, maxBitrate)
    }
}
