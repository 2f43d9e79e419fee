import Benchmarks
import RTC
import Testing

/// The SRTP anchor of the receive-path figures: libsrtp's bare unprotect, timed.
@Suite struct SRTPBenchTests {
    @Test func benchmarkHelperReportsAPositiveCost() {
        let cost = SRTPBench.unprotectCost(profile: .aeadAES128GCM, payloadSize: 1000, count: 200)
        #expect(cost.isFinite)
        #expect(cost > 0)
        #expect(
            SRTPBench.unprotectCost(profile: .aes128CMHMACSHA1_80, payloadSize: 100, count: 50).isFinite)
    }

    /// The protect row times both implementations on packets each of them accepts (a failure is NaN).
    @Test(arguments: [SRTPProfile.aeadAES128GCM, .aes128CMHMACSHA1_80])
    func protectCostIsMeasuredForBothImplementations(profile: SRTPProfile) {
        for implementation in [SRTPBench.Implementation.libsrtp, .understudy] {
            let cost = SRTPBench.protectCost(
                profile: profile, payloadSize: 1000, count: 200, implementation: implementation)
            #expect(cost.isFinite && cost > 0)
        }
    }
}
