#!/usr/bin/env bash
# Partial writes through the directory backend: a write into a chunk that is
# not cached reads nothing from the backing file, save the pages it covers
# only in part; reads of the pages a cached chunk does not hold go to the
# backing file; write-back sends the pages written. The checks are
# tests/fuse/pages_check.sh's, then rewrites while chunks are under
# write-back, with and without --trust-backing.
source "$(dirname "$0")/common.sh"

BACKING=$WORK/backing PAGE_KEY=page_ranges
mkdir -p "$BACKING"
mount_it() { local name=$1; shift; ufs_mount "$name" "$BACKING" "$WORK/mnt" "$@"; }
unmount_it() { ufs_unmount "$1" "$WORK/mnt"; }
source "$(dirname "$0")/pages_check.sh"

# Rewrites while chunks are under write-back: a writer copies into the pages
# of a chunk being written back that are not in flight, and waits for those
# that are. 20,000 writes of 4 KiB at random pages of a 4 MiB file, a page
# at a time and runs of up to 8, through a 1 MiB max (write-back never
# stops); then the backing file equals the model byte for byte.
rewrites() { # NAME STATS [unstable-fuse options...]: the rewrites, then the comparison
	local name=$1 stats=$2
	shift 2
	head -c $((4 << 20)) /dev/urandom >"$BACKING/g"
	cp "$BACKING/g" "$WORK/model_g"
	mount_it "$name" --max 1M --stats "$stats" "$@"
	python3 - "$WORK/mnt/g" "$WORK/model_g" <<'PY' || fail "rewrites under write-back ($name)"
import os, random, sys
rng = random.Random(20261205)
fd, mf = os.open(sys.argv[1], os.O_RDWR), os.open(sys.argv[2], os.O_RDWR)
pages = os.fstat(mf).st_size // 4096
for i in range(20000):
    n = 1 if i % 4 else rng.randrange(1, 9)
    off = rng.randrange(pages - n + 1) * 4096
    data = rng.randbytes(4096 * n)
    assert os.pwrite(fd, data, off) == len(data)
    assert os.pwrite(mf, data, off) == len(data)
os.fsync(fd)
PY
	# After the fsync, before the unmount: the backing file has it all.
	cmp "$BACKING/g" "$WORK/model_g" || fail "after rewrites and fsync ($name), the backend's file differs from the model"
	unmount_it "$name"
	cmp "$BACKING/g" "$WORK/model_g" || fail "after rewrites ($name), the backend's file differs from the model"
	echo "rewrites under write-back ($name): writeback_waits $(key_of "$stats" writeback_waits)," \
		"writeback_passes $(key_of "$stats" writeback_passes), trusted_commits $(key_of "$stats" trusted_commits)"
}
rewrites rewrites "$WORK/stats3"
[[ $(key_of "$WORK/stats3" trusted_commits) == 0 ]] || fail "commits trusted without --trust-backing"
# --trust-backing: the commits that made room (1 MiB for 4 MiB of pages)
# took the backing file's page cache as kept; the fsync still synced.
rewrites trusting "$WORK/stats4" --trust-backing
[[ $(key_of "$WORK/stats4" trusted_commits) -gt 0 ]] || fail "--trust-backing: no commit trusted"
echo PASS
