import Agent

/// A small command-line parser: `--name value` options and `--flag` switches, with clear errors.
struct Arguments {
    enum Failure: Error, CustomStringConvertible {
        case unknownOption(String)
        case missingValue(String)
        case badValue(String, String)
        case missingPositional(String)
        case unexpected(String)

        var description: String {
            switch self {
            case .unknownOption(let o): return "unknown option \(o)"
            case .missingValue(let o): return "option \(o) needs a value"
            case .badValue(let o, let why): return "bad value for \(o): \(why)"
            case .missingPositional(let what): return "missing \(what)"
            case .unexpected(let a): return "unexpected argument '\(a)'"
            }
        }
    }

    private(set) var options: [String: String] = [:]
    /// Every value of each option, in order, for repeatable options (``values(_:)``).
    private(set) var allValues: [String: [String]] = [:]
    private(set) var positionals: [String] = []

    /// Parses `args`, accepting only `valueOptions` (which take a value) and `switches`.
    init(_ args: [String], valueOptions: Set<String>, switches: Set<String> = []) throws(Failure) {
        var i = 0
        while i < args.count {
            let a = args[i]
            if a.hasPrefix("--") {
                var name = a
                var inlineValue: String?
                if let eq = a.firstIndex(of: "=") {
                    name = String(a[..<eq])
                    inlineValue = String(a[a.index(after: eq)...])
                }
                if switches.contains(name) {
                    options[name] = "true"
                } else if valueOptions.contains(name) {
                    if let inlineValue {
                        options[name] = inlineValue
                    } else {
                        guard i + 1 < args.count else { throw .missingValue(name) }
                        options[name] = args[i + 1]
                        i += 1
                    }
                    allValues[name, default: []].append(options[name] ?? "")
                } else {
                    throw .unknownOption(name)
                }
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    func value(_ name: String) -> String? { options[name] }

    /// Every value a repeatable option was given, in order (``value(_:)`` is the last).
    func values(_ name: String) -> [String] { allValues[name] ?? [] }

    func flag(_ name: String) -> Bool { options[name] == "true" }

    /// A positive number of seconds (`6`, `6s`, `1.5`, `2m`, `500ms`, `1h`), at most a year: the
    /// grammar of ``AgentJobOptions/seconds(_:option:)``.
    func seconds(_ name: String, default def: Double) throws(Failure) -> Double {
        guard let v = options[name] else { return def }
        do { return try AgentJobOptions.seconds(v, option: name) } catch { throw .badValue(error.option, error.reason) }
    }
}
