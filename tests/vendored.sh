#!/usr/bin/env bash
# vendored.sh SRCDIR: builds examples/vendored with its plain Makefile (lib/*.c
# compiled into the program, allocator hooks instead of jemalloc) in a
# temporary directory, and runs it: two tenants' data written, synced, shut
# down and read back byte for byte.
set -euo pipefail

src=$(cd "${1:?usage: vendored.sh SRCDIR}" && pwd)
command -v make >/dev/null || { echo "vendored: make not found, skipping"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
make -s -j2 -f "$src/examples/vendored/Makefile" ${CC:+CC="$CC"}
./stored "$tmp/data"
