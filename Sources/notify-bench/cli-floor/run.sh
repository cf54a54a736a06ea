#!/bin/bash
# cli-floor/run.sh: how fast can a command-line post start? Builds start-up floors (a raw libdbus
# post from a C main and from a Swift main, linked the ways below) and times them in the same
# alternation as notifyutil and dbus-send (`notify-bench cli --cli-extra ...`). Usage, from the
# package root after `swift build -c release --product notify-bench`:
#   bash Sources/notify-bench/cli-floor/run.sh [notify-bench arguments, e.g. --samples 6000]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${NOTIFY_BENCH:-$here/../../../.build/release/notify-bench}
[ -x "$bench" ] || { echo "run.sh: build it first: swift build -c release --product notify-bench" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cflags=$(pkg-config --cflags dbus-1)
libdbus_a=$(pkg-config --variable=libdir dbus-1)/libdbus-1.a
libstdcxx_a=$(cc -print-file-name=libstdc++.a)
cc -O2 -fPIC $cflags -c "$here/raw_post.c" -o "$out/raw_post.o"
cc -O2 -fPIC -c "$here/../../notifyutil/libdbus-inside/no_systemd_sockets.c" -o "$out/no_systemd_sockets.o"
# C, libdbus shared: linked as dbus-send is.
cc -O2 "$here/floor_main.c" "$out/raw_post.o" $(pkg-config --libs dbus-1) -o "$out/c-libdbus-shared"
# C, libdbus inside, glibc shared.
cc -O2 "$here/floor_main.c" "$out/raw_post.o" "$libdbus_a" "$out/no_systemd_sockets.o" -o "$out/c-libdbus-inside"
# Swift, the runtime inside (-static-stdlib) and libdbus and libstdc++ inside too: only libc, libm
# and libgcc_s shared. PIE, as Debian requires; then the same not PIE (lintian: hardening-no-pie).
swift_floor() {
    swiftc -O -static-stdlib -use-ld=lld "$here/floor.swift" "$out/raw_post.o" "$out/no_systemd_sockets.o" \
        -Xlinker "$libdbus_a" -Xlinker "$libstdcxx_a" "$@" 2>&1 | { grep -v "^warning: .*-static-stdlib" || true; }
}
swift_floor -o "$out/swift-everything-inside-but-glibc"
swift_floor -Xclang-linker -no-pie -o "$out/swift-same-not-pie"
for f in "$out"/*-*; do
    [ -x "$f" ] && [ "${f##*.}" != o ] && echo "$(basename "$f"): $(ldd "$f" | grep -c '=>') shared libraries" >&2
done
"$bench" cli "$@" --cli-extra "$out/c-libdbus-shared" --cli-extra "$out/c-libdbus-inside" \
    --cli-extra "$out/swift-everything-inside-but-glibc" --cli-extra "$out/swift-same-not-pie"
