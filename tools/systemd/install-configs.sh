#!/bin/sh
# meson install script: copies the example configurations from EXAMPLES_DIR into
# ${DESTDIR}SYSCONFDIR/shesha, skipping every file that already exists there, so an operator's
# edited /etc/shesha/*.yaml survives a reinstall or upgrade. The pristine copies stay in
# EXAMPLES_DIR (share/shesha/examples).
# usage (from meson.add_install_script): install-configs.sh EXAMPLES_DIR SYSCONFDIR FILE...
set -eu
examples=$1 sysconfdir=$2
shift 2
target="${DESTDIR:-}$sysconfdir/shesha"
mkdir -p "$target"
for f in "$@"; do
    if [ -e "$target/$f" ]; then
        echo "shesha: keeping existing $target/$f (the example is in $examples/$f)"
    else
        cp "${DESTDIR:-}$examples/$f" "$target/$f"
        chmod 644 "$target/$f"
        echo "shesha: installed $target/$f"
    fi
done
