import Testing

@testable import LoadGen

@Test func loadGenModuleLinks() { #expect(String(describing: LoadGen.self) == "LoadGen") }
