#!/usr/bin/env bash
# NFS semantics a program relies on, through the NFS backend: statfs says
# the server's longest name (255 here: ganesha says 1024 over a filesystem
# that takes 255, and libnfs alone said 256), names of that length work and
# one byte more is ENAMETOOLONG; symbolic links with targets of up to
# PATH_MAX - 1 bytes (libnfs encodes a call into 4 KiB: one of more than
# about 3,900 bytes failed with ENOMEM) read back the same through the mount
# and on the server, and PATH_MAX bytes is ENAMETOOLONG; a file unlinked
# while open stays readable
# and writable through its descriptors (renamed to a hidden name on the
# server, as the Linux NFS client's silly rename) and is gone from the
# server after the last close.
source "$(dirname "$0")/common.sh"

nfs_server_start "$WORK/export"
nfs_mount names "$WORK/mnt" --stats "$WORK/stats"
m=$WORK/mnt

max=$(stat -f -c %l "$m")
[[ $max == 255 ]] || fail "statfs name_max $max, not 255"
n=$(printf 'n%.0s' $(seq "$max"))
touch "$m/$n" || fail "a name of $max bytes refused"
mkdir "$m/d$(printf 'n%.0s' $(seq $((max - 1))))" || fail "a directory name of $max bytes refused"
if out=$(touch "$m/${n}x" 2>&1); then
	fail "a name of $((max + 1)) bytes taken"
fi
[[ $out == *"too long"* ]] || fail "a name of $((max + 1)) bytes: $out (not ENAMETOOLONG)"
echo "names: statfs $max, $max bytes taken, $((max + 1)) refused"

# A target of LEN bytes: components of up to 255 bytes ("xyz.../"), as
# pjdfstest's symlink/03.t makes; 3952 is a multiple of 4 (no XDR padding
# after the string in the reply), 4095 is PATH_MAX - 1.
long_target() {
	python3 -c 'import sys; n = int(sys.argv[1]); c = ("x" * 254 + "/") * (n // 255 + 1); print(c[:n - 1] + "z")' "$1"
}
for len in 100 3952 4095; do
	t=$(long_target "$len")
	[[ ${#t} == "$len" ]] || fail "a target of ${#t} bytes made, not $len"
	ln -s "$t" "$m/link$len" || fail "a symlink of a $len-byte target refused"
	got=$(readlink "$m/link$len") || fail "readlink of a $len-byte target failed"
	[[ $got == "$t" ]] || fail "readlink of a $len-byte target: ${#got} bytes, not the target"
	got=$(readlink "$WORK/export/link$len") || fail "no symlink link$len on the server"
	[[ $got == "$t" ]] || fail "the server holds a ${#got}-byte target for link$len, not the one made"
	size=$(stat -c %s "$m/link$len")
	[[ $size == "$len" ]] || fail "lstat of link$len: size $size, not $len"
done
t=$(long_target 4096)
if out=$(ln -s "$t" "$m/link4096" 2>&1); then
	fail "a symlink of a 4096-byte target taken"
fi
[[ $out == *"too long"* ]] || fail "a symlink of a 4096-byte target: $out (not ENAMETOOLONG)"
[[ ! -e $WORK/export/link4096 && ! -L $WORK/export/link4096 ]] || fail "link4096 made on the server"
echo "symlinks: targets of 100, 3952 and 4095 bytes read back, 4096 refused"

python3 - "$m/open" "$WORK/export" <<'PY' || fail "I/O to an open file after unlink"
import os, sys
p, export = sys.argv[1], sys.argv[2]
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"hello")
os.unlink(p)
assert not os.path.exists(p), "the name is still there"
assert os.pwrite(fd, b" world", 5) == 6
os.fsync(fd)
assert os.pread(fd, 64, 0) == b"hello world", os.pread(fd, 64, 0)
assert os.fstat(fd).st_size == 11
fd2 = os.dup(fd)
os.close(fd)
assert os.pread(fd2, 5, 6) == b"world"
left = [f for f in os.listdir(export) if f.startswith(".fuse_hidden")]
assert len(left) == 1, f"hidden names on the server while open: {left}"
os.close(fd2)
PY
for _ in $(seq 50); do
	ls -A "$WORK/export" | grep -q '^\.fuse_hidden' || break
	sleep 0.1
done
left=$(ls -A "$WORK/export" | grep -c '^\.fuse_hidden' || true)
[[ $left == 0 ]] || fail "$left hidden files left on the server after the last close"
echo "unlinked while open: read, written, synced; removed at the last close"

ufs_unmount names "$WORK/mnt"
echo PASS
