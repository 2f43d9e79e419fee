// swift-tools-version:6.0
import PackageDescription

// Layout follows docs/architecture.md: dependencies point downward only.
// RTCWire (pure parsers) <- RTC (I/O, ICE, DTLS, SRTP, RTP engine) <- CLI
// RTCWire <- Media (codecs, sources, recorders) <- CLI
let package = Package(
    name: "Understudy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "understudy", targets: ["understudy"]),
        .library(name: "RTCWire", targets: ["RTCWire"]),
        .library(name: "RTC", targets: ["RTC"]),
        .library(name: "Media", targets: ["Media"]),
        .library(name: "Signaling", targets: ["Signaling"]),
        .library(name: "Agent", targets: ["Agent"]),
    ],
    targets: [
        // C libraries, one module map and shim header each.
        .systemLibrary(name: "COpenSSL", path: "CModules/COpenSSL", pkgConfig: "openssl"),
        .systemLibrary(name: "CSRTP", path: "CModules/CSRTP", pkgConfig: "libsrtp2"),
        .systemLibrary(name: "COpus", path: "CModules/COpus", pkgConfig: "opus"),
        .systemLibrary(name: "CVPX", path: "CModules/CVPX", pkgConfig: "vpx"),
        .systemLibrary(name: "CALSA", path: "CModules/CALSA", pkgConfig: "alsa"),
        .systemLibrary(name: "CTurboJPEG", path: "CModules/CTurboJPEG", pkgConfig: "libturbojpeg"),
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

        .target(name: "RTCWire", path: "Sources/RTCWire"),
        .target(name: "RTC", dependencies: ["RTCWire", "COpenSSL", "CSRTP"], path: "Sources/RTC"),
        .target(name: "Media", dependencies: ["RTCWire", "COpus", "CVPX"], path: "Sources/Media"),
        .target(name: "Signaling", dependencies: ["RTCWire"], path: "Sources/Signaling"),
        // Daemon behaviour: media pumps, recorders, WHIP/WHEP sessions (later: the room agent).
        .target(name: "Agent", dependencies: ["RTCWire", "RTC", "Media", "Signaling"], path: "Sources/Agent"),
        .executableTarget(
            name: "understudy",
            dependencies: ["RTCWire", "RTC", "Media", "Signaling", "Agent"],
            path: "Sources/understudy"
        ),
        // A test peer driven over stdin/stdout by the Chromium interop tests.
        .executableTarget(
            name: "interop-peer",
            dependencies: ["RTCWire", "RTC", "Media", "Agent"],
            path: "Sources/InteropPeer"
        ),

        .testTarget(name: "RTCWireTests", dependencies: ["RTCWire"], path: "Tests/RTCWireTests"),
        .testTarget(name: "RTCTests", dependencies: ["RTC", "RTCWire"], path: "Tests/RTCTests"),
        .testTarget(name: "MediaTests", dependencies: ["Media", "RTCWire"], path: "Tests/MediaTests"),
    ],
    cxxLanguageStandard: .cxx17
)
