#!/usr/bin/env bash
# readme.sh SRCDIR: the README's quick start says what .ci/run does. Its
# apt-get command names exactly the packages of .ci/run's packages=(...)
# list, and its test command is .ci/run's readme_test, character for
# character (an indented code line of its own). Its C example is
# examples/readme.c's, which ctest runs.
set -euo pipefail

src=$(cd "${1:?usage: readme.sh SRCDIR}" && pwd)
ci=$src/.ci/run
readme=$src/README.md

words() { tr -d '()\\' | tr ' \t' '\n\n' | sed '/^$/d' | LC_ALL=C sort; }

# As root on a fresh machine: the package lists are fetched first, and no
# sudo (a fresh Debian has none).
want=$(sed -n '/^packages=(/,/)/p' "$ci" | sed 's/^packages=//' | words)
if ! grep -q '^    apt-get update && apt-get install -y ' "$readme"; then
	echo "readme: FAIL: no line '    apt-get update && apt-get install -y ...' (as root, no sudo)"
	exit 1
fi
have=$(sed -n '/^    apt-get update && apt-get install -y /,/^$/p' "$readme" |
	sed 's/^    apt-get update && apt-get install -y //' | words)
if [[ -z $want ]]; then
	echo "readme: FAIL: no packages=(...) list in $ci"
	exit 1
fi
if [[ $want != "$have" ]]; then
	echo "readme: FAIL: the README's apt-get line and .ci/run's packages differ (< .ci/run, > README):"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$have") || true
	exit 1
fi
echo "readme: the apt-get line names .ci/run's $(wc -l <<<"$want") packages"

test_cmd=$(sed -n "s/^readme_test='\(.*\)'\$/\1/p" "$ci")
if [[ -z $test_cmd ]] || ! grep -qxF "    $test_cmd" "$readme"; then
	echo "readme: FAIL: the README has no line '    $test_cmd' (.ci/run's readme_test)"
	exit 1
fi
echo "readme: the test command is .ci/run's: $test_cmd"

# The code block is examples/readme.c's part between its README markers,
# one tab taken off each line (ctest builds and runs that program).
want=$(sed -n '/README: begin/,/README: end/p' "$src/examples/readme.c" | sed '1d;$d' | sed 's/^\t//')
have=$(sed -n '/^```c$/,/^```$/p' "$readme" | sed '1d;$d')
if [[ -z $want || $want != "$have" ]]; then
	echo "readme: FAIL: the README's code block is not examples/readme.c's (< readme.c, > README):"
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$have") || true
	exit 1
fi
echo "readme: the code block is examples/readme.c's ($(wc -l <<<"$want") lines)"
