import Egress
import Media
import Testing

@Suite struct CompositeLayoutTests {
    static func members(_ n: Int) -> [CompositeLayout.Member] { (0..<n).map { CompositeLayout.Member(id: "p\($0)") } }

    /// Every tile even, inside the canvas, and no two overlapping.
    static func checkTiles(_ tiles: [CompositeLayout.Tile], width: Int, height: Int) {
        for t in tiles {
            let r = t.rect
            #expect(r.x % 2 == 0 && r.y % 2 == 0 && r.width % 2 == 0 && r.height % 2 == 0, "\(r) not even")
            #expect(r.width >= 2 && r.height >= 2 && r.x >= 0 && r.y >= 0)
            #expect(r.x + r.width <= width && r.y + r.height <= height, "\(r) outside \(width)x\(height)")
        }
        for (i, a) in tiles.enumerated() {
            for b in tiles[(i + 1)...] {
                let apart =
                    a.rect.x + a.rect.width <= b.rect.x || b.rect.x + b.rect.width <= a.rect.x
                    || a.rect.y + a.rect.height <= b.rect.y || b.rect.y + b.rect.height <= a.rect.y
                #expect(apart, "\(a.rect) overlaps \(b.rect)")
            }
        }
    }

    @Test func gridOfOneFillsTheCanvas() {
        let tiles = CompositeLayout.tiles(.grid, members: Self.members(1), width: 1280, height: 720)
        #expect(tiles.map(\.rect) == [PixelRect(x: 0, y: 0, width: 1280, height: 720)])
    }

    @Test func gridOfFourIsTwoByTwo() {
        let tiles = CompositeLayout.tiles(.grid, members: Self.members(4), width: 1280, height: 720)
        #expect(
            tiles.map(\.rect) == [
                PixelRect(x: 0, y: 0, width: 640, height: 360), PixelRect(x: 640, y: 0, width: 640, height: 360),
                PixelRect(x: 0, y: 360, width: 640, height: 360), PixelRect(x: 640, y: 360, width: 640, height: 360),
            ])
        #expect(tiles.map(\.member.id) == ["p0", "p1", "p2", "p3"])
    }

    @Test func gridCentresAPartialLastRow() {
        let tiles = CompositeLayout.tiles(.grid, members: Self.members(3), width: 1280, height: 720)
        #expect(tiles[2].rect == PixelRect(x: 320, y: 360, width: 640, height: 360))
        let five = CompositeLayout.tiles(.grid, members: Self.members(5), width: 1280, height: 720)
        // 3 columns of 426, two rows of 360; the second row's two tiles centred.
        #expect(five[0].rect == PixelRect(x: 0, y: 0, width: 426, height: 360))
        #expect(five[3].rect == PixelRect(x: 214, y: 360, width: 426, height: 360))
    }

    @Test func everyGridAndSpeakerLayoutIsEvenInsideAndDisjoint() {
        for (w, h) in [(1280, 720), (640, 360), (1920, 1080), (322, 182), (1279, 721)] {
            for n in 1...17 {
                for kind in CompositeLayout.Kind.allCases {
                    let tiles = CompositeLayout.tiles(
                        kind, members: Self.members(n), activeSpeaker: "p\(n / 2)", width: w, height: h)
                    #expect(!tiles.isEmpty)
                    Self.checkTiles(tiles, width: w, height: h)
                }
            }
        }
    }

    @Test func speakerLayoutPutsTheActiveSpeakerLarge() {
        let tiles = CompositeLayout.tiles(
            .speaker, members: Self.members(3), activeSpeaker: "p2", width: 1280, height: 720)
        #expect(tiles[0].member.id == "p2")
        #expect(tiles[0].rect == PixelRect(x: 0, y: 0, width: 1024, height: 720))
        #expect(tiles[1...].map(\.member.id) == ["p0", "p1"])
        #expect(tiles[1...].allSatisfy { $0.rect.x == 1024 && $0.rect.width == 256 && $0.rect.height == 144 })
        // No speaker known: the first member.
        let first = CompositeLayout.tiles(.speaker, members: Self.members(3), width: 1280, height: 720)
        #expect(first[0].member.id == "p0")
    }

    @Test func aScreenShareTakesTheStage() {
        var members = Self.members(2)
        members.append(CompositeLayout.Member(id: "p1", isScreen: true))
        let tiles = CompositeLayout.tiles(.speaker, members: members, activeSpeaker: "p0", width: 1280, height: 720)
        #expect(tiles[0].member == CompositeLayout.Member(id: "p1", isScreen: true))
        #expect(tiles[0].rect.width == 1024)
        #expect(Set(tiles[1...].map(\.member.id)) == ["p0", "p1"])
    }

    @Test func anEmptyStageOrCanvasHasNoTiles() {
        #expect(CompositeLayout.tiles(.grid, members: [], width: 1280, height: 720).isEmpty)
        #expect(CompositeLayout.tiles(.speaker, members: Self.members(2), width: 1, height: 720).isEmpty)
    }

    @Test func fitKeepsTheAspect() {
        let tile = PixelRect(x: 640, y: 0, width: 640, height: 360)
        // 16:9 into 16:9: the whole tile.
        #expect(CompositeLayout.fit(pictureWidth: 320, pictureHeight: 180, in: tile) == tile)
        // 4:3: pillarboxed, centred.
        #expect(
            CompositeLayout.fit(pictureWidth: 640, pictureHeight: 480, in: tile)
                == PixelRect(x: 720, y: 0, width: 480, height: 360))
        // Portrait 9:16 in a wide tile.
        let portrait = CompositeLayout.fit(pictureWidth: 360, pictureHeight: 640, in: tile)!
        #expect(portrait.height == 360 && portrait.width == 202 && portrait.x == 640 + 218)
        // Wide into a square: letterboxed.
        #expect(
            CompositeLayout.fit(
                pictureWidth: 1280, pictureHeight: 720, in: PixelRect(x: 0, y: 0, width: 400, height: 400))
                == PixelRect(x: 0, y: 88, width: 400, height: 224))
        #expect(CompositeLayout.fit(pictureWidth: 0, pictureHeight: 720, in: tile) == nil)
    }
}
