#!/usr/bin/env bash
# vendor.sh SRCDIR [CC]
#
# The sources build without CMake, as a project vendoring them would:
#   cc -std=c11 -Wall -Wextra -Werror -Iinclude -c lib/*.c
# (no jemalloc, no generated files beyond the committed version.h), and link
# with examples/consumer/consumer.c into a program that runs.
set -euo pipefail

src=$(cd "${1:?usage: vendor.sh SRCDIR [CC]}" && pwd)
cc=${2:-${CC:-cc}}

if ! command -v "$cc" >/dev/null; then
	echo "vendor: compiler '$cc' not found, skipping"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
cflags=(-std=c11 -Wall -Wextra -Werror -I"$src/include")

echo "vendor: $cc ${cflags[*]} -c lib/*.c"
"$cc" "${cflags[@]}" -c "$src"/lib/*.c
"$cc" "${cflags[@]}" -c "$src/examples/consumer/consumer.c" -o consumer.o
"$cc" -pthread -o consumer ./*.o

./consumer
echo "vendor: ok"
