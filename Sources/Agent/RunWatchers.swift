/// The tasks that end an agent's `run(duration:until:)` (``RoomAgent``, ``JanusAgent``): one sleeps
/// `duration` seconds, one awaits `stopEvent`; whichever finishes first calls `stop`. Each wakes the
/// run itself, nothing is polled; cancel them once the run is over.
func runWatchers(
    duration: Double?, until stopEvent: (@Sendable () async -> Void)?, stop: @escaping @Sendable () -> Void
) -> [Task<Void, Never>] {
    var tasks: [Task<Void, Never>] = []
    if let duration {
        tasks.append(
            Task {
                try? await Task.sleep(nanoseconds: UInt64(max(0, duration) * 1e9))
                if !Task.isCancelled { stop() }
            })
    }
    if let stopEvent {
        tasks.append(
            Task {
                await stopEvent()
                if !Task.isCancelled { stop() }
            })
    }
    return tasks
}
