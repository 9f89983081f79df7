#!/usr/bin/env bash
# A close is not an fsync. By default a close that wrote starts the file's
# write-back (its data is then written to the backing file, not committed;
# --close=writeback waits for that, checked at the end) and
# the file stays cached, closed, until its data is clean: fsync commits it,
# the reaper then forgets it; unlink drops its cache; unmount commits what
# is left, with the times of the cached writes. With --close=sync the close
# commits. Read from the stats file (rewritten every second) with commits
# held off (--commit-interval 60s, --dirty-expire 60s).
source "$(dirname "$0")/common.sh"

# cache_stat FILE KEY: KEY's value in the stats file's "cache" block.
cache_stat() {
	awk -v key="$2" 'BEGIN { RS = ""; FS = "\n" }
		$1 == "cache" { for (i = 2; i <= NF; i++) { split($i, kv, " "); if (kv[1] == key) print kv[2] } }' "$1"
}

# stats_wait FILE: until the stats file was rewritten (at most 3 s).
stats_wait() {
	local before
	before=$(stat -c %Y.%y "$1" 2>/dev/null || true)
	for _ in $(seq 60); do
		sleep 0.05
		[[ $(stat -c %Y.%y "$1" 2>/dev/null || true) != "$before" ]] && return 0
	done
	return 0
}

head -c 3M /dev/urandom >"$WORK/blob"
st=$WORK/stats
ufs_mount close "$WORK/backing" "$WORK/mnt" --max 32M --stats "$st" \
	--commit-interval 60s --dirty-expire 60s

# A file written and closed: written back, not committed, still cached.
head -c 300000 "$WORK/blob" >"$WORK/mnt/a"
stats_wait "$st"
stats_wait "$st"
[[ $(stat_of "$st" / dirty) -eq 0 ]] || fail "close did not start the write-back: dirty $(stat_of "$st" / dirty)"
[[ $(stat_of "$st" / written_unstable) -ge 1 ]] || fail "nothing written back at close"
[[ $(stat_of "$st" / committed) -eq 0 ]] || fail "close committed (committed $(stat_of "$st" / committed))"
[[ $(stat_of "$st" / unstable) -gt 0 ]] || fail "no unstable data after close"
[[ $(cache_stat "$st" closed_files) -eq 1 ]] || fail "closed_files $(cache_stat "$st" closed_files), not 1"
cmp -n 300000 "$WORK/blob" "$WORK/mnt/a" || fail "a reads back wrong through the mount"
[[ $(stat -c %s "$WORK/backing/a") -eq 300000 ]] || fail "a not written back to the backing file"
echo "close: written back, not committed, the file kept"

# fsync is the integrity point; the reaper then forgets the clean file.
sync "$WORK/mnt/a" || fail "fsync of a"
stats_wait "$st"
stats_wait "$st"
[[ $(stat_of "$st" / committed) -ge 1 ]] || fail "fsync did not commit"
[[ $(stat_of "$st" / unstable) -eq 0 ]] || fail "unstable data left after fsync"
[[ $(cache_stat "$st" closed_files) -eq 0 ]] || fail "a clean closed file was not forgotten"
echo "fsync: committed, then forgotten"

# Unlink of a closed file with data not committed: its cache goes.
head -c 200000 "$WORK/blob" >"$WORK/mnt/b"
rm "$WORK/mnt/b"
[[ ! -e "$WORK/backing/b" ]] || fail "b still in the backing directory"
stats_wait "$st"
stats_wait "$st"
[[ $(cache_stat "$st" closed_files) -eq 0 ]] || fail "an unlinked closed file kept"
[[ $(stat_of "$st" / unstable) -eq 0 ]] || fail "an unlinked file's data still unstable"
echo "unlink: dropped"

# Reopened while closed: the same cache, then a rewrite in place.
head -c 500000 "$WORK/blob" >"$WORK/mnt/c"
dd if="$WORK/blob" of="$WORK/mnt/c" bs=1000 count=7 seek=100 skip=2000 conv=notrunc status=none
cp "$WORK/mnt/c" "$WORK/c.expect"
head -c 500000 "$WORK/blob" >"$WORK/c.ref"
dd if="$WORK/blob" of="$WORK/c.ref" bs=1000 count=7 seek=100 skip=2000 conv=notrunc status=none
cmp "$WORK/c.ref" "$WORK/c.expect" || fail "c reads back wrong after a reopen"

# Changed behind the cache while closed (as another NFS client would):
# the next open reads the file anew, not the closed file's chunks.
# (Once its own write-back is done: until the reaper gives the backing
# file the write's time and takes the file's times and size anew, the
# close's write-back still changes it. The write-back's own stamp may equal
# the write's, both from the coarse clock: a second of the reaper's rounds
# after the times agree.)
head -c 200000 "$WORK/blob" >"$WORK/mnt/d"
for _ in $(seq 100); do
	[[ $(stat -c %y "$WORK/backing/d") == $(stat -c %y "$WORK/mnt/d") ]] && break
	sleep 0.05
done
[[ $(stat -c %y "$WORK/backing/d") == $(stat -c %y "$WORK/mnt/d") ]] ||
	fail "d's write-back did not give the backing file its time"
