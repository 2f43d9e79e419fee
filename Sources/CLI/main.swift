import Agent
import Foundation
import WHIP

#if canImport(Glibc)
    import Glibc
#endif

// The CLI stays thin: parse options, call into Agent, print one clear line on failure.

let usage = """
    usage: understudy <command> [options]

    commands:
      whip URL [--token T] [--video testsrc|none|FILE.ivf] [--audio tone|none|FILE.ogg] [--duration SECONDS]
          publish to a WHIP endpoint (RFC 9725)
      whep URL [--token T] --record FILE.webm|.mkv|.ogg|.ivf [--duration SECONDS]
          play from a WHEP endpoint and record without transcoding
      serve [--listen HOST:PORT] [--media-address IP] [--udp-port N | --udp-ports A-B] [--config FILE.json] [--secret S] [--anyone-may-end]
          run the room server (HTTP + WebSocket signalling on 127.0.0.1:7880 by default)
      token --secret S --room R [--participant ID] [--permissions allow_join,allow_mod] [--ttl 2h]
          print an HS256 room token
      demo [--duration 20] [--out DIR]
          the main job on the embedded server: an agent records a host, is invited on stage, publishes
      bench [--quick] [--out FILE]
          run the performance benchmarks and print ratios against their anchors
      join --server URL --room R [--token T | --secret S] [--name N] [--id ID] [--mode M] [--agent] [--consume all|stage|none|ID,ID] [--consume-kinds audio,video] [--max-video N] [--quality low|medium|high] [--accept-invites trusted|yes|no|from:ID,ID] [--record DIR] [--record-format webm|mp4|ogg+ivf] [--snapshot-every DURATION] [--relay rtp://HOST:PORT] [--relay-room ROOM] [--video testsrc|none|FILE] [--audio tone|none|FILE|alsa:DEVICE] [--duration S] [--metrics 127.0.0.1:PORT] [--log-format text|json]
          a headless participant: consumes, records, relays, follows stage invites
          --reconnect-for 5m: how long a lost connection (a server restart) is retried before leaving with 1102
      invite --server URL --room R --participant ID [--mode SEND_AND_RECV] [--token T | --secret S]
      pubsub publish|subscribe --server URL --room R --topic T [--message M] [--persist] [--token T | --secret S]
      load --server URL --room R [--rooms N] [--token T | --secret S] [--publishers N] [--audio-publishers N] [--subscribers N] [--duration 60s] [--join-rate 10/s] [--layout speaker|3x3|4x4|5x5] [--no-simulcast] [--invite-every 30s] [--threads N] [--json FILE] [--quiet]
          many virtual participants in one process (docs/load-testing.md)
      scenario FILE.json... [--server URL] [--secret S] [--junit FILE] [--out DIR] [--quiet]
          run scripted stage tests with bots and expectations (docs/scenarios.md); exit 0 only when all hold
      worker --redis redis://HOST:PORT[/DB] [--capacity N] [--out DIR] [--id ID] [--claim-timeout 5s]
          run recording/relay jobs from a fleet's Redis (docs/fleet.md)
      jobs submit --redis URL [--job-id ID] [--cost N] <join options> | jobs list|workers --redis URL [--json] | jobs stop ID --redis URL
          queue, list or stop fleet jobs
      analyze FILE [--json] [--fps N]
          full-reference checks of a recording of the synthetic media: drops, freezes, PSNR/SSIM, A/V offset
      completion bash
          print a bash completion script (source <(understudy completion bash))
    """

func fail(_ message: String, code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("understudy: \(message)\n".utf8))
    exit(code)
}

func logLine(_ message: String) {
    FileHandle.standardError.write(Data("understudy: \(message)\n".utf8))
}

func sourceChoice(_ value: String?, synthetic: String, option: String) throws(Arguments.Failure) -> SourceChoice {
    guard let value else { return .synthetic }
    switch value {
    case synthetic: return .synthetic
    case "none": return .none
    default:
        guard FileManager.default.isReadableFile(atPath: value) else {
            throw .badValue(option, "'\(value)' is not '\(synthetic)', 'none' or a readable file")
        }
        return .file(value)
    }
}

