import RoomServer

/// A room server started in this process on ephemeral loopback ports (signalling and media), with
/// `secret` for its tokens; `tweak` changes the rest of the configuration. The test stops it.
public func startTestServer(
    secret: String = "test-secret", _ tweak: (inout RoomServerConfiguration) -> Void = { _ in }
) throws -> RoomServer {
    var configuration = RoomServerConfiguration()
    configuration.listenPort = 0
    configuration.udpPortLow = 0
    configuration.udpPortHigh = 0
    configuration.secret = secret
    tweak(&configuration)
    let server = RoomServer(configuration: configuration)
    try server.start()
    return server
}
