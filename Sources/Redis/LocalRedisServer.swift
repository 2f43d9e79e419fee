import Foundation
import SystemCalls

/// A throw-away `redis-server` on a free loopback port (no persistence), for tests and benchmarks:
/// they start their own instead of depending on one being there.
// Safe: immutable after start (process handle and port); stop() only signals the process.
public final class LocalRedisServer: @unchecked Sendable {
    public let port: Int
    private var process: ChildProcess?
    private let directory: URL

    public init() throws {
        port = Self.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try start()
    }

    deinit { stop() }

    public var url: String { "redis://127.0.0.1:\(port)" }

    public func start() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.serverPath) else {
            throw RedisError.connection("redis-server is not installed (Debian: apt-get install redis-server)")
        }
        let arguments = [
            "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path,
        ]
        do {
            process = try ChildProcess(Self.serverPath, arguments, standardOutput: .null, standardError: .null)
        } catch {
            throw RedisError.connection("redis-server did not start: \(error)")
        }
        // Ready when it accepts a connection (generous deadline: the machine may be busy).
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if Self.canConnect(port) { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw RedisError.connection("redis-server did not start on port \(port)")
    }

    public func stop() {
        guard let p = process else { return }
        // SIGKILL: a throw-away server has nothing to save.
        p.signal(SIGKILL)
        p.wait()
        process = nil
    }

    static var serverPath: String {
        for path in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        return "/usr/bin/redis-server"
    }

    private static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port)).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}
