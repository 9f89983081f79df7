#!/usr/bin/env bash
# The namespace by handle (nfs/handles.c): a path's handle is cached, and a
# handle another client made stale (the tree removed and made again under
# the same names) sends the call from the export's root once more, even
# while the cache would keep it (--attr-cache 60s); times set to the
# nanosecond; modes and owners right at once after create and setattr (the
# attributes of the replies); a rename forgets the old paths; a create in a
# known directory makes no walk from the root; in a directory made here, a
# create makes no LOOKUP3, and a name another client made there shows once
# an exclusive create of it fails.
source "$(dirname "$0")/common.sh"

nfs_server_start "$WORK/export"
nfs_mount h "$WORK/mnt" --attr-cache 60s --stats "$WORK/stats"
# Another client, caching nothing.
nfs_mount other "$WORK/other" --no-cache --attr-cache 0
m=$WORK/mnt o=$WORK/other

# The tree made by the other client and looked up here: the handles of d
# and d/e cached. (A directory made here would answer the names it did not
# make there missing for --attr-cache: below.)
mkdir -p "$o/d/e"
echo one >"$o/d/e/f"
[[ $(cat "$m/d/e/f") == one ]] || fail "d/e/f through the mount"
[[ $(cat "$o/d/e/f") == one ]] || fail "d/e/f through the other client"

# The other client replaces the tree: our handles of d and d/e are stale.
rm -rf "$o/d"
mkdir -p "$o/d/e"
echo two >"$o/d/e/g"
[[ $(cat "$m/d/e/g" 2>&1) == two ]] || fail "d/e/g after the tree was made again: $(cat "$m/d/e/g" 2>&1)"
echo "a stale handle: looked up again from the root"

# Times to the nanosecond, modes and owners, seen at once by both clients.
touch "$m/t"
touch -m -d '2001-02-03 04:05:06.123456789' "$m/t"
for c in "$m" "$o"; do
	[[ $(stat -c %y "$c/t") == "2001-02-03 04:05:06.123456789"* ]] ||
		fail "mtime of t through $c: $(stat -c %y "$c/t")"
done
chmod 751 "$m/t"
chown 1234:5678 "$m/t"
for c in "$m" "$o"; do
	[[ $(stat -c '%a %u %g' "$c/t") == "751 1234 5678" ]] ||
		fail "t through $c: $(stat -c '%a %u %g' "$c/t")"
done
truncate -s 5 "$m/t"
[[ $(stat -c %s "$m/t") == 5 && $(stat -c %s "$o/t") == 5 ]] || fail "t's size after truncate"
echo "times, modes, owners and sizes set show at once"

# A rename of a directory forgets the paths below it.
mv "$m/d" "$m/d2"
[[ ! -e $m/d && $(cat "$m/d2/e/g") == two ]] || fail "d2/e/g after the rename of d"
mkdir "$m/d"
echo three >"$m/d/x"
[[ $(cat "$o/d/x") == three && ! -e $o/d/e ]] || fail "a new d after the rename"
echo "a rename forgets the paths below it"

# A create in a directory whose handle is cached: no LOOKUP3 walk. The
# calls are counted between two stats files; d/x is synced first, so that
# the reaper has no times to give it then. Each try in a directory of its
# own, made by the other client and looked up (stat) through the mount: the
# least of three counts (what else may fall in a window only adds).
sync "$m/d/x"
least=
for i in 1 2 3; do
	mkdir -p "$o/d2/e/c$i"
	stat "$m/d2/e/c$i" >/dev/null
	stats_next "$WORK/stats" || fail "no stats file written"
	before=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
	: >"$m/d2/e/c$i/new"
	stats_next "$WORK/stats" || fail "no stats file written"
	after=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
	[[ -z $least || $((after - before)) -lt $least ]] && least=$((after - before))
done
echo "a create in d2/e/cN: $least calls (the least of three)"
# (the name looked up and missing, the CREATE3, a GETATTR3 at most; a walk
# from the root would add 3 LOOKUP3s)
[[ $least -le 3 ]] || fail "a create made $least calls"

