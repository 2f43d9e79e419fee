import Foundation
import SystemCalls
import TestSupport
import Testing

@testable import RTC

#if canImport(Glibc)
    import Glibc
#endif

/// Two transports wired back to back through queues (never synchronously, the engine is not reentrant).
private final class DTLSLoopback {
    let client: DTLSTransport
    let server: DTLSTransport
    var toServer: [[UInt8]] = []
    var toClient: [[UInt8]] = []
    /// Return true to drop a client→server datagram (gets its index among all sent).
    var dropToServer: (Int, [UInt8]) -> Bool = { _, _ in false }
    /// Rewrites a client→server datagram into zero or more datagrams.
    var rewriteToServer: (Int, [UInt8]) -> [[UInt8]] = { _, datagram in [datagram] }
    var clientKeys: SRTPKeyingMaterial?
    var serverKeys: SRTPKeyingMaterial?
    var clientError: DTLSError?
    var serverError: DTLSError?
    var clientClosed = false
    var serverClosed = false
    /// Return true to drop a server→client datagram (gets its index among all sent).
    var dropToClient: (Int, [UInt8]) -> Bool = { _, _ in false }
    private var sentToServer = 0
    private var sentToClient = 0

    init(
        clientProfiles: [SRTPProfile] = [.aeadAES128GCM, .aes128CMHMACSHA1_80],
        serverProfiles: [SRTPProfile] = [.aeadAES128GCM, .aes128CMHMACSHA1_80],
        clientSeesFingerprint: ((DTLSCertificate) -> DTLSFingerprint?)? = nil,
        serverSeesFingerprint: ((DTLSCertificate) -> DTLSFingerprint?)? = nil,
        clientMTU: Int = DTLSTransport.defaultMTU,
        serverCertificate sharedServerCertificate: DTLSCertificate? = nil
    ) throws {
        let clientCertificate = try DTLSCertificate.generate()
        let serverCertificate = try sharedServerCertificate ?? DTLSCertificate.generate()
        client = try DTLSTransport(
            role: .client, certificate: clientCertificate,
            remoteFingerprint: clientSeesFingerprint.map { $0(serverCertificate) }
                ?? serverCertificate.fingerprint,
            profiles: clientProfiles, mtu: clientMTU)
        server = try DTLSTransport(
            role: .server, certificate: serverCertificate,
            remoteFingerprint: serverSeesFingerprint.map { $0(clientCertificate) }
                ?? clientCertificate.fingerprint,
            profiles: serverProfiles)
        client.sendDatagram = { [unowned self] bytes in
            let datagram = Array(bytes)
            defer { sentToServer += 1 }
            if dropToServer(sentToServer, datagram) { return }
            toServer.append(contentsOf: rewriteToServer(sentToServer, datagram))
        }
        server.sendDatagram = { [unowned self] bytes in
            defer { sentToClient += 1 }
            if dropToClient(sentToClient, Array(bytes)) { return }
            toClient.append(Array(bytes))
        }
        client.onConnected = { [unowned self] in clientKeys = $0 }
        server.onConnected = { [unowned self] in serverKeys = $0 }
        client.onFailed = { [unowned self] in clientError = $0 }
        server.onFailed = { [unowned self] in serverError = $0 }
        client.onClosed = { [unowned self] in clientClosed = true }
        server.onClosed = { [unowned self] in serverClosed = true }
    }

    /// Delivers queued datagrams until both queues are empty.
    func pump() {
        var rounds = 0
        while (!toServer.isEmpty || !toClient.isEmpty) && rounds < 1000 {
            rounds += 1
            if !toServer.isEmpty {
                let datagram = toServer.removeFirst()
                datagram.withUnsafeBytes { server.handleDatagram($0) }
            }
            if !toClient.isEmpty {
                let datagram = toClient.removeFirst()
                datagram.withUnsafeBytes { client.handleDatagram($0) }
            }
        }
    }

    func connect() {
        server.start()
        client.start()
        pump()
    }
}

