import TestSupport
import Foundation
import Testing

@Suite("screentimectl against a real service")
struct CLITests {
    func ctl(_ dir: TemporaryDirectory, _ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runCommand(Binaries.path("screentimectl"), arguments, environment: ["SCREENTIME_RUNTIME_DIR": dir.path], stdin: stdin)
    }

    @Test("ping, describe and call print JSON and exit 0")
    func happyPaths() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }

        let ping = try await ctl(dir, ["ping", "test"])
        #expect(ping.status == 0)
        #expect(ping.stdout.contains("\"service\":\"test\""))

        let byPath = try await ctl(dir, ["ping", service.socketPath, "--pretty"])
        #expect(byPath.status == 0)
        #expect(byPath.stdout.contains("test 0.0.0-test: pid \(service.pid)"))

        let describe = try await ctl(dir, ["describe", "test", "test.echo"])
        #expect(describe.status == 0)
        #expect(describe.stdout.contains("\"name\":\"test.echo\""))

        let call = try await ctl(dir, ["call", "test", "test.echo", #"{"message": "hi", "times": 2}"#])
        #expect(call.status == 0)
        #expect(call.stdout == "{\"message\":\"hihi\"}\n")

        let pretty = try await ctl(dir, ["call", "test", "test.echo", #"{"message": "hi"}"#, "--pretty"])
        #expect(pretty.stdout.contains("\n  \"message\" : \"hi\"\n"))
    }

    @Test("call reads params from stdin with - and prints each reply of a stream")
    func streamFromStdin() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }
        let run = try await ctl(dir, ["call", "test", "test.count", "-"], stdin: #"{"count": 3}"#)
        #expect(run.status == 0)
        #expect(run.stdout == "{\"index\":0}\n{\"index\":1}\n{\"index\":2}\n{\"sent\":3}\n")
    }

    @Test("documented exit codes: 1 service error, 65 bad JSON, 69 unreachable, 75 timeout, 64 usage")
    func exitCodes() async throws {
        let dir = TemporaryDirectory()
        let service = try await ServiceProcess.startByHand(in: dir)
        defer { service.stopNow() }

        let failed = try await ctl(dir, ["call", "test", "test.fail", #"{"code": "not_found", "message": "no such zone"}"#])
        #expect(failed.status == 1)
        #expect(failed.stderr == "screentimectl: not_found: no such zone\n")

        let unknown = try await ctl(dir, ["call", "test", "test.nope"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.hasPrefix("screentimectl: method_not_found:"))

        let badJSON = try await ctl(dir, ["call", "test", "test.echo", "{nope"])
        #expect(badJSON.status == 65)
        #expect(badJSON.stderr.hasPrefix("screentimectl: invalid_json:"))

        let notObject = try await ctl(dir, ["call", "test", "test.echo", "[1]"])
        #expect(notObject.status == 65)

        let unreachable = try await ctl(dir, ["ping", "store"])
        #expect(unreachable.status == 69)
        #expect(unreachable.stderr.contains("cannot connect to \(dir.file("store.sock"))"))

        let slow = try await ctl(dir, ["call", "test", "test.sleep", #"{"milliseconds": 5000}"#, "--timeout", "0.3"])
        #expect(slow.status == 75)
        #expect(slow.stderr.hasPrefix("screentimectl: timeout:"))

        let usage = try await ctl(dir, ["call"])
        #expect(usage.status == 64)
    }

    @Test("--help is there for every subcommand")
    func help() async throws {
        let dir = TemporaryDirectory()
        for arguments in [["--help"], ["ping", "--help"], ["describe", "--help"], ["call", "--help"]] {
            let run = try await ctl(dir, arguments)
            #expect(run.status == 0)
            #expect(run.stdout.contains("USAGE: screentimectl"))
        }
        let top = try await ctl(dir, ["--help"])
        #expect(top.stdout.contains("Exit status:"))
    }
}
