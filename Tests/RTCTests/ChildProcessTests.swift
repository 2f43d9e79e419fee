import Foundation
import SystemCalls
import Testing

@Suite("ChildProcess")
struct ChildProcessTests {
    @Test func stdoutStderrAndTheExitCodeComeBack() throws {
        let child = try ChildProcess(
            "sh", ["-c", "printf out; printf err >&2; exit 3"], standardOutput: .pipe, standardError: .pipe)
        #expect(ChildProcess.readToEnd(child.standardOutput!) == Array("out".utf8))
        #expect(ChildProcess.readToEnd(child.standardError!) == Array("err".utf8))
        #expect(child.wait() == 3)
        #expect(child.wait() == 3)
        #expect(child.hasExited)
    }

    @Test func aSignalledChildReports128PlusTheSignal() throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(!child.hasExited)
        child.signal(SIGKILL)
        #expect(child.wait() == 128 + SIGKILL)
    }

    /// The child starts with SIGTERM deliverable even when the spawning thread blocks it (dispatch
    /// threads do), so `signal(SIGTERM)` ends it.
    @Test func sigtermReachesAChildOfAThreadThatBlocksIt() throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let child = try ChildProcess("/bin/sleep", ["30"])
        child.signal(SIGTERM)
        #expect(child.wait() == 128 + SIGTERM)
    }

    @Test func standardInputIsAPipeTheParentCloses() throws {
        let child = try ChildProcess("cat", [], standardInput: .pipe, standardOutput: .pipe)
        let sent = Array("line\n".utf8)
        #expect(sent.withUnsafeBytes { write(child.standardInput!, $0.baseAddress, $0.count) } == sent.count)
        child.closeStandardInput()
        #expect(ChildProcess.readToEnd(child.standardOutput!) == sent)
        #expect(child.wait() == 0)
    }

    @Test func theEnvironmentIsReplacedWhenGiven() throws {
        let child = try ChildProcess(
            "/bin/sh", ["-c", "printf \"$A:$HOME\""], environment: ["A": "1"], standardOutput: .pipe)
        #expect(String(decoding: ChildProcess.readToEnd(child.standardOutput!), as: UTF8.self) == "1:")
        child.wait()
    }

    /// Nothing of the parent's leaks: a descriptor opened without close-on-exec is not open in the child.
    @Test func theParentsDescriptorsAreClosedInTheChild() throws {
        let leaky = open("/dev/null", O_RDONLY)
        #expect(leaky > 2)
        defer { close(leaky) }
        let child = try ChildProcess("/bin/sh", ["-c", "ls /proc/self/fd"], standardOutput: .pipe)
        let listed = String(decoding: ChildProcess.readToEnd(child.standardOutput!), as: UTF8.self)
            .split(separator: "\n").compactMap { Int32($0) }
        child.wait()
        #expect(!listed.contains(leaky), "\(listed)")
        #expect(listed.filter { $0 > 3 }.isEmpty, "\(listed)")
    }

    /// Foundation's `Process` crashed in CI when the test process held about 1,400 descriptors; the
    /// spawn does not list them at all.
    @Test func manyOpenDescriptorsInTheParentAreFine() throws {
        let held = (0..<2000).map { _ in open("/dev/null", O_RDONLY | O_CLOEXEC) }
        defer { for fd in held where fd >= 0 { close(fd) } }
        #expect(held.allSatisfy { $0 >= 0 })
        let child = try ChildProcess("/bin/true", [])
        #expect(child.wait() == 0)
    }

    @Test func aMissingExecutableIsAClearError() {
        #expect(throws: ChildProcessError.self) { try ChildProcess("/nonexistent/tool", []) }
        do {
            _ = try ChildProcess("no-such-tool-on-path", [])
            Issue.record("spawned a tool that does not exist")
        } catch {
            #expect(error.description.contains("no-such-tool-on-path"))
        }
    }
}
