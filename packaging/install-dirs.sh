#!/bin/sh
# install-dirs.sh: the directories `make install` makes, and `make uninstall` removes again.
#
#   install-dirs.sh make MANIFEST DIR...   makes each DIR (mode 0755, parents too) and adds to
#                                          MANIFEST every directory that did not exist before
#   install-dirs.sh remove MANIFEST        removes MANIFEST, then each directory it lists, deepest
#                                          first, when empty
#
# Why a manifest: uninstall must leave no directory of ours behind, and must not remove one that
# was there before us (an empty /usr/local/share/zsh/site-functions belongs to someone else).
set -eu
action=$1 manifest=$2
shift 2
case $action in
make)
    created=""
    # The manifest's own directory first: it is made here too, and listed.
    for dir in "$(dirname "$manifest")" "$@"; do
        missing=""
        d=$dir
        while [ ! -d "$d" ]; do
            missing="$d
$missing"
            d=$(dirname "$d")
        done
        # Top down, each with its mode (install -d would give made parents the umask's).
        printf '%s' "$missing" | while IFS= read -r m; do [ -n "$m" ] && install -d -m 0755 "$m"; done
        created="$created$missing"
    done
    { [ -f "$manifest" ] && cat "$manifest"; printf '%s' "$created"; } | grep -v '^$' | LC_ALL=C sort -u > "$manifest.new" || true
    mv "$manifest.new" "$manifest"
    ;;
remove)
    [ -f "$manifest" ] || { echo "install-dirs.sh: no $manifest: no directory to remove" >&2; exit 0; }
    dirs=$(cat "$manifest")
    rm -f "$manifest"
    # Reverse order puts a directory after everything beneath it.
    printf '%s\n' "$dirs" | LC_ALL=C sort -r | while IFS= read -r d; do
        [ -n "$d" ] && [ -d "$d" ] && rmdir "$d" 2>/dev/null || true
    done
    ;;
*)
    echo "usage: install-dirs.sh make|remove MANIFEST [DIR...]" >&2
    exit 64
    ;;
esac
