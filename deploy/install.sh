#!/bin/bash
# Installs the ScreenTime Rewards Server under systemd: release binaries, units, the
# screentime user; then enables and starts its sockets (each service starts on its first
# connection). Run it again to upgrade in place: the data stays, the schema migrates when
# each service next starts. See docs/operations.md.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/install.sh [--prefix DIR] [--bin-dir DIR] [--webhooks] [--internet] [--no-start]

  --prefix DIR    where the binaries and docs go (default /usr/local: DIR/libexec/screentime,
                  DIR/bin/screentimectl, DIR/share/doc/screentime-server)
  --bin-dir DIR   install the binaries already built in DIR instead of building them
                  (deploy/build-release.sh: release, --static-swift-stdlib)
  --webhooks      let the push service reach phones over HTTP, or the wake relay
                  (installs the network drop-in; also add --webhooks, or
                  --wake-relay URL, to OPTIONS in /etc/screentime/push.env)
  --internet      let devices reach the gateway from any address (a port forward from the
                  internet), not only from the home network (installs the drop-in)
  --no-start      install and enable, but do not start the sockets now
USAGE
}

prefix=/usr/local
bin_dir=""
webhooks=no
internet=no
start=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --bin-dir) bin_dir="$2"; shift 2 ;;
        --webhooks) webhooks=yes; shift ;;
        --internet) internet=yes; shift ;;
        --no-start) start=no; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
    esac
done

[ "$(id -u)" = 0 ] || { echo "install.sh: run it as root (sudo deploy/install.sh)" >&2; exit 77; }
command -v systemctl >/dev/null || { echo "install.sh: systemd is needed (systemctl not found)" >&2; exit 69; }
root="$(cd "$(dirname "$0")/.." && pwd)"
# deploy/services: one service a line, NAME BINARY.
services=()
binaries=()
while read -r name binary; do services+=("$name"); binaries+=("$binary"); done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/deploy/services")

if [ -z "$bin_dir" ]; then
    echo "building release binaries (deploy/build-release.sh)"
    bin_dir="$("$root/deploy/build-release.sh")"
fi
for binary in "${binaries[@]}" screentimectl; do
    [ -x "$bin_dir/$binary" ] || { echo "install.sh: $bin_dir/$binary is missing: build first, or drop --bin-dir" >&2; exit 66; }
done

libexec="$prefix/libexec/screentime"
docdir="$prefix/share/doc/screentime-server"
units=/etc/systemd/system

echo "installing binaries in $libexec and $prefix/bin"
install -d -m 0755 "$libexec" "$prefix/bin" "$docdir"
# What deploy/build-release.sh makes: one program, `screentime`, and the names it answers to
# as links to it; each installed the same way (a separately built program is copied). Each
# file is made beside its place and renamed over it: a service that systemd starts meanwhile
# finds the old program or the new one, never none.
install_name() {
    local name="$1" target="$2" link="$3"
    rm -f "$target.new"
    if [ "$(readlink "$bin_dir/$name" 2>/dev/null)" = screentime ]; then
        ln -sfn "$link" "$target.new"
    else
        install -m 0755 "$bin_dir/$name" "$target.new"
    fi
    mv -Tf "$target.new" "$target"
}
if [ -x "$bin_dir/screentime" ] && [ ! -L "$bin_dir/screentime" ]; then
    rm -f "$libexec/screentime.new"
    install -m 0755 "$bin_dir/screentime" "$libexec/screentime.new"
    mv -Tf "$libexec/screentime.new" "$libexec/screentime"
fi
for binary in "${binaries[@]}"; do install_name "$binary" "$libexec/$binary" screentime; done
install_name screentimectl "$prefix/bin/screentimectl" "$libexec/screentime"
install -m 0644 "$root/docs/operations.md" "$root/docs/protocol.md" "$root/docs/architecture.md" "$root/docs/data-model.md" "$docdir/"

echo "creating the screentime user and group"
install -D -m 0644 "$root/systemd/screentime.sysusers" /etc/sysusers.d/screentime.conf
systemd-sysusers /etc/sysusers.d/screentime.conf

echo "installing units in $units"
for unit in screentime.target "${services[@]/#/screentime-}"; do
    for suffix in "" .socket .service; do
        [ -f "$root/systemd/$unit$suffix" ] || continue
        sed -e "s|@LIBEXECDIR@|$libexec|g" -e "s|@DOCDIR@|$docdir|g" -e "s|@BINDIR@|$prefix/bin|g" "$root/systemd/$unit$suffix" > "$units/$unit$suffix"
        chmod 0644 "$units/$unit$suffix"
    done
done
# The nightly backup (screentimectl backup scheduled) and its timer; the metrics socket (off
# until enabled).
for unit in screentime-backup.service screentime-backup.timer screentime-metrics.socket; do
    sed -e "s|@DOCDIR@|$docdir|g" -e "s|@BINDIR@|$prefix/bin|g" "$root/systemd/$unit" > "$units/$unit"
    chmod 0644 "$units/$unit"
done
if [ "$webhooks" = yes ]; then
    install -D -m 0644 "$root/systemd/screentime-push-webhooks.conf" "$units/screentime-push.service.d/webhooks.conf"
