import Signaling

extension JSONRawPaths {
    /// Where room-protocol messages carry a PubSub `payload`, which is passed on exactly as its
    /// publisher wrote it (room API §5: it "passes through untouched"): a `publish` request's
    /// `data.payload`, a `pubsubMessage` notification's `data.payload` and each
    /// `data.messages[i].payload` of `pubsubHistory`. Server and clients parse signalling messages
    /// with these paths, so the payload is checked once and never rebuilt or re-encoded.
    public static let pubsubPayloads = JSONRawPaths(
        [.key("data"), .key("payload")], [.key("data"), .key("messages"), .anyElement, .key("payload")])
}
