/// Incremental decoder of a chunked body (RFC 9112 §7.1), for requests and responses alike.
///
/// It reads the caller's receive buffer from an offset and resumes where the previous call
/// stopped, so a body that trickles in costs linear time in total. Chunk extensions and trailers
/// are skipped; a chunk-size line is limited to 1 KiB and the body to the caller's limit.
struct HTTPChunkedBody: Sendable {
    /// Why the body cannot be read; each parser maps it to its own error.
    enum Failure: Error, Equatable {
        /// The data exceeds the body limit.
        case tooLarge
        /// A syntax error, with what was wrong.
        case malformed(String)
    }

    /// Offset of the next chunk-size or trailer line in the caller's buffer.
    private(set) var next: Int
    /// The data decoded so far.
    private(set) var body: [UInt8] = []
    private var inTrailer = false

    /// A body whose first chunk-size line starts at `start`.
    init(at start: Int) { next = start }

    /// The caller dropped `count` bytes from the front of its buffer.
    mutating func shift(by count: Int) { next -= count }

    /// Decodes what `bytes` holds past ``next``: the offset just past the body (trailers included)
    /// once it is complete, nil while more bytes are needed.
    mutating func decode(_ bytes: [UInt8], maxBodyBytes: Int) throws(Failure) -> Int? {
        while !inTrailer {
            // The same limit whether the line arrived whole or is still arriving.
            guard let lineEnd = Self.findCRLF(bytes, from: next) else {
                if bytes.count - next > 1024 { throw .malformed("chunk size line too long") }
                return nil
            }
            guard lineEnd - next <= 1024 else { throw .malformed("chunk size line too long") }
            let sizeField =
                bytes[next..<lineEnd].split(
                    separator: UInt8(ascii: ";"), maxSplits: 1, omittingEmptySubsequences: false
                )
                .first ?? []
            let sizeText = String(decoding: sizeField, as: UTF8.self).trimmingSpaces()
            guard let size = HTTPNumber.chunkSize(sizeText) else { throw .malformed("bad chunk size") }
            guard body.count + size <= maxBodyBytes else { throw .tooLarge }
            let dataStart = lineEnd + 2
            if size == 0 {
                next = dataStart
                inTrailer = true
                break
            }
            guard bytes.count >= dataStart + size + 2 else { return nil }
            guard bytes[dataStart + size] == 13, bytes[dataStart + size + 1] == 10 else {
                throw .malformed("chunk not terminated by CRLF")
            }
            body.append(contentsOf: bytes[dataStart..<(dataStart + size)])
            next = dataStart + size + 2
        }
        // Trailer section: header lines until an empty line.
        while true {
            guard let end = Self.findCRLF(bytes, from: next) else { return nil }
            let isEmpty = end == next
            next = end + 2
            if isEmpty { return next }
        }
    }

    private static func findCRLF(_ bytes: [UInt8], from start: Int) -> Int? {
        var j = start
        while j + 1 < bytes.count {
            if bytes[j] == 13 && bytes[j + 1] == 10 { return j }
            j += 1
        }
        return nil
    }
}

extension HTTPRequestError {
    init(_ failure: HTTPChunkedBody.Failure) {
        switch failure {
        case .tooLarge: self = .bodyTooLarge
        case .malformed(let why): self = .malformed(why)
        }
    }
}

extension HTTPError {
    init(_ failure: HTTPChunkedBody.Failure) {
        switch failure {
        case .tooLarge: self = .messageTooLarge
        case .malformed(let why): self = .malformedResponse(why)
        }
    }
}
