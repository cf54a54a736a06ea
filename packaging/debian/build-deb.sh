#!/usr/bin/env bash
# Builds build/darwin-notify_<version>_<arch>.deb from `make install` into a staging root, with
# dpkg-deb: one package holding the library, its headers and .pc, the CLIs, the man pages, the
# system-bus policy, the tmpfiles.d entry, the systemd user units and the completions.
# Depends are computed from what the binaries link (objdump + dpkg -S), plus dbus-daemon, which
# the library starts. `lintian` on the result reports no errors (tested).
set -euo pipefail
cd "$(dirname "$0")/../.."
version="$(cat VERSION)"
arch="$(dpkg --print-architecture)"
multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
stage="build/deb/darwin-notify_${version}_${arch}"
out="build/darwin-notify_${version}_${arch}.deb"
rm -rf "$stage"
# notifyutil linked like any Debian program (shared libc and libdbus, which security updates
# reach), with the Swift runtime inside it; the checkout's own build stays a static executable.
make --no-print-directory install PREFIX=/usr LIBDIR="/usr/lib/$multiarch" DESTDIR="$PWD/$stage" CFLAGS="-O2 -g0" \
    NOTIFYUTIL_STATIC=0

doc="$stage/usr/share/doc/darwin-notify"
# Debian wants the upstream changelog and its own, compressed, and the copyright in its format.
rm -f "$doc/CHANGELOG.md"
gzip -9n < CHANGELOG.md > "$doc/changelog.gz"
{
    echo "darwin-notify ($version) unstable; urgency=medium"
    echo
    echo "  * Package of upstream version $version (see changelog.gz)."
    echo
    echo " -- DarwinNotify developers <darwin-notify@users.noreply.github.com>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")"
} | gzip -9n > "$doc/changelog.Debian.gz"
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: darwin-notify"
    echo "Source: https://github.com/darwin-notify/darwin-notify"
    echo
    echo "Files: *"
    echo "Copyright: 2026 The DarwinNotify authors"
    echo "License: Expat"
    sed -n '3,$p' LICENSE | sed -e 's/^$/./' -e 's/^/ /'
} > "$doc/copyright"
# The man pages, compressed as Debian installs them; the .so links stay links to the gzipped page.
find "$stage/usr/share/man" -type f -exec gzip -9n {} \;
# Binaries without debug symbols.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/lib/$multiarch/libdarwin-notify.so.$version"
strip --strip-debug "$stage/usr/lib/$multiarch/libdarwin-notify.a"
strip "$stage/usr/bin/notifyutil" "$stage/usr/bin/wormhole" "$stage/usr/bin/notify-bridge"

# Depends: the package of every shared library the binaries need, and dbus-daemon.
libs=$(for f in "$stage/usr/bin/"* "$stage/usr/lib/$multiarch/libdarwin-notify.so.$version"; do
    objdump -p "$f" | awk '/NEEDED/ {print $2}'; done | sort -u)
deps=$(for l in $libs; do
    path=$(ldconfig -p | awk -v l="$l" '$1 == l {print $NF; exit}')
    [ -n "$path" ] || continue
    # dpkg knows a file by the path it installed (/lib/... or /usr/lib/... with merged /usr).
    for p in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
        pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && { echo "$pkg"; break; }
    done
done | sort -u)
depends="dbus-daemon"
for p in $deps; do depends="$depends, $p"; done

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: darwin-notify
Version: $version
Architecture: $arch
Maintainer: DarwinNotify developers <darwin-notify@users.noreply.github.com>
Installed-Size: $size
Depends: $depends
Section: libs
Priority: optional
Homepage: https://github.com/darwin-notify/darwin-notify
Description: Darwin-style notifications (Apple's notify(3)) for Linux
 DarwinNotify brings Apple's Darwin notifications to Linux over D-Bus: the
 notify(3) C API (libdarwin-notify, with darwin-notify.pc), notifyutil, notify-bridge, and
 the wormhole tool for MMWormhole-style messages through group containers.
 Installed, the system bus carries them for every user, as on macOS.
CONTROL
# The shared library's dependency information, and ldconfig and tmpfiles at install.
echo "libdarwin-notify $(echo "$version" | cut -d. -f1) darwin-notify (>= $version)" > "$stage/DEBIAN/shlibs"
printf 'activate-noawait ldconfig\n' > "$stage/DEBIAN/triggers"
cat > "$stage/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    # The shared state directory of the system bus, now rather than at the next boot.
    if command -v systemd-tmpfiles >/dev/null 2>&1; then
        systemd-tmpfiles --create darwin-notify.conf || true
    else
        install -d -m 1777 /run/darwin-notify/state && install -d -m 0777 /run/darwin-notify/state/plain || true
    fi
fi
SCRIPT
cat > "$stage/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
    rm -rf /run/darwin-notify
fi
SCRIPT
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/postrm"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort | xargs -r md5sum > DEBIAN/md5sums)
find "$stage" -type d -exec chmod 0755 {} \;
dpkg-deb --root-owner-group --build "$stage" "$out" >/dev/null
echo "$out"
