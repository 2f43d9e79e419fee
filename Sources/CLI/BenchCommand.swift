import Benchmarks
import Foundation

/// `understudy bench [--quick] [--only SECTIONS] [--out FILE]`: runs the benchmarks and writes the report.
func runBench(_ args: [String]) async {
    await runCommand("bench") {
        let a = try Arguments(args, help: Help.bench)
        let quick = a.flag("--quick")
        var only: Set<BenchmarkReport.Section>?
        if let list = a.value("--only") {
            var sections = Set<BenchmarkReport.Section>()
            for name in list.split(separator: ",") {
                guard let section = BenchmarkReport.Section(rawValue: String(name)) else {
                    let known = BenchmarkReport.Section.allCases.map(\.rawValue).joined(separator: ", ")
                    fail("bench: unknown section '\(name)' (known: \(known))", code: 2)
                }
                sections.insert(section)
            }
            only = sections
        }
        // A partial or quick run never replaces the full report unless asked to.
        let out = a.value("--out") ?? (quick || only != nil ? nil : "docs/benchmarks.md")
        let report = try await BenchmarkReport.run(quick: quick, only: only, progress: logLine)
        print(report.markdown)
        if let out {
            do { try report.markdown.write(toFile: out, atomically: true, encoding: .utf8) } catch {
                fail("bench: cannot write \(out): \(error)")
            }
            logLine("bench: wrote \(out)")
        }
    }
}
