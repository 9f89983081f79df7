#!/usr/bin/env bash
# Truncate, rename and unlink keep the cache coherent: the same sequence of
# operations runs in the mount (a 16 MiB root domain, so chunks are written
# back and evicted meanwhile) and in a plain directory, and the two trees
# must read the same, through the mount and, after unmount, in the backing
# directory. The data is cached in 128 KiB chunks: the offsets below fall
# inside chunks, on their edges and past them.
source "$(dirname "$0")/common.sh"

head -c 8M /dev/urandom >"$WORK/blob"

ops() {
	local d=$1
	# Truncate down inside a chunk, then up past the old end (zeros), then
	# write inside the hole.
	head -c 1M "$WORK/blob" >"$d/trunc"
	truncate -s 300000 "$d/trunc"
	truncate -s 2M "$d/trunc"
	dd if="$WORK/blob" of="$d/trunc" bs=1 count=5000 seek=1572000 skip=7 conv=notrunc status=none
	# Truncate to zero through an open descriptor that keeps writing.
	exec 5<>"$d/trunc0"
	head -c 700000 "$WORK/blob" >&5
	truncate -s 0 "$d/trunc0"
	head -c 1000 "$WORK/blob" >&5 # at offset 700000: a hole before it
	exec 5>&-
	# Rename, then append to the new name.
	head -c 3M "$WORK/blob" >"$d/old"
	mv "$d/old" "$d/new"
	head -c 77777 "$WORK/blob" >>"$d/new"
	# Rename over an existing file that holds cached data of its own.
	head -c 2M "$WORK/blob" >"$d/target"
	tail -c 1M "$WORK/blob" >"$d/source"
	mv "$d/source" "$d/target"
	# Unlink while open: writes go on to the open file, which then goes.
	exec 6>"$d/gone"
	head -c 500000 "$WORK/blob" >&6
	rm "$d/gone"
	head -c 500000 "$WORK/blob" >&6
	exec 6>&-
	# A file recreated under an unlinked name starts empty.
	head -c 400000 "$WORK/blob" >"$d/again"
	rm "$d/again"
	head -c 1000 "$WORK/blob" >"$d/again"
	# Overwrite in the middle of cached data, across a chunk edge.
	head -c 1M "$WORK/blob" >"$d/over"
	dd if=/dev/zero of="$d/over" bs=1 count=10000 seek=126000 conv=notrunc status=none
}

mkdir -p "$WORK/ref"
ops "$WORK/ref"
ufs_mount coh "$WORK/backing" "$WORK/mnt" --max 16M --stats "$WORK/stats"
ops "$WORK/mnt"
diff -r "$WORK/ref" "$WORK/mnt" || fail "the mount differs from the plain directory"
[[ ! -e "$WORK/mnt/gone" && ! -e "$WORK/mnt/old" && ! -e "$WORK/mnt/source" ]] ||
	fail "a removed name is still there"
# A write-only descriptor's writes skip the kernel's page cache (direct
# I/O): another descriptor's cached pages of the same range are not read
# again after it.
python3 - "$WORK/mnt/direct" <<'PY' || fail "a read after a write-only descriptor's write is stale"
import os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"a" * 300000)
r = os.open(p, os.O_RDONLY)
assert os.pread(r, 300000, 0) == b"a" * 300000  # in the kernel's page cache now
w = os.open(p, os.O_WRONLY)
os.pwrite(w, b"b" * 200000, 50000)
assert os.pread(r, 300000, 0) == b"a" * 50000 + b"b" * 200000 + b"a" * 50000, "stale read"
os.close(w)
os.close(r)
PY
rm "$WORK/mnt/direct"
ufs_unmount coh "$WORK/mnt"
diff -r "$WORK/ref" "$WORK/backing" || fail "the backing directory differs after unmount"
[[ $(stat_of "$WORK/stats" / peak_charged) -le $((16 << 20)) ]] || fail "peak charged"
echo PASS
