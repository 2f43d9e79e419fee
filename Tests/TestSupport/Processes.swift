import Foundation
import SystemCalls

/// Runs `tool` (an absolute path, or a name looked up on PATH) to completion; returns its exit
/// status, standard output and standard error. (``ChildProcess``, not Foundation's `Process`, which
/// crashes when the test process holds a thousand descriptors.)
public func runTool(_ tool: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
    let process = try ChildProcess(tool, arguments, standardOutput: .pipe, standardError: .pipe)
    // Drain stderr on another thread while reading stdout, so a chatty tool never blocks on a full pipe.
    let errData = ErrorPipeReader(process)
    let out = ChildProcess.readToEnd(process.standardOutput!)
    let status = process.wait()
    return (status, String(decoding: out, as: UTF8.self), String(decoding: errData.wait(), as: UTF8.self))
}

/// Standard output then standard error of `tool`, trimmed: empty when a quiet tool (`-v error`)
/// succeeded.
public func runToolText(_ tool: String, _ arguments: [String]) throws -> String {
    let r = try runTool(tool, arguments)
    return (r.out + r.err).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Reads a child's stderr to its end on a thread of its own.
private final class ErrorPipeReader: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data: [UInt8] = []

    init(_ process: ChildProcess) {
        // The thread keeps `process`, so its descriptor stays open until the read ends.
        Thread.detachNewThread { [self] in
            data = ChildProcess.readToEnd(process.standardError!)
            done.signal()
        }
    }

    func wait() -> [UInt8] {
        done.wait()
        return data
    }
}
