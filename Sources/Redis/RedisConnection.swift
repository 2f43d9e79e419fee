import CHiredis
import Foundation

/// One synchronous hiredis connection. Not thread-safe: confine it to one thread or serial queue
/// (``RedisClient`` does that). Blocking calls: never use it on a packet loop.
public final class RedisConnection {
    private var context: UnsafeMutablePointer<redisContext>?
    public let url: RedisURL

    /// Connects, authenticates and selects the database; `timeout` bounds the connect and every reply.
    public init(url: RedisURL, timeout: Double = 2) throws(RedisError) {
        self.url = url
        let tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        guard let ctx = redisConnectWithTimeout(url.host, Int32(url.port), tv) else {
            throw .connection("cannot allocate a hiredis context")
        }
        if ctx.pointee.err != 0 {
            let message = Self.errorText(ctx)
            redisFree(ctx)
            throw .connection("\(url.host):\(url.port): \(message)")
        }
        _ = redisSetTimeout(ctx, tv)
        _ = redisEnableKeepAlive(ctx)
        context = ctx
        if let password = url.password { _ = try command(["AUTH", password]) }
        if url.database != 0 { _ = try command(["SELECT", String(url.database)]) }
    }

    deinit { close() }

    /// False once an I/O error broke the connection; make a new one then.
    public var isUsable: Bool { context.map { $0.pointee.err == 0 } ?? false }

    public func close() {
        if let ctx = context { redisFree(ctx) }
        context = nil
    }

    /// Runs one command; error replies are thrown as ``RedisError/server(_:)``.
    @discardableResult
    public func command(_ arguments: [String]) throws(RedisError) -> RedisValue {
        try command(bytes: arguments.map { Array($0.utf8) })
    }

    /// Runs one command with binary-safe arguments.
    @discardableResult
    public func command(bytes arguments: [[UInt8]]) throws(RedisError) -> RedisValue {
        guard let ctx = context, ctx.pointee.err == 0 else { throw .connection("not connected") }
        let reply = Self.send(ctx, arguments)
        guard let reply else {
            let message = Self.errorText(ctx)
            close()
            throw .connection(message)
        }
        defer { freeReplyObject(reply) }
        let value = Self.convert(reply.assumingMemoryBound(to: redisReply.self))
        if case .error(let text) = value { throw .server(text) }
        return value
    }

    private static func send(_ ctx: UnsafeMutablePointer<redisContext>, _ arguments: [[UInt8]])
        -> UnsafeMutableRawPointer?
    {
        // hiredis wants parallel arrays of pointers and lengths; the byte arrays must stay alive
        // for the call, so the pointers come from one contiguous copy.
        var lengths = arguments.map { $0.count }
        var flat: [UInt8] = []
        flat.reserveCapacity(lengths.reduce(0, +) + 1)
        for argument in arguments { flat.append(contentsOf: argument) }
        flat.append(0)
        return flat.withUnsafeBufferPointer { buffer in
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(arguments.count)
            var offset = 0
            let base = UnsafeRawPointer(buffer.baseAddress!)
            for length in lengths {
                pointers.append((base + offset).assumingMemoryBound(to: CChar.self))
                offset += length
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeMutableBufferPointer { argvlen in
                    redisCommandArgv(ctx, Int32(arguments.count), argv.baseAddress, argvlen.baseAddress)
                }
            }
        }
    }

    private static func convert(_ reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let r = reply.pointee
        switch r.type {
        case shim_REDIS_REPLY_STRING():
            return .bulk(bytes(r.str, r.len))
        case shim_REDIS_REPLY_STATUS():
            return .status(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case shim_REDIS_REPLY_ERROR():
            return .error(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case shim_REDIS_REPLY_INTEGER():
            return .integer(Int64(r.integer))
        case shim_REDIS_REPLY_ARRAY():
            guard let elements = r.element else { return .array([]) }
            return .array((0..<Int(r.elements)).compactMap { i in elements[i].map { convert($0) } })
        default:
            return .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ length: Int) -> [UInt8] {
        guard let pointer, length > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: length))
    }

    private static func errorText(_ ctx: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: ctx.pointee.errstr) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }
}
