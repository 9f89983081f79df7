#!/usr/bin/env bash
# man.sh LIBPATH MANDIR HEADER [BUILDDIR]
#
# Checks the man pages of man/ against the library and its header:
#   - every exported us_* symbol of LIBPATH has a page MANDIR/NAME.3, a page
#     of its own or a .so link page;
#   - every .so link page is the one line ".so manN/PAGE.N", names a real
#     page of MANDIR whose NAME section lists the link's name, and mandoc
#     resolves it from the root of a man tree;
#   - every real page names itself in NAME, has a .TH of its own name and
#     section, and lints clean with mandoc -Tlint -W warning (no output);
#   - every page has the sections its kind needs (RETURN VALUE, ERRORS and
#     ATTRIBUTES for a function page), every page of this project it refers
#     to (.BR us_x (3), unstable (7)) exists, and every function a section-3 page
#     names is declared in HEADER with the prototype its SYNOPSIS shows;
#   - with BUILDDIR, `cmake --install BUILDDIR --component man` into a
#     temporary prefix installs every page under share/man/manN, the links
#     resolve there, and man(1) (when installed) shows us_buf_dirty(3) and
#     us_buf_lookup(3) from there; and BUILDDIR/man holds every page as
#     such a tree (the README reads them there with man -M build/man).
# Exit 77 when mandoc or nm is missing.
set -euo pipefail

lib=${1:?usage: man.sh LIBPATH MANDIR HEADER [BUILDDIR]}
mandir=$(cd "${2:?usage: man.sh LIBPATH MANDIR HEADER [BUILDDIR]}" && pwd)
header=${3:?usage: man.sh LIBPATH MANDIR HEADER [BUILDDIR]}
build=${4:-}

for tool in mandoc nm; do
	if ! command -v "$tool" >/dev/null; then
		echo "man: $tool not found, skipping"
		exit 77
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
	echo "man: FAIL: $*"
	status=1
}

# A man tree in $tmp/tree (man1, man3, man7), as installed: mandoc resolves
# ".so man3/x.3" from its root.
mkdir -p "$tmp/tree/man1" "$tmp/tree/man3" "$tmp/tree/man7"
shopt -s nullglob
pages=("$mandir"/*.1 "$mandir"/*.3 "$mandir"/*.7)
shopt -u nullglob
if [[ ${#pages[@]} -eq 0 ]]; then
	fail "no page in $mandir"
	exit 1
fi
for p in "${pages[@]}"; do
	cp "$p" "$tmp/tree/man${p##*.}/"
done

# The header's prototypes, one a line, whitespace squeezed, comments gone.
grep -v '^#' "$header" | tr '\n\t' '  ' |
	sed 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/| |g' |
	grep -o 'US_EXPORT [^;]*;' | sed 's/^US_EXPORT //' | tr -s ' ' |
	sed 's/ *( */(/; s/ *) *;$/);/' >"$tmp/protos"

