#!/usr/bin/env bash
# fsx-style random operations (tests/fuse/fsx.c: pwrite, pread, mapped reads
# and writes with msync, ftruncate up and down, fsync, close and reopen) on
# 4 files of up to 3 MiB through a mount whose root domain is 1 MiB, every
# read checked against the program's model; after the unmount the backing
# files must equal the model. The seed is printed; US_FSX_SEED=N reruns it,
# US_FSX_OPS=N sets the number of operations (default 5000).
#
# First, a short run whose model is deliberately corrupted must fail: the
# checks can see wrong data. US_FSX_UFS_ARGS: more unstable-fuse arguments
# (fuse_fsx_buffered: --buffered-writeback, which must then have written no
# run O_DIRECT, where the default must have written some wherever the
# backing filesystem takes O_DIRECT; fuse_fsx_dropbehind: --clean-max 0,
# which must have dropped clean chunks behind; fuse_fsx_chunk4k and
# fuse_fsx_chunk16k: --chunk 4K, chunks of a page, and --chunk 16K, four). Every run must have written chunks written in part as
# their dirty pages alone (but in chunks of one page), in chunks of the size
# asked.
source "$(dirname "$0")/common.sh"

FSX=${US_FSX:-$(dirname "$UFS")/../../tests/us-fuse-fsx}
[[ -x $FSX ]] || fail "no us-fuse-fsx (set US_FSX)"
OPS=${US_FSX_OPS:-5000}
SEED=${US_FSX_SEED:-$(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 ))}
mkdir -p "$WORK/model"

# shellcheck disable=SC2086 # words
ufs_mount fsx "$WORK/backing" "$WORK/mnt" --max 1M --stats "$WORK/stats" ${US_FSX_UFS_ARGS:-}

if "$FSX" "$WORK/mnt" "$WORK/model" -n 400 -s "$SEED" --corrupt-model >"$WORK/corrupt.out" 2>&1; then
	cat "$WORK/corrupt.out"
	fail "a run with a corrupted model passed: the checks see nothing"
fi
grep -q '^FAIL' "$WORK/corrupt.out" || { cat "$WORK/corrupt.out"; fail "the corrupted run did not fail on a check"; }
echo "a corrupted model is caught: $(grep -m1 '^FAIL' "$WORK/corrupt.out")"

start=$SECONDS
"$FSX" "$WORK/mnt" "$WORK/model" -n "$OPS" -s "$SEED" || fail "fsx (seed $SEED; rerun with US_FSX_SEED=$SEED)"
echo "fsx: $OPS operations in $((SECONDS - start)) s"
ufs_unmount fsx "$WORK/mnt"

for m in "$WORK"/model/fsx*; do
	b=$WORK/backing/$(basename "$m")
	cmp "$m" "$b" || fail "backing file $b differs from the model after the unmount (seed $SEED)"
done
peak=$(stat_of "$WORK/stats" / peak_charged)
echo "backing files equal the model; root domain peak charged $peak of max $((1 << 20))"
[[ -n $peak && $peak -le $((1 << 20)) ]] || fail "peak charged $peak"
direct=$(awk '$1 == "direct_runs" { print $2 }' "$WORK/stats")
pages=$(awk '$1 == "page_ranges" { print $2 }' "$WORK/stats")
echo "runs written back O_DIRECT: ${direct:-none}; ranges of dirty pages written alone: ${pages:-none}"
if [[ ${US_FSX_UFS_ARGS:-} == *--buffered-writeback* ]]; then
	[[ ${direct:-0} -eq 0 ]] || fail "--buffered-writeback wrote runs O_DIRECT"
elif dd if=/dev/zero of="$WORK/odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null; then
	[[ ${direct:-0} -gt 0 ]] || fail "no run written O_DIRECT (the default, and $WORK takes O_DIRECT)"
fi
# The chunks' size taken: --chunk's, or the directory backend's 128 KiB.
chunk_check "$WORK/stats" 131072 "${US_FSX_UFS_ARGS:-}"
# Chunks of one page (--chunk 4K) hold a page whole or nothing: none goes
# as part of its pages.
if ((CHUNK == 4096)); then
	[[ ${pages:-0} -eq 0 ]] || fail "chunks of one page written back in part: $pages ranges"
else
	[[ ${pages:-0} -gt 0 ]] || fail "no chunk written in part was written back as its dirty pages"
fi
if [[ ${US_FSX_UFS_ARGS:-} == *--clean-max* ]]; then
	dropped=$(awk '$1 == "dropped_behind" { print $2 }' "$WORK/stats")
	echo "clean chunks dropped behind: ${dropped:-none}"
	[[ ${dropped:-0} -gt 0 ]] || fail "--clean-max dropped no chunk behind"
fi
echo PASS