@Suite struct DTLSTests {
    @Test func handshakeExportsMatchingKeysAndPrefersGCM() throws {
        let link = try DTLSLoopback()
        link.connect()
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
        let clientKeys = try #require(link.clientKeys)
        let serverKeys = try #require(link.serverKeys)
        #expect(clientKeys.profile == .aeadAES128GCM)
        #expect(serverKeys.profile == .aeadAES128GCM)
        #expect(clientKeys.localKey == serverKeys.remoteKey)
        #expect(clientKeys.localSalt == serverKeys.remoteSalt)
        #expect(clientKeys.remoteKey == serverKeys.localKey)
        #expect(clientKeys.remoteSalt == serverKeys.localSalt)
        #expect(clientKeys.localKey.count == 16 && clientKeys.localSalt.count == 12)
        #expect(clientKeys.localKey != clientKeys.remoteKey)
        #expect(link.clientError == nil && link.serverError == nil)
    }

    @Test func exportedKeysDriveSRTPBetweenThePeers() throws {
        let link = try DTLSLoopback()
        link.connect()
        let clientSessions = try SRTPSession.pair(try #require(link.clientKeys))
        let serverSessions = try SRTPSession.pair(try #require(link.serverKeys))
        var packet = [UInt8](repeating: 0, count: 200 + SRTPSession.maxTrailerLength)
        packet[0] = 0x80
        packet[1] = 111
        packet[3] = 1
        for index in 12..<200 { packet[index] = UInt8(index & 0xFF) }
        let original = Array(packet[0..<200])
        let capacity = packet.count
        let protectedLength = try packet.withUnsafeMutableBytes { buffer in
            try clientSessions.outbound.protectRTP(buffer.baseAddress!, length: 200, capacity: capacity)
        }
        let plainLength = try packet.withUnsafeMutableBytes { buffer in
            try serverSessions.inbound.unprotectRTP(buffer.baseAddress!, length: protectedLength)
        }
        #expect(plainLength == 200)
        #expect(Array(packet[0..<200]) == original)
    }

    @Test func serverListingOnlyCMGetsCM() throws {
        let link = try DTLSLoopback(serverProfiles: [.aes128CMHMACSHA1_80])
        link.connect()
        let clientKeys = try #require(link.clientKeys)
        #expect(clientKeys.profile == .aes128CMHMACSHA1_80)
        #expect(link.serverKeys?.profile == .aes128CMHMACSHA1_80)
        #expect(clientKeys.localSalt.count == 14)
        #expect(clientKeys.localKey == link.serverKeys?.remoteKey)
    }

    @Test func serverPreferenceWinsOverClientOrder() throws {
        // Chromium lists AES_CM first; a server that lists GCM first must still get GCM.
        let link = try DTLSLoopback(clientProfiles: [.aes128CMHMACSHA1_80, .aeadAES128GCM])
        link.connect()
        #expect(link.clientKeys?.profile == .aeadAES128GCM)
    }

    @Test func noCommonProfileFails() throws {
        let link = try DTLSLoopback(
            clientProfiles: [.aes128CMHMACSHA1_80], serverProfiles: [.aeadAES128GCM])
        link.connect()
        #expect(link.client.state != .connected)
        #expect(link.clientKeys == nil)
        #expect(link.client.state == .failed)
    }

    @Test func clientRejectsWrongServerFingerprint() throws {
        let other = try DTLSCertificate.generate()
        let link = try DTLSLoopback(clientSeesFingerprint: { _ in other.fingerprint })
        link.connect()
        #expect(link.clientError == .fingerprintMismatch)
        #expect(link.clientKeys == nil)
        #expect(link.serverKeys == nil)
        #expect(link.server.state == .failed)
    }

    @Test func serverRejectsWrongClientFingerprint() throws {
        let other = try DTLSCertificate.generate()
        let link = try DTLSLoopback(serverSeesFingerprint: { _ in other.fingerprint })
        link.connect()
        #expect(link.serverError == .fingerprintMismatch)
        #expect(link.serverKeys == nil)
        #expect(link.clientKeys == nil)
        #expect(link.client.state == .failed)
    }

    @Test func connectionsOfOneCertificateShareOneContextAndStillCheckTheirOwnPeer() throws {
        let server = try DTLSCertificate.generate()
        let stranger = try DTLSCertificate.generate()
        let first = try DTLSLoopback(serverCertificate: server)
        let impostor = try DTLSLoopback(serverSeesFingerprint: { _ in stranger.fingerprint }, serverCertificate: server)
        let cmOnly = try DTLSLoopback(serverProfiles: [.aes128CMHMACSHA1_80], serverCertificate: server)
        #expect(server.dtlsContextCount == 2)  // one per profile list, not one per connection
        // Interleave the handshakes so that each verify callback runs while the others are open.
        for link in [first, impostor, cmOnly] {
            link.server.start()
            link.client.start()
        }
        for link in [first, impostor, cmOnly] { link.pump() }
        #expect(first.server.state == .connected && first.serverKeys?.profile == .aeadAES128GCM)
        #expect(impostor.serverError == .fingerprintMismatch && impostor.serverKeys == nil)
        #expect(cmOnly.server.state == .connected && cmOnly.serverKeys?.profile == .aes128CMHMACSHA1_80)
        #expect(first.clientKeys?.localKey == first.serverKeys?.remoteKey)
        #expect(first.serverKeys?.localKey != cmOnly.serverKeys?.localKey)
    }

    @Test func releasedHandshakeStateIgnoresDTLSAndClosesQuietly() throws {
        let link = try DTLSLoopback()
        link.server.releaseHandshakeState()  // before the handshake: refused
        #expect(!link.server.isHandshakeStateReleased)
        link.connect()
        #expect(link.server.state == .connected)
        link.server.releaseHandshakeState()
        #expect(link.server.isHandshakeStateReleased)
        // The client's close_notify is ignored (no state to read it with), and no reply goes out.
        link.client.close()
        let sentBefore = link.server.datagramsSent
        link.pump()
        #expect(!link.serverClosed && link.server.state == .connected)
        #expect(link.server.datagramsSent == sentBefore)
        // Closing sends nothing but still reports the close.
        link.server.close()
        #expect(link.serverClosed && link.server.state == .closed)
        #expect(link.server.datagramsSent == sentBefore)
        #expect(link.serverKeys != nil && link.server.keyingMaterial == link.serverKeys)
    }

    @Test func lateFingerprintReleasesKeysOnlyWhenItMatches() throws {
        let link = try DTLSLoopback(serverSeesFingerprint: { _ in nil })
        link.connect()
        #expect(link.clientKeys != nil)
        #expect(link.server.state == .connecting)
        #expect(link.serverKeys == nil)
        link.server.remoteFingerprint = link.client.certificate.fingerprint
        #expect(link.server.state == .connected)
        #expect(link.serverKeys?.remoteKey == link.clientKeys?.localKey)

        let wrong = try DTLSLoopback(serverSeesFingerprint: { _ in nil })
        wrong.connect()
        wrong.server.remoteFingerprint = try DTLSCertificate.generate().fingerprint
        #expect(wrong.serverError == .fingerprintMismatch)
        #expect(wrong.serverKeys == nil)
        wrong.pump()  // the close_notify tells the client
        #expect(wrong.clientClosed)
    }

    @Test func droppedFirstFlightIsRetransmittedByTick() throws {
        let link = try DTLSLoopback()
        link.dropToServer = { index, _ in index == 0 }
        link.connect()
        #expect(link.client.state == .connecting)
        let sentBefore = link.client.datagramsSent
        // Retransmission timers run on OpenSSL's real clock (first one 250 ms); wait for them.
        var syntheticNow: UInt64 = 1_000_000_000
        for _ in 0..<200 where link.client.state != .connected {
            usleep(20_000)
            syntheticNow += 20_000_000
            link.client.tick(now: syntheticNow)
            link.server.tick(now: syntheticNow)
            link.pump()
        }
        #expect(link.client.datagramsSent > sentBefore)
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
        #expect(link.clientKeys?.localKey == link.serverKeys?.remoteKey)
    }

    @Test func handshakeGivesUpAfterTheTimeBudget() throws {
        let certificate = try DTLSCertificate.generate()
        let client = try DTLSTransport(role: .client, certificate: certificate, remoteFingerprint: nil)
        var error: DTLSError?
        var sent = 0
        client.sendDatagram = { _ in sent += 1 }
        client.onFailed = { error = $0 }
        client.start()
        #expect(sent >= 1)
        client.tick(now: 5_000_000_000)
        client.tick(now: 20_000_000_000)
        #expect(client.state == .connecting)
        client.tick(now: 35_000_000_001)
        #expect(client.state == .failed)
        #expect(error == .timeout)
    }

    @Test func clientHelloSplitAcrossTwoDatagramsIsReassembled() throws {
        let link = try DTLSLoopback()
        var split = false
        link.rewriteToServer = { index, datagram in
            if index == 0, let halves = refragmentHandshake(datagram) {
                split = true
                return halves
            }
            // The split used one extra epoch-0 record number; shift the client's later plaintext
            // records so the server's replay window does not drop them (as a real splitting client would).
            return [shiftEpochZeroRecordNumbers(datagram)]
        }
        link.connect()
        #expect(split)
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
    }

    @Test func lostFinalFlightIsResentWhileServerAwaitsFingerprint() throws {
        let link = try DTLSLoopback(serverSeesFingerprint: { _ in nil })
        // Datagram 0 is the server's first flight; 1 is its ChangeCipherSpec + Finished.
        link.dropToClient = { index, _ in index == 1 }
        link.connect()
        #expect(link.server.state == .connecting)
        #expect(link.client.state == .connecting)
        var syntheticNow: UInt64 = 0
        for _ in 0..<200 where link.client.state != .connected {
            usleep(20_000)
            syntheticNow += 20_000_000
            link.client.tick(now: syntheticNow)
            link.server.tick(now: syntheticNow)
            link.pump()
        }
        #expect(link.client.state == .connected)
        link.server.remoteFingerprint = link.client.certificate.fingerprint
        #expect(link.server.state == .connected)
        #expect(link.serverKeys?.remoteKey == link.clientKeys?.localKey)
    }

    @Test func dtls13CapableClientHelloSettlesOnDTLS12() throws {
        // Chromium offers DTLS 1.3 (supported_versions) with a large post-quantum key share, so its
        // ClientHello spans two datagrams. OpenSSL's client cannot produce one, so graft those
        // extensions onto its hello. (The grafted hello breaks the Finished transcript, so only the
        // server's answer is checked: a DTLS 1.2 ServerHello, not an alert.)
        let client = try DTLSTransport(
            role: .client, certificate: try DTLSCertificate.generate(), remoteFingerprint: nil)
        var hello: [UInt8] = []
        client.sendDatagram = { hello = Array($0) }
        client.start()
        let grafted = try #require(addDTLS13Extensions(toClientHello: hello))
        #expect(grafted.count > 1300)
        let halves = try #require(refragmentHandshake(grafted))
        #expect(halves.count == 2 && halves.allSatisfy { $0.count < 1200 })

        let server = try DTLSTransport(
            role: .server, certificate: try DTLSCertificate.generate(), remoteFingerprint: nil)
        var answers: [[UInt8]] = []
        var failure: DTLSError?
        server.sendDatagram = { answers.append(Array($0)) }
        server.onFailed = { failure = $0 }
        server.start()
        halves[0].withUnsafeBytes { server.handleDatagram($0) }
        #expect(answers.isEmpty)  // half a hello: nothing to say yet
        halves[1].withUnsafeBytes { server.handleDatagram($0) }
        #expect(failure == nil)
        let first = try #require(answers.first)
        // Record: handshake (22), DTLS 1.2 record version; message: ServerHello (2), server_version FE FD.
        #expect(first.count > 27)
        #expect(first[0] == 22)
        #expect(first[1] == 0xFE && first[2] == 0xFD)
        #expect(first[13] == 2)
        #expect(first[25] == 0xFE && first[26] == 0xFD)
    }

    @Test func smallMTUFragmentsFlightsAndStillConnects() throws {
        let link = try DTLSLoopback(clientMTU: 300)
        var largest = 0
        link.client.sendDatagram = { [unowned link] bytes in
            largest = max(largest, bytes.count)
            link.toServer.append(Array(bytes))
        }
        link.connect()
        #expect(largest <= 300)
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
    }

    @Test func garbageDatagramsAreHarmless() throws {
        var generator = SystemRandomNumberGenerator()
        var garbage: [[UInt8]] = [[], [22], [23, 0xFE, 0xFD], Array(repeating: 0xFF, count: 13)]
        // Record headers claiming huge lengths, and random bodies behind plausible headers.
        garbage.append([22, 0xFE, 0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 1, 2, 3])
        for contentType: UInt8 in [20, 21, 22, 23, 25, 63] {
            var datagram: [UInt8] = [contentType, 0xFE, 0xFD]
            for _ in 0..<150 { datagram.append(UInt8.random(in: 0...255, using: &generator)) }
            garbage.append(datagram)
        }

        // A server that has seen nothing yet.
        let lonely = try DTLSTransport(
            role: .server, certificate: try DTLSCertificate.generate(), remoteFingerprint: nil)
        lonely.sendDatagram = { _ in }
        for datagram in garbage { datagram.withUnsafeBytes { lonely.handleDatagram($0) } }
        #expect(lonely.state != .connected)

        // A connected pair: post-handshake garbage must not break the association.
        let link = try DTLSLoopback()
        link.connect()
        for datagram in garbage where datagram.first != 21 && datagram.first != 22 {
            datagram.withUnsafeBytes { link.server.handleDatagram($0) }
            datagram.withUnsafeBytes { link.client.handleDatagram($0) }
        }
        #expect(link.client.state == .connected)
        #expect(link.server.state == .connected)
    }

    @Test func closeNotifyReachesThePeer() throws {
        let link = try DTLSLoopback()
        link.connect()
        link.client.close()
        #expect(link.client.state == .closed)
        #expect(link.clientClosed)
        link.pump()
        #expect(link.server.state == .closed)
        #expect(link.serverClosed)
    }

    @Test func demultiplexesByFirstByte() {
        #expect(DTLSTransport.isDTLS(20))
        #expect(DTLSTransport.isDTLS(22))
        #expect(DTLSTransport.isDTLS(63))
        #expect(!DTLSTransport.isDTLS(19))
        #expect(!DTLSTransport.isDTLS(0))
        #expect(!DTLSTransport.isDTLS(64))
        #expect(!DTLSTransport.isDTLS(128))
    }

    @Test func certificateFingerprintIsUppercaseSHA256() throws {
        let certificate = try DTLSCertificate.generate()
        let fingerprint = certificate.fingerprint
        #expect(fingerprint.algorithm == "sha-256")
        let pairs = fingerprint.value.split(separator: ":")
        #expect(pairs.count == 32)
        #expect(pairs.allSatisfy { $0.count == 2 && $0.uppercased() == $0 })
        #expect(try DTLSCertificate.generate().fingerprint != fingerprint)
    }

    @Test func fingerprintParsingIsTolerantAndStrict() throws {
        let certificate = try DTLSCertificate.generate()
        let fingerprint = certificate.fingerprint
        let lower = try DTLSFingerprint(
            algorithm: "SHA-256", value: "  " + fingerprint.value.lowercased() + " ")
        #expect(lower == fingerprint)
        #expect(lower.matches(fingerprint))
        let fromSDP = try DTLSFingerprint(sdpValue: "sha-256 \(fingerprint.value.lowercased())")
        #expect(fromSDP.matches(fingerprint))
        #expect(fromSDP.sdpValue == "sha-256 \(fingerprint.value)")
        #expect(throws: DTLSFingerprint.ParseError.self) {
            try DTLSFingerprint(algorithm: "md5", value: "AB")
        }
        #expect(throws: DTLSFingerprint.ParseError.self) {
            try DTLSFingerprint(algorithm: "sha-256", value: "AB:CD")
        }
        #expect(throws: DTLSFingerprint.ParseError.self) {
            try DTLSFingerprint(algorithm: "sha-256", value: String(fingerprint.value.dropLast()) + "G")
        }
        #expect(throws: DTLSFingerprint.ParseError.self) { try DTLSFingerprint(sdpValue: "sha-256") }
        #expect(throws: DTLSFingerprint.ParseError.self) { try DTLSFingerprint(sdpValue: "") }
    }

    @Test func keyingMaterialSplitFollowsRFC5764() throws {
        let exported = (0..<60).map { UInt8($0) }
        let client = try #require(
            SRTPKeyingMaterial(profile: .aes128CMHMACSHA1_80, exported: exported, isClient: true))
        let server = try #require(
            SRTPKeyingMaterial(profile: .aes128CMHMACSHA1_80, exported: exported, isClient: false))
        #expect(client.localKey == Array(0..<16))
        #expect(client.remoteKey == Array(16..<32))
        #expect(client.localSalt == Array(32..<46))
        #expect(client.remoteSalt == Array(46..<60))
        #expect(server.localKey == client.remoteKey && server.localSalt == client.remoteSalt)
        #expect(SRTPKeyingMaterial(profile: .aeadAES128GCM, exported: exported, isClient: true) == nil)
        let gcm = try #require(
            SRTPKeyingMaterial(
                profile: .aeadAES128GCM, exported: Array(exported.prefix(56)), isClient: true))
        #expect(gcm.remoteSalt == Array(44..<56))
    }
}

