#!/usr/bin/env bash
# standalone.sh SRCDIR: the project cites nothing a reader of the repository
# cannot open. No tracked text file (docs, README, CHANGELOG, man pages,
# sources, scripts) names a tracker's issue ("issue 12", "issues 14"), a
# design document outside the tree ("DESIGN", "DESIGN.md", "§6") or a path
# out of it ("../shared"). Needs git and a checkout; exit 77 otherwise.
set -euo pipefail

src=$(cd "${1:?usage: standalone.sh SRCDIR}" && pwd)
cd "$src"
if ! command -v git >/dev/null || ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	echo "standalone: not a git checkout, skipping"
	exit 77
fi
# This script names the patterns it looks for: it is left out.
pattern='[Ii]ssues? #?[0-9]+|\bDESIGN(\.md)?\b|§ ?[0-9]|\.\./shared'
if hits=$(git grep -n -I -E "$pattern" -- . ':!tests/standalone.sh'); then
	echo "standalone: FAIL: references a reader of the repository cannot follow:"
	echo "$hits"
	exit 1
fi
echo "standalone: $(git ls-files | wc -l) tracked files cite nothing outside the repository"
