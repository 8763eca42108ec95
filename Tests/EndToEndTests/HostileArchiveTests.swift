import Foundation
import Testing
import TestSupport

/// Archives made to harm the machine that restores them: `screentimectl` reads what each
/// holds from its tar headers and refuses it before `tar` unpacks anything.
@Suite("Backups: a hostile archive is refused before anything is unpacked")
struct HostileArchiveTests {
    /// Each archive (made by Python's tarfile, or GNU tar for the sparse one) and what the
    /// refusal names.
    static let cases: [(label: String, says: String)] = [
        ("dotdot", "a path outside the archive"), ("absolute", "a path outside the archive"),
        ("symlink", "as a symbolic link"), ("hardlink", "as a hard link"), ("device", "as a character device"),
        ("fifo", "as a FIFO"), ("unknown", "which no backup has"), ("oversized", "more than such a file ever is"),
        ("sparse", "as a sparse file"),
    ]

    @Test("`..`, absolute paths, symbolic and hard links, devices, FIFOs, files no backup has, an oversized key and a 10 GB sparse database: each refused as damaged (exit 65), naming the member, with nothing unpacked anywhere")
    func refused() async throws {
        let directory = TemporaryDirectory()
        let escape = directory.file("escaped")
        let script = """
            import io, sys, tarfile
            def add(t, name, kind=tarfile.REGTYPE, data=b'x', link='', size=None):
                info = tarfile.TarInfo(name); info.type = kind; info.linkname = link
                info.size = len(data) if kind == tarfile.REGTYPE else 0
                t.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
            cases = {
                'dotdot': [('./manifest.json',), ('./../../' + sys.argv[2].lstrip('/'),)],
                'absolute': [(sys.argv[2],)],
                'symlink': [('./etc/screentime.env', tarfile.SYMTYPE, b'', '/etc/shadow')],
                'hardlink': [('./etc/screentime.env', tarfile.LNKTYPE, b'', '/etc/shadow')],
                'device': [('./etc/null', tarfile.CHRTYPE, b'')],
                'fifo': [('./etc/pipe', tarfile.FIFOTYPE, b'')],
                'unknown': [('./home/root/.ssh/authorized_keys',)],
                'oversized': [('./gateway/key.pem', tarfile.REGTYPE, b'k' * (2 << 20))],
            }
            for label, members in cases.items():
                with tarfile.open(sys.argv[1] + '/' + label + '.tar', 'w', format=tarfile.GNU_FORMAT) as t:
                    for member in members: add(t, *member)
            """
        let made = try await runCommand("/usr/bin/python3", ["-c", script, directory.path, escape])
        try #require(made.status == 0, "\(made.stderr)")
        // A 10 GB database that takes no room on disk, as GNU tar stores a sparse file.
        try FileManager.default.createDirectory(atPath: directory.file("sparse/databases"), withIntermediateDirectories: true)
        let sparse = try await runCommand("/usr/bin/truncate", ["-s", "10G", directory.file("sparse/databases/store.sqlite")])
        let packed = try await runCommand("/usr/bin/tar", ["--sparse", "-cf", directory.file("sparse.tar"), "-C", directory.file("sparse"), "."])
        try #require(sparse.status == 0 && packed.status == 0, "\(sparse.stderr) \(packed.stderr)")

        for (label, says) in Self.cases {
            let archive = directory.file("\(label).tar")
            let verified = try await runCommand(Binaries.path("screentimectl"), ["backup", "verify", archive])
            #expect(verified.status == 65 && verified.stderr.contains("damaged_archive") && verified.stderr.contains(says)
                    && verified.stderr.contains("nothing was unpacked"), "\(label): \(verified.status) \(verified.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: escape), "nothing was written outside")
    }
}
