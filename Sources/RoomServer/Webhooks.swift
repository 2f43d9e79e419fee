import Foundation
import RoomProtocol
import Signaling

/// Sends the server's lifecycle events (`job_started`, `job_updated`, `job_ended`, `job_failed`,
/// `room_started`, `room_finished`) to every configured receiver as signed JSON POSTs
/// (docs/protocol.md, "Webhooks").
///
/// ``post(_:fields:)`` only appends to a bounded queue per receiver and never blocks; each receiver
/// has a thread of its own that delivers, so a slow or dead receiver delays neither the server's
/// request threads nor the other receivers. A failed delivery is retried after 1, 2, 4, 8, 16 s
/// (``retryDelay(afterTry:)``) while the other queued events go on; a full queue drops the newest
/// event and counts it (`understudy_webhook_events_total{result="dropped"}`).
// Safe: each receiver's queue and the counters are guarded by that receiver's condition lock.
public final class WebhookSender: @unchecked Sendable {
    /// Tries per event, the first included: 1 + the five retries of ``retryDelay(afterTry:)``.
    public static let defaultMaxTries = 6
    /// Events queued per receiver before new ones are dropped.
    public static let defaultQueueLimit = 1000

    /// What a receiver's answer means for the event.
    public enum Outcome: Equatable, Sendable {
        /// 2xx: delivered.
        case delivered
        /// Network error, timeout, 408, 429 or 5xx: try again later.
        case retry
        /// Any other status: the receiver refuses it; not retried.
        case refused
    }

    /// The outcome of an HTTP status (nil: no answer at all, which is retried).
    public static func outcome(status: Int?) -> Outcome {
        guard let status else { return .retry }
        if (200..<300).contains(status) { return .delivered }
        if status == 408 || status == 429 || status >= 500 { return .retry }
        return .refused
    }

    /// Seconds to wait after failed try `n` (1-based) before the next: 1, 2, 4, 8, 16, … (capped at 16).
    public static func retryDelay(afterTry n: Int) -> Double {
        Double(1 << min(max(n, 1) - 1, 4))
    }

    /// Why these settings cannot work (a URL that is not `http://HOST[:PORT]/…`, no secret), or nil.
    public static func problem(urls: [String], secret: String?) -> String? {
        for url in urls {
            do throws(HTTPError) { _ = try HTTPURL(url) } catch {
                return "webhook URL '\(url)' is not an http:// URL (\(error))"
            }
        }
        if !urls.isEmpty, secret?.isEmpty ?? true { return "webhooks need a secret (--webhook-secret)" }
        return nil
    }

    private struct Pending {
        var body: [UInt8]
        var signature: String
        var timestamp: Int
        var tries = 0
        var due: Double = 0
    }

    // Safe: guarded by `condition`.
    private final class Receiver: @unchecked Sendable {
        let url: HTTPURL
        let condition = NSCondition()
        var queue: [Pending] = []
        var stopped = false
        var delivered = 0
        var failed = 0
        var dropped = 0
        init(url: HTTPURL) { self.url = url }
    }

    private let receivers: [Receiver]
    /// Job events another server of the cluster claimed and sent (guarded by `elsewhereLock`).
    private var elsewhere = 0
    private let elsewhereLock = NSLock()
    private let secret: String
    private let maxTries: Int
    private let queueLimit: Int
    private let timeout: Double
    private let delayScale: Double
    private let log: @Sendable (String) -> Void

