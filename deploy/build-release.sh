#!/bin/bash
# Builds what the server ships, the one way it is built: release mode, the Swift runtime
# linked in statically (--static-swift-stdlib), so it needs nothing from the Swift
# toolchain where it runs. One program, `screentime`, and beside it screentimectl and the
# daemons as symbolic links to it (it answers to the name it is run by; docs/architecture.md,
# "One program, six names"). Used by the Debian package (debian/rules), install.sh,
# Benchmarks/run and CI; prints the directory that holds them. Also there:
# generate-manual (swift-argument-parser's, the tool behind its generate-manual plugin),
# which debian/rules runs on them for their manual pages.
#
#   deploy/build-release.sh [--scratch-path DIR] [--separate] [EXTRA-PRODUCT...]
#
# --separate: also link screentimectl and each daemon as a program of its own, into
# separate/ in that directory (the cold-start benchmark sets them beside the one program).
# EXTRA-PRODUCT: another product to build the same way (Benchmarks/run adds
# screentime-bench, so that it starts these very binaries).
set -euo pipefail

usage() { echo "Usage: deploy/build-release.sh [--scratch-path DIR] [--separate] [EXTRA-PRODUCT...]"; }
root="$(cd "$(dirname "$0")/.." && pwd)"
scratch=()
extra=()
separate=no
while [ $# -gt 0 ]; do
    case "$1" in
        --scratch-path) scratch=(--scratch-path "$(realpath -m "$2")"); shift 2 ;;
        --separate) separate=yes; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "build-release.sh: unknown option $1" >&2; usage >&2; exit 64 ;;
        *) extra+=("$1"); shift ;;
    esac
done
command -v swift >/dev/null || { echo "build-release.sh: swift is not on PATH (the toolchain, e.g. /opt/swift/usr/bin)" >&2; exit 69; }

# The names `screentime` answers to: screentimectl and the daemons of deploy/services.
names=(screentimectl)
while read -r _ binary; do names+=("$binary"); done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$root/deploy/services")
# Linked by lld (the toolchain's), which packs the relative relocations (DT_RELR, glibc
# 2.36: about 4 MB less of the program, and fewer relocations to apply at each start) and
# folds identical functions that nothing takes the address of (--icf=safe). Generic
# metadata made by direct calls, not from mangled names whose requirements the runtime
# checks one conformance scan at a time: a service starts in three quarters of the time
# (docs/architecture.md, "One program, six names"). Every symbol bound at start (-z now),
# so that the whole relocation-read-only segment is made read-only before any code runs
# (full RELRO, what Debian's hardening flags ask for). The C the Swift packages compile in
# (BoringSSL, llhttp, zlib, the shims) built with _FORTIFY_SOURCE=2, as Debian builds C:
# glibc's checked variants where a buffer's size is known. (Swift code calls the C library
# through its own bounds-checked types; the fortified wrappers are C-header inlines that
# only a C compiler picks.)
flags=(-c release --static-swift-stdlib "${scratch[@]}"
       -Xcc -D_FORTIFY_SOURCE=2
       -Xswiftc -use-ld=lld -Xlinker --icf=safe -Xlinker -z -Xlinker pack-relative-relocs -Xlinker -z -Xlinker now
       -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors)
cd "$root"
bin="$(swift build "${flags[@]}" --show-bin-path)"
if [ "$separate" = yes ]; then
    # Each name as a program of its own, kept aside in separate/: built first, because
    # the links below take their places in the build's directory.
    mkdir -p "$bin/separate"
    for name in "${names[@]}"; do
        rm -f "$bin/$name"
        swift build "${flags[@]}" --product "$name" >&2
        mv -f "$bin/$name" "$bin/separate/$name"
    done
fi
for product in screentime generate-manual "${extra[@]}"; do
    swift build "${flags[@]}" --product "$product" >&2
done
for name in "${names[@]}"; do
    ln -sfn screentime "$bin/$name"
done
# swift-nio-extras asks for libz (-lz) though it compiles in its own renamed copy of zlib:
# the program would need libz.so.1 (and the package zlib1g) for nothing. Dropped when no
# symbol the program uses comes from it (checked, not assumed).
drop_unused_libz() {
    local program="$1" libz needed used provided
    # Whole outputs first, then matched: a pipe into `grep -q` would stop its writer early,
    # which pipefail counts as a failure.
    needed="$(readelf -d "$program")"
    case "$needed" in *"[libz.so.1]"*) ;; *) return 0 ;; esac
    libz="$(PATH="$PATH:/usr/sbin:/sbin" ldconfig -p | awk '$1 == "libz.so.1" && !found { print $NF; found = 1 }')"
    [ -f "$libz" ] || { echo "build-release.sh: libz.so.1 not found (ldconfig -p)" >&2; exit 69; }
    used="$(nm -D --undefined-only "$program" | awk '{print $NF}' | sed 's/@.*//' | sort -u)"
    provided="$(nm -D --defined-only "$libz" | awk '{print $NF}' | sed 's/@.*//' | sort -u)"
    [ -z "$(comm -12 <(echo "$used") <(echo "$provided"))" ] || return 0
    command -v patchelf >/dev/null || { echo "build-release.sh: patchelf is needed (apt-get install patchelf)" >&2; exit 69; }
    patchelf --remove-needed libz.so.1 "$program"
}
drop_unused_libz "$bin/screentime"
if [ "$separate" = yes ]; then
    for name in "${names[@]}"; do drop_unused_libz "$bin/separate/$name"; done
fi
echo "$bin"
