#!/usr/bin/env bash
# fsx-style random operations (tests/fuse/fsx.c) on 4 files of up to 3 MiB
# through the NFS backend with a root domain of 1 MiB, so that chunks are
# evicted and made again over data the server holds, most of them written
# in part; every read checked against the program's model, and after the
# unmount the exported files must equal the model. A run whose model is
# deliberately corrupted must fail first. The seed is printed;
# US_FSX_SEED=N reruns it, US_FSX_OPS=N sets the number of operations
# (default 3000); US_FSX_UFS_ARGS: more unstable-fuse arguments
# (nfs_fsx_chunk128k: --chunk 128K, nfs_fsx_chunk4k: --chunk 4K; the
# default is 16K).
source "$(dirname "$0")/common.sh"

FSX=${US_FSX:-$(dirname "$UFS")/../../tests/us-fuse-fsx}
[[ -x $FSX ]] || fail "no us-fuse-fsx (set US_FSX)"
OPS=${US_FSX_OPS:-3000}
SEED=${US_FSX_SEED:-$(( (RANDOM << 30 | RANDOM << 15 | RANDOM) + 1 ))}
mkdir -p "$WORK/model"

nfs_server_start "$WORK/export"
# shellcheck disable=SC2086 # words
nfs_mount fsx "$WORK/mnt" --max 1M --stats "$WORK/stats" ${US_FSX_UFS_ARGS:-}
if "$FSX" "$WORK/mnt" "$WORK/model" -n 300 -s "$SEED" --corrupt-model >"$WORK/corrupt.out" 2>&1; then
	cat "$WORK/corrupt.out"
	fail "a run with a corrupted model passed: the checks see nothing"
fi
grep -q '^FAIL' "$WORK/corrupt.out" || { cat "$WORK/corrupt.out"; fail "the corrupted run did not fail on a check"; }
start=$SECONDS
"$FSX" "$WORK/mnt" "$WORK/model" -n "$OPS" -s "$SEED" || fail "fsx (seed $SEED; rerun with US_FSX_SEED=$SEED)"
echo "fsx: $OPS operations in $((SECONDS - start)) s"
ufs_unmount fsx "$WORK/mnt"
for m in "$WORK"/model/fsx*; do
	cmp "$m" "$WORK/export/$(basename "$m")" ||
		fail "exported file $(basename "$m") differs from the model after the unmount (seed $SEED)"
done
peak=$(stat_of "$WORK/stats" / peak_charged)
pw=$(nfs_stat "$WORK/stats" nfs_page_writes)
echo "exported files equal the model; peak charged $peak of max $((1 << 20)); WRITE3s of pages: $pw"
[[ -n $peak && $peak -le $((1 << 20)) ]] || fail "peak charged $peak"
# The chunks' size taken: --chunk's, or the NFS backend's 16 KiB. Chunks
# of one page hold a page whole or nothing.
chunk_check "$WORK/stats" 16384 "${US_FSX_UFS_ARGS:-}"
if ((CHUNK == 4096)); then
	[[ ${pw:-0} -eq 0 ]] || fail "chunks of one page written back in part: $pw WRITE3s"
else
	[[ ${pw:-0} -gt 0 ]] || fail "no chunk was written back as its pages"
fi
echo PASS
