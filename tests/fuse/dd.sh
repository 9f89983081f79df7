#!/usr/bin/env bash
# dd of 512 MiB with conv=fsync through a mount whose root domain is 16 MiB:
# it completes, the backing file is the source byte for byte (read through
# the mount and, after unmount, directly), and the root domain's peak charge
# never passed 16 MiB.
#
# Then 256 MiB through a 1 GiB max, --dirty-max 32M and --clean-max 8M: the
# writer drops clean chunks behind, so the cache stays near 8 + 32 MiB
# instead of keeping the whole file, and the file is intact; with
# --clean-max max nothing is dropped and the cache keeps it all. Then
# page-sized writes into clean chunks: only those pages are written back.
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

src256_sum=$(head -c 256M "$WORK/src" | sha256sum)
for clean in 8M max; do
	rm -f "$WORK/backing/g"
	ufs_mount big "$WORK/backing" "$WORK/mnt" --max 1G --dirty-max 32M --clean-max $clean \
		--stats "$WORK/stats.$clean"
	dd if="$WORK/src" of="$WORK/mnt/g" bs=1M count=256 conv=fsync 2>"$WORK/dd.out" ||
		{ cat "$WORK/dd.out"; fail "dd with --clean-max $clean"; }
	[[ $(sha256sum <"$WORK/mnt/g") == "$src256_sum" ]] || fail "--clean-max $clean: read differs"
	ufs_unmount big "$WORK/mnt"
	[[ $(sha256sum <"$WORK/backing/g") == "$src256_sum" ]] || fail "--clean-max $clean: backing differs"
	peak=$(stat_of "$WORK/stats.$clean" / peak_charged)
	drops=$(awk '$1 == "dropped_behind" { print $2 }' "$WORK/stats.$clean")
	echo "256 MiB through a 1 GiB max, --clean-max $clean: $(dd_rate "$WORK/dd.out"), peak charged $((peak >> 20)) MiB, $drops chunks dropped behind"
	if [[ $clean == max ]]; then
		[[ $drops -eq 0 && $peak -ge $((256 << 20)) ]] || fail "--clean-max max: dropped $drops, peak $peak"
	else
		[[ $drops -gt 1000 && $peak -le $((64 << 20)) ]] || fail "--clean-max 8M: dropped $drops, peak $peak"
	fi
done

# 4 KiB writes into chunks that were clean: only their pages are written
# back. 100 writes, each one page at 8 KiB into its own chunk of g (written
# and committed above), fsync: the backend wrote 100 ranges of 4 KiB alone,
# and the file is the source with the 100 pages replaced.
ufs_mount pages "$WORK/backing" "$WORK/mnt" --max 64M --stats "$WORK/stats.pages"
python3 - "$WORK/mnt/g" "$WORK/src" "$WORK/model" <<'PY' || fail "page writes"
import os, sys
g, src, model = sys.argv[1:]
data = bytearray(open(src, "rb").read(256 << 20))
fd = os.open(g, os.O_RDWR)
for i in range(100):
    off = i * 131072 * 2 + 8192
    page = bytes([i + 1]) * 4096
    os.pwrite(fd, page, off)
    data[off:off + 4096] = page
os.fsync(fd)
os.close(fd)
open(model, "wb").write(data)
PY
ufs_unmount pages "$WORK/mnt"
cmp "$WORK/backing/g" "$WORK/model" || fail "the backing file after the page writes differs"
ranges=$(awk '$1 == "page_ranges" { print $2 }' "$WORK/stats.pages")
bytes=$(awk '$1 == "page_bytes" { print $2 }' "$WORK/stats.pages")
echo "100 writes of 4 KiB into clean chunks: $ranges ranges, $bytes bytes written back alone"
[[ $ranges -eq 100 && $bytes -eq $((100 * 4096)) ]] || fail "page write-back: $ranges ranges, $bytes bytes"
echo PASS
