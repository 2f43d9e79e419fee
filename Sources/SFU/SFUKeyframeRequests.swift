/// The key-frame requests one producer sends its publisher, per simulcast layer (after mediasoup's
/// `KeyFrameRequestManager`).
///
/// - ``request(layer:now:)``: a consumer needs a key frame (it starts, switches layers, or its
///   subscriber sent a PLI/FIR). A PLI goes out at most once per `interval` per layer (the
///   publisher is never flooded, whatever the audience); the request stays *pending*.
/// - While a request is pending, ``retryDue(now:)`` names a layer whose PLI (or whose key frame)
///   was lost, once `interval` has passed: nobody has to ask again (up to ``maxRetries`` times).
/// - ``keyframeArrived(layer:)`` clears the pending request: no more retries.
///
/// Loop-thread confined, no allocation after init; the owner sends the PLIs.
struct SFUKeyframeRequests {
    private struct Layer {
        var pending = false
        var hasSent = false
        var lastSent: UInt64 = 0
        var retriesLeft = 0
    }

    /// Retries of one request before it is dropped (a layer the publisher stopped sending must not
    /// draw PLIs forever); the next consumer request starts a new one.
    static let maxRetries = 10

    let interval: UInt64
    private var layers: [Layer]
    private var pendingCount = 0
    /// PLIs decided (first requests and retries).
    private(set) var sent: UInt64 = 0
    /// Requests absorbed by a recent PLI for the same layer.
    private(set) var absorbed: UInt64 = 0
    /// Retries decided because no key frame followed a PLI within `interval`.
    private(set) var retries: UInt64 = 0

    init(layers: Int, interval: UInt64) {
        self.interval = interval
        self.layers = Array(repeating: Layer(), count: max(1, layers))
    }

    /// Whether any layer waits for a key frame (cheap enough for every packet).
    var hasPending: Bool { pendingCount > 0 }

    /// Whether `layer` waits for a key frame.
    func isPending(_ layer: Int) -> Bool { layers.indices.contains(layer) && layers[layer].pending }

    /// Notes a need for a key frame on `layer`; returns true when a PLI should go out now.
    mutating func request(layer: Int, now: UInt64) -> Bool {
        guard layers.indices.contains(layer) else { return false }
        if !layers[layer].pending {
            layers[layer].pending = true
            pendingCount += 1
        }
        layers[layer].retriesLeft = Self.maxRetries
        if layers[layer].hasSent, now &- layers[layer].lastSent < interval {
            absorbed &+= 1
            return false
        }
        markSent(layer, now: now)
        return true
    }

    /// A layer whose pending request had no key frame within `interval` (its PLI is sent again now),
    /// or nil.
    mutating func retryDue(now: UInt64) -> Int? {
        guard pendingCount > 0 else { return nil }
        for i in layers.indices where layers[i].pending && now &- layers[i].lastSent >= interval {
            guard layers[i].retriesLeft > 0 else {
                clear(i)
                continue
            }
            layers[i].retriesLeft -= 1
            retries &+= 1
            markSent(i, now: now)
            return i
        }
        return nil
    }

    /// A PLI for pending `layer` goes out now outside the schedule (its first one had nowhere to go).
    mutating func resent(layer: Int, now: UInt64) {
        guard layers.indices.contains(layer), layers[layer].pending else { return }
        markSent(layer, now: now)
    }

    /// A key frame of `layer` arrived: its request is answered.
    mutating func keyframeArrived(layer: Int) {
        guard layers.indices.contains(layer) else { return }
        clear(layer)
    }

    private mutating func clear(_ layer: Int) {
        guard layers[layer].pending else { return }
        layers[layer].pending = false
        pendingCount -= 1
    }

    private mutating func markSent(_ layer: Int, now: UInt64) {
        layers[layer].hasSent = true
        layers[layer].lastSent = now
        sent &+= 1
    }
}