/// Splits a datagram holding one DTLS handshake record into two records, each carrying one
/// fragment of the handshake message, as Chromium does with its large ClientHello.
private func refragmentHandshake(_ datagram: [UInt8]) -> [[UInt8]]? {
    let recordHeader = 13
    let handshakeHeader = 12
    guard datagram.count > recordHeader + handshakeHeader + 2, datagram[0] == 22 else { return nil }
    let recordLength = Int(datagram[11]) << 8 | Int(datagram[12])
    guard recordHeader + recordLength == datagram.count else { return nil }
    let handshake = Array(datagram[recordHeader...])
    let bodyLength = Int(handshake[1]) << 16 | Int(handshake[2]) << 8 | Int(handshake[3])
    guard handshake.count == handshakeHeader + bodyLength, bodyLength > 2 else { return nil }
    let body = Array(handshake[handshakeHeader...])
    let cut = bodyLength / 2
    func record(sequence: UInt8, offset: Int, fragment: ArraySlice<UInt8>) -> [UInt8] {
        var header = Array(datagram[0..<recordHeader])
        header[10] = sequence  // low byte of the 48-bit record sequence number
        let length = handshakeHeader + fragment.count
        header[11] = UInt8(length >> 8)
        header[12] = UInt8(length & 0xFF)
        var message = Array(handshake[0..<6])  // type, total length, message_seq
        message += [UInt8(offset >> 16), UInt8((offset >> 8) & 0xFF), UInt8(offset & 0xFF)]
        message += [
            UInt8(fragment.count >> 16), UInt8((fragment.count >> 8) & 0xFF),
            UInt8(fragment.count & 0xFF),
        ]
        return header + message + fragment
    }
    return [
        record(sequence: datagram[10], offset: 0, fragment: body[0..<cut]),
        record(sequence: datagram[10] &+ 1, offset: cut, fragment: body[cut...]),
    ]
}

