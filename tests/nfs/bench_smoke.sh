#!/usr/bin/env bash
# Smoke test of bench/nfs-vs-sync: a tiny run (16 MiB, one round, one
# limit, fio of 4 MiB, a copy of tests/nfs) against the real server prints
# one valid JSON object whose figures are positive numbers; every run through the client is checked
# byte for byte by the script itself. Throughputs are not asserted.
# With an unstable-fuse that has the NFS backend (--no-cache in its help),
# every configuration runs; otherwise nfs-cp and us-bench-nfs-raw only.
# Usage: bench_smoke.sh BENCH_SCRIPT US_BENCH_NFS_RAW [UNSTABLE_FUSE]
set -euo pipefail
bench=${1:?usage: $0 BENCH_SCRIPT US_BENCH_NFS_RAW [UNSTABLE_FUSE]}
raw=${2:?usage: $0 BENCH_SCRIPT US_BENCH_NFS_RAW [UNSTABLE_FUSE]}
ufs=${3:-}
only="nfs_cp raw"
# (The help read whole: grep -q closing the pipe early failed the pipeline
# under pipefail, and the client's configurations were never run.)
if [[ -n $ufs && $("$ufs" --help 2>&1 || true) == *--no-cache* ]]; then
	only="fuse nocache nfs_cp raw kernel_writeback"
else
	ufs=
fi
rc=0
# UFS_ARGS reaches the client's runs (a chunk size not its default) and
# the JSON names it.
args=
[[ -n $ufs ]] && args="--chunk 8K"
out=$(UFS=$ufs UFS_ARGS=$args RAW=$raw SIZE_MIB=16 ROUNDS=1 LIMITS=5 ONLY=$only FIO_MIB=4 \
	CP_SRC=$(dirname "$0") bash "$bench") || rc=$?
echo "$out"
[[ $rc -eq 77 ]] && exit 77
[[ $rc -eq 0 ]] || { echo "FAIL: nfs-vs-sync exited with $rc" >&2; exit 1; }
if ! command -v python3 >/dev/null; then
	printf '%s' "$out" | jq -e '.raw_mb_s > 0 and .nfs_cp_mb_s > 0 and (.runs | length) == 1' >/dev/null
	echo PASS
	exit 0
fi
printf '%s' "$out" | ONLY=$only ARGS=$args python3 -c '
import json, os, sys
j = json.load(sys.stdin)
only = os.environ["ONLY"].split()
assert j["bytes"] == 16 << 20
assert j["ufs_args"] == os.environ["ARGS"], j["ufs_args"]
assert j["raw_mb_s"] > 0 and j["nfs_cp_mb_s"] > 0
assert len(j["runs"]) == 1 and j["runs"][0]["limit_mib"] == 5
r = j["runs"][0]
# the server CPU seconds: one figure per run of each configuration
for k in ("raw_server_cpu_s_all", "nfs_cp_server_cpu_s_all"):
    assert len(j[k]) == 1 and j[k][0] >= 0, (k, j[k])
if "fuse" in only:
    assert r["fuse_nfs_mb_s"] > 0 and r["nocache_mb_s"] > 0, r
    assert r["kernel_writeback_mb_s"] >= 0 and r["ratio_raw"] > 0, r
    assert r["max_stall_ms"] >= 0 and 0 < r["fuse_peak_charged"] <= 5 << 20, r
    for k in ("fuse_nfs_server_cpu_s_all", "kernel_writeback_server_cpu_s_all"):
        assert len(r[k]) == 1 and r[k][0] >= 0, (k, r[k])
    assert len(j["nocache_server_cpu_s_all"]) == 1, j
    w = j["workloads"]
    if "randwrite" in w:  # (when fio is installed)
        assert w["randwrite"]["fuse_mb_s"] > 0 and w["randwrite"]["nocache_mb_s"] > 0, w
        # the kernel writeback cache over --no-cache, a run a round
        assert w["randwrite"]["kernel_writeback_mb_s"] > 0, w
        assert len(w["randwrite"]["kernel_writeback_all"]) == 1, w
        assert w["randwrite"]["ratio_kernel_writeback"] > 0, w
        assert w["randwrite"]["fuse_kwb_mb_s"] > 0 and len(w["randwrite"]["fuse_kwb_all"]) == 1, w
    assert w["cp"]["fuse_s"] > 0 and w["cp"]["nocache_s"] > 0 and w["cp"]["ratio_nocache"] > 0, w
    assert w["cp"]["kernel_writeback_s"] > 0 and w["cp"]["ratio_kernel_writeback"] > 0, w
    assert w["cp"]["fuse_kwb_s"] > 0 and w["cp"]["ratio_fuse_kwb_kernel_writeback"] > 0, w
    assert len(w["cp"]["kernel_writeback_all"]) == 1 and len(w["cp"]["fuse_kwb_all"]) == 1, w
else:
    assert j["workloads"] == {}, j
    assert r["fuse_nfs_mb_s"] is None and r["ratio_raw"] is None, r
print("PASS")
'
