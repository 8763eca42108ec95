#!/bin/bash
# Builds the Debian package screentime-server from this tree, the Debian way: a copy of
# the tree with deploy/debian/ as debian/, the source package (dpkg-source -b), then the
# binary packages (dpkg-buildpackage -b: screentime-server and its -dbgsym). Installs
# what Debian provides for it when missing (debhelper, lintian, the build dependencies);
# the Swift toolchain comes from this machine (swift on PATH, else /opt/swift/usr/bin).
# See docs/operations.md, "Install on a home server".
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/build-deb.sh [--bin-dir DIR] [--out DIR] [--binnmu N] [--lint]

  --bin-dir DIR  package the binaries deploy/build-release.sh already built in DIR
                 instead of building them in the copy (a clean release build)
  --out DIR      where the packages go (default: the current directory)
  --binnmu N     a binary-only rebuild, version <changelog version>+bN: a newer
                 build of the same source (the binaries report the source's version)
  --lint         run lintian on the binary and source packages; fail on any error
                 or warning

Prints the files it made, one a line.
USAGE
}

bin_dir=""
out="$(pwd)"
binnmu=""
lint=no
while [ $# -gt 0 ]; do
    case "$1" in
        --bin-dir) bin_dir="$(realpath "$2")"; shift 2 ;;
        --out) out="$(realpath -m "$2")"; shift 2 ;;
        --binnmu) binnmu="$2"; shift 2 ;;
        --lint) lint=yes; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build-deb.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
    esac
done
case "$binnmu" in
    ""|[1-9]|[1-9][0-9]) ;;
    *) echo "build-deb.sh: --binnmu takes a number from 1 to 99, not $binnmu" >&2; exit 64 ;;
esac
if [ -n "$bin_dir" ]; then
    for binary in screentimectl generate-manual; do
        [ -x "$bin_dir/$binary" ] || { echo "build-deb.sh: $bin_dir/$binary is missing: build with deploy/build-release.sh, or drop --bin-dir" >&2; exit 66; }
    done
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v swift >/dev/null || [ ! -x /opt/swift/usr/bin/swift ] || export PATH="/opt/swift/usr/bin:$PATH"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
version="$(dpkg-parsechangelog -l "$root/deploy/debian/changelog" -S Version)"
src="$stage/screentime-server-$version"

# The tree as git sees it (tracked files, and new ones not ignored: no build
# directories), or without its build directories where it is not a git checkout.
mkdir -p "$src"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' _ |
        tar --null -T - -cf -) | tar -xf - -C "$src"
else
    tar -C "$root" --exclude-vcs --exclude='./.build*' --exclude=./.swiftpm --exclude=./.screentime --exclude=./Package.resolved -cf - . | tar -xf - -C "$src"
fi
rm -rf "$src/debian"
cp -a "$root/deploy/debian" "$src/debian"

# What Debian provides for the build, installed when missing.
if ! command -v lintian >/dev/null || ! command -v dh >/dev/null || ! (cd "$src" && dpkg-checkbuilddeps) 2>/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "build-deb.sh: the build dependencies are missing; install them as root: apt-get build-dep $src, apt-get install lintian (or run this as root)" >&2
        (cd "$src" && dpkg-checkbuilddeps) || true
        exit 69
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends debhelper dpkg-dev lintian >&2
    apt-get build-dep -y -qq "$src" >&2
fi

# The source package first, from the clean copy.
(cd "$stage" && dpkg-source -b "screentime-server-$version" >&2)

if [ -n "$binnmu" ]; then
    maintainer="$(sed -n 's/^Maintainer: //p' "$src/debian/control")"
    {
        printf 'screentime-server (%s+b%s) unstable; urgency=medium, binary-only=yes\n\n' "$version" "$binnmu"
        printf '  * Binary-only rebuild (no source changes).\n\n'
        printf ' -- %s  %s\n\n' "$maintainer" "$(date -R)"
        cat "$src/debian/changelog"
    } > "$stage/changelog" && mv "$stage/changelog" "$src/debian/changelog"
fi

(
    cd "$src"
    export SCREENTIME_PREBUILT_BIN_DIR="$bin_dir"
    dpkg-buildpackage -b --no-sign >&2
)

mkdir -p "$out"
made=()
for file in "$stage"/*.deb "$stage"/*.ddeb "$stage"/*.dsc "$stage"/*.tar.xz "$stage"/*.changes "$stage"/*.buildinfo; do
    [ -f "$file" ] || continue
    cp "$file" "$out/"
    made+=("$out/$(basename "$file")")
done
printf '%s\n' "${made[@]}"

if [ "$lint" = yes ]; then
    packages=()
    for file in "${made[@]}"; do
        case "$file" in *.deb|*.ddeb|*.dsc) packages+=("$file") ;; esac
    done
    lintian --fail-on error,warning "${packages[@]}" >&2
fi
