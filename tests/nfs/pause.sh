#!/usr/bin/env bash
# A server that hangs: ganesha stopped (SIGSTOP) for 12 s during a dd of
# 256 MiB through a 16 MiB max: its connection stays up but nothing is
# answered; the RPCs in flight time out after 10 s and are sent again (a
# write as a failed one, a commit at once); dd completes after SIGCONT and
# the exported file is the source.
source "$(dirname "$0")/common.sh"

dd if=/dev/urandom of="$WORK/src" bs=1M count=256 iflag=fullblock status=none
nfs_server_start "$WORK/export"
nfs_mount pause "$WORK/mnt" --max 16M --stats "$WORK/stats"
dd if="$WORK/src" of="$WORK/mnt/f" bs=1M conv=fsync 2>"$WORK/dd.out" 9>&- &
writer=$!
PIDS+=("$writer")
# Paused as soon as the server holds the first 8 MiB: writes are in flight
# then, and the dd (about a second at full speed) is far from its end.
wait_exported "$WORK/export/f" $((8 << 20)) $writer
kill -0 $writer 2>/dev/null || fail "dd ended before the pause"
nfs_server_pause_for 12
wait $writer || { cat "$WORK/dd.out"; fail "dd"; }
cmp "$WORK/src" "$WORK/export/f" || fail "the exported file differs"
stats_next "$WORK/stats" || fail "no stats file written"
errors=$(nfs_stat "$WORK/stats" nfs_write_errors)
cerrors=$(nfs_stat "$WORK/stats" nfs_commit_errors)
cresends=$(nfs_stat "$WORK/stats" nfs_commit_resends)
reconnects=$(nfs_stat "$WORK/stats" nfs_reconnects)
wconnects=$(nfs_stat "$WORK/stats" nfs_write_connects)
peak=$(stat_of "$WORK/stats" / peak_charged)
ufs_unmount pause "$WORK/mnt"
cmp "$WORK/src" "$WORK/export/f" || fail "the exported file differs after unmount"
echo "server stopped 12 s: $errors WRITE3 timed out and sent again, $cresends COMMIT3 sent again" \
	"($cerrors failed)," \
	"$reconnects reconnect(s)," \
	"$wconnects of the write connection;" \
	"peak charged $peak of $((16 << 20))"
# What was in flight when the server stopped depends on the moment: WRITE3s
# (at most two per file) or the COMMIT3 that the full max forced; whichever
# it was, it timed out (a COMMIT3 is kept and sent again, not failed).
[[ $((errors + cerrors + cresends)) -ge 1 ]] || fail "no RPC timed out: the pause did not hit RPCs in flight"
[[ $peak -le $((16 << 20)) ]] || fail "peak charged $peak"
echo PASS
