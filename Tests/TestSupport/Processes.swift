import Foundation

/// Runs `tool` (an absolute path, or a name looked up on PATH) to completion; returns its exit
/// status, standard output and standard error.
public func runTool(_ tool: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
    let process = Process()
    if tool.hasPrefix("/") {
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
    }
    let outPipe = Pipe()
    let errPipe = Pipe()
    process.standardOutput = outPipe
    process.standardError = errPipe
    try process.run()
    // Drain stderr on another thread while reading stdout, so a chatty tool never blocks on a full pipe.
    let errData = ErrorPipeReader(errPipe)
    let out = outPipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (
        process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: errData.wait(), as: UTF8.self)
    )
}

/// Standard output then standard error of `tool`, trimmed: empty when a quiet tool (`-v error`)
/// succeeded.
public func runToolText(_ tool: String, _ arguments: [String]) throws -> String {
    let r = try runTool(tool, arguments)
    return (r.out + r.err).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Reads a pipe to its end on a thread of its own.
private final class ErrorPipeReader: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
