/// What the RTP engine's objects check their thread against: their transport's event loop.
///
/// A protocol rather than `EventLoop` itself so that `RTC/RTP` stays free of the I/O layer (the
/// fuzz build compiles it alone). The check runs in debug builds only: release builds compile the
/// call sites (``RTPSender``, ``RTPReceiver``) to nothing.
public protocol LoopConfinement: AnyObject, Sendable {
    /// Stops the process when the caller is not on the loop's thread.
    func preconditionInLoop(file: StaticString, line: UInt)
}

/// An object of the RTP engine confined to its transport's loop once one owns it (``RTPSender``,
/// ``RTPReceiver``): its entry points call ``assertInLoop(file:line:)``.
protocol LoopConfined: AnyObject {
    /// The loop to check against; nil while the object is used alone (unit tests).
    var loop: (any LoopConfinement)? { get }
}

extension LoopConfined {
    /// Debug builds: stops the process when called off ``loop``; release builds: nothing.
    @inline(__always) func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
            loop?.preconditionInLoop(file: file, line: line)
        #endif
    }
}
