#!/usr/bin/env bash
# Server down for 5 s during a write: dd of 384 MiB (conv=fsync) through a
# 16 MiB max; once the server holds its first 8 MiB, ganesha is killed and
# started again 5 s later. While it is down the writer is throttled (it writes at most the
# max, as the data cannot leave), the root domain never passes its max,
# and after the restart the writer completes with the file intact.
source "$(dirname "$0")/common.sh"

MAX=$((16 << 20))
dd if=/dev/urandom of="$WORK/src" bs=1M count=384 iflag=fullblock status=none
src_sum=$(sha256sum <"$WORK/src")

nfs_server_start "$WORK/export"
nfs_mount down "$WORK/mnt" --max 16M --stats "$WORK/stats"
dd if="$WORK/src" of="$WORK/mnt/f" bs=1M conv=fsync 2>"$WORK/dd.out" 9>&- &
writer=$!
PIDS+=("$writer")
# Killed as soon as the server holds the first 8 MiB (the dd takes about a
# second at full speed: a fixed delay could miss it).
wait_exported "$WORK/export/f" $((8 << 20)) $writer
kill -0 $writer 2>/dev/null || fail "dd ended before the outage"
wchar() { awk '$1 == "wchar:" { print $2 }' /proc/$writer/io; }
nfs_server_kill9
sleep 1
w1=$(wchar)
peak_down=0
for _ in 1 2 3 4; do
	sleep 1
	c=$(stat_of "$WORK/stats" / charged)
	[[ $c -gt $peak_down ]] && peak_down=$c
done
w2=$(wchar)
running=0
kill -0 $writer 2>/dev/null && running=1
# (checked once it is back: a failure must not leave the client waiting
# for a server that never returns)
nfs_server_restart
[[ $running -eq 1 ]] || fail "dd completed while the server was down"
wait $writer || { cat "$WORK/dd.out"; fail "dd"; }
echo "while down (4 s, from 1 s after the kill): the writer wrote $((w2 - w1)) bytes;" \
	"the root domain held at most $peak_down bytes"
[[ $((w2 - w1)) -le $MAX ]] || fail "the writer was not throttled: $((w2 - w1)) bytes while down"
[[ $peak_down -le $MAX ]] || fail "charged $peak_down over the max while down"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs"
stats_next "$WORK/stats" || fail "no stats file written"
peak=$(stat_of "$WORK/stats" / peak_charged)
reconnects=$(nfs_stat "$WORK/stats" nfs_reconnects)
errors=$(nfs_stat "$WORK/stats" nfs_write_errors)
ufs_unmount down "$WORK/mnt"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs after unmount"
echo "root domain: peak charged $peak of max $MAX; $reconnects reconnect(s), $errors write(s) retried"
[[ $peak -le $MAX ]] || fail "peak charged $peak"
[[ $reconnects -ge 1 ]] || fail "no reconnect counted"
echo PASS
