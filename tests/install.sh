#!/usr/bin/env bash
# install.sh SRCDIR BUILDDIR
#
# Installs BUILDDIR into a temporary prefix and uses it as a consumer would:
#  (a) with pkg-config and a plain cc, against the shared library;
#  (b) with find_package(unstable) from examples/consumer, shared and static;
#  (c) the include directory holds the public headers only.
set -euo pipefail

src=$(cd "${1:?usage: install.sh SRCDIR BUILDDIR}" && pwd)
build=$(cd "${2:?usage: install.sh SRCDIR BUILDDIR}" && pwd)
cc=${CC:-cc}

if ! command -v pkg-config >/dev/null; then
	echo "install: pkg-config not found, skipping"
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

echo "install: cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" ||
	{ cat "$tmp/install.log"; exit 1; }

pc=$(find "$prefix" -path '*/pkgconfig/unstable.pc' | head -n 1)
if [[ -z $pc ]]; then
	echo "install: FAIL: no unstable.pc under $prefix"
	find "$prefix"
	exit 1
fi
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
echo "install: libdir $libdir"

# The .pc must describe this prefix, not the configure-time one.
if ! grep -qx "libdir=$libdir" "$pc"; then
	echo "install: FAIL: $pc does not name libdir $libdir:"
	cat "$pc"
	exit 1
fi
for f in libunstable.so libunstable.so.0 libunstable.a cmake/unstable/unstableConfig.cmake \
	cmake/unstable/unstableConfigVersion.cmake cmake/unstable/unstableTargets.cmake; do
	if [[ ! -e $libdir/$f ]]; then
		echo "install: FAIL: $libdir/$f is missing"
		exit 1
	fi
done

# (a) pkg-config
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs unstable)
echo "install: (a) pkg-config: $flags"
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer-pc" \
	"$src/examples/consumer/consumer.c" $flags
LD_LIBRARY_PATH=$libdir "$tmp/consumer-pc"
# Output captured first: with pipefail, "ldd | grep -q" fails at random when
# grep exits on its first match and ldd gets SIGPIPE.
deps=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer-pc")
if [[ $deps != *"$libdir/libunstable.so.0"* ]]; then
	echo "install: FAIL: consumer-pc did not load libunstable.so.0 from $libdir"
	LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer-pc"
	exit 1
fi

# (b) CMake package, shared then static
for kind in shared static; do
	static=OFF
	[[ $kind == static ]] && static=ON
	echo "install: (b) find_package(unstable), $kind"
	if ! { cmake -S "$src/examples/consumer" -B "$tmp/cb-$kind" \
		-DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
		-DCONSUMER_STATIC=$static &&
		cmake --build "$tmp/cb-$kind"; } >"$tmp/cb-$kind.log" 2>&1; then
		cat "$tmp/cb-$kind.log"
		echo "install: FAIL: the $kind CMake consumer does not build"
		exit 1
	fi
	"$tmp/cb-$kind/consumer"
done
deps=$(ldd "$tmp/cb-static/consumer")
if [[ $deps == *libunstable* ]]; then
	echo "install: FAIL: the static consumer loads libunstable.so"
	exit 1
fi

# (c) public headers only
incdir=$(dirname "$(dirname "$(find "$prefix" -path '*/unstable/unstable.h' | head -n 1)")")
headers=$(cd "$incdir" && find . -type f | sort | tr '\n' ' ')
if [[ $headers != "./unstable/unstable.h ./unstable/version.h " ]]; then
	echo "install: FAIL: installed headers are: $headers"
	exit 1
fi
echo "install: (c) headers: $headers"

echo "install: ok"
