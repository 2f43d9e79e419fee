import Glibc
import SystemCalls

/// What an ``EventLoop`` has sent through its send batch: how many datagrams went out per system
/// call and per message, so that the effect of UDP GSO is visible (see ``EventLoop/sendStatistics()``).
public struct EventLoopSendStatistics: Sendable, Equatable {
    /// `sendmmsg`/`sendmsg`/`sendto` calls made.
    public var systemCalls: UInt64 = 0
    /// Messages the kernel accepted (a GSO message carries several datagrams).
    public var messages: UInt64 = 0
    /// Datagrams the kernel accepted.
    public var datagrams: UInt64 = 0
    /// Accepted messages that carried several datagrams with a `UDP_SEGMENT` control message.
    public var segmentedMessages: UInt64 = 0
    /// Datagrams carried by those messages.
    public var segmentedDatagrams: UInt64 = 0
    /// Sockets on which the kernel refused GSO, which then send one datagram per message.
    public var segmentationRefusals: UInt64 = 0

    public init() {}
}

/// The loop's preallocated send batch, shared by all its sockets (loop thread only).
///
/// Datagrams are copied in by ``enqueue(_:_:to:)`` and go out in ``flush()``, at the end of each
/// loop iteration or when the batch is full. The flush groups them by socket (one `sendmmsg` per
/// socket) and, within a socket, by destination, keeping each destination's order; datagrams to
/// different destinations may be reordered. Each run of equal-sized datagrams to one destination
/// (the last one may be shorter) becomes one message with a `UDP_SEGMENT` control message (UDP
/// GSO): the kernel walks its send and loopback-delivery path once per message, not once per
/// datagram, and the receiver still gets separate datagrams. An SFU fans each packet of a frame out
/// to every consumer, so one receive batch gives each consumer a run of a frame's packets.
final class UDPSendBatch {
    /// Datagrams held per batch: room for the fan-out of several received packets to a hundred
    /// consumers, while the first datagram of a full batch waits only a few milliseconds of
    /// forwarding work. `UNDERSTUDY_UDP_SEND_BATCH=N` (64…16384) sets it, for measurements.
    static let capacity: Int = {
        guard let value = getenv("UNDERSTUDY_UDP_SEND_BATCH"), let n = Int(String(cString: value)) else {
            return 1024
        }
        return min(16384, max(64, n))
    }()
    /// Bytes of datagram data held per batch (datagrams are packed, 16-byte aligned).
    static let dataCapacity = capacity * 1536
    /// Largest datagram the batch takes (larger ones are sent on their own).
    static let maximumDatagram = EventLoop.slotSize
    /// Most datagrams in one GSO message (the kernel's `UDP_MAX_SEGMENTS` is 64 on older kernels).
    static let maximumSegments = 64
    /// Most bytes in one GSO message (an IP packet's 64 KB less headers, with margin).
    static let maximumSegmentedBytes = 65_000

    private static let nameSlot = 32
    /// `CMSG_SPACE(sizeof(uint16_t))` on LP64: a 16-byte `cmsghdr`, the value, padding to 8.
    private static let controlSpace = 24
    private static let controlLength = 18
    private static let solUDP: Int32 = 17
    private static let udpSegment: Int32 = 103
    /// A power of two at least twice the capacity (the open-addressing tables stay half empty).
    private static let tableSize = 1 << (Int.bitWidth - (capacity * 2 - 1).leadingZeroBitCount)

    private(set) var statistics = EventLoopSendStatistics()

    // Queued datagrams, in enqueue order.
    private var count = 0
    private var dataUsed = 0
    private let data: UnsafeMutableRawPointer
    private let offsets: UnsafeMutablePointer<Int32>
    private let lengths: UnsafeMutablePointer<Int32>
    private let names: UnsafeMutableRawPointer
    private let nameLengths: UnsafeMutablePointer<socklen_t>
    private let owners: UnsafeMutablePointer<Unmanaged<UDPSocket>>
    /// The next queued datagram to the same socket and destination (-1: none).
    private let nextToDestination: UnsafeMutablePointer<Int32>

    // Open-addressing tables rebuilt at each flush: (socket, destination) → first/last datagram,
    // and socket → first/last destination (its first datagram), chained through `nextDestination`.
    private let destinationHeads: UnsafeMutablePointer<Int32>
    private let destinationTails: UnsafeMutablePointer<Int32>
    private let socketFirst: UnsafeMutablePointer<Int32>
    private let socketLast: UnsafeMutablePointer<Int32>
    private let nextDestination: UnsafeMutablePointer<Int32>
    private let usedSlots: UnsafeMutablePointer<Int32>
    private let socketOrder: UnsafeMutablePointer<Int32>