# A directory made here holds only the names made here: the lookup before
# each create is answered without a LOOKUP3 (nfs_made_misses), and a file
# made by an open with O_TRUNC is not truncated (it is empty), so that 20
# files made in it (echo >) take 20 CREATE3s, a SETATTR3 each (the times
# given after the data) and a GETATTR3 at most: 60 calls (the writes and
# commits are the write connection's, not counted here), where a LOOKUP3
# and a SETATTR3 of the size more each made 87. A name the other client
# made there meanwhile is not seen
# until an exclusive create of it fails (EEXIST): the directory is then
# forgotten and the name looked up.
mkdir "$m/md"
stats_next "$WORK/stats" || fail "no stats file written"
before=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
mbefore=$(nfs_stat "$WORK/stats" nfs_made_misses)
for i in $(seq 20); do echo $i >"$m/md/f$i"; done
stats_next "$WORK/stats" || fail "no stats file written"
after=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
mafter=$(nfs_stat "$WORK/stats" nfs_made_misses)
echo "20 creates in a directory made here: $((after - before)) calls, $((mafter - mbefore)) lookups answered missing"
[[ $((mafter - mbefore)) -ge 20 ]] || fail "$((mafter - mbefore)) lookups answered missing, not 20"
[[ $((after - before)) -le 60 ]] || fail "20 creates in md made $((after - before)) calls"
for i in $(seq 20); do
	[[ $(cat "$o/md/f$i") == "$i" ]] || fail "md/f$i on the other client"
done
echo theirs >"$o/md/theirs"
python3 -c '
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
except FileExistsError:
    sys.exit(0)
sys.exit("an exclusive create of a name the other client made succeeded")' "$m/md/theirs" ||
	fail "O_EXCL over md/theirs"
[[ $(cat "$m/md/theirs") == theirs ]] || fail "md/theirs after EEXIST: $(cat "$m/md/theirs" 2>&1)"
rm "$m/md/f1"
[[ ! -e $m/md/f1 && ! -e $o/md/f1 ]] || fail "md/f1 after rm"
echo "a name made by the other client in md: EEXIST, then seen"

