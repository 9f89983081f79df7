#!/usr/bin/env bash
# POSIX as the backing filesystem does it: creation modes under the
# caller's umask, ownership of what a user creates, the kernel's permission
# checks (EACCES/EPERM where the backing directory gives them, run as an
# unprivileged user), times and blocks of cached writes, the times that
# rename, link, unlink, truncate and chmod change, -V, and the exit status
# after a clean SIGTERM unmount.
. "$(dirname "$0")/common.sh"

command -v setpriv >/dev/null || skip "no setpriv (util-linux)"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

B=$WORK/backing
M=$WORK/mnt
R=$WORK/ref # the same operations on a plain directory
mkdir -p "$B" "$R"
chmod 755 "$WORK"
ufs_mount main "$B" "$M" --max 64M -o allow_other
errors=0
bad() {
	echo "FAIL: $*" >&2
	errors=$((errors + 1))
}

# -V / --version print the version and exit 0.
for v in -V --version; do
	out=$("$UFS" "$v" 2>&1) || bad "$v exited $?: $out"
	grep -q "libunstable" <<<"$out" || bad "$v printed '$out'"
done
# --help lists -h and -f once each and names allow_other.
help=$("$UFS" --help 2>&1)
[[ $(grep -cE '^ +-h[, ]' <<<"$help") -eq 1 ]] || bad "--help lists -h $(grep -cE '^ +-h[, ]' <<<"$help") times"
[[ $(grep -cE '^ +-f ' <<<"$help") -eq 1 ]] || bad "--help lists -f $(grep -cE '^ +-f ' <<<"$help") times"
grep -q allow_other <<<"$help" || bad "--help does not mention allow_other"

# umask 000: a file created with mode 0666 gets 0666, a directory 0777.
for d in "$M" "$R"; do
	(umask 000 && touch "$d/u666" && mkdir "$d/u777")
done
[[ $(stat -c %a "$M/u666") == $(stat -c %a "$R/u666") ]] ||
	bad "umask 000: file mode $(stat -c %a "$M/u666"), backing directory gives $(stat -c %a "$R/u666")"
[[ $(stat -c %a "$M/u777") == $(stat -c %a "$R/u777") ]] ||
	bad "umask 000: directory mode $(stat -c %a "$M/u777"), backing directory gives $(stat -c %a "$R/u777")"

# A user's file, directory, node and symlink belong to that user, who can
# chmod them; a non-owner gets what the backing directory gives.
for d in "$M" "$R"; do
	mkdir -p "$d/pub" && chmod 1777 "$d/pub"
	echo root >"$d/pub/rootfile" && chmod 644 "$d/pub/rootfile"
	"${NOBODY[@]}" sh -c "umask 022; echo x >'$d/pub/mine' && mkdir '$d/pub/mydir' &&
		mkfifo '$d/pub/myfifo' && ln -s mine '$d/pub/mylink'" ||
		bad "uid 65534 could not create in $d/pub"
done
for f in mine mydir myfifo mylink; do
	want=$(stat -c '%u:%g %F' "$R/pub/$f")
	got=$(stat -c '%u:%g %F' "$M/pub/$f" 2>&1)
	[[ $got == "$want" ]] || bad "$f created by uid 65534: $got, backing directory gives $want"
	[[ $(stat -c "%u:%g" "$B/pub/$f" 2>&1) == "65534:65534" ]] ||
		bad "$f in the backing directory is owned by $(stat -c '%u:%g' "$B/pub/$f")"
done
for d in "$M" "$R"; do
	"${NOBODY[@]}" chmod 600 "$d/pub/mine" 2>"$WORK/chmod.err" ||
		bad "uid 65534 cannot chmod its own file in $d: $(cat "$WORK/chmod.err")"
