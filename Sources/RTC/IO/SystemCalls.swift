import Glibc

// Swift's Glibc module does not export <sys/epoll.h>, <sys/eventfd.h> or the GNU `recvmmsg` and
// `sendmmsg`, and Package.swift has no shim module for them yet. These declarations bind the libc
// symbols directly; every argument is an integer or a pointer, whose calling convention Swift and
// C share. A `CModules/CSystem` shim header would replace this file.

@_silgen_name("epoll_create1")
func sys_epoll_create1(_ flags: Int32) -> Int32

@_silgen_name("epoll_ctl")
func sys_epoll_ctl(_ epfd: Int32, _ op: Int32, _ fd: Int32, _ event: UnsafeMutableRawPointer?) -> Int32

@_silgen_name("epoll_wait")
func sys_epoll_wait(_ epfd: Int32, _ events: UnsafeMutableRawPointer, _ maxEvents: Int32, _ timeout: Int32) -> Int32

@_silgen_name("eventfd")
func sys_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

@_silgen_name("recvmmsg")
func sys_recvmmsg(
    _ fd: Int32, _ vector: UnsafeMutableRawPointer, _ count: UInt32, _ flags: Int32,
    _ timeout: UnsafeMutableRawPointer?
) -> Int32

@_silgen_name("sendmmsg")
func sys_sendmmsg(_ fd: Int32, _ vector: UnsafeMutableRawPointer, _ count: UInt32, _ flags: Int32) -> Int32

@_silgen_name("accept4")
func sys_accept4(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?,
    _ flags: Int32
) -> Int32

enum SystemConstants {
    static let epollCloexec: Int32 = 0o2_000_000
    static let epollIn: UInt32 = 0x001
    static let epollOut: UInt32 = 0x004
    static let epollErr: UInt32 = 0x008
    static let epollHup: UInt32 = 0x010
    static let epollCtlMod: Int32 = 3
    static let epollCtlAdd: Int32 = 1
    static let epollCtlDel: Int32 = 2
    static let eventfdNonblock: Int32 = 0o4000
    static let eventfdCloexec: Int32 = 0o2_000_000
}

/// `struct epoll_event`: packed (12 bytes) on x86_64, naturally aligned (16 bytes) elsewhere.
enum EpollEvent {
    #if arch(x86_64)
        static let size = 12
        static let dataOffset = 4
    #else
        static let size = 16
        static let dataOffset = 8
    #endif

    static func write(_ base: UnsafeMutableRawPointer, events: UInt32, data: UInt64) {
        base.storeBytes(of: events, as: UInt32.self)
        base.storeBytes(of: data, toByteOffset: dataOffset, as: UInt64.self)
    }

    static func events(_ base: UnsafeRawPointer, index: Int) -> UInt32 {
        base.loadUnaligned(fromByteOffset: index * size, as: UInt32.self)
    }

    static func data(_ base: UnsafeRawPointer, index: Int) -> UInt64 {
        base.loadUnaligned(fromByteOffset: index * size + dataOffset, as: UInt64.self)
    }
}

/// `struct mmsghdr`: a `msghdr` followed by the datagram length (64 bytes on LP64).
struct MMsgHdr {
    var msg_hdr = msghdr()
    var msg_len: UInt32 = 0
}
