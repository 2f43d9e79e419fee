import Glibc

// Swift's Glibc module does not export <sys/epoll.h>, <sys/eventfd.h> or the GNU `recvmmsg` and
// `sendmmsg`, and Package.swift has no shim module for them yet. These declarations bind the libc
// symbols directly; every argument is an integer or a pointer, whose calling convention Swift and
// C share. A `CModules/CSystem` shim header would replace this file.
//
// This is the one home of these bindings: `RTC` (media sockets) and `Signaling` (the reactor) both
// use them, and Signaling must not depend on RTC, so they sit in a module below both.

/// `epoll_create1(2)`.
@_silgen_name("epoll_create1")
public func sys_epoll_create1(_ flags: Int32) -> Int32

/// `epoll_ctl(2)`; `event` points at an `epoll_event` laid out as ``EpollEvent`` describes.
@_silgen_name("epoll_ctl")
public func sys_epoll_ctl(_ epfd: Int32, _ op: Int32, _ fd: Int32, _ event: UnsafeMutableRawPointer?) -> Int32

/// `epoll_wait(2)`; `events` holds `maxEvents` entries of ``EpollEvent/size`` bytes.
@_silgen_name("epoll_wait")
public func sys_epoll_wait(
    _ epfd: Int32, _ events: UnsafeMutableRawPointer, _ maxEvents: Int32, _ timeout: Int32
) -> Int32

/// `eventfd(2)`.
@_silgen_name("eventfd")
public func sys_eventfd(_ initval: UInt32, _ flags: Int32) -> Int32

/// `recvmmsg(2)`; `vector` is an array of ``MMsgHdr``.
@_silgen_name("recvmmsg")
public func sys_recvmmsg(
    _ fd: Int32, _ vector: UnsafeMutableRawPointer, _ count: UInt32, _ flags: Int32,
    _ timeout: UnsafeMutableRawPointer?
) -> Int32

/// `sendmmsg(2)`; `vector` is an array of ``MMsgHdr``.
@_silgen_name("sendmmsg")
public func sys_sendmmsg(_ fd: Int32, _ vector: UnsafeMutableRawPointer, _ count: UInt32, _ flags: Int32) -> Int32

/// `accept4(2)`.
@_silgen_name("accept4")
public func sys_accept4(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?,
    _ flags: Int32
) -> Int32

/// The Linux constants of the calls above (not exported by Swift's Glibc module either); inlinable,
/// so that the event loops' checks stay constants across the module boundary.
public enum SystemConstants {
    @inlinable public static var epollCloexec: Int32 { 0o2_000_000 }
    @inlinable public static var epollIn: UInt32 { 0x001 }
    @inlinable public static var epollOut: UInt32 { 0x004 }
    @inlinable public static var epollErr: UInt32 { 0x008 }
    @inlinable public static var epollHup: UInt32 { 0x010 }
    /// `EPOLLRDHUP`: the peer closed its writing side.
    @inlinable public static var epollReadHangup: UInt32 { 0x2000 }
    @inlinable public static var epollCtlMod: Int32 { 3 }
    @inlinable public static var epollCtlAdd: Int32 { 1 }
    @inlinable public static var epollCtlDel: Int32 { 2 }
    @inlinable public static var eventfdNonblock: Int32 { 0o4000 }
    @inlinable public static var eventfdCloexec: Int32 { 0o2_000_000 }
}

/// `struct epoll_event`: packed (12 bytes) on x86_64, naturally aligned (16 bytes) elsewhere.
public enum EpollEvent {
    #if arch(x86_64)
        @inlinable public static var size: Int { 12 }
        @inlinable public static var dataOffset: Int { 4 }
    #else
        @inlinable public static var size: Int { 16 }
        @inlinable public static var dataOffset: Int { 8 }
    #endif

    /// Writes one event (mask and user data) at `base`.
    @inlinable
    public static func write(_ base: UnsafeMutableRawPointer, events: UInt32, data: UInt64) {
        base.storeBytes(of: events, as: UInt32.self)
        base.storeBytes(of: data, toByteOffset: dataOffset, as: UInt64.self)
    }

    /// The event mask of entry `index` in an array filled by ``sys_epoll_wait(_:_:_:_:)``.
    @inlinable
    public static func events(_ base: UnsafeRawPointer, index: Int) -> UInt32 {
        base.loadUnaligned(fromByteOffset: index * size, as: UInt32.self)
    }

    /// The user data of entry `index` in an array filled by ``sys_epoll_wait(_:_:_:_:)``.
    @inlinable
    public static func data(_ base: UnsafeRawPointer, index: Int) -> UInt64 {
        base.loadUnaligned(fromByteOffset: index * size + dataOffset, as: UInt64.self)
    }
}

/// `struct mmsghdr`: a `msghdr` followed by the datagram length (64 bytes on LP64).
public struct MMsgHdr {
    public var msg_hdr: msghdr
    public var msg_len: UInt32

    /// An empty header (all zero).
    @inlinable
    public init() {
        msg_hdr = msghdr()
        msg_len = 0
    }
}

/// Writes `bytes` from `offset` on to the non-blocking stream socket `fd` as far as its send buffer
/// takes them now, advancing `offset` (`send(2)` with `MSG_NOSIGNAL`, retried on `EINTR`; a full
/// buffer ends it). Returns the `errno` of a failed send (the connection is broken), else nil.
/// The one send loop of the TCP media connections (`RTC`) and the signalling channels (`Signaling`).
public func sendAvailable(fd: Int32, _ bytes: UnsafeRawBufferPointer, offset: inout Int) -> Int32? {
    while offset < bytes.count {
        let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
        if n > 0 {
            offset += n
        } else if n < 0 && errno == EINTR {
            continue
        } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
            return nil
        } else {
            return errno
        }
    }
    return nil
}
