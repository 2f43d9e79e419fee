import Media

/// Where each participant on stage goes on the composite's canvas: pure arithmetic, no pictures.
///
/// Two layouts:
/// - ``Kind/grid``: every member an equal tile, in stage order, rows filled left to right and the
///   last (partial) row centred.
/// - ``Kind/speaker``: one member large on the left (a screen share when there is one, else the
///   active speaker, else the first member) and the others in a column on the right.
///
/// Every rectangle has even coordinates and sizes, so its chroma (I420: half size both ways) lines
/// up with its luma.
public enum CompositeLayout {
    /// The layout's name, as `--layout` spells it.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case grid
        case speaker
    }

    /// One participant (or one screen share) on stage.
    public struct Member: Sendable, Equatable {
        /// The participant id; a screen share has its presenter's id.
        public var id: String
        /// Whether this is a screen share (it takes the stage in the speaker layout).
        public var isScreen: Bool

        /// Creates a member.
        public init(id: String, isScreen: Bool = false) {
            self.id = id
            self.isScreen = isScreen
        }
    }

    /// One member's place.
    public struct Tile: Sendable, Equatable {
        public var member: Member
        /// Even origin and size, in canvas pixels.
        public var rect: PixelRect
    }

    /// The share of the canvas width the speaker layout's large tile takes (the rest is the column).
    public static let stageShare = 0.8

    /// The tiles of `members` (in stage order) on a `width`×`height` canvas. Sizes are taken as even
    /// (an odd size loses its last column or row); an empty stage or a canvas under 2×2 has no tiles.
    public static func tiles(
        _ kind: Kind, members: [Member], activeSpeaker: String? = nil, width: Int, height: Int
    ) -> [Tile] {
        let w = even(width)
        let h = even(height)
        guard !members.isEmpty, w >= 2, h >= 2 else { return [] }
        switch kind {
        case .grid: return grid(members, width: w, height: h)
        case .speaker: return speaker(members, activeSpeaker: activeSpeaker, width: w, height: h)
        }
    }

    /// Equal tiles: `columns = ⌈√n⌉`, `rows = ⌈n / columns⌉`.
    private static func grid(_ members: [Member], width: Int, height: Int) -> [Tile] {
        let n = members.count
        var columns = 1
        while columns * columns < n { columns += 1 }
        let rows = (n + columns - 1) / columns
        let tileW = even(width / columns)
        let tileH = even(height / rows)
        guard tileW >= 2, tileH >= 2 else { return [] }
        // The whole grid centred on the canvas, and a partial last row centred in it.
        let top = even((height - rows * tileH) / 2)
        var tiles: [Tile] = []
        tiles.reserveCapacity(n)
        for (i, member) in members.enumerated() {
            let row = i / columns
            let inRow = row == rows - 1 ? n - row * columns : columns
            let left = even((width - inRow * tileW) / 2)
            let rect = PixelRect(x: left + (i % columns) * tileW, y: top + row * tileH, width: tileW, height: tileH)
            tiles.append(Tile(member: member, rect: rect))
        }
        return tiles
    }

    /// One large tile, the others in a column on the right (16:9 tiles, as many as fit at 1/8 of the
    /// height or more; members past that are not shown).
    private static func speaker(_ members: [Member], activeSpeaker: String?, width: Int, height: Int) -> [Tile] {
        let main =
            members.firstIndex(where: \.isScreen)
            ?? activeSpeaker.flatMap { id in members.firstIndex { $0.id == id && !$0.isScreen } } ?? 0
        guard members.count > 1 else {
            return [Tile(member: members[main], rect: PixelRect(x: 0, y: 0, width: width, height: height))]
        }
        let stageW = even(Int(Double(width) * stageShare))
        let columnW = width - stageW
        var tiles = [Tile(member: members[main], rect: PixelRect(x: 0, y: 0, width: stageW, height: height))]
        let others = members.indices.filter { $0 != main }.map { members[$0] }
        let minH = max(2, even(height / 8))
        let fit = max(1, height / minH)
        let shown = Array(others.prefix(fit))
        let tileH = even(min(height / shown.count, columnW * 9 / 16))
        guard tileH >= 2, columnW >= 2 else { return tiles }
        let top = even((height - shown.count * tileH) / 2)
        for (i, member) in shown.enumerated() {
            tiles.append(
                Tile(member: member, rect: PixelRect(x: stageW, y: top + i * tileH, width: columnW, height: tileH)))
        }
        return tiles
    }

    /// Where a `pictureWidth`×`pictureHeight` picture goes inside `rect`, keeping its aspect
    /// (letterboxed or pillarboxed, centred), even-aligned; nil for an empty picture or rect.
    public static func fit(pictureWidth: Int, pictureHeight: Int, in rect: PixelRect) -> PixelRect? {
        guard pictureWidth > 0, pictureHeight > 0, rect.width >= 2, rect.height >= 2 else { return nil }
        var w = rect.width
        var h = rect.height
        // Compare aspects in integers: pictureW / pictureH against rectW / rectH.
        if pictureWidth * rect.height > rect.width * pictureHeight {
            h = even(rect.width * pictureHeight / pictureWidth)
        } else {
            w = even(rect.height * pictureWidth / pictureHeight)
        }
        w = max(2, w)
        h = max(2, h)
        return PixelRect(
            x: rect.x + even((rect.width - w) / 2), y: rect.y + even((rect.height - h) / 2), width: w, height: h)
    }

    @inline(__always) static func even(_ v: Int) -> Int { max(0, v) & ~1 }
}
