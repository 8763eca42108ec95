#!/bin/bash
# Stops and removes the ScreenTime Rewards Server installed by deploy/install.sh. The data
# (/var/lib/screentime), the configuration (/etc/screentime, drop-ins such as the gateway's port)
# and the screentime user stay unless --purge is given.
set -euo pipefail

prefix=/usr/local
purge=no
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        --purge) purge=yes; shift ;;
        -h|--help) echo "Usage: deploy/uninstall.sh [--prefix DIR] [--purge]   (--purge also deletes the data, the configuration and the user)"; exit 0 ;;
        *) echo "uninstall.sh: unknown option $1" >&2; exit 64 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "uninstall.sh: run it as root" >&2; exit 77; }

root="$(cd "$(dirname "$0")/.." && pwd)"
services=()
while read -r name _; do services+=("$name"); done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/deploy/services")
units=/etc/systemd/system
systemctl disable --now screentime.target "${services[@]/%/.socket}" >/dev/null 2>&1 || true
for service in "${services[@]}"; do
    systemctl disable --now "screentime-$service.socket" "screentime-$service.service" >/dev/null 2>&1 || true
    rm -f "$units/screentime-$service.socket" "$units/screentime-$service.service"
done
systemctl disable --now screentime-backup.timer screentime-backup.service >/dev/null 2>&1 || true
rm -f "$units/screentime-backup.timer" "$units/screentime-backup.service"
systemctl disable --now screentime-metrics.socket >/dev/null 2>&1 || true
rm -f "$units/screentime-metrics.socket"
systemctl disable --now screentime.target >/dev/null 2>&1 || true
rm -rf "$units/screentime.target" "$units/screentime-push.service.d" "$units/screentime-gateway.service.d"
systemctl daemon-reload
# No longer announced on the home network (the gateway socket's `screentimectl gateway
# announce` wrote it).
"$prefix/bin/screentimectl" gateway announce --remove >/dev/null 2>&1 || rm -f /etc/avahi/services/screentime.service
rm -rf "$prefix/libexec/screentime" "$prefix/share/doc/screentime-server"
rm -f "$prefix/bin/screentimectl"
if [ "$purge" = yes ]; then
    rm -rf /var/lib/screentime /etc/screentime "$units/screentime-gateway.socket.d"
    userdel screentime 2>/dev/null || true
    groupdel screentime 2>/dev/null || true
    rm -f /etc/sysusers.d/screentime.conf
    echo "removed, with the data, the configuration and the screentime user"
else
    echo "removed; the data stays in /var/lib/screentime and the configuration in /etc/screentime (--purge deletes them)"
fi
