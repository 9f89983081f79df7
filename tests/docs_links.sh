#!/usr/bin/env bash
# docs_links.sh SRCDIR: every relative link of README.md, CHANGELOG.md and
# docs/*.md reaches a file of the tree, and every #anchor a heading of its
# target (GitHub's anchors: lower case, punctuation dropped, spaces to -).
set -euo pipefail

src=$(cd "${1:?usage: docs_links.sh SRCDIR}" && pwd)
cd "$src"

# The anchors of a Markdown file, one a line (headings outside code fences).
anchors() {
	awk '/^```/ { fence = !fence; next } !fence && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
		tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

bad=0 n=0
for f in README.md CHANGELOG.md docs/*.md; do
	[[ -e $f ]] || continue
	links=$(awk '/^```/ { fence = !fence; next } !fence' "$f" |
		grep -o '\]([^) ]*)' | sed 's/^](//; s/)$//' || true)
	for link in $links; do
		[[ $link == http://* || $link == https://* || $link == mailto:* ]] && continue
		n=$((n + 1))
		path=${link%%#*}
		frag=
		[[ $link == *#* ]] && frag=${link#*#}
		if [[ -n $path ]]; then
			target=$(dirname "$f")/$path
		else
			target=$f
		fi
		if [[ ! -e $target ]]; then
			echo "docs_links: FAIL: $f links to $link: no file $target"
			bad=1
			continue
		fi
		if [[ -n $frag && $target == *.md ]] && ! anchors "$target" | grep -qxF "$frag"; then
			echo "docs_links: FAIL: $f links to $link: no heading with that anchor in $target"
			bad=1
		fi
	done
done
echo "docs_links: $n relative links checked"
exit $bad
