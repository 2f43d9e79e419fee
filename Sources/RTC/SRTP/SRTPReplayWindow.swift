/// Which packet indices of one stream were already accepted (RFC 3711 §3.3.2): a bitmap of the
/// `size` indices at and below the highest one seen.
struct SRTPReplayWindow {
    /// Why an index is refused.
    enum Verdict: Equatable {
        /// Not seen yet and inside (or ahead of) the window.
        case fresh
        /// Accepted before.
        case replayed
        /// Older than the window: it can no longer be told apart from a replay.
        case tooOld
    }

    /// The highest index accepted so far; meaningless while `isEmpty`.
    private(set) var highest: UInt64 = 0
    private(set) var isEmpty = true
    /// Bit k of the bitmap stands for index `highest - k`.
    private var words: [UInt64]
    let size: Int

    init(size: Int) {
        precondition(size > 0 && size % 64 == 0, "replay window must be a positive multiple of 64")
        self.size = size
        words = [UInt64](repeating: 0, count: size / 64)
    }

    func check(_ index: UInt64) -> Verdict {
        guard !isEmpty, index <= highest else { return .fresh }
        let age = highest - index
        guard age < UInt64(size) else { return .tooOld }
        let bit = Int(age)
        return words[bit >> 6] & (1 << UInt64(bit & 63)) != 0 ? .replayed : .fresh
    }

    /// Marks `index` as accepted, sliding the window when it is the new highest.
    mutating func accept(_ index: UInt64) {
        if isEmpty {
            isEmpty = false
            highest = index
            words[0] = 1
            return
        }
        if index > highest {
            shift(by: index - highest)
            highest = index
            words[0] |= 1
        } else {
            let age = highest - index
            guard age < UInt64(size) else { return }
            let bit = Int(age)
            words[bit >> 6] |= 1 << UInt64(bit & 63)
        }
    }

    /// Moves every bit `distance` places towards older indices.
    private mutating func shift(by distance: UInt64) {
        guard distance < UInt64(size) else {
            for i in words.indices { words[i] = 0 }
            return
        }
        let wordShift = Int(distance) >> 6
        let bitShift = UInt64(distance) & 63
        for i in stride(from: words.count - 1, through: 0, by: -1) {
            let source = i - wordShift
            var value: UInt64 = 0
            if source >= 0 {
                value = words[source] << bitShift
                if bitShift > 0 && source > 0 { value |= words[source - 1] >> (64 - bitShift) }
            }
            words[i] = value
        }
    }
}

/// The RTP packet index estimate of RFC 3711 Appendix A: a 48-bit index (rollover counter and
/// sequence number) for a 16-bit sequence number, given the highest index seen. While that index
/// is still in the first half of the first cycle there is no earlier cycle to fall back to, so the
/// number is taken as it is (libsrtp does the same).
func estimateSRTPIndex(sequence: UInt16, highest: UInt64) -> UInt64 {
    guard highest > 0x8000 else { return UInt64(sequence) }
    let roc = highest >> 16
    let last = UInt16(truncatingIfNeeded: highest)
    var guessROC = roc
    if last < 0x8000 {
        if sequence > last && sequence - last > 0x8000 { guessROC = roc - 1 }  // roc ≥ 1 here
    } else if last - 0x8000 > sequence {
        guessROC = (roc + 1) & 0xFFFF_FFFF
    }
    return guessROC << 16 | UInt64(sequence)
}
