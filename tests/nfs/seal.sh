#!/usr/bin/env bash
# A file removed while the engine is committing it: the removal drops its
# cache and destroys its object, and a COMMIT3 that the engine's callback
# sent meanwhile would come back stale (the file is gone) and name the
# object freed. The daemon seals the file before its drain: the callback,
# held back here 500 ms by a test hook (UFS_TEST_COMMIT_DELAY_MS), sends
# nothing (nfs_sealed_commits), no COMMIT3 fails, and the daemon lives on
# (under ASan, the build before this fix read freed memory here).
source "$(dirname "$0")/common.sh"

nfs_server_start "$WORK/export"
UFS_TEST_COMMIT_DELAY_MS=500 nfs_mount seal "$WORK/mnt" --max 32M --commit-interval 10ms \
	--stats "$WORK/stats"
m=$WORK/mnt
head -c 200000 /dev/urandom >"$WORK/src"
for i in $(seq 8); do
	cp "$WORK/src" "$m/f$i" || fail "cp f$i"
	# The close starts the write-back: once it is answered the data is
	# unstable, 10 ms later the engine commits it, and its callback is
	# held back 500 ms; the removal comes in that window.
	sleep 0.25
	rm "$m/f$i" || fail "rm f$i (the daemon: $(tail -3 "$WORK/seal.log"))"
	[[ ! -e $m/f$i && ! -e $WORK/export/f$i ]] || fail "f$i after rm"
done
# The files kept beside them are written whole.
for i in $(seq 4); do
	cp "$WORK/src" "$m/k$i"
done
stats_next "$WORK/stats" || fail "no stats file written"
sealed=$(nfs_stat "$WORK/stats" nfs_sealed_commits)
cerrors=$(nfs_stat "$WORK/stats" nfs_commit_errors)
ufs_unmount seal "$WORK/mnt"
for i in $(seq 4); do
	cmp "$WORK/src" "$WORK/export/k$i" || fail "k$i differs on the export"
done
grep -q "stale" "$WORK/seal.log" && { cat "$WORK/seal.log"; fail "a COMMIT3 came back stale"; }
echo "8 files removed while committed: $sealed commits sealed, $cerrors failed"
[[ $sealed -ge 1 ]] || fail "no commit was sealed: the removals did not meet a commit in its callback"
[[ $cerrors -eq 0 ]] || fail "$cerrors COMMIT3s failed"
echo PASS
