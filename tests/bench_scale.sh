#!/bin/sh
# Smoke test of us-bench-scale (bench/scale.c) and, when given, of
# us-bench-sim-scale (bench/sim-scale.c): a tiny run of each prints one valid
# JSON object with the fields docs/performance.md quotes. Timings are not
# asserted.
# Usage: bench_scale.sh <path to us-bench-scale> [<path to us-bench-sim-scale>]
set -eu
bin=$1
sim=${2-}
out=$("$bin" --tiny) || { echo "us-bench-scale failed" >&2; exit 1; }
echo "$out"
if [ -n "$sim" ]; then
	simout=$("$sim" --domains 40,80 --max 1M --bytes 2M --bs 64K) ||
		{ echo "us-bench-sim-scale failed" >&2; exit 1; }
	echo "$simout"
fi
if command -v python3 >/dev/null 2>&1 && python3 -c 'import json' 2>/dev/null; then
	printf '%s' "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("small", "large"):
    for f in ("ns_per_cycle", "domains", "buffers"):
        assert isinstance(j[k][f], (int, float)) and j[k][f] > 0, (k, f)
assert j["ratio"] > 0
'
	[ -z "$sim" ] || printf '%s' "$simout" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert [r["domains"] for r in j["runs"]] == [40, 80], j["runs"]
for r in j["runs"]:
    for f in ("cpu_s", "peak_rss_mib", "virtual_s", "cpu_ns_per_writer_s"):
        assert isinstance(r[f], (int, float)) and r[f] >= 0, f
    assert r["peak_rss_mib"] > 0 and r["virtual_s"] > 0, r
assert j["domains_ratio"] == 2 and j["cpu_ratio"] >= 0 and j["rss_ratio"] > 0
'
elif command -v jq >/dev/null 2>&1; then
	printf '%s' "$out" | jq -e '.small.ns_per_cycle > 0 and .large.ns_per_cycle > 0 and
		.small.domains > 0 and .large.buffers > 0 and .ratio > 0' >/dev/null
	[ -z "$sim" ] || printf '%s' "$simout" | jq -e '(.runs | map(.domains)) == [40, 80] and
		(.runs | all(.peak_rss_mib > 0 and .virtual_s > 0 and .cpu_s >= 0)) and
		.domains_ratio == 2 and .rss_ratio > 0' >/dev/null
else
	printf '%s' "$out" | grep -Eq '^\{"small": \{"ns_per_cycle": [0-9.]+, "domains": [0-9]+, "buffers": [0-9]+\}, "large": \{"ns_per_cycle": [0-9.]+, "domains": [0-9]+, "buffers": [0-9]+\}, "ratio": [0-9.]+\}$'
	[ -z "$sim" ] || printf '%s' "$simout" | grep -Eq '^\{"command": .*"runs": \[\{"domains": 40, .*\{"domains": 80, .*"cpu_ratio": [0-9.]+, "rss_ratio": [0-9.]+\}$'
fi
