import COpenSSL
import Foundation

/// RFC 6455 §4 opening-handshake helpers shared by the server and the client.
public enum WebSocketHandshake {
    static let magic = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`: base64(SHA-1(key + GUID)).
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + magic).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        _ = input.withUnsafeBufferPointer { inBuf in
            digest.withUnsafeMutableBufferPointer { SHA1(inBuf.baseAddress, inBuf.count, $0.baseAddress) }
        }
        return Data(digest).base64EncodedString()
    }

    /// A fresh random 16-byte nonce, base64-encoded, for a client's `Sec-WebSocket-Key`.
    static func makeKey() -> String {
        var nonce = [UInt8](repeating: 0, count: 16)
        if nonce.withUnsafeMutableBufferPointer({ RAND_bytes($0.baseAddress, 16) }) != 1 {
            for i in 0..<16 { nonce[i] = UInt8.random(in: 0...255) }
        }
        return Data(nonce).base64EncodedString()
    }

    /// Whether a request asks for a WebSocket upgrade at all (it carries `Upgrade: websocket`).
    public static func isUpgradeRequest(_ request: HTTPRequest) -> Bool {
        guard let upgrade = request.headers["Upgrade"] else { return false }
        return upgrade.split(separator: ",").contains { $0.trimmingSpaces().lowercased() == "websocket" }
    }

    /// Validates a client's opening handshake. Returns the `Sec-WebSocket-Accept` value, or the
    /// error response to send: 426 (with `Sec-WebSocket-Version: 13`) for a missing upgrade or
    /// another version, 400 for anything else malformed.
    public static func validate(_ request: HTTPRequest) -> Result<String, WebSocketHandshakeRejection> {
        guard request.method == "GET", request.version == "HTTP/1.1" else {
            return .failure(.init(status: 400, message: "WebSocket handshake must be GET over HTTP/1.1"))
        }
        guard isUpgradeRequest(request) else {
            return .failure(.init(status: 426, message: "this endpoint requires a WebSocket upgrade"))
        }
        let connection = request.headers["Connection"]?.lowercased() ?? ""
        guard connection.split(separator: ",").contains(where: { $0.trimmingSpaces() == "upgrade" }) else {
            return .failure(.init(status: 400, message: "Connection header must contain Upgrade"))
        }
        guard request.headers["Sec-WebSocket-Version"]?.trimmingSpaces() == "13" else {
            return .failure(.init(status: 426, message: "unsupported WebSocket version (13 required)"))
        }
        guard let key = request.headers["Sec-WebSocket-Key"]?.trimmingSpaces(),
            let decoded = Data(base64Encoded: key), decoded.count == 16
        else {
            return .failure(.init(status: 400, message: "missing or invalid Sec-WebSocket-Key"))
        }
        return .success(acceptValue(forKey: key))
    }
}

/// A refused WebSocket handshake: the HTTP status and a plain-text explanation.
public struct WebSocketHandshakeRejection: Error, Sendable, Equatable {
    public var status: Int
    public var message: String

    /// The HTTP response to send for this rejection.
    public var response: HTTPResponse {
        var response = HTTPResponse.text(message + "\n", status: status)
        if status == 426 {
            response.headers.add("Sec-WebSocket-Version", "13")
            response.headers.add("Upgrade", "websocket")
        }
        return response
    }
}

/// What an upgrade handler decides for a WebSocket handshake request.
public enum WebSocketUpgradeDecision: Sendable {
    /// Accept: the server answers 101 (plus `headers`) and calls `onOpen` on the new connection's
    /// serial callback context before any message callback. Install the callbacks there.
    case accept(headers: HTTPHeaders = HTTPHeaders(), onOpen: @Sendable (WebSocketConnection) -> Void)
    /// Refuse with an ordinary HTTP response (e.g. 401 for a bad token); no upgrade happens.
    case reject(HTTPResponse)
}
