import Foundation
import Media
import RoomServer
import TestSupport
import Testing
import WHIP

/// The WHIP/WHEP client fails with a typed error that keeps its cause: a bad URL, nothing to send, an
/// unreadable file (before any network exchange), and a server that refuses the offer.
@Suite struct WHIPClientErrorTests {
    @Test func aBadURLKeepsTheParserError() async {
        do {
            _ = try await WHIPClient.publish(
                url: "not a url", token: nil, video: .synthetic, audio: .none, duration: 0.1)
            Issue.record("a bad URL was accepted")
        } catch {
            guard case .badURL(let url, let cause) = error else {
                Issue.record("expected badURL, got \(error)")
                return
            }
            #expect(url == "not a url")
            #expect(!"\(cause)".isEmpty)
        }
    }

    @Test func nothingToSendIsRefusedBeforeAnyExchange() async {
        do {
            _ = try await WHIPClient.publish(
                url: "http://127.0.0.1:9/whip/r", token: nil, video: .none, audio: .none, duration: 0.1)
            Issue.record("nothing to send was accepted")
        } catch {
            guard case .nothingToSend = error else {
                Issue.record("expected nothingToSend, got \(error)")
                return
            }
        }
    }

    /// Port 9 (discard) is closed here: had the file been opened after connecting, the error
    /// would be an HTTP one.
    @Test func anUnreadableFileFailsFirstWithItsErrno() async {
        let path = temporaryPath("missing-\(UUID().uuidString).ivf")
        do {
            _ = try await WHIPClient.publish(
                url: "http://127.0.0.1:9/whip/r", token: nil, video: .file(path), audio: .none, duration: 0.1)
            Issue.record("a missing file was accepted")
        } catch {
            #expect(error.description.hasPrefix("file error: cannot read \(path)"), "\(error)")
            guard case .source(.unreadable(let p, let code)) = error else {
                Issue.record("expected source(unreadable), got \(error)")
                return
            }
            #expect(p == path)
            #expect(code == ENOENT)
        }
    }

    /// A real room server refuses a WHIP offer without a token: 401, and the session never starts.
    @Test func aRefusedOfferCarriesTheStatusAndBody() async throws {
        let server = try startTestServer()
        defer { server.stop() }
        do {
            _ = try await WHIPClient.publish(
                url: "http://127.0.0.1:\(server.httpPort)/whip/r1", token: nil, video: .synthetic, audio: .none,
                duration: 0.1)
            Issue.record("an offer without a token was accepted")
        } catch {
            guard case .rejected(let status, _, let body) = error else {
                Issue.record("expected rejected, got \(error)")
                return
            }
            #expect(status == 401)
            #expect(body.contains("4002"), "\(body)")
        }
    }
}
