import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A bare WebSocket client on a socket with a tiny receive buffer, for clients that stop reading.
final class RawWebSocket: @unchecked Sendable {
    let fd: Int32

    init(port: UInt16, path: String, receiveBuffer: Int32 = 4096) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var size = receiveBuffer
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else { throw Timeout(what: "connect") }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        writeAll(Array(request.utf8))
        // Read the 101 head byte by byte, so nothing after it is consumed.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]), read(fd, &byte, 1) == 1 { head.append(byte) }
        guard String(decoding: head, as: UTF8.self).hasPrefix("HTTP/1.1 101") else { throw Timeout(what: "upgrade") }
    }

    deinit { close(fd) }

    func writeAll(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// A masked text frame (payload < 64 KiB).
    func sendText(_ text: String) {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let mask: [UInt8] = [1, 2, 3, 4]
        frame += mask
        for (i, b) in payload.enumerated() { frame.append(b ^ mask[i % 4]) }
        writeAll(frame)
    }

    /// Reads frames until a close frame; returns its code (nil on EOF or timeout first).
    func readUntilCloseCode() -> UInt16? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Parse whole frames at the front of the buffer.
            while buffer.count >= 2 {
                var length = Int(buffer[1] & 0x7F)
                var headerLength = 2
                if length == 126 {
                    guard buffer.count >= 4 else { break }
                    length = Int(buffer[2]) << 8 | Int(buffer[3])
                    headerLength = 4
                } else if length == 127 {
                    guard buffer.count >= 10 else { break }
                    length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
                    headerLength = 10
                }
                guard buffer.count >= headerLength + length else { break }
                if buffer[0] & 0x0F == 0x8 {
                    guard length >= 2 else { return nil }
                    return UInt16(buffer[headerLength]) << 8 | UInt16(buffer[headerLength + 1])
                }
                buffer.removeFirst(headerLength + length)
            }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
    }
}
