import Glibc

// Glibc's Swift module does not export <sys/epoll.h> or <sys/eventfd.h>; these bind the libc symbols
// directly (integer and pointer arguments only, so the C calling convention matches). RTC has its
// own private copy; Signaling must not depend on RTC.

@_silgen_name("epoll_create1")
func sig_epoll_create1(_ flags: Int32) -> Int32

@_silgen_name("epoll_ctl")
func sig_epoll_ctl(_ epfd: Int32, _ op: Int32, _ fd: Int32, _ event: UnsafeMutableRawPointer?) -> Int32

@_silgen_name("epoll_wait")
func sig_epoll_wait(_ epfd: Int32, _ events: UnsafeMutableRawPointer, _ maxEvents: Int32, _ timeout: Int32) -> Int32

@_silgen_name("eventfd")
func sig_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

enum EpollConstants {
    static let cloexec: Int32 = 0o2_000_000
    static let input: UInt32 = 0x001
    static let output: UInt32 = 0x004
    static let error: UInt32 = 0x008
    static let hangup: UInt32 = 0x010
    static let readHangup: UInt32 = 0x2000
    static let ctlAdd: Int32 = 1
    static let ctlDel: Int32 = 2
    static let ctlMod: Int32 = 3
    static let eventfdNonblock: Int32 = 0o4000
}

/// `struct epoll_event`: packed (12 bytes) on x86_64, naturally aligned (16 bytes) elsewhere.
enum EpollEventLayout {
    #if arch(x86_64)
        static let size = 12
        static let dataOffset = 4
    #else
        static let size = 16
        static let dataOffset = 8
    #endif
}

/// Puts a descriptor into non-blocking mode and disables Nagle (signalling messages are small
/// and latency-sensitive).
func configureStreamSocket(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL, 0)
    _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}
