import Foundation

/// Why a room token was refused; each case maps to a room API error code (docs/spec/room-api.md §8).
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// 4002 `INVALID_TOKEN`: missing, malformed, bad signature, wrong algorithm or expired.
    case invalid(String)
    /// 4008 `INVALID_PERMISSIONS`: `ask_join` mixed with `allow_join`/`allow_mod`, or an unknown permission.
    case invalidPermissions
    /// 4022 `UNAUTHORIZED_MEETING_ID`: the token names another room.
    case wrongRoom
    /// 4023 `UNAUTHORIZED_PARTCIPANT_ID`: the token names another participant.
    case wrongParticipant

    /// The numeric error code of the room API.
    public var code: Int {
        switch self {
        case .invalid: return 4002
        case .invalidPermissions: return 4008
        case .wrongRoom: return 4022
        case .wrongParticipant: return 4023
        }
    }

    /// The error name of the room API (spelling as in the spec).
    public var name: String {
        switch self {
        case .invalid: return "INVALID_TOKEN"
        case .invalidPermissions: return "INVALID_PERMISSIONS"
        case .wrongRoom: return "UNAUTHORIZED_MEETING_ID"
        case .wrongParticipant: return "UNAUTHORIZED_PARTCIPANT_ID"
        }
    }

    public var description: String {
        switch self {
        case .invalid(let why): return "invalid token: \(why)"
        case .invalidPermissions: return "invalid permissions: ask_join cannot be combined with allow_join or allow_mod"
        case .wrongRoom: return "token is not valid for this room"
        case .wrongParticipant: return "token is not valid for this participant"
        }
    }
}

/// The claims of a room access token: an HS256 JWT signed with the server secret.
public struct RoomToken: Sendable, Equatable {
    /// The permissions a token may carry.
    public static let knownPermissions: Set<String> = ["allow_join", "ask_join", "allow_mod"]

    public var apikey: String
    /// A subset of `allow_join`, `ask_join`, `allow_mod`; `ask_join` (the lobby) stands alone.
    public var permissions: [String]
    /// Always 2 for tokens this server issues.
    public var version: Int
    /// When set, the token is only valid for this room.
    public var roomId: String?
    /// When set, the token is only valid for this participant id.
    public var participantId: String?
    public var roles: [String]
    /// Expiry, Unix seconds.
    public var exp: Int64
    /// Issued-at, Unix seconds.
    public var iat: Int64?
    /// Not-before, Unix seconds: the token is refused until then.
    public var nbf: Int64?

    public init(
        apikey: String, permissions: [String], version: Int = 2, roomId: String? = nil, participantId: String? = nil,
        roles: [String] = [], exp: Int64, iat: Int64? = nil, nbf: Int64? = nil
    ) {
        self.apikey = apikey
        self.permissions = permissions
        self.version = version
        self.roomId = roomId
        self.participantId = participantId
        self.roles = roles
        self.exp = exp
        self.iat = iat
        self.nbf = nbf
    }

    /// Convenience: a token valid for `lifetime` seconds from `now`.
    public init(
        apikey: String, permissions: [String], roomId: String? = nil, participantId: String? = nil,
        roles: [String] = [], lifetime: TimeInterval, now: Date = Date()
    ) {
        let issued = Int64(now.timeIntervalSince1970)
        self.init(
            apikey: apikey, permissions: permissions, roomId: roomId, participantId: participantId, roles: roles,
            exp: issued + Int64(lifetime), iat: issued)
    }

    /// The claims as a JSON object.
    public var claims: JSONValue {
        var object: [String: JSONValue] = [
            "apikey": .string(apikey),
            "permissions": .array(permissions.map(JSONValue.string)),
            "version": .number(Double(version)),
            "exp": .number(Double(exp)),
        ]
        if let roomId { object["roomId"] = .string(roomId) }
        if let participantId { object["participantId"] = .string(participantId) }
        if !roles.isEmpty { object["roles"] = .array(roles.map(JSONValue.string)) }
        if let iat { object["iat"] = .number(Double(iat)) }
        if let nbf { object["nbf"] = .number(Double(nbf)) }
        return .object(object)
    }

