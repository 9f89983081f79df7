#!/usr/bin/env bash
# results.sh [--run] [--with-fuse] [--with-nfs] [--only PARTS] [--json DIR] [--out FILE] [BUILD_DIR]
#
# docs/results.md, the project's current results in one page, from the
# benchmarks' JSON: the date, the machine, each command, each figure with
# its peer and their ratio. With --run it first runs the benchmarks into the
# JSON directory (default BUILD_DIR/results): the simulator's seeds (virtual
# time), us-bench-hotpath, us-bench-sim-scale at 10,000 and 20,000
# domains, and bench/contention-sweep (4 s of the bound per point; needs
# python3); with --with-fuse bench/fuse-vs-kernel (root, /dev/fuse, a
# memory cgroup; about 10 minutes) and with --with-nfs bench/nfs-vs-sync
# (root, nfs-ganesha; about 10 minutes). Without --run it only writes the
# page from the JSON already there (a part whose JSON is missing is listed
# as not run). Each part records when and at which commit it ran, and the
# page gives that under its heading; --only "seeds hotpath simscale
# contention fuse nfs" (any of them) runs those parts alone and keeps the
# others' JSON. Needs jq. The page is written to --out (default
# docs/results.md of the source tree); nothing else is.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
run=0 fuse=0 nfs=0 dir= out=$src/docs/results.md build= only=
while (($#)); do
	case $1 in
	--run) run=1 ;;
	--with-fuse) fuse=1 ;;
	--with-nfs) nfs=1 ;;
	--only) only=" $2 "; run=1; shift ;;
	--json) dir=$2; shift ;;
	--out) out=$2; shift ;;
	-h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "results: unknown option $1" >&2; exit 2 ;;
	*) build=$1 ;;
	esac
	shift
done
build=$(cd "${build:-$src/build}" && pwd)
dir=${dir:-$build/results}
command -v jq >/dev/null || { echo "results: needs jq (Debian: apt-get install jq)" >&2; exit 1; }
mkdir -p "$dir"

# part NAME: whether this run measures NAME (then its when-file is written).
part() {
	if [[ -n $only ]]; then
		[[ $only == *" $1 "* ]] || return 1
	else
		case $1 in
		fuse) ((fuse)) || return 1 ;;
		nfs) ((nfs)) || return 1 ;;
		esac
	fi
	echo "results: $1" >&2
	printf '%s at commit %s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" \
		"$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$dir/$1.when"
}

if ((run)); then
	sim=$build/sim/unstable-sim
	{
		printf '{"date":"%s",' "$(date -u +%Y-%m-%dT%H:%MZ)"
		printf '"cpu":"%s",' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
		printf '"cores":%d,' "$(nproc)"
		printf '"mem_gib":%.1f,' "$(awk '/^MemTotal/ { print $2 / 1048576 }' /proc/meminfo)"
		printf '"build_type":"%s",' "$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")"
		printf '"kernel":"%s","commit":"%s"}\n' "$(uname -r)" \
			"$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	} >"$dir/machine.json"
	if part seeds; then
		"$sim" --json --scenario seeds >"$dir/seeds.json"
	fi
	if part hotpath; then
		"$build/bench/us-bench-hotpath" >"$dir/hotpath.json"
	fi
	if part simscale; then
		"$build/bench/us-bench-sim-scale" --sim "$sim" --domains 10000,20000 --max 1M --bytes 2M \
			--bs 64K >"$dir/simscale.json"
	fi
	if command -v python3 >/dev/null && part contention; then
		python3 "$src/bench/contention-sweep" --sim "$sim" --len 4 --json >"$dir/contention.json"
	fi
	if part fuse; then
		"$src/bench/fuse-vs-kernel" --limits "5 60 300 2048" --rounds 3 "$build" >"$dir/fuse.json"
	fi
	if part nfs; then
		ROUNDS=3 "$src/bench/nfs-vs-sync" "$build" >"$dir/nfs.json"
	fi
fi

