#!/usr/bin/env bash
# fio with verify=crc32c through the NFS backend: 4 jobs, two sequential
# writers (1 MiB blocks) and two random writers (4 KiB to 200 KiB blocks at
# 4 KiB offsets: most writes cover part of a chunk, which is first read
# from the server with READ3), 64 MiB files each, through a 32 MiB max, so
# that cached chunks are evicted and read back from the server. fio reads
# everything back and checks it; after unmount, the exported files hold
# what was read through the mount.
source "$(dirname "$0")/common.sh"
command -v fio >/dev/null || skip "no fio (Debian: fio)"

cat >"$WORK/job.fio" <<JOB
[global]
directory=$WORK/mnt
ioengine=psync
size=64m
verify=crc32c
verify_fatal=1
do_verify=1
fallocate=none
end_fsync=1
verify_state_save=0
randseed=20240601
numjobs=2

[seq]
rw=write
bs=1m

[rand]
rw=randwrite
bsrange=4k-200k
JOB

nfs_server_start "$WORK/export"
nfs_mount fio "$WORK/mnt" --max 32M --stats "$WORK/stats"
(cd "$WORK" && fio job.fio) >"$WORK/fio.out" 2>&1 || { cat "$WORK/fio.out"; fail "fio"; }
grep -E "^ *(write|read):|err=" "$WORK/fio.out"
grep -qi "verify.*fail\|bad magic\|crc32c.*wanted" "$WORK/fio.out" && fail "verification errors"
files="seq.0.0 seq.1.0 rand.0.0 rand.1.0"
sums=$(cd "$WORK/mnt" && sha256sum $files)
ufs_unmount fio "$WORK/mnt"
peak=$(stat_of "$WORK/stats" / peak_charged)
reads=$(nfs_stat "$WORK/stats" nfs_reads)
echo "root domain: peak charged $peak of $((32 << 20)); READ3 $reads"
[[ $peak -le $((32 << 20)) ]] || fail "peak charged $peak"
[[ $reads -gt 0 ]] || fail "nothing was read from the server"
[[ $(cd "$WORK/export" && sha256sum $files) == "$sums" ]] ||
	fail "the exported files differ from what was read through the mount"
echo PASS
