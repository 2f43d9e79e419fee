import RoomProtocol
import Signaling

/// Agent jobs (recording, `--relay`, `--relay-room`) for the server's rooms (`POST /admin/jobs`),
/// run by a fleet of `understudy worker`s. The server only forwards: Fleet's `FleetJobService`
/// implements it over the fleet's Redis (`serve --jobs redis://…`, docs/fleet.md).
public protocol RoomJobService: AnyObject, Sendable {
    /// Queues a job that joins `roomId` with these `understudy join` options; returns `{jobId, …}`.
    /// Bad options are refused with 3073 and the reason.
    func submit(roomId: String, options: [String], jobId: String?, cost: Int?) async throws(RoomError) -> JSONValue
    /// `{jobs: […], skipped: N}`, only those of `roomId` when given; secrets redacted, and records
    /// that are not valid skipped and counted rather than failing the listing.
    func list(roomId: String?) async throws(RoomError) -> JSONValue
    /// Asks the job to stop; 4003 when there is no such job, 3073 for an id outside the job id grammar.
    func stop(jobId: String, roomId: String?) async throws(RoomError) -> JSONValue
    /// Claims the webhook event `key` of job `jobId` for this server: true for the first caller across
    /// every server sharing the job service, false for the others, so that a cluster sends each job event
    /// once. When the service cannot tell (it is unreachable), true: an event sent twice beats one lost.
    func claimEvent(jobId: String, key: String) async -> Bool
}

extension RoomServer {
    func installJobRoutes(on server: HTTPServer) {
        server.route(method: "POST", path: "/admin/jobs") { [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            guard let body = try? JSONValue.parse(request.body), let roomId = body["roomId"]?.stringValue,
                isValidIdentifier(roomId)
            else {
                return adminError(
                    400, RoomError(3073, "body must be {\"roomId\": \"…\", \"options\": [\"--consume\", \"stage\", …]}")
                )
            }
            if let refusal = self.adminRefusal(request, roomId: roomId) { return refusal }
            guard let jobs = self.jobService else {
                return adminError(404, RoomError(4003, "this server has no job fleet (serve --jobs redis://…)"))
            }
            let options = body["options"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard options.count == (body["options"]?.arrayValue?.count ?? 0) else {
                return adminError(400, RoomError(3073, "options must be an array of strings"))
            }
            if let given = body["jobId"], given.stringValue == nil {
                return adminError(400, RoomError(3073, "jobId must be a string"))
            }
            if let given = body["cost"], given.intValue == nil {
                return adminError(400, RoomError(3073, "cost must be a positive whole number"))
            }
            do throws(RoomError) {
                let created = try await jobs.submit(
                    roomId: roomId, options: options, jobId: body["jobId"]?.stringValue, cost: body["cost"]?.intValue)
                return HTTPResponse.json(created.jsonString, status: 201)
            } catch {
                return adminError(error.code == 3047 ? 503 : 400, error)
            }
        }
        server.route(method: "GET", path: "/admin/jobs") { [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            if let refusal = self.adminRefusal(request, roomId: nil) { return refusal }
            guard let jobs = self.jobService else {
                return adminError(404, RoomError(4003, "this server has no job fleet (serve --jobs redis://…)"))
            }
            do throws(RoomError) {
                return HTTPResponse.json(try await jobs.list(roomId: self.tokenRoomScope(request)).jsonString)
            } catch {
                return adminError(503, error)
            }
        }
        // `POST /admin/jobs/ID/stop`
        server.route(method: "POST", pathPrefix: "/admin/jobs/") {
            [weak self] (request: HTTPRequest) async -> HTTPResponse in
            guard let self else { return HTTPResponse.text("", status: 503) }
            let rest = request.path.dropFirst("/admin/jobs/".count)
            guard rest.hasSuffix("/stop"), case let jobId = String(rest.dropLast("/stop".count)), !jobId.isEmpty else {
                return adminError(404, RoomError(4003, "no such admin route"))
            }
            if let refusal = self.adminRefusal(request, roomId: nil) { return refusal }
            guard let jobs = self.jobService else {
                return adminError(404, RoomError(4003, "this server has no job fleet (serve --jobs redis://…)"))
            }
            do throws(RoomError) {
                return HTTPResponse.json(
                    try await jobs.stop(jobId: jobId, roomId: self.tokenRoomScope(request)).jsonString)
            } catch {
                return adminError(error.code == 4003 ? 404 : error.code == 3073 ? 400 : 503, error)
            }
        }
    }
}
