/// The server's version: what every service reports in `rpc.ping` and `rpc.describe`,
/// what the CLI's `--version` prints, and what the Debian package is versioned as.
/// deploy/debian/changelog's newest entry must carry the same version (build-deb.sh
/// refuses to build otherwise, and a test checks it): bump both together.
public enum ServerVersion {
    public static let current = "0.9.1"
}
