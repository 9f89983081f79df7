#!/usr/bin/env bash
# docs_outputs.sh SRCDIR BUILDDIR: the figures the docs quote from a
# deterministic command are what that command prints today. In README.md
# and docs/*.md, a quoted output sits between
#
#   <!-- output of: COMMAND -->
#   ... (an indented code block, or Markdown as printed)
#   <!-- end of output -->
#
# COMMAND runs from SRCDIR with build/ meaning BUILDDIR (the simulator runs
# in virtual time: its figures do not depend on the machine); its output,
# and the quoted one with a code block's four spaces taken off, must be the
# same line for line, but for CPU and wall-clock times (masked).
set -euo pipefail

src=$(cd "${1:?usage: docs_outputs.sh SRCDIR BUILDDIR}" && pwd)
build=$(cd "${2:?usage: docs_outputs.sh SRCDIR BUILDDIR}" && pwd)
cd "$src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mask() { sed -E 's/[0-9]+(\.[0-9]+)? s of CPU/N s of CPU/g; s/"wall_seconds":[0-9.]+/"wall_seconds":N/g'; }

fail=0 n=0
for f in README.md docs/*.md; do
	grep -q '^<!-- output of: ' "$f" || continue
	# Each quoted block into its own file; its command into another.
	awk -v dir="$tmp" -v base="${f//\//_}" '
		/^<!-- output of: .* -->$/ {
			k++; cmd = $0; sub(/^<!-- output of: /, "", cmd); sub(/ -->$/, "", cmd)
			print cmd > (dir "/" base "." k ".cmd"); close(dir "/" base "." k ".cmd")
			on = 1; printf "" > (dir "/" base "." k ".want"); next
		}
		/^<!-- end of output -->$/ { on = 0; next }
		on { line = $0; sub(/^    /, "", line); print line >> (dir "/" base "." k ".want") }
	' "$f"
	for c in "$tmp/${f//\//_}".*.cmd; do
		n=$((n + 1))
		cmd=$(<"$c")
		run=$(sed -E "s#(^|[ =])(\./)?build/#\1$build/#g" <<<"$cmd")
		# Leading and trailing blank lines are not part of a block.
		want=$(sed '/./,$!d' "${c%.cmd}.want" | mask)
		if ! have=$(bash -c "$run" 2>&1 | mask); then
			echo "docs_outputs: FAIL: $f: '$cmd' failed:"
			echo "$have" | head -5
			fail=1
			continue
		fi
		have=$(sed '/./,$!d' <<<"$have")
		if [[ $want != "$have" ]]; then
			echo "docs_outputs: FAIL: $f: the output of '$cmd' is not what the page quotes (< page, > today):"
			diff <(printf '%s\n' "$want") <(printf '%s\n' "$have") | head -20 || true
			fail=1
		fi
	done
done
echo "docs_outputs: $n quoted outputs checked"
exit $fail