    /// Signs `token` as a compact HS256 JWT.
    public static func sign(_ token: RoomToken, secret: String) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array(token.claims.jsonString.utf8))
        let signingInput = header + "." + payload
        let signature = HMACSHA256.mac(key: Array(secret.utf8), message: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Verifies signature, algorithm, expiry, not-before and permission rules, and returns the claims.
    ///
    /// Only `HS256` is accepted (so `none` and algorithm-confusion tokens fail). The signature is
    /// checked before the payload is interpreted, with a constant-time comparison.
    ///
    /// - Parameter maxLifetime: when given, a token whose `exp` lies further than this many seconds
    ///   after its `iat` (or after `now` when it has no `iat`) is refused, so that a leaked token
    ///   cannot be valid for years.
    public static func verify(_ jwt: String, secret: String, now: Date = Date(), maxLifetime: Double? = nil)
        throws(TokenError) -> RoomToken
    {
        let trimmed = jwt.trimmingSpaces()
        guard !trimmed.isEmpty else { throw .invalid("missing token") }
        guard trimmed.utf8.count <= 8192 else { throw .invalid("token too long") }
        let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .invalid("not a compact JWS (expected three parts)") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw .invalid("bad base64url") }
        let header: JSONValue
        do { header = try JSONValue.parse(headerBytes) } catch { throw .invalid("header is not JSON") }
        guard header.objectValue != nil else { throw .invalid("header is not a JSON object") }
        guard let alg = header["alg"]?.stringValue else { throw .invalid("missing alg") }
        guard alg == "HS256" else { throw .invalid("unsupported alg \(alg)") }
        let signingInput = Array(trimmed.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let expected = HMACSHA256.mac(key: Array(secret.utf8), message: signingInput)
        guard HMACSHA256.constantTimeEqual(expected, signature) else { throw .invalid("bad signature") }

        let claims: JSONValue
        do { claims = try JSONValue.parse(payloadBytes) } catch { throw .invalid("payload is not JSON") }
        guard claims.objectValue != nil else { throw .invalid("payload is not a JSON object") }
        guard let apikey = claims["apikey"]?.stringValue else { throw .invalid("missing apikey") }
        guard let exp = claims["exp"]?.doubleValue, exp.isFinite, abs(exp) < 1e15 else { throw .invalid("missing exp") }
        guard now.timeIntervalSince1970 < exp else { throw .invalid("token expired") }
        // The room API lists `version: 2` among the claims a token needs: a token without it is
        // refused as one with another version is (issue 32 item 7).
        guard let version = claims["version"], !version.isNull else { throw .invalid("missing version") }
        guard version.intValue == 2 else { throw .invalid("unsupported version") }
        guard let permissionValues = claims["permissions"]?.arrayValue else { throw .invalid("missing permissions") }
        var permissions: [String] = []
        for value in permissionValues {
            guard let p = value.stringValue else { throw .invalidPermissions }
            permissions.append(p)
        }
        try validatePermissions(permissions)
        var roles: [String] = []
        if let roleValues = claims["roles"], !roleValues.isNull {
            guard let array = roleValues.arrayValue else { throw .invalid("roles must be an array") }
            for value in array {
                guard let r = value.stringValue else { throw .invalid("roles must be strings") }
                roles.append(r)
            }
        }
        func optionalString(_ key: String) throws(TokenError) -> String? {
            guard let v = claims[key], !v.isNull else { return nil }
            guard let s = v.stringValue else { throw .invalid("\(key) must be a string") }
            return s
        }
        let iat = claims["iat"]?.doubleValue.flatMap { $0.isFinite && abs($0) < 1e15 ? Int64($0) : nil }
        let nbf = try timePolicy(claims, exp: exp, iat: iat, now: now.timeIntervalSince1970, maxLifetime: maxLifetime)
        return RoomToken(
            apikey: apikey, permissions: permissions, version: 2, roomId: try optionalString("roomId"),
            participantId: try optionalString("participantId"), roles: roles, exp: Int64(exp), iat: iat, nbf: nbf)
    }

    /// `nbf` (must be a number when present, and not in the future) and the maximum lifetime; returns `nbf`.
    private static func timePolicy(_ claims: JSONValue, exp: Double, iat: Int64?, now: Double, maxLifetime: Double?)
        throws(TokenError) -> Int64?
    {
        var nbf: Int64?
        if let value = claims["nbf"], !value.isNull {
            guard let n = value.doubleValue, n.isFinite, abs(n) < 1e15 else { throw .invalid("nbf must be a number") }
            guard now >= n else { throw .invalid("token not valid yet (nbf)") }
            nbf = Int64(n)
        }
        if let maxLifetime {
            let start = iat.map(Double.init) ?? now
            guard exp - start <= maxLifetime else {
                throw .invalid("token lifetime exceeds the server's maximum of \(Int(maxLifetime)) s")
            }
        }
        return nbf
    }

    /// Checks the permission rules: known names only, and `ask_join` never with `allow_join` or `allow_mod`.
    public static func validatePermissions(_ permissions: [String]) throws(TokenError) {
        let set = Set(permissions)
        guard set.isSubset(of: knownPermissions) else { throw .invalidPermissions }
        if set.contains("ask_join"), set.contains("allow_join") || set.contains("allow_mod") {
            throw .invalidPermissions
        }
    }

    /// Checks the token against the room and participant being joined: a token that names a room
    /// or participant only opens that one.
    public func check(room: String, participant: String?) throws(TokenError) {
        if let roomId, roomId != room { throw .wrongRoom }
        if let participantId, let participant, participantId != participant { throw .wrongParticipant }
    }

    public var canJoin: Bool { permissions.contains("allow_join") }
    public var mustAskToJoin: Bool { permissions.contains("ask_join") }
    public var isModerator: Bool { permissions.contains("allow_mod") }

    /// Parses a duration like `45s`, `30m`, `2h`, `1d`, `1h30m`, or a bare number of seconds.
    /// Returns nil for anything else (including zero-length input or overflow).
    public static func parseDuration(_ text: String) -> TimeInterval? {
        let s = text.trimmingSpaces().lowercased()
        guard !s.isEmpty else { return nil }
        if let seconds = Double(s), seconds.isFinite, seconds >= 0 { return seconds }
        var total: Double = 0
        var digits = ""
        for c in s {
            if c.isASCII, c.isNumber || c == "." {
                digits.append(c)
                continue
            }
            guard let value = Double(digits), value.isFinite, value >= 0 else { return nil }
            let unit: Double
            switch c {
            case "s": unit = 1
            case "m": unit = 60
            case "h": unit = 3600
            case "d": unit = 86400
            case "w": unit = 604_800
            default: return nil
            }
            total += value * unit
            digits = ""
        }
        guard digits.isEmpty, total.isFinite else { return nil }
        return total
    }
}
