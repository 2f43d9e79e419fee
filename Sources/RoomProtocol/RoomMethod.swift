/// Every request method of the room protocol (docs/protocol.md §3–§9), spelled once.
///
/// Clients send `{id, method, data}` with `method` one of these raw values; the server answers
/// `{id, ok, data}` or `{id, ok: false, error: RoomError}`.
public enum RoomMethod: String, Sendable, Hashable, CaseIterable {
    case join, leave, end, ping
    case changeMode, setMediaStatus
    case produce, closeProducer, consume, stopConsuming, setQuality, setViewPort
    case subscriberAnswer, restartIce, getStats
    case publish, subscribe, unsubscribe
    case requestMic, requestCam, disableMic, disableCam, remove, pin, unpin, respondEntry
}

/// Every notification the server sends (docs/protocol.md §10), spelled once.
public enum RoomNotification: String, Sendable, Hashable, CaseIterable {
    case participantJoined, participantLeft, participantModeChanged, participantEvents
    case mediaStatusChanged, producerAdded, producerClosed
    case consumerCreated, consumerClosed, consumerLayerChanged
    case presenterChanged, speakerChanged, pinStateChanged, roomVideoCodecsChanged
    case subscriberOffer
    case micRequested, webcamRequested, micDisabled, webcamDisabled
    case entryRequested, entryResponded, entryPending
    case pubsubMessage, pubsubHistory
    case roomLeft, roomClosed, clusterNodes
    case error
}