# A directory listed (READDIRPLUS3) answers the lookups of its names that
# follow, and each removal gives its directory's attributes: 20 files the
# other client made, listed, looked at and removed here, make one call
# each, their REMOVE3 (before: a LOOKUP3 and a GETATTR3 of the directory
# more per name).
mkdir "$o/ls"
for i in $(seq 20); do echo $i >"$o/ls/f$i"; done
ls -f "$m/ls" >/dev/null
stats_next "$WORK/stats"
before=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
for i in $(seq 20); do
	[[ $(stat -c %s "$m/ls/f$i") == ${#i} || $(stat -c %s "$m/ls/f$i") == $((${#i} + 1)) ]] ||
		fail "ls/f$i: size $(stat -c %s "$m/ls/f$i")"
done
stats_next "$WORK/stats"
mid=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
rm "$m"/ls/f*
stats_next "$WORK/stats"
after=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
echo "20 names listed: stats $((mid - before)) calls, removals $((after - mid))"
[[ $((mid - before)) -eq 0 ]] || fail "the stats of 20 listed names made $((mid - before)) calls"
[[ $((after - mid)) -le 22 ]] || fail "20 removals after a listing made $((after - mid)) calls"
[[ -z $(ls -A "$o/ls") ]] || fail "ls not empty on the other client: $(ls -A "$o/ls")"
rmdir "$m/ls"

# A file of two names: a chmod by one shows through the other at once (the
# other name's cached attributes forgotten).
echo x >"$m/hl1"
ln "$m/hl1" "$m/hl2"
stat "$m/hl2" >/dev/null
chmod 640 "$m/hl1"
chown 4321:8765 "$m/hl1"
[[ $(stat -c '%a %u %g' "$m/hl2") == "640 4321 8765" ]] ||
	fail "hl2 after a chmod and chown of hl1: $(stat -c '%a %u %g' "$m/hl2")"
echo "a setattr by one name shows through the file's other names"

# A file written here (answered UNSTABLE, not committed yet) and removed by
# the other client: its COMMIT3 is refused as stale. The daemon writes its
# chunks again, they are refused too and end as lost (the error goes to
# fsync and close): no commit asked again for ever, the unmount ends.
# Only that file's chunk is written again: keep, 1 MiB written 2 s later
# (its commit not due yet), stays unstable and reaches the server whole.
echo lost >"$m/lost"
rm -f "$o/lost"
t0=$SECONDS
sleep 2
head -c 1M /dev/urandom >"$WORK/keep.src"
cp "$WORK/keep.src" "$m/keep"
for _ in $(seq 300); do
	grep -q "COMMIT of .*lost: stale" "$WORK/h.log" && break
	sleep 0.1
done
grep -q "COMMIT of .*lost: stale" "$WORK/h.log" || fail "no stale COMMIT3 of lost seen in 30 s"
line=$(grep "COMMIT of .*lost: stale" "$WORK/h.log" | head -1)
[[ $line == *": 1 unstable chunks are written again" ]] ||
	fail "the stale COMMIT3 of lost wrote other files' chunks again: $line"
echo "a file removed by another client before its commit: stale COMMIT3 after $((SECONDS - t0)) s, its data written again and refused, the other files' left alone"
sync "$m/keep"
cmp "$WORK/keep.src" "$o/keep" || fail "keep on the server after the stale COMMIT3 of lost"

# link, mknod (a FIFO, a character device; a regular file, which libfuse
# sends as a create; refused when the name is taken), readlink and statfs
# are raw calls on handles too, with their results; a readlink and a statfs
# each make at least one raw call (counted in nfs_handle_rpcs; libnfs's
# calls by path, before, were not).
ln "$m/keep" "$m/keep2"
mkfifo "$m/fifo"
mknod "$m/cdev" c 259 70000
python3 -c 'import os, sys; os.mknod(sys.argv[1], 0o640)' "$m/node"
: >"$o/taken"
python3 -c '
import os, sys
try:
    os.mknod(sys.argv[1], 0o640 | 0o10000)
except FileExistsError:
    sys.exit(0)
sys.exit("mknod of a taken name succeeded")' "$m/taken" || fail "mknod over taken"
[[ $(stat -c %h "$o/keep") == 2 ]] || fail "keep's links on the server: $(stat -c %h "$o/keep")"
[[ $(stat -c %F "$o/fifo") == fifo ]] || fail "fifo on the server: $(stat -c %F "$o/fifo")"
[[ $(stat -c '%F %t %T' "$o/cdev") == "character special file 103 11170" ]] ||
	fail "cdev on the server: $(stat -c '%F %t %T' "$o/cdev")"
[[ $(stat -c '%F %a' "$o/node") == "regular empty file 640" ]] ||
	fail "node on the server: $(stat -c '%F %a' "$o/node")"
ln -s keep "$m/sl"
stat "$m/sl" >/dev/null
calls() { # calls FILE CMD...: the raw calls CMD makes, between two stats files, into FILE
	local before after
	stats_next "$WORK/stats" || fail "no stats file written"
	before=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
	"${@:2}" >/dev/null
	stats_next "$WORK/stats" || fail "no stats file written"
	after=$(nfs_stat "$WORK/stats" nfs_handle_rpcs)
	echo $((after - before)) >"$1"
}
[[ $(readlink "$m/sl") == keep ]] || fail "readlink sl: $(readlink "$m/sl")"
[[ $(stat -f -c %l "$m") == 255 ]] || fail "statfs name_max $(stat -f -c %l "$m")"
calls "$WORK/rl" readlink "$m/sl"
calls "$WORK/sf" stat -f "$m"
rl=$(cat "$WORK/rl") sf=$(cat "$WORK/sf")
echo "link, mknod, readlink, statfs on handles: a readlink $rl raw call(s), a statfs $sf"
[[ $rl -ge 1 && $sf -ge 1 ]] || fail "readlink $rl, statfs $sf raw calls"
ufs_unmount other "$WORK/other"
ufs_unmount h "$WORK/mnt"
echo PASS
