import Foundation
import RTC

/// The floor under the SFU figure: CPU per datagram of the loop's own send path alone (copy into the
/// `sendmmsg` batch, the syscall, and the kernel's UDP send and loopback delivery to the receiving
/// socket, which Linux charges to the sender), with no SFU work at all.
///
/// One loop sends batches round-robin to `destinations` sockets on loopback, as the SFU fans a packet
/// out to its subscribers; another loop drains them. The sending thread's CPU time divided by the
/// datagrams sent is the cost no forwarding code can go below on this kernel, so 1 s ÷ that cost is
/// the most packets per second one core can forward here.
enum SendFloorRow {
    struct Result {
        /// Whether runs to one destination went out as UDP GSO messages.
        var segmentation: Bool
        var destinations: Int
        var size: Int
        var sent: Int
        var received: Int
        /// Sending-thread CPU per datagram, per round (nanoseconds).
        var rounds: [Double]
        /// Messages the kernel accepted (fewer than datagrams with GSO).
        var messages: Int
        var medianNanoseconds: Double {
            let sorted = rounds.sorted()
            return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        }
        /// The most datagrams per second one core can send this way.
        var ceilingPerCore: Double { medianNanoseconds > 0 ? 1e9 / medianNanoseconds : 0 }
    }

    /// Counts what the draining loop receives (loop thread only; read after the loop stops).
    // Safe: written on the draining loop thread only, read after that loop has stopped.
    final class Sink: DatagramHandler, @unchecked Sendable {
        var received = 0
        func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {
            received += 1
        }
    }

    final class Source: DatagramHandler, Sendable {
        func handleDatagram(_ data: UnsafeMutableRawBufferPointer, from: SocketAddress, socket: UDPSocket) {}
    }

    /// `rounds` rounds of `perRound` datagrams of `size` bytes to `destinations` loopback sockets.
    /// With `segmentation` off every datagram is a message of its own (the floor per datagram); with
    /// it on, a full batch holds about `sendBatchCapacity / destinations` datagrams per destination,
    /// each run sent as one GSO message.
    static func run(
        destinations: Int = 100, size: Int = 300, perRound: Int = 20_480, rounds: Int = 5, segmentation: Bool
    ) async throws -> Result {
        precondition(perRound % EventLoop.sendBatchCapacity == 0, "whole batches only")
        let receiver = try EventLoop.make(name: "floor-recv")
        let sender = try EventLoop.make(name: "floor-send")
        defer {
            sender.shutdown()
            receiver.shutdown()
        }
        let sink = Sink()
        let loopback = SocketAddress(ip: "127.0.0.1", port: 0)!
        var targets: [SocketAddress] = []
        for _ in 0..<destinations {
            targets.append(try receiver.openUDP(bindTo: loopback, handler: sink).localAddress)
        }
        let socket = try sender.openUDP(bindTo: loopback, handler: Source())
        let enabled = await sender.submit { () -> Bool in
            socket.segmentationOffload = segmentation
            return socket.segmentationOffload
        }
        if segmentation && !enabled { throw SegmentationUnavailable() }
        let statistics0 = await sender.sendStatistics()
        let box = SendTargets(targets: targets, socket: socket)
        var perPacket: [Double] = []
        for _ in 0..<rounds {
            let nanoseconds = await sender.submit { () -> UInt64 in
                var payload = [UInt8](repeating: 0xA5, count: size)
                let start = threadCPUNanoseconds()
                payload.withUnsafeMutableBytes { bytes in
                    let raw = UnsafeRawBufferPointer(bytes)
                    for i in 0..<perRound {
                        box.socket.send(raw, to: box.targets[i % box.targets.count])
                    }
                }
                // `perRound` is a multiple of the batch size: every batch went out inside the window.
                return threadCPUNanoseconds() - start
            }
            perPacket.append(Double(nanoseconds) / Double(perRound))
            // Let the receiver drain before the next round (4 MB of buffer per socket is plenty).
            try await Task.sleep(nanoseconds: 200_000_000)
        }
        // Wait (generously) for the receiver to count what arrived.
        let expected = rounds * perRound
        var received = 0
        for _ in 0..<100 {
            received = await receiver.submit { sink.received }
            if received >= expected { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let sent = await sender.submit { Int(box.socket.packetsSent) }
        let statistics1 = await sender.sendStatistics()
        return Result(
            segmentation: segmentation, destinations: destinations, size: size, sent: sent, received: received,
            rounds: perPacket, messages: Int(statistics1.messages - statistics0.messages))
    }

    struct SegmentationUnavailable: Error, CustomStringConvertible {
        var description: String { "this kernel has no UDP GSO (UDP_SEGMENT)" }
    }

    struct SendTargets: Sendable {
        let targets: [SocketAddress]
        let socket: UDPSocket
    }

    /// The report's section: the floor one datagram per message, and with GSO runs.
    static func section(single r: Result, segmented g: Result?) -> String {
        var text = "## Loopback send floor: datagrams per second per core with no SFU work\n\n"
        text += "| metric | one datagram per message | GSO runs to each destination |\n|---|---|---|\n"
        text += "| destinations, datagram size | \(r.destinations) loopback sockets, \(r.size) bytes | same |\n"
        func rounds(_ x: Result?) -> String {
            x.map { $0.rounds.map { String(format: "%.0f ns", $0) }.joined(separator: ", ") } ?? "not run"
        }
        func counts(_ x: Result?) -> String {
            x.map {
                String(
                    format: "%d / %d (%.1f per message)", $0.sent, $0.received,
                    Double($0.sent) / Double(max(1, $0.messages)))
            } ?? "not run"
        }
        func ceiling(_ x: Result?) -> String {
            x.map { String(format: "**%.0f** (%.0f ns each)", $0.ceilingPerCore, $0.medianNanoseconds) } ?? "not run"
        }
        text += "| rounds (sending-thread CPU per datagram) | \(rounds(r)) | \(rounds(g)) |\n"
        text += "| datagrams sent / received | \(counts(r)) | \(counts(g)) |\n"
        text += "| **datagrams per CPU-second of the sending thread** | \(ceiling(r)) | \(ceiling(g)) |\n\n"
        text += """
            Method: one event loop sends round-robin to \(r.destinations) UDP sockets of a second loop on
            127.0.0.1 through `UDPSocket.send` (the SFU's own path: copy into the preallocated batch of
            \(EventLoop.sendBatchCapacity), one `sendmmsg` per flush), with no SRTP and no RTP work; the
            second loop drains them. First with GSO off on the sending socket (every datagram a message
            of its own: the floor per datagram), then with it on (the flush groups the batch by
            destination: about \(EventLoop.sendBatchCapacity / r.destinations) equal-sized datagrams per
            destination go out as one `UDP_SEGMENT` message). CPU time of the
            sending thread (CLOCK_THREAD_CPUTIME_ID) ÷ datagrams, median of the rounds. Linux charges
            the loopback delivery (the receiver's socket queue and its wake-up) to the sender, as it does
            in the SFU, so this is the kernel's share per forwarded packet on loopback: the whole-process
            SFU figure cannot exceed it at the same number of datagrams per message.


            """
        return text
    }
}
