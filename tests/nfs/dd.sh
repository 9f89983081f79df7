#!/usr/bin/env bash
# dd of 512 MiB with conv=fsync through the NFS backend with an 8 MiB max:
# it completes, the exported file is the source byte for byte (read on the
# server's side, and through the mount), the root domain's peak charge
# never passed 8 MiB, and the data went as WRITE3 UNSTABLE with COMMIT3s.
source "$(dirname "$0")/common.sh"

MAX=$((8 << 20))
dd if=/dev/urandom of="$WORK/src" bs=1M count=512 iflag=fullblock status=none
src_sum=$(sha256sum <"$WORK/src")

nfs_server_start "$WORK/export"
nfs_mount dd "$WORK/mnt" --max 8M --stats "$WORK/stats"
dd if="$WORK/src" of="$WORK/mnt/f" bs=1M conv=fsync 2>"$WORK/dd.out" || { cat "$WORK/dd.out"; fail "dd"; }
echo "dd 512 MiB, conv=fsync, NFS backend, 8 MiB max: $(dd_rate "$WORK/dd.out")"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs"
[[ $(sha256sum <"$WORK/mnt/f") == "$src_sum" ]] || fail "read through the mount differs"
ufs_unmount dd "$WORK/mnt"
[[ $(sha256sum <"$WORK/export/f") == "$src_sum" ]] || fail "the exported file differs after unmount"

peak=$(stat_of "$WORK/stats" / peak_charged)
writes=$(nfs_stat "$WORK/stats" nfs_writes)
wbytes=$(nfs_stat "$WORK/stats" nfs_write_bytes)
stable=$(nfs_stat "$WORK/stats" nfs_stable_replies)
commits=$(nfs_stat "$WORK/stats" nfs_commits)
per_file=$(nfs_stat "$WORK/stats" nfs_peak_file_rpcs)
echo "root domain: peak charged $peak of max $MAX; WRITE3 $writes ($wbytes bytes," \
	"$stable answered stable, at most $per_file in flight), COMMIT3 $commits"
[[ -n $peak && $peak -gt 0 && $peak -le $MAX ]] || fail "peak charged $peak"
[[ $wbytes -ge $((512 << 20)) ]] || fail "only $wbytes bytes written"
[[ $commits -ge 1 ]] || fail "no COMMIT3"
# One file: --rpcs (16) caps the mount, 8 WRITE3s of one file at most.
[[ $per_file -ge 1 && $per_file -le 8 ]] || fail "$per_file WRITE3s of one file in flight"
[[ $stable -lt $writes ]] || fail "every write was answered stable: no unstable data"
echo PASS