fi
# Where an earlier version put the internet drop-in (on the service, where it filtered
# nothing): moved to the socket, whose access list is the one that applies.
if [ -f "$units/screentime-gateway.service.d/internet.conf" ]; then
    [ -f "$units/screentime-gateway.socket.d/internet.conf" ] ||
        install -D -m 0644 "$root/systemd/screentime-gateway-internet.conf" "$units/screentime-gateway.socket.d/internet.conf"
    rm -f "$units/screentime-gateway.service.d/internet.conf"
    rmdir "$units/screentime-gateway.service.d" 2>/dev/null || true
fi
if [ "$internet" = yes ]; then
    install -D -m 0644 "$root/systemd/screentime-gateway-internet.conf" "$units/screentime-gateway.socket.d/internet.conf"
fi
# The gateway's port is its socket's ListenStream= (8443): `systemctl edit
# screentime-gateway.socket` changes it. An earlier version's port.conf drop-in goes when it
# is as that version wrote it; changed, it becomes 00-port.conf, still in force but read
# before the override.conf of `systemctl edit`, so that a port set there wins.
dropins="$units/screentime-gateway.socket.d"
if [ -f "$dropins/port.conf" ]; then
    if [ "$(md5sum < "$dropins/port.conf" | cut -d' ' -f1)" = 22595ffa399909d27f95dca9ee7a0bc6 ]; then
        rm -f "$dropins/port.conf"
    elif [ ! -e "$dropins/00-port.conf" ]; then
        mv "$dropins/port.conf" "$dropins/00-port.conf"
        echo "your gateway port drop-in is now $dropins/00-port.conf (systemctl edit screentime-gateway.socket overrides it)"
    fi
    rmdir "$dropins" 2>/dev/null || true
fi
install -d -m 0755 /etc/screentime
for index in "${!services[@]}"; do
    env="/etc/screentime/${services[$index]}.env"
    [ -f "$env" ] || sed -e "s/@NAME@/${services[$index]}/g" -e "s/@BINARY@/${binaries[$index]}/g" "$root/deploy/service.env.in" > "$env"
done
[ -f /etc/screentime/backup.env ] || install -m 0644 "$root/deploy/backup.env" /etc/screentime/backup.env
# The options may name secrets (a passphrase's file, a webhook's address): the files are
# readable by root (systemd reads them) and the services' group only.
chown root:screentime /etc/screentime/*.env
chmod 0640 /etc/screentime/*.env

# The gateway's key, certificate and endpoint file (its URLs and pin, which pairing codes
# carry) now, as the screentime user, rather than at its first connection.
install -d -o screentime -g screentime -m 0750 /var/lib/screentime
# The port: the socket's, as systemd has it now (an upgrade), else the unit's 8443.
port=$(systemctl show -P Listen screentime-gateway.socket 2>/dev/null | sed -n 's/.*:\([0-9]\{1,5\}\) (Stream)$/\1/p' | sed -n 1p)
runuser -u screentime -- "$libexec/screentime-gatewayd" --state-dir /var/lib/screentime --runtime-dir /run/screentime \
    --log-target stderr --log-level warning --listen "0.0.0.0:${port:-8443}" --init-only >/dev/null

systemctl daemon-reload
systemctl enable screentime.target >/dev/null
# reenable: an earlier version's sockets were also wanted by sockets.target, and would
# listen after a reboot with screentime.target disabled. Such a version's gateway socket was
# made without its IP filter: it is made again (once).
refilter=no
ls "$units"/sockets.target.wants/screentime-*.socket >/dev/null 2>&1 && refilter=yes
for service in "${services[@]}"; do systemctl reenable "screentime-$service.socket" 2>/dev/null; done
systemctl enable screentime-backup.timer 2>/dev/null
if [ "$start" = yes ]; then
    systemctl start screentime.target
    systemctl start screentime-backup.timer
    # An upgrade: services that were running pick up the new binaries now.
    for service in "${services[@]}"; do systemctl try-restart "screentime-$service.service"; done
    if [ "$refilter" = yes ]; then systemctl try-restart screentime-gateway.socket; fi
    # The socket announces itself when it starts; one that kept listening through this
    # upgrade does it now, with this version's file.
    "$prefix/bin/screentimectl" gateway announce >/dev/null || true
fi
echo "installed. Sockets: $(printf '/run/screentime/%s.sock ' "${services[@]}")(group screentime); the gateway on TCP (another port: systemctl edit screentime-gateway.socket)."
echo "Try: screentimectl call store rpc.ping    Logs: journalctl -u 'screentime-*'"
echo "The gateway's pin (what devices check; pairing codes carry it): screentimectl gateway pin"
port=$(systemctl show -P Listen screentime-gateway.socket 2>/dev/null | sed -n 's/.*:\([0-9]\{1,5\}\) (Stream)$/\1/p' | sed -n 1p)
if [ -f "$units/screentime-gateway.socket.d/internet.conf" ]; then
    echo "The gateway listens on TCP port ${port:-8443} on every interface and accepts devices from any address (the internet drop-in)."
else
    echo "The gateway listens on TCP port ${port:-8443} on every interface, for devices on the home network only (private and link-local addresses)."
fi
echo "To turn the server off for good: systemctl disable --now screentime.target"