    // One socket's messages, built at flush.
    private let messages: UnsafeMutablePointer<MMsgHdr>
    private let messageSegments: UnsafeMutablePointer<Int32>
    private let vectors: UnsafeMutablePointer<iovec>
    private let controls: UnsafeMutableRawPointer

    init() {
        let n = Self.capacity
        data = .allocate(byteCount: Self.dataCapacity, alignment: 16)
        offsets = .allocate(capacity: n)
        lengths = .allocate(capacity: n)
        names = .allocate(byteCount: n * Self.nameSlot, alignment: 8)
        nameLengths = .allocate(capacity: n)
        owners = .allocate(capacity: n)
        nextToDestination = .allocate(capacity: n)
        destinationHeads = .allocate(capacity: Self.tableSize)
        destinationHeads.initialize(repeating: -1, count: Self.tableSize)
        destinationTails = .allocate(capacity: Self.tableSize)
        socketFirst = .allocate(capacity: Self.tableSize)
        socketFirst.initialize(repeating: -1, count: Self.tableSize)
        socketLast = .allocate(capacity: Self.tableSize)
        nextDestination = .allocate(capacity: n)
        usedSlots = .allocate(capacity: 2 * n + 1)
        socketOrder = .allocate(capacity: n)
        messages = .allocate(capacity: n)
        messageSegments = .allocate(capacity: n)
        vectors = .allocate(capacity: n)
        controls = .allocate(byteCount: n * Self.controlSpace, alignment: 8)
    }

