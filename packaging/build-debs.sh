#!/usr/bin/env bash
# build-debs.sh: `make deb`. Builds the binary packages from debian/ with dpkg-buildpackage, as
# a Debian maintainer would (`dpkg-buildpackage -us -uc -b` in the source tree), then moves what
# it writes beside the tree (../*.deb, .changes, .buildinfo) into build/deb/, and prints the
# .changes file's path (lintian takes it: `lintian --pedantic build/deb/*.changes`). -tc cleans
# the tree after (debian/rules clean, which is `make clean`), as before: nothing of the package
# build is left in debian/.
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(cat VERSION)"
packaged="$(dpkg-parsechangelog -S Version)"
if [ "$version" != "$packaged" ]; then
    echo "make deb: VERSION says $version, debian/changelog $packaged: add a debian/changelog entry (dch -v $version)" >&2
    exit 1
fi
arch="$(dpkg --print-architecture)"
parent="$(dirname "$PWD")"
dpkg-buildpackage -us -uc -b -tc >&2
mkdir -p build/deb
# The .changes names every file built (its Files: lines end in the file name).
changes="darwin-notify_${version}_${arch}.changes"
for f in $(sed -n '/^Files:/,/^[^ ]/s/^ .* \([^ ]*\)$/\1/p' "$parent/$changes") "$changes"; do
    mv -f "$parent/$f" build/deb/
done
echo "build/deb/darwin-notify_${version}_${arch}.changes"
