#!/usr/bin/env bash
# docs_figures.sh SRCDIR [FILE...]: every figure the docs cite comes with
# the command that gives it. A figure is a measured rate, time or ratio in
# the text: a number with MB/s, GB/s, MiB/s or GiB/s, or a number with a
# decimal point and ms, s, ns, µs, % or × (targets such as "200 ms" and
# settings in code spans are not figures). Each section of a page (from a
# heading to the next) that cites one must name a command: a code span or
# a code block that starts with a program of the project (./build/...,
# bench/..., unstable-sim, us-bench-..., tests/..., ctest) or a tool run
# against it (fio, dd, cp -a, perf, strace, time), a quoted output
# (<!-- output of: CMD -->, checked by docs_outputs.sh), or a link to
# docs/results.md, whose every part names its command. The pages checked:
# README.md and docs/*.md (the CHANGELOG keeps earlier days' figures with
# the commands of their day). With FILEs, those instead (the test's own
# self-check uses it). Exit 1 naming each section that fails.
set -euo pipefail

src=$(cd "${1:?usage: docs_figures.sh SRCDIR [FILE...]}" && pwd)
shift
if (($#)); then
	files=("$@")
else
	files=("$src/README.md" "$src"/docs/*.md)
fi

check() {
	awk '
	function section_end() {
		if (nfig && !cmd) {
			printf "%s:%d: \"%s\": %d figure(s) and no command (first: %s)\n", \
				file, sline, shead, nfig, first
			bad++
		}
		nfig = 0; cmd = 0; first = ""
	}
	BEGIN { file = ARGV[1]; sline = 1; shead = "(top of the page)" }
	/^[ \t]*```/ { fence = !fence; next }
	!fence && /^#/ { section_end(); sline = FNR; shead = $0; next }
	{
		line = $0
		# A command: in a code span, an indented or fenced block, a
		# quoted output or a link to the results page.
		if (line ~ /`[ \t]*(sudo |[A-Z_]+=[^ ]* )*(\.\/)?(build[^ `\/]*\/|bench\/|sim\/|tests\/|examples\/)/ ||
		    line ~ /`[ \t]*(sudo )?(unstable-sim|unstable-fuse|us-bench-[a-z-]+|ctest|fio|dd|cp -a|perf|strace|time|mandoc|man -l)[ `]/ ||
		    line ~ /output of:/ || line ~ /\]\((docs\/)?results\.md[)#]/ ||
		    ((fence || line ~ /^    [^ ]/) && line ~ /^[ \t]*(\$ |sudo |[A-Z_]+=[^ ]* )*(\.\/)?(build[^ \/]*\/|bench\/|tests\/|unstable-sim|unstable-fuse|ctest|fio|dd|perf|strace)/))
			cmd = 1
		t = line
		if (!fence) gsub(/`[^`]*`/, "", t)
		while (match(t, /[0-9]+\.[0-9]+ ?(×|ms|s|ns|µs|%)([^A-Za-z0-9]|$)|[0-9]+ ?(MB\/s|GB\/s|MiB\/s|GiB\/s)/)) {
			if (!nfig)
				first = substr(t, RSTART, RLENGTH)
			nfig++
			t = substr(t, RSTART + RLENGTH)
		}
	}
	END { section_end(); exit bad ? 1 : 0 }
	' "$1"
}

# The check must see a figure without its command, and one with it.
if ((!$#)); then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	printf '# t\n\nIt ran at 812 MB/s, 1.3× the peer.\n' >"$tmp/bad.md"
	printf '# t\n\n`bench/fuse-vs-kernel build`: 812 MB/s, 1.3× the peer.\n' >"$tmp/good.md"
	if check "$tmp/bad.md" >/dev/null || ! check "$tmp/good.md" >/dev/null; then
		echo "docs_figures: FAIL: the check itself does not tell a figure with its command from one without"
		exit 1
	fi
fi

rc=0 n=0
for f in "${files[@]}"; do
	n=$((n + 1))
	check "$f" || rc=1
done
if ((rc)); then
	echo "docs_figures: FAIL: figures without the command that gives them (above)"
	exit 1
fi
echo "docs_figures: $n pages, every section that cites a figure names its command"