    deinit {
        data.deallocate()
        offsets.deallocate()
        lengths.deallocate()
        names.deallocate()
        nameLengths.deallocate()
        owners.deallocate()
        nextToDestination.deallocate()
        destinationHeads.deallocate()
        destinationTails.deallocate()
        socketFirst.deallocate()
        socketLast.deallocate()
        nextDestination.deallocate()
        usedSlots.deallocate()
        socketOrder.deallocate()
        messages.deallocate()
        messageSegments.deallocate()
        vectors.deallocate()
        controls.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    /// Whether UDP GSO is on for new sockets: on unless `UNDERSTUDY_UDP_GSO=0` (for A/B runs).
    static let segmentationAllowed: Bool = {
        guard let value = getenv("UNDERSTUDY_UDP_GSO") else { return true }
        return String(cString: value) != "0"
    }()

    /// Whether the kernel knows `UDP_SEGMENT` for `fd` (Linux 4.18 and later). An older kernel
    /// would ignore the control message and send one large datagram, so it is probed, not assumed.
    static func kernelSupportsSegmentation(fd: Int32) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, solUDP, udpSegment, &value, &length) == 0
    }

    /// Copies a datagram into the batch (flushing first when it is full). Loop thread only.
    @inline(__always)
    func enqueue(_ udp: UDPSocket, _ bytes: UnsafeRawBufferPointer, to address: SocketAddress) {
        if bytes.count > Self.maximumDatagram {
            // Rare (oversized) datagrams skip the batch; those queued before them go first.
            flush()
            let sent = address.withSockAddr { sendto(udp.fd, bytes.baseAddress, bytes.count, 0, $0, $1) }
            statistics.systemCalls &+= 1
            if sent >= 0 {
                statistics.messages &+= 1
                statistics.datagrams &+= 1
            }
            udp.recordSend(sent: sent >= 0, bytes: bytes.count)
            return
        }
        let padded = (bytes.count + 15) & ~15
        if count == Self.capacity || dataUsed + padded > Self.dataCapacity { flush() }
        let i = count
        if let base = bytes.baseAddress, bytes.count > 0 {
            (data + dataUsed).copyMemory(from: base, byteCount: bytes.count)
        }
        offsets[i] = Int32(dataUsed)
        lengths[i] = Int32(bytes.count)
        nameLengths[i] = address.copy(to: names + i * Self.nameSlot)
        owners[i] = Unmanaged.passUnretained(udp)
        dataUsed += padded
        count = i + 1
    }

    /// Sends every queued datagram: one `sendmmsg` per socket, one message per run of equal-sized
    /// datagrams to one destination (GSO) or per datagram. Loop thread only.
    func flush() {
        guard count > 0 else { return }
        let sockets = groupBySocketAndDestination()
        for s in 0..<sockets {
            send(socketFirstDatagram: Int(socketOrder[s]))
        }
        // Clear the tables' used entries for the next flush.
        var u = 0
        while u < usedSlots[0] {
            let slot = Int(usedSlots[1 + u])
            destinationHeads[slot] = -1
            socketFirst[slot] = -1
            u += 1
        }
        count = 0
        dataUsed = 0
    }

    // MARK: Grouping

    @inline(__always)
    private func nameWords(_ i: Int) -> UnsafeRawPointer { UnsafeRawPointer(names + i * Self.nameSlot) }

    @inline(__always)
    private func sameDestination(_ a: Int, _ b: Int) -> Bool {
        if owners[a].toOpaque() != owners[b].toOpaque() || nameLengths[a] != nameLengths[b] { return false }
        let x = nameWords(a)
        let y = nameWords(b)
        return x.load(as: UInt64.self) == y.load(as: UInt64.self)
            && x.load(fromByteOffset: 8, as: UInt64.self) == y.load(fromByteOffset: 8, as: UInt64.self)
            && x.load(fromByteOffset: 16, as: UInt64.self) == y.load(fromByteOffset: 16, as: UInt64.self)
            && x.load(fromByteOffset: 24, as: UInt64.self) == y.load(fromByteOffset: 24, as: UInt64.self)
    }

    @inline(__always)
    private static func mix(_ value: UInt64) -> Int {
        Int(truncatingIfNeeded: (value &* 0x9E37_79B9_7F4A_7C15) >> 40) & (tableSize - 1)
    }

    /// Chains each datagram to the next one for the same socket and destination, and each
    /// destination's first datagram to the socket's next destination. Returns the number of
    /// sockets, listed in `socketOrder` by their first datagram. `usedSlots[0]` counts the table
    /// entries to clear afterwards, listed from `usedSlots[1]`.
    private func groupBySocketAndDestination() -> Int {
        var used: Int32 = 0
        var sockets = 0
        for i in 0..<count {
            nextToDestination[i] = -1
            let owner = UInt64(UInt(bitPattern: owners[i].toOpaque()))
            let w = nameWords(i)
            let key =
                owner ^ w.load(as: UInt64.self) ^ (w.load(fromByteOffset: 8, as: UInt64.self) &* 31)
                ^ (w.load(fromByteOffset: 16, as: UInt64.self) &* 1_000_003)
            var slot = Self.mix(key)
            while true {
                let head = Int(destinationHeads[slot])
                if head < 0 {
                    // A new destination of this socket.
                    destinationHeads[slot] = Int32(i)
                    destinationTails[slot] = Int32(i)
                    usedSlots[1 + Int(used)] = Int32(slot)
                    used += 1
                    nextDestination[i] = -1
                    linkDestination(i, owner: owner, used: &used, sockets: &sockets)
                    break
                }
                if sameDestination(head, i) {
                    nextToDestination[Int(destinationTails[slot])] = Int32(i)
                    destinationTails[slot] = Int32(i)
                    break
                }
                slot = (slot + 1) & (Self.tableSize - 1)
            }
        }
        usedSlots[0] = used
        return sockets
    }

    /// Appends destination head `i` to its socket's list of destinations.
    @inline(__always)
    private func linkDestination(_ i: Int, owner: UInt64, used: inout Int32, sockets: inout Int) {
        var slot = Self.mix(owner)
        while true {
            let first = Int(socketFirst[slot])
            if first < 0 {
                socketFirst[slot] = Int32(i)
                socketLast[slot] = Int32(i)
                // Recorded for clearing; clearing also resets destinationHeads there, which is
                // harmless: that table is cleared entry by entry the same way.
                usedSlots[1 + Int(used)] = Int32(slot)
                used += 1
                socketOrder[sockets] = Int32(i)
                sockets += 1
                return
            }
            if owners[first].toOpaque() == owners[i].toOpaque() {
                nextDestination[Int(socketLast[slot])] = Int32(i)
                socketLast[slot] = Int32(i)
                return
            }
            slot = (slot + 1) & (Self.tableSize - 1)
        }
    }

    // MARK: Sending

    /// Builds the messages of the socket whose first datagram is `first` and sends them.
    private func send(socketFirstDatagram first: Int) {
        let owner = owners[first].takeUnretainedValue()
        let segmenting = owner.segmentationOffload
        var messageCount = 0
        var vectorCount = 0
        var destination = first
        while destination >= 0 {
            var i = destination
            while i >= 0 {
                // A message starts at datagram i; with GSO it takes the following datagrams of
                // the same size, and one shorter datagram to end the run.
                let size = Int(lengths[i])
                let m = messageCount
                messages[m] = MMsgHdr()
                messages[m].msg_hdr.msg_name = names + i * Self.nameSlot
                messages[m].msg_hdr.msg_namelen = nameLengths[i]
                messages[m].msg_hdr.msg_iov = vectors + vectorCount
                var segments = 0
                var bytes = 0
                repeat {
                    vectors[vectorCount] = iovec(iov_base: data + Int(offsets[i]), iov_len: Int(lengths[i]))
                    vectorCount += 1
                    segments += 1
                    bytes += Int(lengths[i])
                    let shorter = Int(lengths[i]) < size
                    i = Int(nextToDestination[i])
                    if !segmenting || shorter || size == 0 || i < 0 { break }
                    let next = Int(lengths[i])
                    if next > size || next == 0 || segments == Self.maximumSegments
                        || bytes + next > Self.maximumSegmentedBytes
                    {
                        break
                    }
                } while true
                messages[m].msg_hdr.msg_iovlen = segments
                messageSegments[m] = Int32(segments)
                if segments > 1 {
                    let control = controls + m * Self.controlSpace
                    control.storeBytes(of: Self.controlLength, as: Int.self)
                    control.storeBytes(of: Self.solUDP, toByteOffset: 8, as: Int32.self)
                    control.storeBytes(of: Self.udpSegment, toByteOffset: 12, as: Int32.self)
                    control.storeBytes(of: UInt16(size), toByteOffset: 16, as: UInt16.self)
                    messages[m].msg_hdr.msg_control = control
                    messages[m].msg_hdr.msg_controllen = Self.controlSpace
                }
                messageCount += 1
            }
            destination = Int(nextDestination[destination])
        }
        sendMessages(owner, count: messageCount)
    }

    /// `sendmmsg` of the built messages, going on past failures; a GSO message the kernel refuses
    /// turns GSO off for the socket and goes out one datagram per message instead.
    private func sendMessages(_ owner: UDPSocket, count messageCount: Int) {
        var index = 0
        while index < messageCount {
            let sent = sys_sendmmsg(owner.fd, messages + index, UInt32(messageCount - index), 0)
            statistics.systemCalls &+= 1
            if sent > 0 {
                for m in index..<(index + Int(sent)) { accepted(owner, message: m) }
                index += Int(sent)
                continue
            }
            let error = errno
            if error == EINTR { continue }
            let segments = Int(messageSegments[index])
            if segments > 1 && (error == EIO || error == EINVAL || error == ENOPROTOOPT || error == EOPNOTSUPP) {
                // No checksum offload on the route's device, or a kernel that refuses GSO here.
                if owner.segmentationOffload {
                    owner.segmentationOffload = false
                    statistics.segmentationRefusals &+= 1
                }
                sendSingly(owner, message: index)
            } else {
                // EAGAIN, ECONNREFUSED, …: the message's datagrams are lost; count them and go on.
                for _ in 0..<segments { owner.recordSend(sent: false, bytes: 0) }
            }
            index += 1
        }
    }

    /// Counts an accepted message: its datagrams for the socket, the message for the loop.
    @inline(__always)
    private func accepted(_ owner: UDPSocket, message m: Int) {
        let segments = Int(messageSegments[m])
        let iov = messages[m].msg_hdr.msg_iov!
        for k in 0..<segments { owner.recordSend(sent: true, bytes: iov[k].iov_len) }
        statistics.messages &+= 1
        statistics.datagrams &+= UInt64(segments)
        if segments > 1 {
            statistics.segmentedMessages &+= 1
            statistics.segmentedDatagrams &+= UInt64(segments)
        }
    }

    /// Sends the datagrams of GSO message `m` one `sendmsg` each.
    private func sendSingly(_ owner: UDPSocket, message m: Int) {
        let segments = Int(messageSegments[m])
        let iov = messages[m].msg_hdr.msg_iov!
        for k in 0..<segments {
            var single = msghdr()
            single.msg_name = messages[m].msg_hdr.msg_name
            single.msg_namelen = messages[m].msg_hdr.msg_namelen
            single.msg_iov = iov + k
            single.msg_iovlen = 1
            var sent: Int
            repeat {
                sent = sendmsg(owner.fd, &single, 0)
                statistics.systemCalls &+= 1
            } while sent < 0 && errno == EINTR
            owner.recordSend(sent: sent >= 0, bytes: iov[k].iov_len)
            if sent >= 0 {
                statistics.messages &+= 1
                statistics.datagrams &+= 1
            }
        }
    }
}