func runWHIP(_ args: [String]) async {
    await runCommand("whip") {
        let a = try Arguments(args, help: Help.whip)
        guard let url = a.positionals.first else { throw Arguments.Failure.missingPositional("the WHIP endpoint URL") }
        guard a.positionals.count == 1 else { throw Arguments.Failure.unexpected(a.positionals[1]) }
        let video = try sourceChoice(a.value("--video"), synthetic: "testsrc", option: "--video")
        let audio = try sourceChoice(a.value("--audio"), synthetic: "tone", option: "--audio")
        let duration = try a.seconds("--duration", default: 30)
        ShutdownSignal.shared.install()
        let summary = try await WHIPClient.publish(
            url: url, token: a.value("--token"), video: video, audio: audio, duration: duration,
            iceServers: try iceServers(a) ?? [], log: logLine,
            wait: { await ShutdownSignal.shared.sleep(seconds: $0) })
        logLine("whip done: \(summary.line)")
    }
}

func runWHEP(_ args: [String]) async {
    await runCommand("whep") {
        let a = try Arguments(args, help: Help.whep)
        guard let url = a.positionals.first else { throw Arguments.Failure.missingPositional("the WHEP endpoint URL") }
        guard a.positionals.count == 1 else { throw Arguments.Failure.unexpected(a.positionals[1]) }
        guard let record = a.value("--record") else { throw Arguments.Failure.missingValue("--record") }
        let duration = try a.seconds("--duration", default: 30)
        ShutdownSignal.shared.install()
        let summary = try await WHIPClient.play(
            url: url, token: a.value("--token"), recordPath: record, duration: duration,
            iceServers: try iceServers(a) ?? [], log: logLine,
            wait: { await ShutdownSignal.shared.sleep(seconds: $0) })
        logLine("whep done: \(summary.line)")
        if summary.videoFrames == 0 && summary.audioFrames == 0 {
            fail("whep: no media was received")
        }
    }
}

// A file size limit (RLIMIT_FSIZE) must not kill a recorder with SIGXFSZ: ignored, the write fails
// with EFBIG, and the recorder reports it as it reports a full disk (issue 31 item 16).
signal(SIGXFSZ, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    print(usage)
    exit(2)
}
let rest = Array(arguments.dropFirst())
if Help.isRequested(rest), let help = Help.command(command) {
    print(help.text, terminator: "")
    exit(0)
}
switch command {
case "whip": await runWHIP(rest)
case "whep": await runWHEP(rest)
case "bench": await runBench(rest)
case "demo": await runDemo(rest)
case "serve": await runServe(rest)
case "token": await runToken(rest)
case "join": await runJoin(rest)
case "invite": await runInvite(rest)
case "pubsub": await runPubSub(rest)
case "load": await runLoad(rest)
case "scenario": await runScenario(rest)
case "worker": await runWorker(rest)
case "jobs": await runJobs(rest)
case "analyze": await runAnalyze(rest)
case "completion": runCompletion(rest)
case "-h", "--help", "help":
    if let name = rest.first, let help = Help.command(name) {
        print(help.text, terminator: "")
    } else {
        print(usage + "\n`understudy COMMAND --help` shows a command's options and an example.")
    }
default: fail("unknown command '\(command)'\n\(usage)", code: 2)
}
// The command has finished its files. `exit` would run the atexit handlers, among them OpenSSL's
// global cleanup, while loop and decode threads may still be in libcrypto (a stopped agent with
// `--analyze` and an impaired link crashed there with SIGSEGV); stdio is flushed, then the process ends.
fflush(nil)
_exit(0)

/// Runs one command's `body`: a usage error (``Arguments/Failure``) exits with code 2, any other
/// error with 1, each as one line that starts with the command's `name`.
func runCommand(_ name: String, _ body: () async throws -> Void) async {
    do {
        try await body()
    } catch let e as Arguments.Failure {
        fail("\(name): \(e)", code: 2)
    } catch {
        fail("\(name): \(error)")
    }
}

/// Prints `value` as the `--json` output of a command: pretty, keys sorted, slashes unescaped.
func printJSON<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
