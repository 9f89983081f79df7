#!/usr/bin/env bash
# clean_tree.sh record|check SRCDIR BUILDDIR
#
# No test or benchmark may write into the source tree. ctest runs
# "record" before every other test (fixture setup) and "check" after all of
# them (fixture cleanup): check fails when the run left a file in SRCDIR
# that was not there before, untracked or ignored, outside BUILDDIR and the
# build*/ directories (.gitignore's build trees: other builds may run
# meanwhile). A file ignored by .gitignore counts too: ignoring what a test
# leaves behind does not make the tree clean. Skips (77) outside a git
# checkout or without git.
set -euo pipefail

mode=${1:?usage: clean_tree.sh record|check SRCDIR BUILDDIR}
src=$(cd "${2:?usage: clean_tree.sh record|check SRCDIR BUILDDIR}" && pwd -P)
build=$(cd "${3:?usage: clean_tree.sh record|check SRCDIR BUILDDIR}" && pwd -P)
state=$build/clean_tree.before

if ! command -v git >/dev/null ||
	[[ $(git -C "$src" rev-parse --is-inside-work-tree 2>/dev/null) != true ]]; then
	echo "clean_tree: $src is not a git checkout, skipping"
	exit 77
fi

# The build directory relative to the source tree, when it is inside it.
build_rel=
if [[ $build == "$src"/* ]]; then
	build_rel=${build#"$src"/}/
fi

# Untracked (??) and ignored (!!) files under SRCDIR, one path a line,
# relative to SRCDIR, without the build trees.
leftovers() {
	git -C "$src" status --porcelain=v1 -z --untracked-files=all --ignored=matching -- . |
		tr '\0' '\n' | sed -n 's/^\(??\|!!\) //p' |
		while IFS= read -r path; do
			[[ -n $build_rel && $path == "$build_rel"* ]] && continue
			[[ $path == build*/* ]] && continue
			printf '%s\n' "$path"
		done | LC_ALL=C sort
}

case $mode in
record)
	leftovers >"$state"
	echo "clean_tree: recorded $(wc -l <"$state") untracked or ignored files outside the build trees"
	;;
check)
	if [[ ! -e $state ]]; then
		echo "clean_tree: no state recorded ($state): run the whole suite"
		exit 77
	fi
	new=$(leftovers | LC_ALL=C comm -13 "$state" -)
	if [[ -n $new ]]; then
		echo "clean_tree: FAIL: the tests left files in the source tree $src:"
		sed 's/^/  /' <<<"$new"
		echo "clean_tree: tests must work in a temporary or the build directory"
		exit 1
	fi
	echo "clean_tree: the source tree has no new file"
	;;
*)
	echo "usage: clean_tree.sh record|check SRCDIR BUILDDIR" >&2
	exit 2
	;;
esac
