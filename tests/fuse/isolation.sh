#!/usr/bin/env bash
# Two writers in different domains (--domain-by cgroup): A in a memory
# cgroup of 8 MiB (a 4 MiB domain, throttled hard), B in one of 1 GiB (a
# 512 MiB domain). B writes 512 MiB alone, then again while A writes 256
# MiB; the test reports both rates and B's ratio. Rates are reported, not
# asserted (the two writers share two CPUs and one disk); what is asserted:
# both complete with their data whole, and A's domain reached its max (its
# charges had to reclaim) without ever passing it.
source "$(dirname "$0")/common.sh"
cg_setup

dd if=/dev/urandom of="$WORK/srcA" bs=1M count=256 iflag=fullblock status=none
dd if=/dev/urandom of="$WORK/srcB" bs=1M count=512 iflag=fullblock status=none
cg_create small $((8 << 20))
cgA=$CG_DIR
cg_create large $((1 << 30))
cgB=$CG_DIR

ufs_mount iso "$WORK/backing" "$WORK/mnt" --max 1G --domain-by cgroup --stats "$WORK/stats"
cg_run "$cgB" dd if="$WORK/srcB" of="$WORK/mnt/alone" bs=1M conv=fsync 2>"$WORK/alone.out" ||
	fail "B alone"
cg_run "$cgA" dd if="$WORK/srcA" of="$WORK/mnt/a" bs=1M conv=fsync 2>"$WORK/a.out" &
pidA=$!
cg_run "$cgB" dd if="$WORK/srcB" of="$WORK/mnt/b" bs=1M conv=fsync 2>"$WORK/b.out" || fail "B"
wait $pidA || fail "A"
alone=$(dd_rate "$WORK/alone.out")
rateA=$(dd_rate "$WORK/a.out")
rateB=$(dd_rate "$WORK/b.out")
echo "B alone (512 MiB domain): $alone"
echo "B beside A:               $rateB"
echo "A (4 MiB domain):         $rateA"
awk -v a="${alone% *}" -v b="${rateB% *}" 'BEGIN { printf "B beside A / B alone: %.2f\n", b / a }'

sleep 1.5
maxA=$(stat_of "$WORK/stats" "$cgA" limit_max)
peakA=$(stat_of "$WORK/stats" "$cgA" peak_charged)
maxB=$(stat_of "$WORK/stats" "$cgB" limit_max)
peakB=$(stat_of "$WORK/stats" "$cgB" peak_charged)
echo "A's domain: max $maxA, peak charged $peakA; B's: max $maxB, peak charged $peakB"
evA=$(stat_of "$WORK/stats" "$cgA" max_events)
echo "A's charges that hit its max: $evA"
[[ $maxA -eq $((4 << 20)) && $peakA -le $maxA && $evA -gt 0 ]] || fail "A's domain"
[[ $peakB -le $maxB ]] || fail "B's domain"
ufs_unmount iso "$WORK/mnt"
cmp "$WORK/srcA" "$WORK/backing/a" || fail "A's data"
cmp "$WORK/srcB" "$WORK/backing/b" || fail "B's data"
cmp "$WORK/srcB" "$WORK/backing/alone" || fail "B's first data"
echo PASS
