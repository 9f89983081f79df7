#!/usr/bin/env bash
# layers.sh LIBUNSTABLE_A INTERNAL_H: the library's files in one-way
# layers. internal.h lists every lib/*.c file with its layer ("LAYERS");
# from the static library's symbol tables (nm), file A uses file B when A
# refers to a global symbol B defines. Fails when a file uses one of its
# own layer or a higher one (naming the symbols), or when a file of the
# library has no layer. Prints the files, the uses, the upward ones and
# the files caught in or above a circle (none when the layers hold).
set -euo pipefail
lib=$1 header=$2
command -v nm >/dev/null || { echo "layers: no nm" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# " *   3  engine.c   ..." lines of the LAYERS block: file and layer.
sed -n '/^ \* LAYERS/,/^ \*\/$/p' "$header" |
	awk '$1 == "*" && $2 ~ /^[0-9]+$/ && $3 ~ /\.c$/ { sub(/\.c$/, "", $3); print $3, $2 }' \
		>"$work/layers"
[[ -s $work/layers ]] || { echo "layers: no LAYERS block in $header" >&2; exit 1; }

# file.c.o: defined and undefined globals.
nm -A "$lib" | awk '
	{ split($1, p, ":"); f = p[2]; sub(/\.c\.o$/, "", f) }
	$(NF - 1) ~ /^[TDBRVWGS]$/ { print "D", $NF, f }
	$(NF - 1) == "U" { print "U", $NF, f }' >"$work/syms"
awk '$1 == "D" { def[$2] = $3 } $1 == "U" { use[NR] = $3 " " $2 }
	END { for (i in use) { split(use[i], a, " ");
		if ((a[2] in def) && def[a[2]] != a[1]) print a[1], def[a[2]] } }' \
	"$work/syms" | sort -u >"$work/edges"
awk '{ print $3 }' "$work/syms" | sort -u >"$work/files"

fail=0
while read -r f; do
	grep -q "^$f " "$work/layers" || { echo "layers: $f.c has no layer in $header" >&2; fail=1; }
done <"$work/files"
awk 'NR == FNR { l[$1] = $2; next } ($1 in l) && ($2 in l) && l[$2] >= l[$1] { print $1, $2 }' \
	"$work/layers" "$work/edges" | sort -u >"$work/up"
while read -r a b; do
	echo "layers: $a.c uses $b.c, of layer $(awk -v f="$b" '$1 == f { print $2 }' "$work/layers") (not below its own): $(
		awk -v a="$a" -v b="$b" '$1 == "U" && $3 == a { u[$2] = 1 } $1 == "D" && $3 == b && ($2 in u) { printf "%s ", $2 }' \
			<(grep "^U" "$work/syms") <(grep "^D" "$work/syms"))" >&2
	fail=1
done <"$work/up"

# Files left once those that use nothing left are peeled off, round by round:
# the files in a circle, and those that use one.
awk '{ out[$1] = out[$1] " " $2; n[$1]++; all[$1] = 1; all[$2] = 1 }
	END {
		do {
			changed = 0
			for (f in all) if (!(f in gone)) {
				k = split(out[f], t, " "); left = 0
				for (i = 1; i <= k; i++) if (!(t[i] in gone)) left++
				if (!left) { gone[f] = 1; changed = 1 }
			}
		} while (changed)
		for (f in all) if (!(f in gone)) printf "%s ", f
	}' "$work/edges" >"$work/circle"
printf 'layers: %d files, %d uses between them, %d upward; in or above a circle: %s\n' \
	"$(wc -l <"$work/files")" "$(wc -l <"$work/edges")" "$(wc -l <"$work/up")" \
	"$(tr ' ' '\n' <"$work/circle" | sed '/^$/d' | sort | tr '\n' ' ')"
exit $fail
