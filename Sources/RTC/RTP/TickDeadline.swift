/// When a transport's timers next have work (loop clock, nanoseconds), shared by the transport and
/// what it owns (its ICE agent and receive streams).
///
/// The transport runs its timers only once the loop clock reaches ``at``, and then sets it from
/// every part's next timer. Whatever makes a timer due sooner between two runs lowers it: a receive
/// stream's first packet, a hole or a key-frame request, ICE or signalling input. A connection with
/// nothing due then costs its loop one comparison per 10 ms tick instead of a visit to each of its
/// streams (with hundreds of connections per loop, that visit was a fixed cost per tick).
///
/// Loop-thread confined, like its owner.
final class TickDeadline {
    /// The loop time from which the timers must run (0: at the next tick).
    var at: UInt64 = 0

    /// Makes the timers run no later than `time`.
    @inline(__always)
    func lower(to time: UInt64) {
        if time < at { at = time }
    }

    /// Makes the timers run at the next tick.
    @inline(__always)
    func wake() { at = 0 }
}
