// swift-tools-version:6.0
import PackageDescription

// Layout follows docs/architecture.md ("Module graph"), which lists these dependencies edge for edge;
// scripts/check-module-graph.py checks that, and that every target declares exactly what it imports.
// Dependencies point downward only. At the bottom, RTCWire (pure parsers, EncodedFrame, MediaSource)
// and SystemCalls (the Linux calls Glibc's Swift module lacks);
// above them RTC (I/O, ICE, DTLS, SRTP, RTP engine, MediaPump) and Media (codecs, sources, recorders),
// which do not know each other; then the protocol clients and the server (Understudy, WHIP, LoadGen,
// RoomServer), the agents and tools built on them, and the CLI on top.
// The packet path is single-threaded by design (one event loop owns each object), so Swift's
// dynamic exclusivity checks only cost time there; release builds of these modules skip them.
let hotPathSettings: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Understudy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "understudy", targets: ["CLI"]),
        .library(name: "RTCWire", targets: ["RTCWire"]),
        .library(name: "RTC", targets: ["RTC"]),
        .library(name: "Media", targets: ["Media"]),
        .library(name: "Signaling", targets: ["Signaling"]),
        .library(name: "RoomProtocol", targets: ["RoomProtocol"]),
        .library(name: "Janus", targets: ["Janus"]),
        .library(name: "Redis", targets: ["Redis"]),
        .library(name: "Fleet", targets: ["Fleet"]),
        .library(name: "Cluster", targets: ["Cluster"]),
        .library(name: "Agent", targets: ["Agent"]),
        .library(name: "Egress", targets: ["Egress"]),
        .library(name: "WHIP", targets: ["WHIP"]),
        .library(name: "SFU", targets: ["SFU"]),
        .library(name: "RoomServer", targets: ["RoomServer"]),
        .library(name: "Understudy", targets: ["Understudy"]),
        .library(name: "LoadGen", targets: ["LoadGen"]),
        .library(name: "Scenario", targets: ["Scenario"]),
    ],
    targets: [
        // C libraries, one module map and shim header each.
        .systemLibrary(name: "COpenSSL", path: "CModules/COpenSSL", pkgConfig: "openssl"),
        .systemLibrary(name: "CSRTP", path: "CModules/CSRTP", pkgConfig: "libsrtp2"),
        .systemLibrary(name: "COpus", path: "CModules/COpus", pkgConfig: "opus"),
        .systemLibrary(name: "CVPX", path: "CModules/CVPX", pkgConfig: "vpx"),
        // No pkgConfig: x264.pc adds -DX264_API_IMPORTS, which SwiftPM refuses with a warning.
        .systemLibrary(name: "CX264", path: "CModules/CX264"),
        // libaom: the AV1 encoder (realtime usage), for publishing AV1.
        .systemLibrary(name: "CAOM", path: "CModules/CAOM", pkgConfig: "aom"),
        .systemLibrary(name: "CALSA", path: "CModules/CALSA", pkgConfig: "alsa"),
        .systemLibrary(name: "CTurboJPEG", path: "CModules/CTurboJPEG", pkgConfig: "libturbojpeg"),
        // libavcodec: the decoder of H.264, VP9 and (through libdav1d) AV1 for captureImage.
        .systemLibrary(name: "CAVCodec", path: "CModules/CAVCodec", pkgConfig: "libavcodec"),
        // libyuv: the composite's scaling and blits (no pkg-config file in Debian's libyuv-dev).
        .systemLibrary(name: "CYUV", path: "CModules/CYUV"),
        // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses with a warning.
        .systemLibrary(name: "CHiredis", path: "CModules/CHiredis"),
        .target(
            name: "CAudioProcessing",
            path: "CModules/CAudioProcessing",
            cxxSettings: [
                .define("WEBRTC_POSIX"),
                .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD"),
                .unsafeFlags(["-I/usr/include/webrtc_audio_processing"]),
            ],
            linkerSettings: [.linkedLibrary("webrtc_audio_processing")]
        ),

        .target(name: "RTCWire", path: "Sources/RTCWire", swiftSettings: hotPathSettings),
        // The Linux calls Swift's Glibc module does not export (epoll, eventfd, recvmmsg/sendmmsg, accept4):
        // one home for the media event loop (RTC) and the signalling reactor (Signaling); and
        // ChildProcess, posix_spawn for the tools tests, benchmarks and the local Redis start.
        .target(name: "SystemCalls", path: "Sources/SystemCalls"),
        .target(
            name: "RTC", dependencies: ["RTCWire", "SystemCalls", "COpenSSL", "CSRTP"], path: "Sources/RTC",
            swiftSettings: hotPathSettings),
        .target(
            name: "Media",
            dependencies: [
                "RTCWire", "COpus", "CVPX", "CX264", "CAOM", "CTurboJPEG", "CALSA", "CAudioProcessing", "CAVCodec",
            ],
            path: "Sources/Media"),
        // Transport only: reactor, HTTP, WebSocket, JSON; it knows no room and no Janus.
        .target(name: "Signaling", dependencies: ["SystemCalls", "COpenSSL"], path: "Sources/Signaling"),
        // The room's vocabulary, spelled once: method and notification names, modes and track kinds with
        // their aliases, the envelope, `RoomError` and its name table, leave codes, the token (HS256, hence
        // COpenSSL), and the client core (requests matched to responses) that the SDK and the load bots share.
        .target(name: "RoomProtocol", dependencies: ["Signaling", "COpenSSL"], path: "Sources/RoomProtocol"),
        // The Janus HTTP API and VideoRoom requests (wire types only), for the Janus agent and load bots.
        .target(name: "Janus", dependencies: ["Signaling"], path: "Sources/Janus"),
        // Redis through hiredis, on its own queue: the shared state of clusters and bot fleets.
        .target(name: "Redis", dependencies: ["CHiredis", "SystemCalls"], path: "Sources/Redis"),
        // Room servers as a cluster over Redis: node registry, room placement, relayed joins.
        .target(
            name: "Cluster", dependencies: ["Redis", "RoomServer", "Signaling", "RoomProtocol"], path: "Sources/Cluster"
        ),
        // Bot fleets: typed recording/relay jobs from a Redis Stream, run by workers as RoomAgents; the
        // job service behind a room server's `POST /admin/jobs`; distributed load shares.
        .target(
            name: "Fleet",
            dependencies: ["Redis", "Agent", "Understudy", "LoadGen", "RoomServer", "Signaling", "RoomProtocol"],
            path: "Sources/Fleet"),
        // The selective forwarding unit: producers, consumers, layer selection, NACK/keyframe handling.
        .target(name: "SFU", dependencies: ["RTCWire", "RTC"], path: "Sources/SFU", swiftSettings: hotPathSettings),
        // The room service: signalling, room state, PubSub broker; media through the SFU.
        .target(
            name: "RoomServer", dependencies: ["RTCWire", "RTC", "SFU", "Signaling", "RoomProtocol"],
            path: "Sources/RoomServer",
            // The browser page, compiled into the binary (`PackageResources`).
            resources: [
                .embedInCode("Web/assets/index.html"), .embedInCode("Web/assets/room.js"),
                .embedInCode("Web/assets/style.css"),
            ]),
        // The client SDK: Room, Participant, PubSub, modes, events, errors, stats (spec: docs/spec).
        .target(
            name: "Understudy", dependencies: ["RTCWire", "RTC", "Media", "Signaling", "RoomProtocol"],
            path: "Sources/Understudy"),
        // The room agent (consume policy, stage invites, recording per participant, RTP relay) and the
        // Janus agent: daemon behaviour on top of the SDK.
        .target(
            name: "Agent",
            dependencies: ["RTCWire", "RTC", "Media", "Signaling", "Understudy", "RoomProtocol", "Janus", "Egress"],
            path: "Sources/Agent"),
        // Room composites and live outputs (MP4/WebM files, HLS, RTMP), off the packet loop.
        .target(name: "Egress", dependencies: ["RTCWire", "Media", "CYUV"], path: "Sources/Egress"),
        // WHIP publish and WHEP play (RFC 9725): one PeerConnection and an HTTP resource, no room.
        .target(name: "WHIP", dependencies: ["RTCWire", "RTC", "Media", "Signaling"], path: "Sources/WHIP"),
        // `understudy load`: many lightweight virtual participants in one process, sharing I/O threads.
        .target(
            name: "LoadGen", dependencies: ["RTCWire", "RTC", "Media", "Signaling", "RoomProtocol", "Janus"],
            path: "Sources/LoadGen", swiftSettings: hotPathSettings),
        // `understudy scenario`: scripted stage tests with several bots and expectations.
        .target(
            name: "Scenario",
            dependencies: ["RTCWire", "RTC", "Media", "Signaling", "Understudy", "Agent", "RoomProtocol", "Janus"],
            path: "Sources/Scenario"),
        // `understudy bench`: performance measurements reported as ratios against anchors.
        .target(
            name: "Benchmarks",
            dependencies: [
                "RTCWire", "RTC", "Media", "Signaling", "SFU", "RoomServer", "Understudy", "LoadGen",
                "Redis", "Cluster", "RoomProtocol", "Egress",
            ],
            path: "Sources/Benchmarks"),
        // The `understudy` executable (target CLI: `Sources/understudy` differed from `Sources/Understudy`
        // by case only, and the two collided on a case-insensitive file system).
        .executableTarget(
            name: "CLI",
            dependencies: [
                "RTCWire", "RTC", "Media", "Signaling", "Understudy", "Agent", "WHIP", "RoomServer", "Benchmarks",
                "LoadGen", "Scenario", "Redis", "Fleet", "Cluster", "RoomProtocol", "Janus",
            ],
            path: "Sources/CLI"
        ),
        // A test peer driven over stdin/stdout by the Chromium interop tests.
        .executableTarget(
            name: "interop-peer",
            dependencies: ["RTCWire", "RTC", "Media"],
            path: "Sources/InteropPeer"
        ),

        // Helpers every test target shares: tool runs (ffmpeg, ffprobe), media fixtures, a connected
        // PeerConnection pair, waits with deadlines, an in-process room server.
        .target(
            name: "TestSupport", dependencies: ["Media", "RTC", "RTCWire", "RoomServer", "SystemCalls"],
            path: "Tests/TestSupport"),
        // The SDK tests' helpers (a test server for the SDK, tokens, joined rooms, event logs), shared by
        // the SDK's and the agent's tests.
        .target(
            name: "SDKTestSupport",
            dependencies: ["RTCWire", "Understudy", "RoomServer", "Signaling", "RoomProtocol", "TestSupport"],
            path: "Tests/SDKTestSupport"),
        // The agent's tests' helpers (an agent started in a room, frame counts, scratch directories).
        .target(
            name: "AgentTestSupport",
            dependencies: ["Agent", "RoomServer", "Understudy", "TestSupport", "SDKTestSupport"],
            path: "Tests/AgentTestSupport"),
        .testTarget(
            name: "EgressTests", dependencies: ["Egress", "Media", "RTCWire", "SystemCalls", "TestSupport"],
            path: "Tests/EgressTests"),
        .testTarget(name: "RedisTests", dependencies: ["Redis"], path: "Tests/RedisTests"),
        .testTarget(
            name: "ClusterTests",
            dependencies: ["Cluster", "Redis", "RoomServer", "RoomProtocol", "Signaling", "TestSupport"],
            path: "Tests/ClusterTests"),
        .testTarget(
            name: "FleetTests",
            dependencies: ["Fleet", "Redis", "Agent", "LoadGen", "RoomServer", "Signaling", "RoomProtocol"],
            path: "Tests/FleetTests"),
        .testTarget(
            name: "RoomProtocolTests", dependencies: ["RoomProtocol", "RoomServer", "Signaling", "TestSupport"],
            path: "Tests/RoomProtocolTests"),
        .testTarget(name: "RTCWireTests", dependencies: ["RTCWire"], path: "Tests/RTCWireTests"),
        .testTarget(
            name: "RTCTests", dependencies: ["RTC", "RTCWire", "Media", "SystemCalls", "TestSupport"],
            path: "Tests/RTCTests"),
        .testTarget(name: "MediaTests", dependencies: ["Media", "RTCWire", "TestSupport"], path: "Tests/MediaTests"),
        .testTarget(
            name: "SignalingTests", dependencies: ["Signaling", "SystemCalls"], path: "Tests/SignalingTests",
            exclude: ["peers"]),
        .testTarget(name: "JanusTests", dependencies: ["Janus", "Signaling"], path: "Tests/JanusTests"),
        .testTarget(
            name: "SFUTests", dependencies: ["SFU", "RTC", "RTCWire", "Media", "SystemCalls", "TestSupport"],
            path: "Tests/SFUTests"),
        .testTarget(
            name: "RoomServerTests",
            dependencies: [
                "RoomServer", "Signaling", "RTC", "RTCWire", "Media", "RoomProtocol", "SFU", "SystemCalls",
                "TestSupport",
            ],
            path: "Tests/RoomServerTests"),
        .testTarget(
            name: "UnderstudyTests",
            dependencies: ["Understudy", "RoomServer", "RTCWire", "RTC", "Media", "TestSupport", "SDKTestSupport"],
            path: "Tests/UnderstudyTests"),
        .testTarget(
            name: "LoadGenTests",
            dependencies: ["LoadGen", "RoomServer", "Signaling", "RTCWire", "RTC", "RoomProtocol", "TestSupport"],
            path: "Tests/LoadGenTests"),
        .testTarget(
            name: "WHIPTests", dependencies: ["WHIP", "Media", "RoomServer", "TestSupport"], path: "Tests/WHIPTests"),
        .testTarget(name: "BenchmarksTests", dependencies: ["Benchmarks", "RTC", "RTCWire"], path: "Tests/BenchmarksTests"),
        .testTarget(
            name: "ScenarioTests", dependencies: ["Scenario", "RTC", "RoomServer", "Media", "TestSupport"],
            path: "Tests/ScenarioTests"),
        .testTarget(
            name: "AgentTests",
            dependencies: [
                "Agent", "Understudy", "RoomServer", "RTC", "RTCWire", "Media", "TestSupport", "SDKTestSupport",
                "AgentTestSupport", "Egress", "SystemCalls",
            ],
            path: "Tests/AgentTests"),
    ],
    cxxLanguageStandard: .cxx17
)
