import Glibc

/// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34): Glibc's Swift module does not export it.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
func sys_posix_spawn_file_actions_addclosefrom_np(_ actions: UnsafeMutableRawPointer, _ from: Int32) -> Int32

/// `pipe2(2)`, a GNU call Glibc's Swift module does not export.
@_silgen_name("pipe2")
func sys_pipe2(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// Why a child process could not start.
public struct ChildProcessError: Error, CustomStringConvertible {
    /// What failed, with the `errno` text.
    public let description: String
}

/// A child process started with `posix_spawn`, for tools a test or a benchmark runs (ffprobe,
/// redis-server, aiortc peers).
///
/// Foundation's `Process` is not used for this on Linux: to close the parent's descriptors in the
/// child it copies every entry of `/proc/self/fd` as a full 256-byte name, which reads past the end
/// of the directory buffer and crashes when a process holds about a thousand descriptors (a test
/// suite full of sockets does). Here the child closes every descriptor from 3 up in one file action
/// (`closefrom`), so nothing of the parent's leaks and nothing is listed; pipes are made close-on-exec
/// so a sibling spawned at the same moment never holds their write ends open. The child starts with
/// no blocked signals and default handlers (a dispatch thread blocks SIGTERM, which a child would
/// otherwise inherit).
// Safe: `pid` and the descriptors are immutable; `exitStatus` is guarded by `lock`.
public final class ChildProcess: @unchecked Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The parent's own stream.
        case inherit
        /// `/dev/null`.
        case null
        /// A pipe; the parent's end is ``standardInput``, ``standardOutput`` or ``standardError``.
        case pipe
        /// This open descriptor (a file the caller opened); the caller keeps and closes it.
        case descriptor(Int32)
        /// For stderr: wherever stdout goes (`2>&1`).
        case standardOutput
    }

    /// The child's process ID.
    public let pid: pid_t
    /// The write end of the child's stdin when it is a ``Stream/pipe``; ``closeStandardInput()`` closes it.
    public private(set) var standardInput: Int32?
    /// The read end of the child's stdout when it is a ``Stream/pipe``; open while this object
    /// lives (a reader on another thread keeps the object).
    public let standardOutput: Int32?
    /// The read end of the child's stderr when it is a ``Stream/pipe``, likewise.
    public let standardError: Int32?

    /// Guards `exitStatus` and `standardInput`.
    private var lock = pthread_mutex_t()
    /// Held while reaping, so that two waiters never both call `waitpid`.
    private var reapLock = pthread_mutex_t()
    private var exitStatus: Int32?

    /// Starts `executable` (an absolute path, or a name looked up on `PATH`) with `arguments`.
    /// - Parameter environment: the child's whole environment; nil inherits the parent's.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Stream = .null, standardOutput: Stream = .inherit, standardError: Stream = .inherit
    ) throws(ChildProcessError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // The parent's ends of the pipes, and every descriptor to close here after the spawn.
        var parentEnds: [Int32?] = [nil, nil, nil]
        var closeAfterSpawn: [Int32] = []
        func fail(_ what: String, _ code: Int32) -> ChildProcessError {
            for fd in closeAfterSpawn { close(fd) }
            for case let fd? in parentEnds { close(fd) }
            return ChildProcessError(description: "\(executable): \(what): \(String(cString: strerror(code)))")
        }
        for (target, stream) in [(Int32(0), standardInput), (1, standardOutput), (2, standardError)] {
            switch stream {
            case .inherit:
                continue
            case .null:
                let fd = open("/dev/null", O_RDWR | O_CLOEXEC)
                guard fd >= 0 else { throw fail("open /dev/null", errno) }
                closeAfterSpawn.append(fd)
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .descriptor(let fd):
                posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .standardOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, target)
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard sys_pipe2(&ends, O_CLOEXEC) == 0 else { throw fail("pipe", errno) }
                let (childEnd, parentEnd) = target == 0 ? (ends[0], ends[1]) : (ends[1], ends[0])
                closeAfterSpawn.append(childEnd)
                parentEnds[Int(target)] = parentEnd
                posix_spawn_file_actions_adddup2(&actions, childEnd, target)
            }
        }
        _ = withUnsafeMutablePointer(to: &actions) { sys_posix_spawn_file_actions_addclosefrom_np($0, 3) }

        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaultSignals = sigset_t()
        sigemptyset(&defaultSignals)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD] { sigaddset(&defaultSignals, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaultSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map {
            $0.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer {
            for p in argv { free(p) }
            for p in envp ?? [] { free(p) }
        }
        var child: pid_t = 0
        let result = argv.withUnsafeBufferPointer { args in
            let argvPointer = UnsafeMutablePointer(mutating: args.baseAddress!)
            let spawn = { (env: UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 in
                executable.hasPrefix("/")
                    ? posix_spawn(&child, executable, &actions, &attributes, argvPointer, env)
                    : posix_spawnp(&child, executable, &actions, &attributes, argvPointer, env)
            }
            guard let envp else { return spawn(environ) }
            return envp.withUnsafeBufferPointer { spawn($0.baseAddress) }
        }
        guard result == 0 else { throw fail("spawn", result) }
        for fd in closeAfterSpawn { close(fd) }
        pid = child
        self.standardInput = parentEnds[0]
        self.standardOutput = parentEnds[1]
        self.standardError = parentEnds[2]
        pthread_mutex_init(&lock, nil)
        pthread_mutex_init(&reapLock, nil)
    }

    deinit {
        for case let fd? in [standardInput, standardOutput, standardError] { close(fd) }
        pthread_mutex_destroy(&lock)
        pthread_mutex_destroy(&reapLock)
    }

    /// Closes the write end of the child's stdin pipe: the child reads end of file.
    public func closeStandardInput() {
        withLock {
            if let fd = standardInput { close(fd) }
            standardInput = nil
        }
    }

    /// Sends `signal` to the child (nothing once it has been waited for).
    public func signal(_ signal: Int32) {
        withLock { if exitStatus == nil { _ = kill(pid, signal) } }
    }

    /// Whether the child has exited (reaping it when it has).
    public var hasExited: Bool { reap(blocking: false) != nil }

    /// Waits for the child to exit and returns its exit code, or 128 + the signal that ended it
    /// (as a shell reports it); -1 if something else reaped it. Safe to call again and from
    /// several threads.
    @discardableResult
    public func wait() -> Int32 { reap(blocking: true) ?? -1 }

    private func reap(blocking: Bool) -> Int32? {
        if blocking {
            pthread_mutex_lock(&reapLock)
        } else if pthread_mutex_trylock(&reapLock) != 0 {
            return nil  // another thread is waiting for the exit: not seen yet
        }
        defer { pthread_mutex_unlock(&reapLock) }
        if let status = withLock({ exitStatus }) { return status }
        var status: Int32 = 0
        var done: pid_t
        repeat { done = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while done < 0 && errno == EINTR
        guard done == pid || (blocking && done < 0) else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
        let code = done < 0 ? -1 : status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        withLock {
            exitStatus = code
            if let fd = standardInput { close(fd) }
            standardInput = nil
        }
        return code
    }

    private func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return body()
    }

    /// Reads `fd` to its end (the child closed it), blocking; the bytes read.
    public static func readToEnd(_ fd: Int32) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: chunk[0..<n])
            } else if n == 0 || errno != EINTR {
                return bytes
            }
        }
    }
}
