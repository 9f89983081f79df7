#!/usr/bin/env bash
# symbols.sh LIBPATH [HEADER]
#
# Checks the ABI surface of the shared library: every defined dynamic symbol
# starts with us_ (the version node, type A, aside) and carries the version
# node of lib/unstable.map; the SONAME is libunstable.so.0. With HEADER, also
# checks that every function the header declares with US_EXPORT is exported.
set -euo pipefail

lib=${1:?usage: symbols.sh LIBPATH [HEADER]}
header=${2:-}

for tool in nm readelf; do
	if ! command -v "$tool" >/dev/null; then
		echo "symbols: $tool not found, skipping"
		exit 77
	fi
done

status=0
syms=$(nm -D --defined-only "$lib")

# Columns: address, type, name[@@version]. Type A is the version node.
bad=$(awk '$2 != "A" && $3 !~ /^us_/' <<<"$syms")
if [[ -n $bad ]]; then
	echo "symbols: FAIL: exported symbols without the us_ prefix:"
	echo "$bad"
	status=1
fi

exported=$(awk '$2 != "A" { print $3 }' <<<"$syms")
count=$(grep -c . <<<"$exported" || true)
if [[ $count -eq 0 ]]; then
	echo "symbols: FAIL: no symbol exported"
	status=1
fi

# Versioned as name@@NODE when the version script took effect.
unversioned=$(grep -v '@@UNSTABLE_' <<<"$exported" || true)
if [[ -n $unversioned ]]; then
	echo "symbols: FAIL: symbols without a version node (version script not applied?):"
	echo "$unversioned"
	status=1
fi

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [[ $soname != libunstable.so.0 ]]; then
	echo "symbols: FAIL: SONAME is '${soname}', expected libunstable.so.0"
	status=1
fi

if [[ -n $header ]]; then
	# "US_EXPORT <type> us_name(" possibly over several lines.
	declared=$(grep -v '^#' "$header" | tr '\n' ' ' |
		grep -o 'US_EXPORT[^;(#]*[^a-zA-Z0-9_]us_[a-zA-Z0-9_]*[[:space:]]*(' |
		sed 's/.*[^a-zA-Z0-9_]\(us_[a-zA-Z0-9_]*\)[[:space:]]*($/\1/' | sort -u)
	# shellcheck disable=SC2001 # per line, not on the whole string
	names=$(sed 's/@.*//' <<<"$exported" | sort -u)
	missing=$(comm -23 <(echo "$declared") <(echo "$names"))
	if [[ -n $missing ]]; then
		echo "symbols: FAIL: declared in $(basename "$header") but not exported:"
		echo "$missing"
		status=1
	fi
	extra=$(comm -13 <(echo "$declared") <(echo "$names"))
	if [[ -n $extra ]]; then
		echo "symbols: note: exported but not declared in $(basename "$header"):"
		echo "$extra"
	fi
	echo "symbols: $(grep -c . <<<"$declared") functions declared in $(basename "$header")"
fi

echo "symbols: $count exported symbols, SONAME ${soname:-none}"
if [[ $status -eq 0 ]]; then
	echo "symbols: ok"
fi
exit $status
