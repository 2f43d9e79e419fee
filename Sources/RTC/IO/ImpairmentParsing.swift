import Foundation

/// Why an impairment given as a preset name or JSON (``Impairment/parse(_:)``) was refused.
public struct ImpairmentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field at fault (`down.burst.p`), or nil for the text as a whole.
    public var field: String?
    public var message: String

    public var description: String {
        if let field { return "impairment field '\(field)': \(message)" }
        return "impairment: \(message)"
    }
}

extension Impairment {
    /// The preset names, `none` first.
    public static let presetNames = ["none", "3g", "lossy-wifi", "congested"]

    /// A named link (figures in docs/load-testing.md), or nil for an unknown name.
    ///
    /// - `none`: nothing.
    /// - `3g`: 1.6 Mbit/s down and 768 kbit/s up, 150 ms ± 20 ms each way, 1 % loss.
    /// - `lossy-wifi`: 10 ms ± 10 ms each way, 1 % random loss and Gilbert-Elliott dropouts
    ///   (p 0.003, r 0.02: a dropout every ~330 datagrams lasting ~50, about 13 % of datagrams in all).
    /// - `congested`: 1 Mbit/s down and 500 kbit/s up behind a 400 ms queue, 40 ms ± 5 ms each way.
    public static func preset(named name: String) -> Impairment? {
        switch name {
        case "none": return Impairment()
        case "3g":
            return Impairment(
                down: LinkImpairment(rateKbps: 1600, delayMs: 150, jitterMs: 20, loss: 0.01),
                up: LinkImpairment(rateKbps: 768, delayMs: 150, jitterMs: 20, loss: 0.01))
        case "lossy-wifi":
            let link = LinkImpairment(
                delayMs: 10, jitterMs: 10, loss: 0.01, burst: GilbertElliott(p: 0.003, r: 0.02))
            return Impairment(down: link, up: link)
        case "congested":
            return Impairment(
                down: LinkImpairment(rateKbps: 1000, bucketBytes: 10_000, queueMs: 400, delayMs: 40, jitterMs: 5),
                up: LinkImpairment(rateKbps: 500, bucketBytes: 10_000, queueMs: 400, delayMs: 40, jitterMs: 5))
        default: return nil
        }
    }

    /// Parses a preset name (``presetNames``) or the JSON form
    /// `{"down": {...}, "up": {...}, "seed": N}`, each direction with the fields of
    /// ``LinkImpairment`` (`rateKbps`, `bucketBytes`, `queueMs`, `delayMs`, `jitterMs`,
    /// `jitterReorders`, `loss`, `burst` `{p, r, lossBad, lossGood}`, `reorder`, `reorderMs`,
    /// `duplicate`), all optional. Unknown fields, wrong types and values out of range are refused.
    public static func parse(_ text: String) throws(ImpairmentError) -> Impairment {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("{") || trimmed.hasPrefix("[") else {
            if let preset = preset(named: trimmed) { return preset }
            throw ImpairmentError(
                field: nil,
                message:
                    "unknown preset '\(trimmed)' (expected one of \(presetNames.joined(separator: ", ")) or a JSON object)"
            )
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(trimmed.utf8))
        } catch {
            throw ImpairmentError(field: nil, message: "not valid JSON")
        }
        var fields = try Fields(object, path: nil)
        var result = Impairment()
        if let down = fields.take("down") { result.down = try link(down, path: "down") }
        if let up = fields.take("up") { result.up = try link(up, path: "up") }
        if let seed = try fields.number("seed", in: 0...Double(1 << 53)) {
            guard seed == seed.rounded() else { throw fields.error("seed", "expected a whole number, found \(seed)") }
            result.seed = UInt64(seed)
        }
        try fields.finish()
        return result
    }

    private static func link(_ object: Any, path: String) throws(ImpairmentError) -> LinkImpairment {
        var f = try Fields(object, path: path)
        var link = LinkImpairment()
        let long = 0.0...60_000
        if let v = try f.number("rateKbps", in: 0...10_000_000) { link.rateKbps = v }
        if let v = try f.number("bucketBytes", in: 0...100_000_000) { link.bucketBytes = Int(v) }
        if let v = try f.number("queueMs", in: long) { link.queueMs = v }
        if let v = try f.number("delayMs", in: long) { link.delayMs = v }
        if let v = try f.number("jitterMs", in: long) { link.jitterMs = v }
        if let v = try f.bool("jitterReorders") { link.jitterReorders = v }
        if let v = try f.number("loss", in: 0...1) { link.loss = v }
        if let v = try f.number("reorder", in: 0...1) { link.reorder = v }
        if let v = try f.number("reorderMs", in: long) { link.reorderMs = v }
        if let v = try f.number("duplicate", in: 0...1) { link.duplicate = v }
        if let burst = f.take("burst") {
            var b = try Fields(burst, path: "\(path).burst")
            guard let p = try b.number("p", in: 0...1), let r = try b.number("r", in: 0...1) else {
                throw ImpairmentError(field: "\(path).burst", message: "expected both 'p' and 'r'")
            }
            var model = GilbertElliott(p: p, r: r)
            if let v = try b.number("lossBad", in: 0...1) { model.lossBad = v }
            if let v = try b.number("lossGood", in: 0...1) { model.lossGood = v }
            try b.finish()
            link.burst = model
        }
        try f.finish()
        return link
    }
}

/// The members of one JSON object, taken one by one; what is left over is an unknown field.
private struct Fields {
    var members: [String: Any]
    let path: String?

    init(_ object: Any, path: String?) throws(ImpairmentError) {
        guard let members = object as? [String: Any] else {
            throw ImpairmentError(field: path, message: "expected a JSON object")
        }
        self.members = members
        self.path = path
    }

    func name(_ key: String) -> String { path.map { "\($0).\(key)" } ?? key }

    func error(_ key: String, _ message: String) -> ImpairmentError {
        ImpairmentError(field: name(key), message: message)
    }

    mutating func take(_ key: String) -> Any? {
        guard let value = members.removeValue(forKey: key), !(value is NSNull) else { return nil }
        return value
    }

    mutating func number(_ key: String, in range: ClosedRange<Double>) throws(ImpairmentError) -> Double? {
        guard let value = take(key) else { return nil }
        guard let number = value as? NSNumber, !Self.isBoolean(number) else { throw error(key, "expected a number") }
        let v = number.doubleValue
        guard v.isFinite, range.contains(v) else {
            throw error(
                key,
                "expected a number in [\(format(range.lowerBound)), \(format(range.upperBound))], found \(format(v))")
        }
        return v
    }

    mutating func bool(_ key: String) throws(ImpairmentError) -> Bool? {
        guard let value = take(key) else { return nil }
        guard let number = value as? NSNumber, Self.isBoolean(number) else {
            throw error(key, "expected true or false")
        }
        return number.boolValue
    }

    /// JSON `true`/`false` come back as NSNumbers of type `c` (char); numbers never do.
    static func isBoolean(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }

    func finish() throws(ImpairmentError) {
        if let extra = members.keys.sorted().first { throw error(extra, "unknown field") }
    }

    private func format(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v) }
}