sleep 1 # the reaper's rounds (100 ms), and a new mtime whatever the clock's grain
tail -c 150000 "$WORK/blob" >"$WORK/backing/d"
cmp <(tail -c 150000 "$WORK/blob") "$WORK/mnt/d" || fail "d changed behind the cache reads stale"
[[ $(stat -c %s "$WORK/mnt/d") -eq 150000 ]] || fail "d's size stale: $(stat -c %s "$WORK/mnt/d")"
echo "changed behind the cache: read anew"

# Times set after writing (cp -a, tar): kept through the later commit.
head -c 100000 "$WORK/blob" >"$WORK/mnt/t"
touch -d '2001-02-03 04:05:06' "$WORK/mnt/t"
[[ $(stat -c %Y "$WORK/mnt/t") -eq $(date -d '2001-02-03 04:05:06' +%s) ]] || fail "t's time"
# A chmod that adds permissions to a file with cached writes waits for
# their write-back, with their times (cp -a: a file made with few, written,
# then its times and mode set); one that takes permissions away is made at
# once. Held open (written by the shell itself: a close of any descriptor
# of it would give the file its times): the times and the mode wait for
# the close, whether the engine wrote the data back meanwhile or not.
head -c 3750 "$WORK/blob" | base64 -w0 >"$WORK/m.expect"
exec 7>"$WORK/mnt/m"
printf %s "$(cat "$WORK/m.expect")" >&7
chmod 600 "$WORK/mnt/m"
[[ $(stat -c %a "$WORK/backing/m") == 600 ]] || fail "a chmod taking permissions away waited"
chmod 755 "$WORK/mnt/m"
touch -d '2002-03-04 05:06:07' "$WORK/mnt/m"
[[ $(stat -c %a "$WORK/mnt/m") == 755 ]] || fail "m's mode through the mount: $(stat -c %a "$WORK/mnt/m")"
[[ $(stat -c %Y "$WORK/mnt/m") -eq $(date -d '2002-03-04 05:06:07' +%s) ]] || fail "m's time through the mount"
[[ $(stat -c %a "$WORK/backing/m") == 600 ]] || fail "the chmod of m did not wait for its writes"
exec 7>&-
for _ in $(seq 100); do
	[[ $(stat -c %a.%Y "$WORK/backing/m") == 755.$(date -d '2002-03-04 05:06:07' +%s) ]] && break
	sleep 0.05
done
[[ $(stat -c %a.%Y "$WORK/backing/m") == 755.$(date -d '2002-03-04 05:06:07' +%s) ]] ||
	fail "m's mode and time not given to the backing file after its write-back: $(stat -c %a.%y "$WORK/backing/m")"
cmp "$WORK/m.expect" "$WORK/backing/m" || fail "m wrong in the backing directory"
echo "chmod and times after writing: made with the write-back"

ufs_unmount close "$WORK/mnt"
cmp "$WORK/c.ref" "$WORK/backing/c" || fail "c wrong in the backing directory after unmount"
cmp -n 100000 "$WORK/blob" "$WORK/backing/t" || fail "t wrong in the backing directory"
[[ $(stat -c %Y "$WORK/backing/t") -eq $(date -d '2001-02-03 04:05:06' +%s) ]] ||
	fail "t's time moved by its write-back: $(stat -c %y "$WORK/backing/t")"
[[ $(stat_of "$st" / unstable) -eq 0 && $(stat_of "$st" / dirty) -eq 0 ]] ||
	fail "data left at unmount"
echo "unmount: committed, times kept"

# --close=sync: the close commits.
rm -f "$st"
ufs_mount closesync "$WORK/backing" "$WORK/mnt" --max 32M --stats "$st" \
	--commit-interval 60s --dirty-expire 60s --close=sync
head -c 300000 "$WORK/blob" >"$WORK/mnt/s"
stats_wait "$st"
stats_wait "$st"
[[ $(stat_of "$st" / committed) -ge 1 ]] || fail "--close=sync: close did not commit"
[[ $(stat_of "$st" / unstable) -eq 0 ]] || fail "--close=sync: unstable data after close"
[[ $(cache_stat "$st" closed_files) -eq 0 ]] || fail "--close=sync: a closed file kept"
ufs_unmount closesync "$WORK/mnt"
cmp -n 300000 "$WORK/blob" "$WORK/backing/s" || fail "s wrong in the backing directory"
echo "--close=sync: committed at close"

# --close=writeback: the close returns once the data is in the backing file
# (close-to-open: another opener of it reads it), with the write's time;
# not committed.
rm -f "$st"
ufs_mount closewb "$WORK/backing" "$WORK/mnt" --max 32M --stats "$st" \
	--commit-interval 60s --dirty-expire 60s --close=writeback
head -c 300000 "$WORK/blob" >"$WORK/mnt/w"
cmp -n 300000 "$WORK/blob" "$WORK/backing/w" || fail "--close=writeback: w not in the backing file at close"
[[ $(stat -c %y "$WORK/backing/w") == $(stat -c %y "$WORK/mnt/w") ]] ||
	fail "--close=writeback: w's time not the write's at close"
stats_wait "$st"
stats_wait "$st"
[[ $(stat_of "$st" / committed) -eq 0 ]] || fail "--close=writeback: close committed"
ufs_unmount closewb "$WORK/mnt"
echo "--close=writeback: written back at close, not committed"
echo PASS
