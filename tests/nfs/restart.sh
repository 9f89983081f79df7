#!/usr/bin/env bash
# Server restart: a writer writes 256 MiB through a 32 MiB max and pauses
# at 193 MiB (after an fsync at 192); while the stats show unstable data
# (WRITE3 UNSTABLE answered, not committed: the commit interval is long),
# ganesha is killed with SIGKILL and started again (a new write verifier);
# the writer writes the
# rest and its fsync() succeeds. The stats show at least one verifier
# change and data written again (the unstable chunks the old server
# answered, which the test also removes from the exported file while the
# server is down, as a crash would), and the exported file equals the
# source; a small file whose time was set after writing keeps it through
# the data written again, and so does one whose time was set after its
# write-back. Prints the bytes written again and the time to recover.
source "$(dirname "$0")/common.sh"
SECONDS=0

MAX=$((32 << 20))
dd if=/dev/urandom of="$WORK/src" bs=1M count=256 iflag=fullblock status=none
src_sum=$(sha256sum <"$WORK/src")

nfs_server_start "$WORK/export"
# Dirty data is written back after 500 ms; unstable data is committed
# after 60 s only (or under pressure, or by a sync).
nfs_mount rs "$WORK/mnt" --max 32M --stats "$WORK/stats" --commit-interval 60s \
	--dirty-expire 500ms

# The writer: 192 MiB and fsync (all committed), 1 MiB more, then waits
# for $WORK/go; the rest, fsync; prints the seconds its last fsync took.
# paused and go are FIFOs: each side blocks until the other opens it.
# (fd 9, the NFS server lock, not inherited: a writer left behind must not
# hold it)
mkfifo "$WORK/paused" "$WORK/go"
python3 - "$WORK/src" "$WORK/mnt/f" "$WORK" >"$WORK/writer.out" 2>&1 9>&- <<'PY' &
import os, sys, time
src, dst, work = sys.argv[1:]
data = open(src, 'rb').read()
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
mib = 1 << 20
for i in range(256):
    if i == 192:
        os.fsync(fd)
    if i == 193:
        open(work + '/paused', 'w').close()  # a FIFO: returns once read
        open(work + '/go').read()            # a FIFO: returns once written
    os.write(fd, data[i * mib:(i + 1) * mib])
t = time.monotonic()
os.fsync(fd)
print("fsync %.3f s" % (time.monotonic() - t))
os.close(fd)
PY
writer=$!
PIDS+=("$writer")

timeout 60 cat "$WORK/paused" || { cat "$WORK/writer.out"; fail "the writer did not reach its pause"; }
# A small file with its time set after writing (cp -a, tar): given to the
# server after its write-back, and again after the restart has the client
# write its unstable data again (which moves the server's mtime).
head -c 5000 "$WORK/src" >"$WORK/mnt/t"
touch -d '2001-02-03 04:05:06' "$WORK/mnt/t"
want_t=$(date -d '2001-02-03 04:05:06' +%s)
for _ in $(seq 100); do
	[[ $(stat -c %Y "$WORK/export/t") == "$want_t" ]] && break
	sleep 0.05
done
[[ $(stat -c %Y "$WORK/export/t") == "$want_t" ]] || fail "t's time not on the server after its write-back"
# The same with the time set later (a copy slower than the dirty expiry):
# t2 is written back and given its write's time first, its own time is
# set on the server at once, and must be given again too.
head -c 5000 "$WORK/src" >"$WORK/mnt/t2"
for _ in $(seq 100); do
	[[ $(stat -c %s "$WORK/export/t2" 2>/dev/null) == 5000 ]] && break
	sleep 0.05
done
[[ $(stat -c %s "$WORK/export/t2") == 5000 ]] || fail "t2 not written back in 5 s"
sleep 0.5 # the reaper gives it its write's time meanwhile (a round every 100 ms)
touch -d '2001-02-03 04:05:06' "$WORK/mnt/t2"
[[ $(stat -c %Y "$WORK/export/t2") == "$want_t" ]] || fail "t2's time not on the server at once"
# The last MiB is written back (dirty expiry) as WRITE3 UNSTABLE and, under
# every threshold, left uncommitted: wait until a stats file written after
# the pause shows it, and nothing dirty or in writeback.
unstable=0
for _ in $(seq 20); do
	stats_next "$WORK/stats" || fail "no stats file written"
	unstable=$(stat_of "$WORK/stats" / unstable)
	dirty=$(stat_of "$WORK/stats" / dirty)
	wb=$(stat_of "$WORK/stats" / writeback)
	[[ -n $unstable && $unstable -gt 0 && $dirty -eq 0 && $wb -eq 0 ]] && break
done
[[ -n $unstable && $unstable -gt 0 && $dirty -eq 0 && $wb -eq 0 ]] ||
	fail "not only unstable data in the stats before the kill: unstable $unstable, dirty $dirty, writeback $wb"
t0=$(date +%s.%N)
nfs_server_kill9
# Nothing can be committed while the server is down: what the stats show
# now (a stats file written after the kill) was answered by the killed
# server and never committed.
stats_next "$WORK/stats" || fail "no stats file written"
unstable=$(stat_of "$WORK/stats" / unstable)
echo "[$SECONDS s] server killed with $unstable bytes unstable (answered, not committed)"
# ganesha wrote them into its page cache, which a SIGKILL does not lose;
# a server that crashes does: its file ends where the last commit (the
# fsync at 192 MiB) left it. Done here while it is down.
truncate -s $((192 << 20)) "$WORK/export/f"
# (checked once it is back: a failure must not leave the client waiting
# for a server that never returns)
nfs_server_restart
t1=$(date +%s.%N)
[[ -n $unstable && $unstable -gt 0 ]] || fail "no unstable data while the server was down"
echo >"$WORK/go"
wait $writer || { cat "$WORK/writer.out"; fail "the writer failed (fsync)"; }
t2=$(date +%s.%N)
cat "$WORK/writer.out"
echo "[$SECONDS s] writer done"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs"
stats_next "$WORK/stats" || fail "no stats file written" # the stats of after the fsync
changes=$(nfs_stat "$WORK/stats" nfs_verifier_changes)
resent=$(nfs_stat "$WORK/stats" nfs_resent_bytes)
outage=$(nfs_stat "$WORK/stats" nfs_last_outage_ms)
peak=$(stat_of "$WORK/stats" / peak_charged)
ufs_unmount rs "$WORK/mnt"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs after unmount"
cmp -n 5000 "$WORK/src" "$WORK/export/t" || fail "t differs on the server"
[[ $(stat -c %Y "$WORK/export/t") == "$want_t" ]] ||
	fail "t's time lost when its data was written again: $(stat -c %y "$WORK/export/t")"
[[ $(stat -c %Y "$WORK/export/t2") == "$want_t" ]] ||
	fail "t2's time lost when its data was written again: $(stat -c %y "$WORK/export/t2")"
printf 'restart: server down %.2f s (killed, a stats file, started again); the client reconnected after %s ms\n' \
	"$(echo "$t1 - $t0" | bc)" "$outage"
printf 'restart: %s verifier change(s), %s bytes written again; the rest written and fsync()ed %.2f s after the restart\n' \
	"$changes" "$resent" "$(echo "$t2 - $t1" | bc)"
echo "root domain: peak charged $peak of max $MAX"
[[ $changes -ge 1 ]] || fail "no verifier change seen"
[[ $resent -gt 0 ]] || fail "nothing written again"
[[ -n $peak && $peak -le $MAX ]] || fail "peak charged $peak over the max"
echo PASS
