/// Where a Redis server is: `redis://HOST:PORT[/DB]`, optionally `redis://:PASSWORD@HOST:PORT[/DB]`.
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    public var password: String?

    public init(host: String, port: Int = 6379, database: Int = 0, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.password = password
    }

    /// Parses a `redis://` URL; the error names what is wrong with it.
    public init(parsing text: String) throws(RedisError) {
        guard text.hasPrefix("redis://") else { throw .badURL(text, "must start with redis://") }
        var rest = Substring(text.dropFirst("redis://".count))
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            // Redis before ACLs has no user name: the password follows the colon.
            if let colon = userInfo.firstIndex(of: ":") {
                password = String(userInfo[userInfo.index(after: colon)...])
            } else {
                password = String(userInfo)
            }
            if password?.isEmpty == true { password = nil }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let dbText = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !dbText.isEmpty {
                guard dbText.allSatisfy(\.isASCIIDigit), let db = Int(dbText), db < 1 << 16 else {
                    throw .badURL(text, "database must be a small non-negative number")
                }
                database = db
            }
        }
        var host = rest
        var port = 6379
        if let colon = rest.lastIndex(of: ":") {
            let portText = rest[rest.index(after: colon)...]
            host = rest[..<colon]
            guard !portText.isEmpty, portText.allSatisfy(\.isASCIIDigit), let p = Int(portText), (1...65535).contains(p)
            else { throw .badURL(text, "port must be 1-65535") }
            port = p
        }
        guard !host.isEmpty else { throw .badURL(text, "missing host") }
        self.init(host: String(host), port: port, database: database, password: password)
    }

    public var description: String {
        "redis://\(password == nil ? "" : ":***@")\(host):\(port)\(database == 0 ? "" : "/\(database)")"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
