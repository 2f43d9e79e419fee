import Foundation
import RTC
import Testing

@testable import Benchmarks

/// The SFU row's CPU split: per-thread /proc parsing, the window difference, the perf classifier,
/// and the loopback send floor.
@Suite(.serialized) struct ProcessCPUSplitTests {
    @Test func parsesAThreadStatLineWhoseNameHasSpacesAndParentheses() throws {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 10 0 0 0 250 75 0 0 20 0 9 0 100"
        let sample = try #require(ThreadCPUSample.parse(stat: line, ticksPerSecond: 100))
        #expect(sample.name == "a (b) c")
        #expect(sample.user == 2.5)
        #expect(sample.system == 0.75)
        #expect(ThreadCPUSample.parse(stat: "4242 (x) S 1 2", ticksPerSecond: 100) == nil)
        #expect(ThreadCPUSample.parse(stat: "garbage", ticksPerSecond: 100) == nil)
    }

    @Test func splitsTheWindowBetweenTheLoopThreadAndTheOthers() {
        let start: [Int32: ThreadCPUSample] = [
            1: ThreadCPUSample(name: "understudy", user: 1, system: 1),
            2: ThreadCPUSample(name: "room-sfu", user: 10, system: 20),
        ]
        let end: [Int32: ThreadCPUSample] = [
            1: ThreadCPUSample(name: "understudy", user: 1.5, system: 1.25),
            2: ThreadCPUSample(name: "room-sfu", user: 12, system: 23),
            // A thread that started within the window counts from zero.
            3: ThreadCPUSample(name: "worker", user: 0.5, system: 0),
        ]
        let split = ProcessCPUSplit.between(start, end, loopThreadName: "room-sfu")
        #expect(split.loopUser == 2)
        #expect(split.loopSystem == 3)
        #expect(split.otherUser == 1)
        #expect(split.otherSystem == 0.25)
        #expect(split.total == 6.25)
    }

    @Test func chargesPerfSamplesToTheInnermostActivity() {
        let script = """

            \tffffffff8226e079 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
            \tffffffff81e7fe4d __x64_sys_sendmmsg ([kernel.kallsyms])
            \t          10b106 __sendmmsg (/usr/lib/x86_64-linux-gnu/libc.so.6)
            \t          1ad155 $s3RTC9EventLoopC11enqueueSend (/bin/understudy)

            \t          20a880 [unknown] (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)
            \t          1c9659 $s3RTC11SRTPSessionC10protectRTP (/bin/understudy)
            \t          1c9600 $s3SFU11SFUConsumerC7forward (/bin/understudy)

            \t          1c9659 swift_retain (/usr/lib/swift/linux/libswiftCore.so)
            \t          1c9600 $s3SFU11SFUProducerC7receive (/bin/understudy)

            \t          1c9600 $s3RTC14PeerConnectionC4tick3now (/bin/understudy)
            \t          1c9600 $s3RTC9EventLoopC3run (/bin/understudy)

            """
        let counts = LoopProfile.classify(perfScript: script)
        #expect(counts[LoopProfile.categories[0]] == 1)
        #expect(counts[LoopProfile.categories[3]] == 1)
        #expect(counts[LoopProfile.categories[4]] == 1)
        #expect(counts[LoopProfile.categories[6]] == 1)
        #expect(counts.values.reduce(0, +) == 4)
    }

    /// The floor row sends through the loop's real path and every datagram arrives, one per
    /// message without GSO and several per message with it.
    @Test(arguments: [false, true]) func sendFloorSendsEveryDatagram(segmentation: Bool) async throws {
        let perRound = 2 * EventLoop.sendBatchCapacity
        let r = try await SendFloorRow.run(
            destinations: 8, size: 300, perRound: perRound, rounds: 2, segmentation: segmentation)
        #expect(r.sent == 2 * perRound)
        #expect(r.received == 2 * perRound)
        #expect(r.rounds.count == 2)
        #expect(r.medianNanoseconds > 0)
        if segmentation {
            // 1024 datagrams per flush over 8 destinations: runs of 128, sent as two messages of 64.
            #expect(r.messages * 64 == r.sent)
        } else {
            #expect(r.messages == r.sent)
        }
    }

    /// An event loop names its thread after itself, which is how the SFU row finds the loop thread.
    @Test func eventLoopThreadCarriesItsName() async throws {
        let loop = try EventLoop.make(name: "named-loop-test-long")
        defer { loop.shutdown() }
        let name = await loop.submit { () -> String in
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        }
        #expect(name == "named-loop-test\n")
    }
}