/// Appends supported_versions (DTLS 1.3, 1.2) and a 1216-byte key share for group 0x11EC
/// (X25519MLKEM768) to a single-record ClientHello, fixing up every length field.
private func addDTLS13Extensions(toClientHello datagram: [UInt8]) -> [UInt8]? {
    let recordHeader = 13
    let handshakeHeader = 12
    guard datagram.count > recordHeader + handshakeHeader + 40, datagram[0] == 22, datagram[13] == 1
    else { return nil }
    var body = Array(datagram[(recordHeader + handshakeHeader)...])
    // client_version(2) random(32) session_id cookie cipher_suites compression extensions
    var offset = 34
    guard offset < body.count else { return nil }
    offset += 1 + Int(body[offset])  // session id
    guard offset < body.count else { return nil }
    offset += 1 + Int(body[offset])  // cookie
    guard offset + 1 < body.count else { return nil }
    offset += 2 + (Int(body[offset]) << 8 | Int(body[offset + 1]))  // cipher suites
    guard offset < body.count else { return nil }
    offset += 1 + Int(body[offset])  // compression methods
    guard offset + 1 < body.count else { return nil }
    let extensionsLengthAt = offset
    var extensionsLength = Int(body[offset]) << 8 | Int(body[offset + 1])
    guard extensionsLengthAt + 2 + extensionsLength == body.count else { return nil }

    var added: [UInt8] = [0x00, 0x2B, 0x00, 0x05, 0x04, 0xFE, 0xFC, 0xFE, 0xFD]  // supported_versions
    let share = [UInt8](repeating: 0x5A, count: 1216)
    let entryLength = 4 + share.count
    added += [0x00, 0x33, UInt8((entryLength + 2) >> 8), UInt8((entryLength + 2) & 0xFF)]  // key_share
    added += [UInt8(entryLength >> 8), UInt8(entryLength & 0xFF), 0x11, 0xEC]
    added += [UInt8(share.count >> 8), UInt8(share.count & 0xFF)] + share
    body += added
    extensionsLength += added.count
    body[extensionsLengthAt] = UInt8(extensionsLength >> 8)
    body[extensionsLengthAt + 1] = UInt8(extensionsLength & 0xFF)

    let length = body.count
    var message = Array(datagram[recordHeader..<(recordHeader + handshakeHeader)])
    message[1] = UInt8(length >> 16)
    message[2] = UInt8((length >> 8) & 0xFF)
    message[3] = UInt8(length & 0xFF)
    message[9] = message[1]
    message[10] = message[2]
    message[11] = message[3]  // fragment = whole message
    var record = Array(datagram[0..<recordHeader])
    let recordLength = handshakeHeader + length
    record[11] = UInt8(recordLength >> 8)
    record[12] = UInt8(recordLength & 0xFF)
    return record + message + body
}