done
[[ $(stat -c %a "$M/pub/mine") == 600 ]] || bad "chmod 600 by the owner gave $(stat -c %a "$M/pub/mine")"
# Non-owner cases: the error (or success) must match the backing directory.
nonowner() { # what, then a command with @ for the directory
	local what=$1 cmd=$2 rm rr
	rm=$("${NOBODY[@]}" sh -c "${cmd//@/$M/pub}" 2>&1 >/dev/null; echo "rc=$?")
	rr=$("${NOBODY[@]}" sh -c "${cmd//@/$R/pub}" 2>&1 >/dev/null; echo "rc=$?")
	rm=${rm//$M\/pub/@}
	rr=${rr//$R\/pub/@}
	[[ $rm == "$rr" ]] || bad "non-owner $what: mount '$rm', backing directory '$rr'"
}
nonowner "chmod" "chmod 666 @/rootfile"
nonowner "write" "echo y >>@/rootfile"
nonowner "chown" "chown 65534 @/rootfile"
nonowner "unlink (sticky)" "rm -f @/rootfile"
nonowner "rename (sticky)" "mv @/rootfile @/moved"
nonowner "truncate" "truncate -s 0 @/rootfile"

# A write by a non-owner clears set-user-ID and set-group-ID: appending
# (through the kernel's page cache) and through a write-only descriptor
# (direct I/O: the kernel leaves it to the filesystem).
for how in ">>@" "| dd of=@ conv=notrunc status=none"; do
	for d in "$M" "$R"; do
		echo s >"$d/pub/suid" && chmod 6777 "$d/pub/suid"
		"${NOBODY[@]}" sh -c "echo more ${how//@/$d/pub/suid}"
	done
	[[ $(stat -c %a "$M/pub/suid") == $(stat -c %a "$R/pub/suid") ]] ||
		bad "write ($how) by a non-owner left mode $(stat -c %a "$M/pub/suid"), backing directory gives $(stat -c %a "$R/pub/suid")"
done

# And again after the owner sets it back while the writer's descriptor
# stays open: each write by a non-owner takes it away, not only the first.
# (The system's python3: one under root's home is not the other user's.)
if [[ -x /usr/bin/python3 ]]; then
	echo s >"$M/pub/suid2" && chmod 777 "$M/pub/suid2"
	mkfifo -m 666 "$WORK/wrote" "$WORK/go"
	"${NOBODY[@]}" timeout 20 /usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"a")
open(sys.argv[2], "w").write("1")
open(sys.argv[3]).read()
os.pwrite(fd, b"b", 1)
' "$M/pub/suid2" "$WORK/wrote" "$WORK/go" &
	writer=$!
	timeout 20 cat "$WORK/wrote" >/dev/null
	chmod 4777 "$M/pub/suid2"
	timeout 20 sh -c "echo go >'$WORK/go'"
	wait "$writer" || bad "the writer of suid2 failed"
	[[ $(stat -c %a "$M/pub/suid2") == 777 ]] ||
		bad "a second write through one descriptor, after chmod 4777, left mode $(stat -c %a "$M/pub/suid2")"
fi

# mknod passes through.
mknod "$M/null" c 1 3 && [[ $(stat -c %t:%T "$M/null") == 1:3 ]] || bad "mknod c 1 3"
mkfifo "$M/fifo" && [[ -p $B/fifo ]] || bad "mkfifo"

# A cached write shows its mtime/ctime, size and blocks at once (the file
# stays open: a close writes back); an open, unlinked file has nlink 0.
echo old >"$M/times"
touch -d '2001-01-01 00:00:00' "$M/times"
before=$(date +%s)
command -v python3 >/dev/null || skip "no python3"
python3 - "$M" "$before" "$B" <<'PY' || bad "cached attributes (above)"
import os, sys
m, before, backing = sys.argv[1], int(sys.argv[2]), sys.argv[3]
bad = []
fd = os.open(m + "/times", os.O_RDWR)
os.pwrite(fd, b"\0" * 262144, 0)
st = os.stat(m + "/times")
if st.st_mtime < before: bad.append("mtime after a cached write: %d" % st.st_mtime)
if st.st_ctime < before: bad.append("ctime after a cached write: %d" % st.st_ctime)
if st.st_size != 262144: bad.append("size after a cached write: %d" % st.st_size)
if st.st_blocks < 512: bad.append("st_blocks after 256 KiB cached: %d" % st.st_blocks)
os.close(fd)
fd = os.open(m + "/times2", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"y", 10)
os.utime(m + "/times2", (978307200, 978307200))
st = os.stat(m + "/times2")
if st.st_mtime != 978307200: bad.append("utime after a cached write: mtime %d" % st.st_mtime)
os.close(fd)
# Closed: the file keeps the write's mtime exactly, through the mount at
# once and in the backing directory once its write-back is done (the close
# only starts it; the reaper then gives the backing file the write's time,
# within a round of 100 ms: looked at for 5 s). Without it the backing file
# has the time of the write-back's own pwrite, taken from the kernel's
# coarse clock, which never equals the write's fine one.
import time
fd = os.open(m + "/times3", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"z" * 200000, 0)
wrote = os.stat(m + "/times3").st_mtime_ns
os.close(fd)
for where, path in (("through the mount", m + "/times3"), ("in the backing directory", backing + "/times3")):
    until = time.monotonic() + (5 if path.startswith(backing) else 0)
    while True:
        got = os.stat(path).st_mtime_ns
        if got == wrote or time.monotonic() >= until:
            break
        time.sleep(0.02)
    if got != wrote:
        bad.append("mtime %s after close: %d ns from the write's" % (where, got - wrote))
# No --xattr: ENOSYS to the kernel, which then stops asking for
# security.capability before each write; callers get EOPNOTSUPP.
try:
    os.getxattr(m + "/times", "security.capability")
    bad.append("getxattr security.capability succeeded")
except OSError as e:
    if e.errno != 95: bad.append("getxattr security.capability: %s, not EOPNOTSUPP" % e)
fd = os.open(m + "/gone", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 1000)
os.unlink(m + "/gone")
try:
    st = os.fstat(fd)
    if st.st_nlink != 0: bad.append("fstat of an open, unlinked file: nlink %d" % st.st_nlink)
    if st.st_size != 1000: bad.append("fstat of an open, unlinked file: size %d" % st.st_size)
    os.fchmod(fd, 0o600)
    os.ftruncate(fd, 300)
    os.write(fd, b"y" * 10)
    st = os.fstat(fd)
    if st.st_mode & 0o777 != 0o600: bad.append("fchmod of an open, unlinked file: mode %o" % st.st_mode)
    if st.st_size != 1010: bad.append("an open, unlinked file after ftruncate and a write: size %d" % st.st_size)
    if os.pread(fd, 10, 295) != b"x" * 5 + b"\0" * 5: bad.append("read of an open, unlinked file after ftruncate")
except OSError as e:
    bad.append("an open, unlinked file: %s" % e)
for where in (m, backing):
    if any(n.startswith(".fuse_hidden") for n in os.listdir(where)):
        bad.append("a hidden file in %s: %s" % (where, os.listdir(where)))
os.close(fd)
for where in (m, backing):
    if any(n.startswith(".fuse_hidden") or n == "gone" for n in os.listdir(where)):
        bad.append("left after the last close in %s: %s" % (where, os.listdir(where)))
# Two names of one file: what one changes, the other shows at once (the
# kernel keeps attributes for a second, and each name is its own kernel
# inode): link count, mode, size, times, data.
a, b2 = m + "/hl_a", m + "/hl_b"
fd = os.open(a, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x" * 1000)
os.close(fd)
os.stat(a)
os.link(a, b2)
def same(what, got, want):
    if got != want: bad.append("hard link, %s: %r, not %r" % (what, got, want))
same("nlink of the source after link", os.stat(a).st_nlink, 2)
os.stat(b2)
os.chmod(a, 0o600)
same("mode through the other name after chmod", os.stat(b2).st_mode & 0o777, 0o600)
os.truncate(a, 500)
same("size through the other name after truncate", os.stat(b2).st_size, 500)
os.utime(a, (1000000000, 1000000000))
same("mtime through the other name after utime", os.stat(b2).st_mtime, 1000000000)
fa = os.open(a, os.O_RDWR)
os.pwrite(fa, b"new", 0)
fb = os.open(b2, os.O_RDWR)
same("data read through the other name", os.pread(fb, 3, 0), b"new")
try:
    import mmap
    mm = mmap.mmap(fb, 3, mmap.MAP_SHARED)
    same("a shared mmap through the other name", mm[:3], b"new")
    mm.close()
except OSError as e:
    bad.append("hard link, a shared mmap: %s" % e)
os.fchmod(fa, 0o640)
same("mode through the other name after fchmod", os.stat(b2).st_mode & 0o777, 0o640)
os.ftruncate(fa, 5)
same("size through the other name after ftruncate", os.stat(b2).st_size, 5)
os.close(fa)
os.close(fb)
os.unlink(a)
same("nlink of the other name after unlink", os.stat(b2).st_nlink, 1)
os.unlink(b2)
for b in bad: print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# A file with a dirty shared mapping, linked, then truncated through a
# descriptor while it has two names: the kernel writes the mapping out
# while the other names are invalidated, which needs requests answered
# meanwhile (a deadlock before, in both).
timeout 60 python3 - "$M" <<'PY' || bad "link and ftruncate of a file with a dirty shared mapping (above; 124: hung)"
import mmap, os, sys
m = sys.argv[1]
a, b = m + "/mm_a", m + "/mm_b"
fd = os.open(a, os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, 16384)
mm = mmap.mmap(fd, 16384, mmap.MAP_SHARED)
mm[0:1] = b"x"
os.link(a, b)
mm[4096:4097] = b"y"
os.stat(b)
os.ftruncate(fd, 4096)
mm.close()
os.close(fd)
fd = os.open(b, os.O_RDONLY)
st = os.fstat(fd)
data = os.pread(fd, 2, 0)
os.close(fd)
os.unlink(a)
os.unlink(b)
if st.st_size != 4096 or data != b"x\0":
    print("FAIL: after the link and ftruncate: size %d, data %r" % (st.st_size, data), file=sys.stderr)
    sys.exit(1)
PY

# rename, link, unlink, truncate, chmod and writes move a file's ctime and
# mtime as on the backing directory, at once (a file with cached writes
# open meanwhile, and one without): the same sequence in both, each step's
# direction of change (+ later, = same) compared.
times_of() {
	python3 - "$1" "$2" <<'PY'
import os, sys
d = sys.argv[1]
out = []
raw = open(sys.argv[2], "w")
probe = d + "/tick"
open(probe, "w").close()
def tick():
    # Until the filesystem's own clock has moved (its ctime granularity):
    # no fixed sleep.
    os.utime(probe)
    t0 = os.stat(probe).st_ctime_ns
    while os.stat(probe).st_ctime_ns == t0:
        os.utime(probe)
for cached in (True, False):
    f, g, h = (d + "/t%s%d" % (n, cached) for n in "fgh")
    fd = os.open(f, os.O_CREAT | os.O_RDWR, 0o644)
    if cached:
        os.write(fd, b"x" * 5000)
    prev = os.stat(f)
    def step(name, op, path):
        global prev
        tick()
        op()
        st = os.stat(path)
        c = lambda a, b: "+" if b > a else ("=" if b == a else "-")
        out.append("%s:%s%s" % (name, c(prev.st_mtime_ns, st.st_mtime_ns), c(prev.st_ctime_ns, st.st_ctime_ns)))
        print(name, cached, "mtime", st.st_mtime_ns, "ctime", st.st_ctime_ns, file=raw)
        prev = st
    step("write", lambda: os.pwrite(fd, b"y" * 100, 10), f)
    step("rename", lambda: os.rename(f, g), g)
    step("link", lambda: os.link(g, h), g)
    step("unlink", lambda: os.unlink(h), g)
    step("truncate", lambda: os.truncate(g, 100), g)
    step("chmod", lambda: os.chmod(g, 0o600), g)
    os.close(fd)
os.unlink(probe)
print(" ".join(out))
PY
}
mt=$(times_of "$M" "$WORK/times.m") rt=$(times_of "$R" "$WORK/times.r")
echo "times (mtime ctime per step): mount $mt"
if [[ $mt != "$rt" ]]; then
	bad "times through the mount: $mt; the backing directory's: $rt"
	echo "the mount's (ns):"; cat "$WORK/times.m"
	echo "the backing directory's (ns):"; cat "$WORK/times.r"
fi

# SIGTERM: a clean unmount that wrote everything back exits 0.
kill -TERM "$UFS_PID_main"
rc=0
wait "$UFS_PID_main" || rc=$?
[[ $rc -eq 0 ]] || bad "the daemon exited $rc after SIGTERM"
[[ $(stat -c %Y "$B/times") -ge $before ]] || bad "the backing file's mtime after write-back: $(stat -c %y "$B/times")"
[[ $(stat -c %s "$B/times") -eq 262144 ]] || bad "the backing file's size: $(stat -c %s "$B/times")"

[[ $errors -eq 0 ]] || fail "$errors failures"
echo PASS