    /// Senders to `urls` (checked with ``problem(urls:secret:)``), signing with `secret`.
    /// `delayScale` multiplies the retry delays (1 in service; tests shorten them).
    public init(
        urls: [String], secret: String, maxTries: Int = defaultMaxTries, queueLimit: Int = defaultQueueLimit,
        timeout: Double = 10, delayScale: Double = 1, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(HTTPError) {
        var parsed: [Receiver] = []
        for url in urls { parsed.append(Receiver(url: try HTTPURL(url))) }
        receivers = parsed
        self.secret = secret
        self.maxTries = max(1, maxTries)
        self.queueLimit = max(1, queueLimit)
        self.timeout = timeout
        self.delayScale = delayScale
        self.log = log
        for receiver in receivers {
            let thread = Thread { [weak self] in self?.deliverLoop(receiver) }
            thread.name = "webhook"
            thread.start()
        }
    }

    deinit { stop() }

    /// Stops the delivery threads; queued events are not sent.
    public func stop() {
        for r in receivers {
            r.condition.lock()
            r.stopped = true
            r.condition.broadcast()
            r.condition.unlock()
        }
    }

    /// Queues event `type` with `fields` (the job record, the room id, a reason) for every receiver;
    /// adds `id` and `timestamp`. Never blocks. Returns the event's id.
    @discardableResult
    public func post(_ type: String, fields: [String: JSONValue]) -> String {
        let id = "evt-" + UUID().uuidString.lowercased()
        let timestamp = Int(Date().timeIntervalSince1970)
        var object = fields
        object["id"] = .string(id)
        object["event"] = .string(type)
        object["timestamp"] = .number(Double(timestamp))
        let body = Array(JSONValue.object(object).jsonString.utf8)
        let pending = Pending(
            body: body, signature: WebhookSignature.sign(body: body, secret: secret), timestamp: timestamp)
        for r in receivers {
            r.condition.lock()
            if r.queue.count >= queueLimit {
                r.dropped += 1
            } else {
                r.queue.append(pending)
                r.condition.signal()
            }
            r.condition.unlock()
        }
        return id
    }

    /// Counts a job event not sent here because another server sharing the job service claimed it.
    public func noteSentElsewhere() { elsewhereLock.withLock { elsewhere += 1 } }

    /// Job events another server claimed and sent (see ``noteSentElsewhere()``).
    public var sentElsewhere: Int { elsewhereLock.withLock { elsewhere } }

    /// Events delivered, given up (refused or out of tries) and dropped (queue full), over all receivers.
    public var counts: (delivered: Int, failed: Int, dropped: Int) {
        var out = (delivered: 0, failed: 0, dropped: 0)
        for r in receivers {
            r.condition.lock()
            out.delivered += r.delivered
            out.failed += r.failed
            out.dropped += r.dropped
            r.condition.unlock()
        }
        return out
    }

    /// Events waiting (first tries and retries), over all receivers.
    public var queued: Int {
        receivers.reduce(0) { sum, r in
            r.condition.lock()
            defer { r.condition.unlock() }
            return sum + r.queue.count
        }
    }

    /// Its lines for `/metrics`: events by result, and those waiting.
    public func metricsText() -> String {
        let c = counts
        return """
            # HELP understudy_webhook_events_total Webhook events by result (delivered, failed: refused or out of tries, dropped: queue full, sent_elsewhere: another server of the cluster sent it).
            # TYPE understudy_webhook_events_total counter
            understudy_webhook_events_total{result="delivered"} \(c.delivered)
            understudy_webhook_events_total{result="failed"} \(c.failed)
            understudy_webhook_events_total{result="dropped"} \(c.dropped)
            understudy_webhook_events_total{result="sent_elsewhere"} \(sentElsewhere)
            # HELP understudy_webhook_queued Webhook events waiting for delivery or a retry.
            # TYPE understudy_webhook_queued gauge
            understudy_webhook_queued \(queued)

            """
    }

    /// One receiver's thread: sends the oldest due event, in order of arrival; waits for the next due
    /// time or a new event.
    private func deliverLoop(_ r: Receiver) {
        while true {
            r.condition.lock()
            var next: (index: Int, event: Pending)?
            while next == nil {
                if r.stopped {
                    r.condition.unlock()
                    return
                }
                let now = Date().timeIntervalSince1970
                if let i = r.queue.firstIndex(where: { $0.due <= now }) {
                    next = (i, r.queue[i])
                } else if let soonest = r.queue.map(\.due).min() {
                    _ = r.condition.wait(until: Date(timeIntervalSince1970: soonest))
                } else {
                    r.condition.wait()
                }
            }
            r.condition.unlock()
            guard var (_, event) = next else { continue }
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/json")
            headers.add(WebhookSignature.header, event.signature)
            headers.add(WebhookSignature.timestampHeader, String(event.timestamp))
            var status: Int?
            do throws(HTTPError) {
                status = try HTTPClient.requestBlocking(
                    "POST", r.url, headers: headers, body: event.body, timeout: timeout
                ).status
            } catch {
                status = nil
            }
            event.tries += 1
            let outcome = Self.outcome(status: status)
            r.condition.lock()
            // The queue only grows at its end meanwhile, so the event is still where it was found.
            let index = r.queue.firstIndex { $0.body == event.body } ?? 0
            switch outcome {
            case .delivered:
                r.queue.remove(at: index)
                r.delivered += 1
            case .refused,
                .retry where event.tries >= maxTries:
                r.queue.remove(at: index)
                r.failed += 1
                log(
                    "webhook \(r.url.hostHeader): gave up on an event after \(event.tries) tries (last: \(status.map(String.init) ?? "no answer"))"
                )
            case .retry:
                event.due = Date().timeIntervalSince1970 + Self.retryDelay(afterTry: event.tries) * delayScale
                r.queue[index] = event
            }
            r.condition.unlock()
        }
    }
}
