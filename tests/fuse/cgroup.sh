#!/usr/bin/env bash
# --domain-by cgroup: the dd of dd.sh (512 MiB, conv=fsync) run inside a memory
# cgroup of 32 MiB (made by the test, v1 or v2). Its files get a domain of
# their own whose max is 50 % of the cgroup's limit (16 MiB) and follows the
# limit when it changes; the writer is not OOM-killed, its domain never
# passes its max, and the data arrives whole.
source "$(dirname "$0")/common.sh"
cg_setup

LIMIT=$((32 << 20))
dd if=/dev/urandom of="$WORK/src" bs=1M count=512 iflag=fullblock status=none
src_sum=$(sha256sum <"$WORK/src")
cg_create writer $LIMIT
cg=$CG_DIR
echo "memory cgroup v$CG_VERSION: $cg, limit $LIMIT"

ufs_mount cg "$WORK/backing" "$WORK/mnt" --max 256M --domain-by cgroup --stats "$WORK/stats"
rc=0
cg_run "$cg" dd if="$WORK/src" of="$WORK/mnt/f" bs=1M conv=fsync 2>"$WORK/dd.out" || rc=$?
cat "$WORK/dd.out"
kills=$(cg_oom_kills "$cg")
[[ $rc -eq 0 ]] || fail "dd in the cgroup exited with $rc (OOM kills: $kills)"
[[ $kills -eq 0 ]] || fail "$kills OOM kills in the cgroup"
echo "dd 512 MiB, conv=fsync, in a 32 MiB memory cgroup: $(dd_rate "$WORK/dd.out")"

sleep 1.5 # the stats file is rewritten every second
max=$(stat_of "$WORK/stats" "$cg" limit_max)
peak=$(stat_of "$WORK/stats" "$cg" peak_charged)
echo "cgroup domain: max $max, peak charged $peak"
[[ $max -eq $((LIMIT / 2)) ]] || fail "the domain's max is $max, not half of $LIMIT"
[[ -n $peak && $peak -gt 0 && $peak -le $max ]] || fail "peak charged $peak"

# The domain follows the cgroup's limit.
cg_limit "$cg" $((2 * LIMIT))
sleep 2.5
max=$(stat_of "$WORK/stats" "$cg" limit_max)
echo "after the cgroup's limit became $((2 * LIMIT)): domain max $max"
[[ $max -eq $LIMIT ]] || fail "the domain's max did not follow the cgroup: $max"

ufs_unmount cg "$WORK/mnt"
[[ $(sha256sum <"$WORK/backing/f") == "$src_sum" ]] || fail "the backing file differs"
[[ $(stat_of "$WORK/stats" / enomem) -eq 0 ]] || fail "ENOMEM"
echo PASS
