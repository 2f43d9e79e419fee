import Glibc

// Glibc's Swift module leaves out the GNU `pthread_setname_np` (it needs _GNU_SOURCE); bound here
// directly, like the declarations in SystemCalls.swift (integer and pointer arguments only).
@_silgen_name("pthread_setname_np")
private func sys_pthread_setname_np(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32

/// Names the calling thread (Linux keeps at most 15 bytes), so per-thread CPU in
/// `/proc/PID/task/*/comm`, `perf` and `top -H` tells the event loops apart.
func nameCurrentThread(_ name: String) {
    var bytes = Array(name.utf8.prefix(15)).map { CChar(bitPattern: $0) }
    bytes.append(0)
    _ = sys_pthread_setname_np(pthread_self(), bytes)
}

@_silgen_name("pthread_getname_np")
private func sys_pthread_getname_np(_ thread: pthread_t, _ name: UnsafeMutablePointer<CChar>, _ length: Int) -> Int32

/// The calling thread's name (for messages about the thread a call ran on).
func currentThreadName() -> String {
    var bytes = [CChar](repeating: 0, count: 16)
    guard sys_pthread_getname_np(pthread_self(), &bytes, bytes.count) == 0 else { return "?" }
    return String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