/// Adds one to the record number of every epoch-0 record in a datagram (OpenSSL packs a whole
/// flight, several records, into one datagram when it fits).
private func shiftEpochZeroRecordNumbers(_ datagram: [UInt8]) -> [UInt8] {
    var shifted = datagram
    var offset = 0
    while offset + 13 <= shifted.count {
        if shifted[offset + 3] == 0 && shifted[offset + 4] == 0 { shifted[offset + 10] &+= 1 }
        offset += 13 + (Int(shifted[offset + 11]) << 8 | Int(shifted[offset + 12]))
    }
    return shifted
}

// MARK: - Real peer: the openssl command-line tool

/// Interoperability with OpenSSL's own `s_server`/`s_client` tools over real UDP on 127.0.0.1.
/// These are DTLS implementations we did not write; the exported keys are compared with the
/// keys the tool itself prints (`-keymatexport`).
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct DTLSOpenSSLPeerTests {
    @Test func ourClientAgainstOpenSSLServer() throws {
        let peer = try OpenSSLPeerFiles()
        defer { peer.remove() }
        let server = try peer.launch([
            "s_server", "-dtls1_2", "-accept", "127.0.0.1:0", "-cert", peer.certificatePath, "-key",
            peer.keyPath,
            "-use_srtp", "SRTP_AES128_CM_SHA1_80", "-keymatexport", "EXTRACTOR-dtls_srtp",
            "-keymatexportlen", "60",
        ])
        defer {
            server.signal(SIGTERM)
            server.wait()
        }
        let acceptLine = try #require(peer.waitForOutput(containing: "ACCEPT 127.0.0.1:"))
        let port = try #require(UInt16(acceptLine.split(separator: ":").last.map(String.init) ?? ""))

        let socket = try #require(LoopbackUDPSocket())
        try #require(socket.connect(port: port))
        let transport = try DTLSTransport(
            role: .client, certificate: try DTLSCertificate.generate(),
            remoteFingerprint: try peer.fingerprint())
        var keys: SRTPKeyingMaterial?
        var failure: DTLSError?
        transport.sendDatagram = { socket.send($0) }
        transport.onConnected = { keys = $0 }
        transport.onFailed = { failure = $0 }
        transport.start()
        socket.run(transport, until: { keys != nil || failure != nil })

        #expect(failure == nil)
        let material = try #require(keys)
        #expect(material.profile == .aes128CMHMACSHA1_80)
        let line = try #require(peer.waitForOutput(containing: "Keying material: "))
        let printed = line.components(separatedBy: "Keying material: ").last?.trimmingCharacters(
            in: .whitespaces)
        // Client is "local": client key, server key, client salt, server salt.
        let ours = material.localKey + material.remoteKey + material.localSalt + material.remoteSalt
        #expect(printed?.uppercased() == ours.map { String(format: "%02X", $0) }.joined())
    }

    @Test func openSSLClientAgainstOurServer() throws {
        let peer = try OpenSSLPeerFiles()
        defer { peer.remove() }
        let socket = try #require(LoopbackUDPSocket())
        let port = try #require(socket.bindAnyPort())
        let transport = try DTLSTransport(
            role: .server, certificate: try DTLSCertificate.generate(),
            remoteFingerprint: try peer.fingerprint())
        var keys: SRTPKeyingMaterial?
        var failure: DTLSError?
        transport.sendDatagram = { socket.send($0) }
        transport.onConnected = { keys = $0 }
        transport.onFailed = { failure = $0 }
        transport.start()

        let client = try peer.launch([
            "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(port)", "-cert", peer.certificatePath,
            "-key",
            peer.keyPath, "-use_srtp", "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80",
            "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", "56",
        ])
        defer {
            client.signal(SIGTERM)
            client.wait()
        }
        socket.run(transport, until: { keys != nil || failure != nil })

        #expect(failure == nil)
        let material = try #require(keys)
        #expect(material.profile == .aeadAES128GCM)
        let line = try #require(peer.waitForOutput(containing: "Keying material: "))
        let printed = line.components(separatedBy: "Keying material: ").last?.trimmingCharacters(
            in: .whitespaces)
        // We are the server: the client's halves are our remote ones.
        let ours = material.remoteKey + material.localKey + material.remoteSalt + material.localSalt
        #expect(printed?.uppercased() == ours.map { String(format: "%02X", $0) }.joined())
    }
}

