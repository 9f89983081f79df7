#!/usr/bin/env bash
# The seed tables as one Markdown table, from unstable-sim's JSON:
# every writer row of `--scenario seeds` under the three policies, side by
# side, with the targets checked. The README quotes its output.
#
#   bench/seeds-table.sh [PATH/TO/unstable-sim]   (default build/sim/unstable-sim)
set -euo pipefail

sim=${1:-build/sim/unstable-sim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for p in unstable no-forced-commit naive; do
	"$sim" --json --scenario seeds --policy "$p" >"$tmp/$p.json"
done

# Flat JSON objects, one per line: fields split on commas (no value holds one).
awk -v dir="$tmp" '
function parse(line, f,    n, i, kv, k, v, parts) {
	delete f
	gsub(/^\{|\}$/, "", line)
	n = split(line, parts, ",")
	for (i = 1; i <= n; i++) {
		k = parts[i]; sub(/:.*/, "", k); gsub(/"/, "", k)
		v = parts[i]; sub(/^[^:]*:/, "", v)
		f[k] = v ~ /^"/ ? substr(v, 2, length(v) - 2) : v + 0
	}
}
function size(b) {
	if (b == 0) return "none"
	if (b >= 2^40 && b % 2^40 == 0) return b / 2^40 "T"
	if (b >= 2^30 && b % 2^30 == 0) return b / 2^30 "G"
	if (b >= 2^20) return sprintf("%gM", b / 2^20)
	return b
}
function load(p,    line, n, f) {
	n = 0
	while ((getline line < (dir "/" p ".json")) > 0) {
		parse(line, f)
		if (f["kind"] == "writer") {
			n++
			tp[p, n] = f["throughput"]; ratio[p, n] = f["ratio_to_ceiling"]
			enomem[p, n] = f["enomem"]; p99[p, n] = f["p99_pause_ms"]
			maxp[p, n] = f["max_pause_ms"]; lost[p, n] = f["lost_bytes"]
			stall[p, n] = f["max_stall_ms"]
			peak[p, n] = f["peak_charged"]; limit[p, n] = f["limit"]
			scen[p, n] = f["scenario"]; dom[p, n] = f["domain"]; bytes[p, n] = f["bytes"]
			ceil_[p, n] = f["ceiling"]
		} else if (f["kind"] == "domain") {
			if (f["max"] > 0 && f["peak_charged"] > f["max"]) over[p]++
		} else if (f["kind"] == "summary" && f["scenario"] == "lustre-3") {
			jain[p] = f["jain"]
		}
	}
	return n
}
BEGIN {
	n = load("unstable"); load("no-forced-commit"); load("naive")
	print "| scenario | domain | limit | bytes | ours MB/s | ratio to ceiling | peak charged | ENOMEM | lost | p99 / max pause ms | max stall ms | naive MB/s | naive p99 / max ms | no-forced-commit MB/s |"
	print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) {
		u = "unstable"
		miss = ""
		lustre = scen[u, i] ~ /^lustre/
		if (lustre && ratio[u, i] < 0.95) { miss = " **<0.95**"; below++ }
		if (enomem[u, i] > 0) bad++
		if (lost[u, i] > 0) bad++
		if (limit[u, i] > 0 && peak[u, i] > limit[u, i]) bad++
		nf = (enomem["no-forced-commit", i] > 0) ? "ENOMEM" : sprintf("%.0f", tp["no-forced-commit", i] / 1e6)
		nv = (enomem["naive", i] > 0) ? "ENOMEM" : sprintf("%.0f", tp["naive", i] / 1e6)
		nvp = (enomem["naive", i] > 0) ? "-" : sprintf("%.1f / %.1f", p99["naive", i], maxp["naive", i])
		if (stall[u, i] > worst) { worst = stall[u, i]; worstw = scen[u, i] " " dom[u, i] }
		printf "| %s | %s | %s | %s | %.0f | %.3f%s | %s | %d | %d | %.1f / %.1f | %.1f | %s | %s | %s |\n",
			scen[u, i], dom[u, i], size(limit[u, i]), size(bytes[u, i]), tp[u, i] / 1e6,
			ratio[u, i], miss, size(peak[u, i]), enomem[u, i], lost[u, i], p99[u, i], maxp[u, i],
			stall[u, i], nv, nvp, nf
	}
	printf "\n%d writer rows (policy unstable): %d with ENOMEM, lost bytes or a charge over its limit; %d Lustre rows below a ratio to ceiling of 0.95; Lustre table 3 Jain index %.4f; %d domains over their max; longest stall %.1f ms (%s).\n",
		n, bad + 0, below + 0, jain["unstable"], over["unstable"] + 0, worst + 0, worstw
}'
