import AggregatorAPI
import Foundation
import PairingAPI
import PushAPI
import RPCCore
import StoreAPI
import Testing

/// The fuzzer's seed corpus (Fuzz/corpus) starts it from a valid request for every method
/// of every service; a method added to a list without a seed fails here (run
/// `Fuzz/capture-seeds` to refresh the corpus from the tests' real traffic).
@Suite("Fuzz seed corpus")
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    static let methods: [any DeclaredMethod] = [Builtin.ping, Builtin.describe, Builtin.cancel, Builtin.metrics]
        + [StoreMethods.list, PairingMethods.list, PushMethods.list, AggregatorMethods.list].flatMap(\.methods)

    /// Each seed's frames, by file name.
    static func seeds() throws -> [String: [[UInt8]]] {
        var seeds: [String: [[UInt8]]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: self.corpus.path) {
            var bytes = try [UInt8](Data(contentsOf: self.corpus.appendingPathComponent(name)))[...]
            var frames: [[UInt8]] = []
            while bytes.count >= 4 {
                let length = bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
                guard bytes.count >= 4 + length else { break }
                frames.append(Array(bytes.dropFirst(4).prefix(length)))
                bytes = bytes.dropFirst(4 + length)
            }
            seeds[name] = frames
        }
        return seeds
    }

    @Test("every declared method has a seed whose params it accepts")
    func everyMethodHasAValidSeed() throws {
        let seeds = try Self.seeds()
        for method in Self.methods {
            // The seeds named for the method: one request each, for that method; the tests'
            // bad requests are among them, so one accepted is enough.
            var accepted = 0
            for (name, frames) in seeds where name.hasPrefix(method.name + "-") {
                #expect(frames.count == 1, "\(name): one frame expected")
                guard let frame = frames.first, case .success(let (head, params)) = RequestHead.parseRequestLeavingParams(bytes: frame) else {
                    Issue.record("\(name): not a readable request")
                    continue
                }
                #expect(head.method == method.name, "\(name)")
                if (try? method.decodeParams(params)) != nil { accepted += 1 }
            }
            #expect(accepted > 0, "no seed in Fuzz/corpus that \(method.name) accepts (Fuzz/capture-seeds, or a <method>-hand seed)")
        }
    }
}