# when NAME: the line saying when NAME's figures were measured.
when() {
	if [[ -s $dir/$1.when ]]; then
		echo "Measured $(<"$dir/$1.when")."
		echo
	fi
}

have() { [[ -s $dir/$1.json ]]; }
have machine || { echo "results: no $dir/machine.json: run with --run first" >&2; exit 1; }

{
	m=$dir/machine.json
	echo "# Current results"
	echo
	echo "Written by \`bench/results.sh\` from the benchmarks' JSON; do not edit by hand (run"
	echo "\`bench/results.sh --run [--with-fuse] [--with-nfs] build\` to measure again). Last run on"
	jq -r '"\(.date) at commit \(.commit) (a \(.build_type // "?") build), on \(.cores) cores of \(.cpu), \(.mem_gib) GiB of memory, Linux \(.kernel)."' "$m"
	echo "The simulator's figures are in virtual time and do not depend on the machine; the others do"
	echo "(on this machine by up to a fifth from day to day): each is given beside the peer measured in"
	echo "the same run."
	echo

	echo "## The seeds (virtual time)"
	echo
	when seeds
	if have seeds; then
		echo "\`./build/sim/unstable-sim --scenario seeds --json\`: the published tables of Lustre's unstable"
		echo "page accounting and of the Linux memcg writeback fix, reproduced ([simulator.md](simulator.md))."
		echo
		jq -rs '
			[.[] | select(.kind == "writer" and .policy == "unstable")] as $w
			| [$w[] | select(.scenario | startswith("lustre"))] as $l
			| "| writer rows | with ENOMEM, OOM or bytes lost | Lustre rows: least ratio to ceiling | longest stall |",
			  "|---|---|---|---|",
			  "| \($w | length) | \([$w[] | select(.enomem > 0 or .oom > 0 or .lost_bytes > 0)] | length) | \([$l[] | .ratio_to_ceiling] | min) | \([$w[] | .max_stall_ms] | max) ms |"
		' "$dir/seeds.json"
	else
		echo "Not in this run."
	fi
	echo

	echo "## The hot path"
	echo
	when hotpath
	if have hotpath; then
		echo "\`./build/bench/us-bench-hotpath\`: \`us_buf_dirty()\` on its lock-free paths, against a 4 KiB"
		echo "\`memcpy\` (the data a write copies anyway) in the same run ([performance.md](performance.md))."
		echo
		jq -r '
			"| memcpy of 4 KiB | first dirtying, 1 thread | × memcpy (target ≤ 0.10) | rewrite of a DIRTY buffer | × memcpy (target ≤ 0.10) | 2 threads, separate domains | shared domain |",
			"|---|---|---|---|---|---|---|",
			"| \(.ns_memcpy_4k) ns | \(.ns_per_dirty_1t) ns | \(.ratio_1t) | \(.ns_per_redirty_1t) ns | \(.ratio_redirty_1t) | \(.scaling_2t_separate)× | \(.scaling_2t_shared)× |"
		' "$dir/hotpath.json"
	else
		echo "Not in this run."
	fi
	echo

	echo "## The simulator's cost"
	echo
	when simscale
	if have simscale; then
		jq -r '"`./build/bench/us-bench-sim-scale --domains 10000,20000 --max 1M --bytes 2M --bs 64K` (`\(.command)`): CPU time and peak memory as the number of domains doubles (target: ≤ 2.2× from 10,000 to 20,000).", ""' "$dir/simscale.json"
		jq -r '
			"| domains | CPU s | peak RSS MiB | virtual s | CPU ns per writer-second |",
			"|---|---|---|---|---|",
			(.runs[] | "| \(.domains) | \(.cpu_s) | \(.peak_rss_mib) | \(.virtual_s) | \(.cpu_ns_per_writer_s) |"),
			"",
			(if (.runs | length) >= 2 then "20,000 / 10,000 domains: \((.runs[1].cpu_s / .runs[0].cpu_s * 100 | round) / 100)× the CPU time." else empty end)
		' "$dir/simscale.json"
	else
		echo "Not in this run."
	fi
	echo

	echo "## Writers contending in one domain (virtual time)"
	echo
	when contention
	if have contention; then
		jq -r '"`bench/contention-sweep --len \(.len_s) --json`: 2, 4, 16 and 64 writers of mixed blocks in one domain, commits of 1 ms to 4 s, max 2×, 10× and 100× bandwidth × commit latency (\(.of) points; [guide.md](guide.md#writers-that-contend)). Points meeting each target:", ""' "$dir/contention.json"
		jq -r '
			"| Jain ≥ 0.99 over the run | every 2 s window ≥ 0.99 | no stall over max(200 ms, 2C) | ≥ 0.9 of min(bw, max / (2C + L)), L the write latency (1 ms) | ≥ 0.9 of min(bw, max / 2C) | least Jain | longest stall over its target |",
			"|---|---|---|---|---|---|---|",
			"| \(.met.jain) of \(.of) | \(.met.windows) of \(.of) | \(.met.stalls) of \(.of) | \(.met.throughput) of \(.of) | \([.points[] | select(.commit_ms <= 4000 and .throughput_ratio_2c >= 0.9)] | length) of \(.of) | \([.points[] | select(.commit_ms <= 4000) | .jain] | min) | \([.points[] | select(.commit_ms <= 4000) | .stall_s / .stall_target_s] | max * 100 | round / 100)× |",
			(if .beyond then
				"",
				"Beyond the grid, the same writers with 10 s commits (\(.beyond.of) points): Jain ≥ 0.99 over the run at \(.beyond.met.jain), every 2 s window ≥ 0.99 at \(.beyond.met.windows) (the least \([.points[] | select(.commit_ms > 4000) | .jain_window] | min)), no window whose writers are more than two of their largest block apart at \(.beyond.met.blocks), every stall within target at \(.beyond.met.stalls), ≥ 0.9 of the bound at \(.beyond.met.throughput)."
			else empty end)
		' "$dir/contention.json"
	else
		echo "Not in this run."
	fi
	echo

	echo "## unstable-fuse against its peers"
	echo
	when fuse
	if have fuse; then
		echo "\`bench/fuse-vs-kernel --limits \"5 60 300 2048\" --rounds 3 build\` (root): dd of 1 GiB through"
		echo "unstable-fuse at each limit, alternating with a FUSE passthrough without cache, the kernel's FUSE"
		echo "writeback cache and the kernel's page cache (each in a memory cgroup of the limit), medians; then"
		echo "fio and a tree copy at 60 MiB ([fuse.md](fuse.md))."
		echo
		jq -r '
			"| limit MiB | unstable-fuse MB/s | passthrough | × | FUSE writeback cache | × | kernel | × | longest stall ms |",
			"|---|---|---|---|---|---|---|---|---|",
			(.runs[] | "| \(.limit_mib) | \(.fuse_mb_s) | \(.passthrough_mb_s) | \(.ratio_passthrough) | \(.fuse_writeback_mb_s) | \(.ratio_fuse_writeback) | \(.kernel_mb_s) | \(.ratio_kernel) | \(.max_stall_ms) |"),
			"",
			(if (.fio | length) > 0 then
				"| fio at 60 MiB | unstable-fuse MB/s | passthrough | × | `passthrough_ll -o cache=never` | × | FUSE writeback cache | × (target ≥ 1.0) | kernel | × | unstable-fuse `--kernel-writeback` | × `passthrough_ll -o writeback` | the same, `--trust-backing` | × |",
				"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
				(.fio[] | "| \(.rw) bs=\(.bs / 1024)K × \(.numjobs) | \(.fuse_mb_s) | \(.passthrough_mb_s) | \(.ratio_passthrough) | \(.passthrough_ll_never_mb_s) | \(.ratio_ll_never) | \(.fuse_writeback_mb_s) | \(.ratio_fuse_writeback) | \(.kernel_mb_s) | \(.ratio_kernel) | \(.fuse_kwb_mb_s // "not run") | \(.ratio_kwb_ll_writeback // "") | \(.fuse_kwb_trust_mb_s // "not run") | \(.ratio_kwb_trust_ll_writeback // "") |"),
				""
			else empty end),
			(if .cp then
				"| `cp -a \(.cp.src)` (\(.cp.entries) entries) + sync at 60 MiB | unstable-fuse s | `--close=sync` | `passthrough_ll -o cache=never` | `-o writeback` | kernel | × writeback (target ≤ 1.0) |",
				"|---|---|---|---|---|---|---|",
				"| seconds | \(.cp.fuse_s) | \(.cp.fuse_close_sync_s) | \(.cp.passthrough_ll_never_s) | \(.cp.passthrough_ll_writeback_s) | \(.cp.kernel_s) | \(.cp.ratio_fuse_writeback) |"
			else empty end)
		' "$dir/fuse.json"
	else
		echo "Not in this run: the latest figures, with their commands, are in [fuse.md](fuse.md#current-figures)."
	fi
	echo

	echo "## unstable-fuse's NFS backend"
	echo
	when nfs
	if have nfs; then
		echo "\`ROUNDS=3 bench/nfs-vs-sync build\` (root, nfs-ganesha): dd of 1 GiB through the NFS backend at"
		echo "each limit, alternating with the same client without cache, nfs-cp and a raw WRITE3 stream, medians"
		echo "([nfs.md](nfs.md))."
		echo
		jq -r '
			"Peers, the same for every limit: without cache \(.nocache_mb_s) MB/s, nfs-cp \(.nfs_cp_mb_s), the raw stream \(.raw_mb_s) (the server'"'"'s ceiling here).",
			"",
			"| limit MiB | NFS backend MB/s | × raw stream (target ≥ 0.8) | × no cache (≥ 2) | × kernel FUSE writeback cache (≥ 1.2) | longest stall ms |",
			"|---|---|---|---|---|---|",
			(.runs[] | "| \(.limit_mib) | \(.fuse_nfs_mb_s) | \(.ratio_raw // "") | \(.ratio_nocache // "") | \(.ratio_kernel_writeback // "OOM-killed") | \(.max_stall_ms // "") |"),
			"",
			(if .workloads.randwrite or .workloads.cp then "| workload at 60 MiB | NFS backend | without cache | ratio | kernel FUSE writeback cache over `--no-cache` | NFS backend × it | `--kernel-writeback` with the cache | × it |", "|---|---|---|---|---|---|---|---|" else empty end),
			(if .workloads.randwrite then "| fio randwrite 4 KiB, \(.workloads.randwrite.size_mib) MiB | \(.workloads.randwrite.fuse_mb_s) MB/s | \(.workloads.randwrite.nocache_mb_s) MB/s | \(.workloads.randwrite.ratio_nocache)× | \(.workloads.randwrite.kernel_writeback_mb_s // "not run") | \(.workloads.randwrite.ratio_kernel_writeback // "") | \(.workloads.randwrite.fuse_kwb_mb_s // "not run") | \(.workloads.randwrite.ratio_fuse_kwb_kernel_writeback // "") |" else empty end),
			(if .workloads.cp then "| `cp -a \(.workloads.cp.src)` (\(.workloads.cp.entries) entries) + sync | \(.workloads.cp.fuse_s) s | \(.workloads.cp.nocache_s) s | \(.workloads.cp.ratio_nocache)× the time (target ≤ 0.5) | \(.workloads.cp.kernel_writeback_s // "not run") | \(.workloads.cp.ratio_kernel_writeback // "") | \(.workloads.cp.fuse_kwb_s // "not run") | \(.workloads.cp.ratio_fuse_kwb_kernel_writeback // "") |" else empty end)
		' "$dir/nfs.json"
	else
		echo "Not in this run: the latest figures, with their commands, are in [nfs.md](nfs.md)."
	fi
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "results: wrote $out" >&2
