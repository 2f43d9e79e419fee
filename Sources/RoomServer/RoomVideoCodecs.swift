import RTCWire

/// The video codecs every receiver in a room accepts (`roomVideoCodecs`, docs/protocol.md "Video
/// codecs a room accepts"): counts per codec over the room's receivers, so a join or leave costs
/// O(1) however large the room.
///
/// A receiver is a participant outside `SIGNALLING_ONLY` (one that may get media), publishers
/// included: they receive the others. A join that declares no `videoCodecs` counts as VP8 only,
/// the one video codec every client of this protocol decoded before the declaration existed.
struct RoomVideoCodecs: Sendable, Equatable {
    /// Receivers counted.
    private(set) var receivers = 0
    private var counts = [Int](repeating: 0, count: MediaCodec.videoCodecs.count)

    /// An empty room (which accepts every codec: nobody refuses one).
    init() {}

    /// A receiver that accepts `codecs` came (joined, or left `SIGNALLING_ONLY`).
    mutating func add(_ codecs: [MediaCodec]) { change(codecs, by: 1) }

    /// A receiver that accepted `codecs` went (left, or went to `SIGNALLING_ONLY`).
    mutating func remove(_ codecs: [MediaCodec]) { change(codecs, by: -1) }

    /// The codecs every receiver accepts, in ``MediaCodec/videoCodecs`` order; all of them when
    /// the room has no receiver.
    var accepted: [MediaCodec] {
        zip(MediaCodec.videoCodecs, counts).compactMap { $0.1 == receivers ? $0.0 : nil }
    }

    private mutating func change(_ codecs: [MediaCodec], by delta: Int) {
        receivers += delta
        for codec in codecs {
            if let i = MediaCodec.videoCodecs.firstIndex(of: codec) { counts[i] += delta }
        }
    }
}
