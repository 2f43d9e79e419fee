/// Which packet indices of one stream were already accepted (RFC 3711 §3.3.2): the `size` indices
/// at and below the highest one seen, as a ring of bits (index `i` is bit `i % size`), so that the
/// usual step of one index clears one bit instead of shifting the whole map. `RTPReceiver` uses
/// the same window to spot duplicate packets.
final class SRTPReplayWindow {
    /// What a packet's index means for the window.
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
    let size: Int
    private let words: UnsafeMutablePointer<UInt64>
    private let wordCount: Int
    /// `size - 1`: a power-of-two size makes a packet's bit a mask, not a division.
    private let positionMask: UInt64

    init(size: Int) {
        precondition(size >= 64 && size & (size - 1) == 0, "replay window must be a power of two of at least 64")
        self.size = size
        wordCount = size / 64
        positionMask = UInt64(size - 1)
        // Cache-line aligned: a 1024-bit window is exactly two lines.
        words = UnsafeMutableRawPointer.allocate(byteCount: wordCount * 8, alignment: 64)
            .bindMemory(to: UInt64.self, capacity: wordCount)
        words.initialize(repeating: 0, count: wordCount)
    }

    /// A window of at least `count` indices (at least 64), rounded up to a power of two.
    convenience init(covering count: Int) {
        self.init(size: max(64, 1 << (Int.bitWidth - (max(count, 2) - 1).leadingZeroBitCount)))
    }

    deinit { words.deallocate() }

    func check(_ index: UInt64) -> Verdict {
        guard !isEmpty, index <= highest else { return .fresh }
        guard highest - index < UInt64(size) else { return .tooOld }
        return isSet(index) ? .replayed : .fresh
    }

    /// Marks `index` as accepted, moving the window forward when it is the new highest.
    func accept(_ index: UInt64) {
        if isEmpty {
            isEmpty = false
            highest = index
        } else if index > highest {
            let distance = index - highest
            if distance >= UInt64(size) {
                words.update(repeating: 0, count: wordCount)
            } else {
                // The indices the window now covers anew must start unseen.
                var next = highest &+ 1
                while next < index {
                    clear(next)
                    next &+= 1
                }
            }
            highest = index
        } else if highest - index >= UInt64(size) {
            return
        }
        set(index)
    }

    private func bit(_ index: UInt64) -> (word: Int, mask: UInt64) {
        let position = Int(index & positionMask)
        return (position >> 6, 1 << UInt64(position & 63))
    }
    private func isSet(_ index: UInt64) -> Bool {
        let (word, mask) = bit(index)
        return words[word] & mask != 0
    }
    private func set(_ index: UInt64) {
        let (word, mask) = bit(index)
        words[word] |= mask
    }
    private func clear(_ index: UInt64) {
        let (word, mask) = bit(index)
        words[word] &= ~mask
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
