import Foundation
import RoomProtocol
import Signaling

// `understudy token`: print an HS256 room token for the given secret.

func runToken(_ args: [String]) async {
    await runCommand("token") {
        let a = try Arguments(args, help: Help.token)
        if let extra = a.positionals.first { throw Arguments.Failure.unexpected(extra) }
        guard let secret = a.value("--secret") ?? ProcessInfo.processInfo.environment["UNDERSTUDY_SECRET"],
            !secret.isEmpty
        else {
            throw Arguments.Failure.missingValue("--secret (or UNDERSTUDY_SECRET)")
        }
        let permissions = (a.value("--permissions") ?? "allow_join").split(separator: ",").map {
            String($0).trimmingCharacters(in: .whitespaces)
        }
        do {
            try RoomToken.validatePermissions(permissions)
        } catch {
            throw Arguments.Failure.badValue("--permissions", "\(error)")
        }
        let ttlText = a.value("--ttl") ?? "2h"
        guard let ttl = RoomToken.parseDuration(ttlText), ttl > 0, ttl <= 366 * 86400 else {
            throw Arguments.Failure.badValue("--ttl", "'\(ttlText)' is not a duration like 45s, 30m, 2h or 1d")
        }
        let roles = a.value("--roles").map { $0.split(separator: ",").map(String.init) } ?? []
        let token = RoomToken(
            apikey: a.value("--apikey") ?? "understudy", permissions: permissions, roomId: a.value("--room"),
            participantId: a.value("--participant"), roles: roles, lifetime: ttl)
        print(RoomToken.sign(token, secret: secret))
    }
}
