import Foundation

/// Runs blocking socket work (a connect and handshake, one HTTP exchange) on a short-lived thread of
/// its own and returns its result, so that it never holds a thread of Swift's cooperative pool.
func onOwnThread<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { cont in
        let thread = Thread {
            do throws(E) {
                cont.resume(returning: .success(try body()))
            } catch {
                cont.resume(returning: .failure(error))
            }
        }
        thread.start()
    }
    return try result.get()
}
