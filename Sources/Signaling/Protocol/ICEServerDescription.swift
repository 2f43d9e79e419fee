/// One entry of `iceServers` in the join response (the shape of WebRTC's `RTCIceServer`): the
/// TURN servers a room server hands out to its clients.
public struct ICEServerDescription: Sendable, Hashable, Codable {
    /// `turn:` / `turns:` URLs of one server (RFC 7065).
    public var urls: [String]
    /// Long-term credential user name.
    public var username: String?
    /// Long-term credential password.
    public var credential: String?

    /// Creates a description from its fields.
    public init(urls: [String], username: String?, credential: String?) {
        self.urls = urls
        self.username = username
        self.credential = credential
    }

    /// Reads one entry; `urls` may be a string or an array of strings. Nil when malformed.
    public init?(json: JSONValue) {
        var urls: [String] = []
        if let one = json["urls"]?.stringValue {
            urls = [one]
        } else if let many = json["urls"]?.arrayValue {
            urls = many.compactMap(\.stringValue)
            guard urls.count == many.count else { return nil }
        }
        guard !urls.isEmpty else { return nil }
        self.init(urls: urls, username: json["username"]?.stringValue, credential: json["credential"]?.stringValue)
    }

    /// The entry as sent in the join response.
    public var json: JSONValue {
        var fields: [String: JSONValue] = ["urls": .array(urls.map(JSONValue.string))]
        if let username { fields["username"] = .string(username) }
        if let credential { fields["credential"] = .string(credential) }
        return .object(fields)
    }

    private enum CodingKeys: String, CodingKey { case urls, username, credential }

    /// Decodes the configuration-file form, which is the JSON form (`urls` a string or an array).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if let one = try? c.decode(String.self, forKey: .urls) {
            urls = [one]
        } else {
            urls = try c.decode([String].self, forKey: .urls)
        }
        username = try c.decodeIfPresent(String.self, forKey: .username)
        credential = try c.decodeIfPresent(String.self, forKey: .credential)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(urls, forKey: .urls)
        try c.encodeIfPresent(username, forKey: .username)
        try c.encodeIfPresent(credential, forKey: .credential)
    }

    /// Reads the `iceServers` array of a join response (absent: empty; malformed entries skipped).
    public static func list(from json: JSONValue?) -> [ICEServerDescription] {
        (json?.arrayValue ?? []).compactMap { ICEServerDescription(json: $0) }
    }
}
