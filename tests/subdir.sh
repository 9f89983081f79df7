#!/usr/bin/env bash
# subdir.sh SRCDIR
#
# A parent project embeds unstable with add_subdirectory() and
# UNSTABLE_WITH_JEMALLOC OFF: it must configure without pkg-config (and so
# without Check), get no tests or install rules from unstable, and build and
# run the consumer against unstable::unstable.
set -euo pipefail

src=$(cd "${1:?usage: subdir.sh SRCDIR}" && pwd)
cc=${CC:-cc}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/parent"
cat >"$tmp/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(parent LANGUAGES C)
enable_testing()

# A normal variable: option() in unstable honours it (policy CMP0077).
set(UNSTABLE_WITH_JEMALLOC OFF)
add_subdirectory("$src" unstable)

add_executable(consumer "$src/examples/consumer/consumer.c")
target_link_libraries(consumer PRIVATE unstable::unstable)
CMAKE

# PKG_CONFIG=/nonexistent alone does not hide pkg-config from FindPkgConfig
# (it falls back to the PATH), so a pkg-config that fails and leaves a mark
# comes first on the PATH: any lookup would show.
mkdir "$tmp/bin"
cat >"$tmp/bin/pkg-config" <<SH
#!/bin/sh
echo "pkg-config \$*" >>"$tmp/pkg-config-called"
exit 127
SH
chmod +x "$tmp/bin/pkg-config"

echo "subdir: configure with PKG_CONFIG=/nonexistent and a failing pkg-config on PATH"
if ! { PATH=$tmp/bin:$PATH PKG_CONFIG=/nonexistent cmake -S "$tmp/parent" -B "$tmp/build" \
	-DCMAKE_C_COMPILER="$cc" &&
	cmake --build "$tmp/build" -j2; } >"$tmp/build.log" 2>&1; then
	cat "$tmp/build.log"
	echo "subdir: FAIL: the parent project does not build"
	exit 1
fi
if [[ -e $tmp/pkg-config-called ]]; then
	cat "$tmp/build.log"
	echo "subdir: FAIL: pkg-config was used:"
	cat "$tmp/pkg-config-called"
	exit 1
fi

"$tmp/build/consumer"

lib=$(find "$tmp/build/unstable" -name 'libunstable.so.0' | head -n 1)
if [[ -z $lib ]]; then
	echo "subdir: FAIL: no libunstable.so.0 built"
	exit 1
fi
dyn=$(readelf -d "$lib") # captured: "| grep -q" races with pipefail
if [[ $dyn == *jemalloc* ]]; then
	echo "subdir: FAIL: $lib needs jemalloc although UNSTABLE_WITH_JEMALLOC is OFF"
	exit 1
fi

tests=$(cd "$tmp/build" && ctest -N | sed -n 's/^Total Tests: //p')
if [[ $tests != 0 ]]; then
	echo "subdir: FAIL: the parent got $tests tests from unstable"
	exit 1
fi
if grep -q 'unstable\.h' "$tmp/build/unstable/cmake_install.cmake"; then
	echo "subdir: FAIL: unstable added install rules in a parent project"
	exit 1
fi
if grep -q 'unstable-demo' "$tmp/build/unstable/Makefile" 2>/dev/null; then
	echo "subdir: FAIL: unstable built its examples in a parent project"
	exit 1
fi

echo "subdir: ok"