/// A certificate and key for the OpenSSL tool, plus its captured output.
private struct OpenSSLPeerFiles {
    let directory: String
    var certificatePath: String { directory + "/cert.pem" }
    var keyPath: String { directory + "/key.pem" }
    var outputPath: String { directory + "/out.txt" }

    init() throws {
        directory = NSTemporaryDirectory() + "dtls-peer-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let status = try Self.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-subj",
            "/CN=openssl-peer", "-days", "1", "-keyout", keyPath, "-out", certificatePath,
        ])
        guard status == 0 else { throw DTLSError.setupFailed("openssl req exited \(status)") }
    }

    func fingerprint() throws -> DTLSFingerprint {
        let text = try runTool(
            "/usr/bin/openssl", ["x509", "-in", certificatePath, "-noout", "-fingerprint", "-sha256"]
        )
        .out
        let value =
            text.components(separatedBy: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return try DTLSFingerprint(algorithm: "sha-256", value: value)
    }

    /// Starts the tool with stdin held open (EOF on stdin makes it quit) and stdout to a file.
    func launch(_ arguments: [String]) throws -> ChildProcess {
        let output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw DTLSError.setupFailed("cannot open \(outputPath)") }
        defer { close(output) }
        return try ChildProcess(
            "/usr/bin/openssl", arguments, standardInput: .pipe, standardOutput: .descriptor(output),
            standardError: .null)
    }

    /// Polls the captured output for a line, for up to 5 s.
    func waitForOutput(containing needle: String) -> String? {
        for _ in 0..<250 {
            if let text = try? String(contentsOfFile: outputPath, encoding: .utf8),
                let line = text.split(separator: "\n").first(where: { $0.contains(needle) })
            {
                return String(line)
            }
            usleep(20_000)
        }
        return nil
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    private static func run(_ arguments: [String]) throws -> Int32 {
        try ChildProcess("/usr/bin/openssl", arguments, standardOutput: .null, standardError: .null).wait()
    }
}

