import Foundation
import RTCWire

/// Counts of received video and audio frames and the renegotiations asked for, filled from a loop
/// thread and read by the test.
public final class SFUFrameLog: @unchecked Sendable {
    private let lock = NSLock()
    private var video = 0
    private var audio = 0
    private var renegotiations: [String] = []
    public init() {}
    public func add(_ kind: MediaKind) { lock.withLock { if kind == .video { video += 1 } else { audio += 1 } } }
    public func renegotiate(_ id: String) { lock.withLock { renegotiations.append(id) } }
    public var videoFrames: Int { lock.withLock { video } }
    public var audioFrames: Int { lock.withLock { audio } }
    public var renegotiationRequests: [String] { lock.withLock { renegotiations } }
}
