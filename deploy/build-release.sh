#!/bin/bash
# Builds the binaries the server ships, the one way they are built: release mode, the
# Swift runtime linked in statically (--static-swift-stdlib), so they need nothing from
# the Swift toolchain where they run. Used by the Debian package (debian/rules),
# install.sh, Benchmarks/run and CI; prints the directory that holds them. Beside them:
# generate-manual (swift-argument-parser's, the tool behind its generate-manual plugin),
# which debian/rules runs on them for their manual pages.
#
#   deploy/build-release.sh [--scratch-path DIR] [EXTRA-PRODUCT...]
#
# EXTRA-PRODUCT: another product to build the same way (Benchmarks/run adds
# screentime-bench, so that it starts these very binaries).
set -euo pipefail

usage() { echo "Usage: deploy/build-release.sh [--scratch-path DIR] [EXTRA-PRODUCT...]"; }
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch=()
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --scratch-path) scratch=(--scratch-path "$(realpath -m "$2")"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "build-release.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
        *) extra+=("$1"); shift ;;
    esac
done
command -v swift >/dev/null || { echo "build-release.sh: swift is not on PATH (the toolchain, e.g. /opt/swift/usr/bin)" >&2; exit 69; }

products=(screentimectl generate-manual)
while read -r _ binary; do products+=("$binary"); done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/deploy/services")
flags=(-c release --static-swift-stdlib "${scratch[@]}")
cd "$root"
for product in "${products[@]}" "${extra[@]}"; do
    swift build "${flags[@]}" --product "$product" >&2
done
swift build "${flags[@]}" --show-bin-path