/// A blocking-with-timeout UDP socket on 127.0.0.1 for driving one transport in a test.
private final class LoopbackUDPSocket {
    let descriptor: Int32
    private var peerKnown = false

    init?() {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        if descriptor < 0 { return nil }
    }

    deinit { Glibc.close(descriptor) }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    func connect(port: UInt16) -> Bool {
        var address = Self.loopback(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        peerKnown = result == 0
        return peerKnown
    }

    /// Binds 127.0.0.1 on an ephemeral port and returns it.
    func bindAnyPort() -> UInt16? {
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return named == 0 ? UInt16(bigEndian: address.sin_port) : nil
    }

    func send(_ bytes: UnsafeRawBufferPointer) {
        guard peerKnown else { return }
        _ = Glibc.send(descriptor, bytes.baseAddress, bytes.count, 0)
    }

    /// Feeds received datagrams and ticks into `transport` until `done` or 10 s pass.
    func run(_ transport: DTLSTransport, until done: () -> Bool) {
        var buffer = [UInt8](repeating: 0, count: 2048)
        var now: UInt64 = 0
        for _ in 0..<1000 where !done() {
            var descriptorSet = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&descriptorSet, 1, 10) > 0 {
                var from = sockaddr_in()
                var fromLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                let count = buffer.withUnsafeMutableBytes { bytes in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            recvfrom(descriptor, bytes.baseAddress, bytes.count, 0, $0, &fromLength)
                        }
                    }
                }
                if count > 0 {
                    if !peerKnown {
                        // Server side: lock onto the first sender.
                        peerKnown = withUnsafePointer(to: &from) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                Glibc.connect(descriptor, $0, fromLength) == 0
                            }
                        }
                    }
                    buffer.withUnsafeBytes {
                        transport.handleDatagram(UnsafeRawBufferPointer(rebasing: $0[0..<count]))
                    }
                }
            }
            now += 10_000_000
            transport.tick(now: now)
        }
    }
}
