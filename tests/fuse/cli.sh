#!/usr/bin/env bash
# Bad arguments: a message on standard error and exit status 2, before any
# mount is attempted (so no root or FUSE is needed).
set -uo pipefail
UFS=${1:?usage: $0 PATH/TO/unstable-fuse}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/b" "$dir/m"

expect2() {
	local err rc
	err=$("$UFS" "$@" 2>&1 >/dev/null)
	rc=$?
	if [[ $rc -ne 2 || -z $err ]]; then
		echo "FAIL: unstable-fuse $* exited $rc with '$err'" >&2
		exit 1
	fi
	echo "ok: $* -> $err" | head -1
}

expect2
expect2 "$dir/b"
expect2 "$dir/nonexistent" "$dir/m"
expect2 "$dir/b" "$dir/m" --max
expect2 "$dir/b" "$dir/m" --max lots
expect2 "$dir/b" "$dir/m" --max 0
expect2 "$dir/b" "$dir/m" --max 1K
expect2 "$dir/b" "$dir/m" --domain-by group
expect2 "$dir/b" "$dir/m" --commit-interval 0
expect2 "$dir/b" "$dir/m" --commit-interval 5y
expect2 "$dir/b" "$dir/m" --cgroup-percent 0
expect2 "$dir/b" "$dir/m" --flushers x
expect2 "$dir/b" "$dir/m" --clean-max lots
expect2 "$dir/b" "$dir/m" --clean-max -1
expect2 "$dir/b" "$dir/m" --dirty-max 1K
expect2 "$dir/b" "$dir/m" --dirty-max
expect2 "$dir/b" "$dir/m" --stats ""
for c in "" 0 2K 3K 12K 256K 1M nan -4K 4K7; do
	expect2 "$dir/b" "$dir/m" --chunk "$c"
done
expect2 "$dir/b" "$dir/m" --chunk
msg=$("$UFS" "$dir/b" "$dir/m" --chunk 12K 2>&1)
grep -q -- "--chunk" <<<"$msg" || { echo "FAIL: a bad --chunk refused without naming it: $msg" >&2; exit 1; }
# Good sizes pass the option's check: without a mount point the refusal is
# about that, not --chunk.
for c in 4K 16k 32K 131072 "=8K" "=128K"; do
	[[ $c == =* ]] && set -- "--chunk$c" || set -- --chunk "$c"
	msg=$("$UFS" "$dir/b" "$@" 2>&1)
	if grep -q -- "--chunk" <<<"$msg" || ! grep -q "MOUNTPOINT" <<<"$msg"; then
		echo "FAIL: unstable-fuse $dir/b $* (no mount point): $msg" >&2
		exit 1
	fi
done
expect2 "$dir/b" "$dir/m" --direct-writeback --buffered-writeback
expect2 nfs://127.0.0.1/export "$dir/m" --trust-backing
msg=$("$UFS" nfs://127.0.0.1/export "$dir/m" --trust-backing 2>&1)
if ! grep -q "without libnfs" <<<"$msg" && ! grep -q "trust-backing" <<<"$msg"; then
	echo "FAIL: --trust-backing with nfs:// refused without naming the option: $msg" >&2
	exit 1
fi
expect2 "$dir/b" "$dir/m" --bogus
expect2 "$dir/b" "$dir/m" -o no_such_fuse_option
help=$("$UFS" --help) || { echo "FAIL: --help" >&2; exit 1; }
# Options the daemon sets whatever is given are not offered.
for forced in attr_timeout= use_ino hard_remove; do
	if grep -qE "^ +-o $forced" <<<"$help"; then
		echo "FAIL: --help offers -o $forced, which unstable-fuse sets itself" >&2
		exit 1
	fi
done
grep -q "ac_attr_timeout" <<<"$help" || { echo "FAIL: --help lost libfuse's other options" >&2; exit 1; }
echo PASS