# The names a page's NAME section lists ("a, b, c \- what they do"), into
# $names, without a process per call: pages are many, forks are slow.
names_of() {
	local line next=0
	names=
	while IFS= read -r line; do
		if ((next)); then
			line=${line%% \\-*}
			line=${line//,/}
			names=${line//\\/}
			return
		fi
		[[ $line == ".SH NAME" ]] && next=1
	done <"$1"
}

# The header's prototypes by function name.
declare -A proto_of
while IFS= read -r line; do
	f=${line%%(*}
	f=${f##*[ *]}
	proto_of[$f]=$line
done <"$tmp/protos"

# The rendered SYNOPSIS of every real section-3 page, by page name, on one
# line each, whitespace squeezed: one mandoc run for them all.
declare -A synopsis_of
render_synopses() {
	local name syn
	(($# == 0)) && return
	while IFS=$'\t' read -r name syn; do
		synopsis_of[$name]=$syn
	done < <(mandoc -Tascii "$@" | sed 's/.\x08//g' | awk '
		/^[A-Z0-9_]+\(3\) / { if (page != "") print page "\t" syn; page = tolower($1); sub(/\(3\)$/, "", page); syn = ""; on = 0; next }
		/^SYNOPSIS$/ { on = 1; next }
		/^[A-Z][A-Z ]*$/ { on = 0 }
		on { gsub(/[ \t]+/, " "); sub(/^ /, ""); syn = syn " " $0 }
		END { if (page != "") print page "\t" syn }')
}

# 1. A page for every exported symbol.
syms=$(nm -D --defined-only "$lib" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' |
	grep '^us_' | sort -u)
nsyms=$(grep -c . <<<"$syms" || true)
if [[ $nsyms -eq 0 ]]; then
	fail "no us_* symbol exported by $lib"
fi
for s in $syms; do
	[[ -f $mandir/$s.3 ]] || fail "no page man/$s.3 for the exported symbol $s"
done

# 2. Every page: link pages first, then real ones; mandoc lints each kind in
# one run, from the tree's root, where it resolves the links (of which it
# only warns that .so is fragile, as a link page is by design).
nreal=0
nlinks=0
real=()
links=()
man3=()
for p in "${pages[@]}"; do
	[[ $p == *.3 ]] && man3+=("$p")
done
man3real=()
for p in "${man3[@]}"; do
	read -r first <"$p" || true
	[[ $first == ".so "* ]] || man3real+=("$p")
done
render_synopses "${man3real[@]}"

for p in "${pages[@]}"; do
	base=${p##*/}
	name=${base%.*}
	sect=${base##*.}
	mapfile -t lines <"$p"
	first=${lines[0]-}
	if [[ $first == ".so "* ]]; then
		nlinks=$((nlinks + 1))
		links+=("man$sect/$base")
		target=${first#.so }
		if [[ ${#lines[@]} -ne 1 || ! $target =~ ^man([137])/[A-Za-z0-9_.-]+\.([137])$ ||
			${BASH_REMATCH[1]} != "${BASH_REMATCH[2]}" ]]; then
			fail "$base: a link page is the one line '.so manN/PAGE.N'"
			continue
		fi
		tfile=$mandir/${target##*/}
		if [[ ! -f $tfile ]]; then
			fail "$base: .so $target: no such page in man/"
			continue
		fi
		read -r tfirst <"$tfile" || true
		if [[ $tfirst == ".so "* ]]; then
			fail "$base: .so $target: a link to a link"
			continue
		fi
		names_of "$tfile"
		if [[ " $names " != *" $name "* ]]; then
			fail "$base: $target does not list $name in its NAME section"
		fi
		continue
	fi

	nreal=$((nreal + 1))
	real+=("man$sect/$base")
	if [[ $first != ".TH ${name^^} $sect "* ]]; then
		fail "$base: its first line is '$first', expected '.TH ${name^^} $sect ...'"
	fi
	names_of "$p"
	if [[ " $names " != *" $name "* ]]; then
		fail "$base: its NAME section does not list $name"
	fi

	need=(NAME SYNOPSIS DESCRIPTION "SEE ALSO")
	case $sect in
	1) need+=(OPTIONS "EXIT STATUS") ;;
	3) need+=("RETURN VALUE" ERRORS ATTRIBUTES) ;;
	esac
	have=$'\n'
	for line in "${lines[@]}"; do
		if [[ $line == ".SH "* ]]; then
			line=${line#.SH }
			have+=${line//\"/}$'\n'
		elif [[ $line =~ ^\.BR\ (us_[a-z_]+|unstable[a-z\\-]*)\ \(([137])\) ]]; then
			ref=${BASH_REMATCH[1]//\\/}.${BASH_REMATCH[2]}
			[[ -f $mandir/$ref ]] || fail "$base: refers to ${ref%.*}(${ref##*.}), which has no page"
		fi
	done
	for sec in "${need[@]}"; do
		[[ $have == *$'\n'"$sec"$'\n'* ]] || fail "$base: no $sec section"
	done

	if [[ $sect == 3 ]]; then
		syn=${synopsis_of[$name]-}
		[[ $syn == *"#include <unstable/unstable.h>"* ]] ||
			fail "$base: its SYNOPSIS does not include <unstable/unstable.h>"
		for f in $names; do
			proto=${proto_of[$f]-}
			if [[ -z $proto ]]; then
				fail "$base: $f is not declared with US_EXPORT in ${header##*/}"
			elif [[ $syn != *"$proto"* ]]; then
				fail "$base: its SYNOPSIS does not show the prototype of the header:"$'\n'"  $proto"
			fi
		done
	fi
done
if [[ ${#real[@]} -gt 0 ]]; then
	out=$(cd "$tmp/tree" && mandoc -Tlint -W warning "${real[@]}" 2>&1) || true
	[[ -z $out ]] || fail "mandoc -Tlint -W warning:"$'\n'"$out"
fi
if [[ ${#links[@]} -gt 0 ]]; then
	out=$(cd "$tmp/tree" && mandoc -Tlint -W warning "${links[@]}" 2>&1 |
		grep -v 'WARNING: \.so is fragile') || true
	[[ -z $out ]] || fail "mandoc -Tlint -W warning (link pages):"$'\n'"$out"
fi

# 3. The installed pages.
if [[ -n $build ]]; then
	prefix=$tmp/prefix
	installed=$tmp/none
	if cmake --install "$build" --prefix "$prefix" --component man >"$tmp/install.log" 2>&1; then
		installed=$(find "$prefix" -name unstable.7 | head -1)
	else
		cat "$tmp/install.log"
		fail "cmake --install $build --component man failed"
	fi
	manroot=$(dirname "$(dirname "$installed")")
	if [[ -z $installed ]]; then
		echo "man: note: nothing installed (install rules off): installation not checked"
	elif [[ -f $installed ]]; then
		for p in "${pages[@]}"; do
			base=$(basename "$p")
			[[ -f $manroot/man${base##*.}/$base ]] ||
				fail "$base is not installed in $manroot/man${base##*.}"
		done
		# The installed link resolves from the installed root.
		shown=$(cd "$manroot" && mandoc -Tascii man3/us_buf_lookup.3 2>&1 | sed 's/.\x08//g') || true
		[[ $shown == *us_buf_lookup*"RETURN VALUE"* ]] ||
			fail "the installed man3/us_buf_lookup.3 does not resolve with mandoc"
		# man(1) itself, when it is a real one (a minimised system has a stub).
		if man --version >/dev/null 2>&1; then
			shown=$(MANPAGER=cat MANWIDTH=80 man -M "$manroot" 3 us_buf_dirty 2>&1 || true)
			[[ $shown == *"us_buf_dirty - mark a buffer dirty"* ]] ||
				fail "man -M $manroot us_buf_dirty does not show the page:"$'\n'"$shown"
			shown=$(MANPAGER=cat MANWIDTH=80 man -M "$manroot" 3 us_buf_lookup 2>&1 || true)
			[[ $shown == *us_buf_lookup*"RETURN VALUE"* ]] ||
				fail "man -M $manroot us_buf_lookup does not follow its .so link"
		fi
		echo "man: installed under ${manroot#"$tmp"/}"
	fi
	# The build tree's copy (BUILDDIR/man), where the README reads them.
	for p in "${pages[@]}"; do
		base=$(basename "$p")
		cmp -s "$p" "$build/man/man${base##*.}/$base" ||
			fail "$base is not the same in $build/man/man${base##*.}"
	done
	shown=$(cd "$build/man" && mandoc -Tascii man3/us_object_commit.3 2>&1 | sed 's/.\x08//g') || true
	[[ $shown == *us_object_commit*"RETURN VALUE"* ]] ||
		fail "$build/man/man3/us_object_commit.3 does not resolve with mandoc"
fi

echo "man: $nsyms exported symbols, $nreal pages, $nlinks .so link pages"
if [[ $status -eq 0 ]]; then
	echo "man: ok"
fi
exit $status
