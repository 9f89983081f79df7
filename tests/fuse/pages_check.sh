# The partial-write checks of tests/fuse/pages.sh and tests/nfs/pages.sh,
# sourced after the backend's common.sh with:
#
#   BACKING    where the backend keeps the files (the backing directory,
#              the NFS export), written here directly as the "server side"
#   mount_it   a function: mount_it NAME [unstable-fuse options...] mounts
#              the backend on $WORK/mnt; unmount_it NAME undoes it
#   PAGE_KEY   the stats line that counts writes of some pages of a chunk
#              (page_ranges, nfs_page_writes)
#
# A file of 4 MiB of random data is laid out in BACKING, then, through the
# mount (nothing of it cached):
#
#   1. 300 writes of 4 KiB at random page-aligned offsets, and reads of the
#      whole file through a second descriptor while they are cached (cached
#      chunks then hold some valid pages among pages never read): the cache
#      must read nothing from the backend for them (fill_bytes 0), write
#      them back as pages, and every read equal the model;
#   2. writes that cover pages in part (a byte, 100 bytes across a page
#      boundary, the last page of the file, a write past the end): exactly
#      the pages covered in part and inside the file are read (fill_bytes);
#   3. after each unmount, BACKING holds the model, byte for byte.
#
# The model is the same writes done on a copy of the file.

pages_write() { # MODE FILE MODEL: the writes of phase MODE
	python3 - "$@" <<'PY'
import os, random, sys
mode, path, model = sys.argv[1:4]
rng = random.Random(20261204)
fd = os.open(path, os.O_RDWR)
mf = os.open(model, os.O_RDWR)
size = os.fstat(mf).st_size
def both(off, data):
    assert os.pwrite(fd, data, off) == len(data)
    assert os.pwrite(mf, data, off) == len(data)
def check(what):
    # A descriptor of its own: the kernel drops the file's pages at open,
    # so the reads reach the cache.
    rd = os.open(path, os.O_RDONLY)
    got = os.pread(rd, 8 << 20, 0)
    os.close(rd)
    want = os.pread(mf, 8 << 20, 0)
    if got != want:
        bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
            if len(got) == len(want) else min(len(got), len(want))
        sys.exit(f"{what}: read through the mount differs from the model at byte {bad} "
                 f"(lengths {len(got)}, {len(want)})")
if mode == "aligned":
    for i in range(300):
        both(rng.randrange(size // 4096) * 4096, rng.randbytes(4096))
        if i in (0, 7, 99, 299):
            check(f"after {i + 1} page writes")
else:
    # (offset, length): inside one page; across a page boundary (two pages
    # in part); the first byte of a page whose chunk is cached with that
    # page not valid; the file's last page; then past the end.
    writes = [(1 << 20) + 5, 1], [(2 << 20) + 4096 - 50, 100], \
             [(3 << 20) + 8192, 1], [size - 10, 10], [size + 4096 * 3 + 7, 33]
    both((3 << 20), rng.randbytes(4096))  # page-aligned: the chunk, cached
    for off, n in writes:
        both(off, rng.randbytes(n))
    check("after partial-page writes")
os.close(fd)
os.close(mf)
PY
}

fill_of() { awk '$1 == "fill_bytes" { print $2; exit }' "$1"; }
key_of() { awk -v k="$2" '$1 == k { print $2; exit }' "$1"; }

head -c $((4 << 20)) /dev/urandom >"$BACKING/f"
cp "$BACKING/f" "$WORK/model"

mount_it aligned --max 8M --stats "$WORK/stats1"
pages_write aligned "$WORK/mnt/f" "$WORK/model" || fail "page-aligned writes"
unmount_it aligned
cmp "$BACKING/f" "$WORK/model" || fail "after page-aligned writes, the backend's file differs from the model"
fill=$(fill_of "$WORK/stats1") pw=$(key_of "$WORK/stats1" "$PAGE_KEY")
echo "300 page writes into uncached chunks: $fill bytes read for them, $PAGE_KEY $pw"
[[ $fill == 0 ]] || fail "page-aligned writes read $fill bytes from the backend"
[[ ${pw:-0} -gt 0 ]] || fail "no chunk was written back as its pages ($PAGE_KEY ${pw:-none})"

mount_it partial --max 8M --stats "$WORK/stats2"
pages_write partial "$WORK/mnt/f" "$WORK/model" || fail "partial-page writes"
unmount_it partial
cmp "$BACKING/f" "$WORK/model" || fail "after partial-page writes, the backend's file differs from the model"
fill=$(fill_of "$WORK/stats2")
# One page each for the byte, two for the 100 bytes across a boundary, one
# for the byte in the cached chunk, one for the file's last page; nothing
# for the write past the end.
echo "partial-page writes: $fill bytes read (want $((5 * 4096)))"
[[ $fill == $((5 * 4096)) ]] || fail "partial-page writes read $fill bytes, not the 5 pages they cover in part"
