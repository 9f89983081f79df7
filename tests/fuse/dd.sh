#!/usr/bin/env bash
# dd of 512 MiB with conv=fsync through a mount whose root domain is 16 MiB:
# it completes, the backing file is the source byte for byte (read through
# the mount and, after unmount, directly), and the root domain's peak charge
# never passed 16 MiB.
source "$(dirname "$0")/common.sh"

MAX=$((16 << 20))
dd if=/dev/urandom of="$WORK/src" bs=1M count=512 iflag=fullblock status=none
src_sum=$(sha256sum <"$WORK/src")

ufs_mount dd "$WORK/backing" "$WORK/mnt" --max 16M --stats "$WORK/stats"
dd if="$WORK/src" of="$WORK/mnt/f" bs=1M conv=fsync 2>"$WORK/dd.out" || { cat "$WORK/dd.out"; fail "dd"; }
echo "dd 512 MiB, conv=fsync, through a 16 MiB root domain: $(dd_rate "$WORK/dd.out")"
[[ $(sha256sum <"$WORK/mnt/f") == "$src_sum" ]] || fail "read through the mount differs"
ufs_unmount dd "$WORK/mnt"
[[ $(sha256sum <"$WORK/backing/f") == "$src_sum" ]] || fail "the backing file differs"

peak=$(stat_of "$WORK/stats" / peak_charged)
enomem=$(stat_of "$WORK/stats" / enomem)
charged=$(stat_of "$WORK/stats" / charged)
echo "root domain: peak charged $peak of max $MAX, enomem $enomem, charged at exit $charged"
[[ -n $peak && $peak -gt 0 && $peak -le $MAX ]] || fail "peak charged $peak"
[[ $enomem -eq 0 ]] || fail "enomem $enomem"
echo PASS
