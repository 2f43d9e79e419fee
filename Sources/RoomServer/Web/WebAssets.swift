/// The browser page's files (`Web/assets/`), compiled into the binary by SwiftPM's `embedInCode`
/// resources (see Package.swift), so `understudy serve` needs nothing on disk.
enum WebAssets {
    struct Asset: Sendable {
        let contentType: String
        let body: [UInt8]
    }

    /// File name (as under `assets/`) to its content.
    static let files: [String: Asset] = [
        "index.html": Asset(contentType: "text/html; charset=utf-8", body: PackageResources.index_html),
        "room.js": Asset(contentType: "text/javascript; charset=utf-8", body: PackageResources.room_js),
        "style.css": Asset(contentType: "text/css; charset=utf-8", body: PackageResources.style_css),
    ]
}
