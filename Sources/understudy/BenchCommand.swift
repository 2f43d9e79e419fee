import Benchmarks
import Foundation

/// `understudy bench [--quick] [--out FILE]`: runs the benchmarks and writes the report.
func runBench(_ args: [String]) async {
    do {
        let a = try Arguments(args, valueOptions: ["--out"], switches: ["--quick"])
        let quick = a.flag("--quick")
        let out = a.value("--out") ?? (quick ? nil : "docs/benchmarks.md")
        let report = try await BenchmarkReport.run(quick: quick, progress: logLine)
        print(report.markdown)
        if let out {
            do { try report.markdown.write(toFile: out, atomically: true, encoding: .utf8) } catch {
                fail("bench: cannot write \(out): \(error)")
            }
            logLine("bench: wrote \(out)")
        }
    } catch let e as Arguments.Failure {
        fail("bench: \(e)", code: 2)
    } catch {
        fail("bench: \(error)")
    }
}
