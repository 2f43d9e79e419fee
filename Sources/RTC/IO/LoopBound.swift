/// A value that may only be touched on its ``EventLoop`` (or once that loop has finished, see
/// ``EventLoop/isConfinedHere``), as swift-nio's `NIOLoopBound`.
///
/// It is `Sendable` because every access checks where it runs: a closure may carry one to another
/// thread, but reading or writing it there stops the process with a clear message instead of racing.
/// Creating one is allowed anywhere (the value is not shared yet); every later access checks, in
/// every build, so keep it off the packet path.
// Safe: every access checks the loop (preconditionInLoop), in every build.
public final class LoopBound<Value>: @unchecked Sendable {
    /// The loop the value belongs to.
    public let loop: EventLoop
    private var stored: Value

    /// Binds `value` to `loop`.
    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        self.stored = value
    }

    /// The value; only on ``loop``.
    public var value: Value {
        get {
            loop.preconditionInLoop()
            return stored
        }
        set {
            loop.preconditionInLoop()
            stored = newValue
        }
    }
}
