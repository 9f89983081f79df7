#!/usr/bin/env bash
# fio with verify=crc32c: a sequential writer (1 MiB blocks) and a random
# writer (4 KiB to 200 KiB blocks at 4 KiB offsets: most writes cover part
# of a chunk, so chunks are filled from the backing file first) on 96 MiB
# files each, through a 32 MiB root domain, so that cached chunks are
# evicted and read back from the backing file. fio reads everything back
# and checks it; after unmount, the backing files must hold what was read
# through the mount.
source "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "no fio (Debian: fio)"

cat >"$WORK/job.fio" <<JOB
[global]
directory=$WORK/mnt
ioengine=psync
size=96m
verify=crc32c
verify_fatal=1
do_verify=1
fallocate=none
end_fsync=1
verify_state_save=0
randseed=20240601

[seq]
rw=write
bs=1m

[rand]
rw=randwrite
bsrange=4k-200k
JOB

ufs_mount fio "$WORK/backing" "$WORK/mnt" --max 32M --stats "$WORK/stats"
(cd "$WORK" && fio job.fio) >"$WORK/fio.out" 2>&1 || { cat "$WORK/fio.out"; fail "fio"; }
grep -E "^ *(write|read):|err=" "$WORK/fio.out"
grep -qi "verify.*fail\|bad magic\|crc32c.*wanted" "$WORK/fio.out" && fail "verification errors"
sums=$(cd "$WORK/mnt" && sha256sum seq.0.0 rand.0.0)
ufs_unmount fio "$WORK/mnt"
peak=$(stat_of "$WORK/stats" / peak_charged)
echo "root domain: peak charged $peak of $((32 << 20))"
[[ $peak -le $((32 << 20)) ]] || fail "peak charged $peak"
[[ $(cd "$WORK/backing" && sha256sum seq.0.0 rand.0.0) == "$sums" ]] ||
	fail "the backing files differ from what was read through the mount"
echo PASS
