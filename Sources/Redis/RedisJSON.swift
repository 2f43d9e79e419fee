import Foundation

/// Values stored in Redis as JSON text: one encoding (sorted keys, so equal values give equal
/// text) for the cluster's node records and the fleet's jobs, workers and reports.
public enum RedisJSON {
    /// JSON text of `value`. Encoding the plain value types stored here cannot fail; "{}" if it did.
    public static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// Decodes stored text, or reports which stored type was not valid.
    public static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws(RedisError) -> T {
        do { return try JSONDecoder().decode(type, from: Data(text.utf8)) } catch {
            throw .unexpectedReply("stored \(type) is not valid: \(error)")
        }
    }
}
