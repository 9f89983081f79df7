#!/bin/sh
# Smoke test of us-bench-scale (bench/scale.c): a tiny run prints one valid
# JSON object with the fields docs/performance.md quotes. Timings are not asserted.
# Usage: bench_scale.sh <path to us-bench-scale>
set -eu
bin=$1
out=$("$bin" --tiny) || { echo "us-bench-scale failed" >&2; exit 1; }
echo "$out"
if command -v python3 >/dev/null 2>&1 && python3 -c 'import json' 2>/dev/null; then
	printf '%s' "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("small", "large"):
    for f in ("ns_per_cycle", "domains", "buffers"):
        assert isinstance(j[k][f], (int, float)) and j[k][f] > 0, (k, f)
assert j["ratio"] > 0
'
elif command -v jq >/dev/null 2>&1; then
	printf '%s' "$out" | jq -e '.small.ns_per_cycle > 0 and .large.ns_per_cycle > 0 and
		.small.domains > 0 and .large.buffers > 0 and .ratio > 0' >/dev/null
else
	printf '%s' "$out" | grep -Eq '^\{"small": \{"ns_per_cycle": [0-9.]+, "domains": [0-9]+, "buffers": [0-9]+\}, "large": \{"ns_per_cycle": [0-9.]+, "domains": [0-9]+, "buffers": [0-9]+\}, "ratio": [0-9.]+\}$'
fi
