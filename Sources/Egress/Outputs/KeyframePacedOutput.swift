/// An output that wants the composite's video encoder to make a keyframe at least every so often: HLS cuts
/// segments only at keyframes, and an RTMP output restarts (after a reconnect or a dropped GOP) only at one.
/// A composite with several such outputs uses the smallest interval.
public protocol KeyframePacedOutput: CompositeOutput {
    /// The longest gap between video keyframes this output works well with, in seconds (infinity: no wish).
    var keyframeIntervalSeconds: Double { get }
}
