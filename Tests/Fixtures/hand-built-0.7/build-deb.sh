#!/bin/bash
# The hand-built 0.7 package's build script, as it was (deploy/build-deb.sh before the
# package was built with debhelper), kept to test upgrades from that package. Changed only
# to find the tree from here, to package exactly 0.7's four services, and to take the
# binaries from --bin-dir alone.
#
# Builds the Debian package screentime-server_<version>_<arch>.deb with dpkg-deb:
# binaries in /usr/libexec/screentime, screentimectl in /usr/bin, units in
# /lib/systemd/system, the user in /usr/lib/sysusers.d. Its maintainer scripts create the
# user, reload systemd and enable and start the sockets on install (restarting running
# services on upgrade), and stop them on removal; purge deletes the data.
set -euo pipefail

usage() { echo "Usage: deploy/build-deb.sh [--version X.Y.Z] [--bin-dir DIR] [--out DIR]"; }
version=0.7.0
bin_dir=""
out="$(pwd)"
while [ $# -gt 0 ]; do
    case "$1" in
        --version) version="$2"; shift 2 ;;
        --bin-dir) bin_dir="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-deb.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
    esac
done
root="$(cd "$(dirname "$0")/../../.." && pwd)"
[ -n "$bin_dir" ] || { echo "build-deb.sh (0.7): --bin-dir is needed" >&2; exit 64; }
arch="$(dpkg --print-architecture)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/screentime-server"
libexec=/usr/libexec/screentime
docdir=/usr/share/doc/screentime-server

install -d "$pkg/DEBIAN" "$pkg$libexec" "$pkg/usr/bin" "$pkg/lib/systemd/system" "$pkg/usr/lib/sysusers.d" "$pkg$docdir"
for binary in screentime-stored screentime-pairingd screentime-pushd screentime-aggregatord; do
    install -m 0755 "$bin_dir/$binary" "$pkg$libexec/$binary"
done
install -m 0755 "$bin_dir/screentimectl" "$pkg/usr/bin/screentimectl"
for unit in "$root"/systemd/screentime-{store,pairing,push,aggregator}.{socket,service} "$root"/systemd/screentime.target; do
    sed -e "s|@LIBEXECDIR@|$libexec|g" -e "s|@DOCDIR@|$docdir|g" "$unit" > "$pkg/lib/systemd/system/$(basename "$unit")"
done
install -m 0644 "$root/systemd/screentime.sysusers" "$pkg/usr/lib/sysusers.d/screentime.conf"
install -m 0644 "$root/docs/operations.md" "$root/docs/protocol.md" "$root/docs/architecture.md" "$root/systemd/screentime-push-webhooks.conf" "$pkg$docdir/"

cat > "$pkg/DEBIAN/control" <<CONTROL
Package: screentime-server
Version: $version
Architecture: $arch
Maintainer: ScreenTime Rewards Server developers <root@localhost>
Depends: systemd, libsystemd0, libsqlite3-0, libqrencode4, libpng16-16, libstdc++6
Section: net
Priority: optional
Description: ScreenTime Rewards home server (replaces CloudKit for the app)
 A family's own server for the ScreenTime Rewards app: record store, pairing,
 push fan-out and usage aggregator as socket-activated systemd services, and
 the screentimectl admin CLI.
CONTROL

cat > "$pkg/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    systemd-sysusers /usr/lib/sysusers.d/screentime.conf
    install -d -m 0755 /etc/screentime
    for service in store pairing push aggregator; do
        [ -f "/etc/screentime/$service.env" ] || printf '# Options for screentime-%s (see its --help)\nOPTIONS=\n' "$service" > "/etc/screentime/$service.env"
    done
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        systemctl enable screentime.target screentime-store.socket screentime-pairing.socket screentime-push.socket screentime-aggregator.socket >/dev/null
        systemctl start screentime.target
        # An upgrade: running services pick up the new binaries (data and schema stay; it migrates on start).
        systemctl try-restart screentime-store.service screentime-pairing.service screentime-push.service screentime-aggregator.service
    fi
fi
SCRIPT
cat > "$pkg/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl disable --now screentime.target screentime-store.socket screentime-pairing.socket screentime-push.socket screentime-aggregator.socket >/dev/null 2>&1 || true
    systemctl stop screentime-store.service screentime-pairing.service screentime-push.service screentime-aggregator.service || true
fi
SCRIPT
cat > "$pkg/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
[ -d /run/systemd/system ] && systemctl daemon-reload || true
if [ "$1" = purge ]; then
    rm -rf /var/lib/screentime /etc/screentime
    userdel screentime 2>/dev/null || true
    groupdel screentime 2>/dev/null || true
fi
SCRIPT
chmod 0755 "$pkg/DEBIAN/postinst" "$pkg/DEBIAN/prerm" "$pkg/DEBIAN/postrm"
mkdir -p "$out"
# SCREENTIME_DEB_UNCOMPRESSED=1 (the tests): quicker to build, bigger.
dpkg-deb --build --root-owner-group ${SCREENTIME_DEB_UNCOMPRESSED:+-Znone} "$pkg" "$out/screentime-server_${version}_${arch}.deb" >/dev/null
echo "$out/screentime-server_${version}_${arch}.deb"
