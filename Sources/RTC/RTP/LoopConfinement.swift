/// What the RTP engine's objects check their thread against: their transport's event loop.
///
/// A protocol rather than `EventLoop` itself so that `RTC/RTP` stays free of the I/O layer (the
/// fuzz build compiles it alone). The check runs in debug builds only: release builds compile the
/// call sites (``RTPSender``, ``RTPReceiver``) to nothing.
public protocol LoopConfinement: AnyObject, Sendable {
    /// Stops the process when the caller is not on the loop's thread.
    func preconditionInLoop(file: StaticString, line: UInt)
}
