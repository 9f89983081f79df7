#!/bin/sh
# unstable-sim's command line: bad arguments print a message and exit 2; a
# small custom run and --json work.
set -u
sim=$1
fail=0

expect() {
	code=$1
	shift
	out=$("$sim" "$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$code" ]; then
		echo "FAIL: unstable-sim $* exited $rc, expected $code: $out"
		fail=1
	fi
}

# A bad command line: exit 2 and two lines on stderr, the error (each
# value's naming its option, its argument and its key) and a hint.
one_error() {
	want=$1
	shift
	err=$("$sim" "$@" 2>&1 >/dev/null)
	rc=$?
	first=$(printf '%s\n' "$err" | sed -n 1p)
	if [ "$rc" -ne 2 ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 2 ] ||
		[ "$(printf '%s\n' "$err" | sed -n 2p)" != "try unstable-sim --help" ]; then
		echo "FAIL: unstable-sim $*: exit $rc, not one error line and the hint: $err"
		fail=1
	fi
	case $first in
	"unstable-sim: $want"*) ;;
	*)
		echo "FAIL: unstable-sim $*: '$first' does not start with 'unstable-sim: $want'"
		fail=1
		;;
	esac
}

one_error "unknown option '--bogus'" --bogus
one_error "unknown option '-x'" -x
one_error "unknown option '-j'" --json -jh
one_error "--memory requires an argument" --memory
one_error "--json takes no argument" --json=1
one_error "unexpected argument 'extra'" --domain a --writer a,bytes=1M extra
one_error "--domain x,max=abc: max: " --domain x,max=abc
one_error "--domain x,max=nan: max: " --domain x,max=nan
one_error "--domain x,dirty=-5%: dirty: " --domain x,dirty=-5%
one_error "--domain d,count=1000000: count: " --domain d,count=1000000 --writer d,bytes=1M
one_error "--backend bw=nan/s: bw: " --backend bw=nan/s --domain a --writer a,bytes=1M
one_error "--backend f:rpcs=-1: rpcs: " --backend f:rpcs=-1
one_error "--writer a,bytes=nan: bytes: " --domain a --writer a,bytes=nan
one_error "--writer a,bytes=1e18: bytes: " --domain a --writer a,bytes=1e18
one_error "--writer a,bytes=1M,start=nans: start: " --domain a --writer a,bytes=1M,start=nans
one_error "--writer a,bytes=1M,bs=2G: bs: " --domain a --writer a,bytes=1M,bs=2G
one_error "--memory: '0' is out of range" --memory 0
one_error "--seed: '-1' is negative" --seed -1
one_error "--policy: 'sloppy'" --policy sloppy
one_error "--scenario: 'x'" --scenario x
# A writer's bs over its domain's max, an ancestor's or the memory: no block
# could ever be charged (it ended in ENOMEM, with exit 0).
one_error "writer 0 (domain a): bs=2M is more than max=1M of domain a" \
	--domain a,max=1M --writer a,bytes=8M,bs=2M
one_error "writer 0 (domain a): bs=2M is more than max=1M of domain p" \
	--domain p,max=1M --domain a,parent=p --writer a,bytes=8M,bs=2M
one_error "writer 0 (domain a): bs=2M is more than the engine's memory" \
	--memory 1M --domain a --writer a,bytes=8M,bs=2M
# A run that would not finish: too many blocks, or too long a simulated time
# (100T ran 200 s of CPU, 1G at 1K/s would run for hours).
one_error "this run is 104857600 blocks" --domain a --writer a,bytes=100T
one_error "this run lasts 1048576 s of simulated time" \
	--backend bw=1K/s --domain a --writer a,bytes=1G
# -h is --help; --version prints the library's.
if [ "$("$sim" -h)" != "$("$sim" --help)" ] || ! "$sim" -h | grep -q '^usage: unstable-sim'; then
	echo "FAIL: -h is not --help"
	fail=1
fi
if ! "$sim" --version | grep -Eqx 'unstable-sim [0-9]+\.[0-9]+\.[0-9]+'; then
	echo "FAIL: --version: $("$sim" --version 2>&1)"
	fail=1
fi
# dirty=0 is write-through: a commit per block (the default 20 % gave 9).
out=$("$sim" --domain a,max=16M,dirty=0 --writer a,bytes=64M)
asked=$(printf '%s\n' "$out" | sed -n 's/^Jain index .*; \([0-9]*\) commits asked.*/\1/p')
if [ -z "$asked" ] || [ "$asked" -lt 64 ] ||
	! printf '%s\n' "$out" | grep -q 'ENOMEM 0, .*lost 0 bytes'; then
	echo "FAIL: dirty=0: $asked commits asked: $out"
	fail=1
fi
# The backend line names the backends the writers used, each with its
# bandwidth (not the default's when they used named ones).
out=$("$sim" --backend f:bw=1G/s --backend s:bw=100M/s --domain a,max=64M \
	--writer a,bytes=64M,backend=f --writer a,bytes=16M,backend=s)
case $out in
*'backends: f 1073.7 MB/s, s 104.9 MB/s (1178.6 MB/s in all); '*) ;;
*)
	echo "FAIL: backend line of f and s: $out"
	fail=1
	;;
esac
out=$("$sim" --backend s:bw=100M/s --domain a,max=64M --writer a,bytes=16M,backend=s)
case $out in
*'backend: s 104.9 MB/s; '*) ;;
*)
	echo "FAIL: backend line of s: $out"
	fail=1
	;;
esac
# A striped writer's ceiling: the stripe count times its share of the
# slowest backend (2 x 100 MiB/s), not the sum of its shares.
out=$("$sim" --json --backend f:bw=1G/s --backend s:bw=100M/s --domain a,max=64M \
	--writer a,bytes=64M,stripe=f+s)
case $out in
*'"ceiling":209715200,'*) ;;
*)
	echo "FAIL: striped ceiling: $out"
	fail=1
	;;
esac
expect 2 --bogus
expect 2 --policy sloppy
expect 0 --policy naive --domain a,max=16M --writer a,bytes=48M
expect 2 --memory 12X
expect 2 --backend bw=fast
expect 2 --domain a --writer b,bytes=1G
expect 2 --domain a --writer a
expect 2 --domain a --writer a,bytes=1G extra
expect 2
expect 0 --help
expect 0 --domain a,max=16M --writer a,bytes=48M
out=$("$sim" --json --domain a,max=16M --writer a,bytes=48M)
case $out in
*'"kind":"writer"'*'"enomem":0'*'"lost_bytes":0'*'"kind":"summary"'*) ;;
*)
	echo "FAIL: --json output: $out"
	fail=1
	;;
esac
# Honest names: the writer's ceiling and its ratio to it beside
# the backend's bandwidth and the part of it used; the writer's own stall.
case $out in
*'"ceiling":'[0-9]*'"ratio_to_ceiling":'[0-9]*'"backend_bw":1073741824,"backend_utilisation":0.'[0-9]*'"max_stall_ms":'[0-9]*) ;;
*)
	echo "FAIL: --json names: $out"
	fail=1
	;;
esac
case $out in
*'"ratio":'*)
	echo "FAIL: --json still has ratio: $out"
	fail=1
	;;
esac
# Each writer line names the backends its data goes to.
out=$("$sim" --json --backend fast:bw=1G/s --backend o2:bw=1G/s --domain a,max=8M \
	--writer a,bytes=1M,backend=fast --writer a,bytes=1M --writer a,bytes=2M,stripe=fast+o2)
case $out in
*'"backend":"fast","domain":"a"'*'"backend":"default","domain":"a"'*'"backend":"fast+o2","domain":"a"'*) ;;
*)
	echo "FAIL: --json writer backends: $out"
	fail=1
	;;
esac
# The engine sees each answer at the time the server gives it: a commit's
# latency as set (20 ms), a write's as its latency plus its transfer (2 ms
# plus a run of 4 MiB at 1 GiB/s: 2 to 6 ms); the link at its rate. An
# answer stamped with the time of the step before would show less.
out=$("$sim" --json --backend bw=1G/s,lat=2ms,commit-lat=20ms --domain a,max=200M \
	--writer a,bytes=1G)
meas=$(printf '%s\n' "$out" | sed -n 's/.*"kind":"backend".*"measured_link_bw":\([0-9]*\),"measured_write_lat_ms":\([0-9.]*\),"measured_commit_lat_ms":\([0-9.]*\)}$/\1 \2 \3/p')
if ! printf '%s\n' "$meas" | awk '{ exit !($1 > 0.95 * 1073741824 && $1 <= 1.01 * 1073741824 && $2 >= 2 && $2 <= 6 && $3 >= 19.9 && $3 <= 20.1) }'; then
	echo "FAIL: measured link, write and commit latency '$meas': $out"
	fail=1
fi
# A one-block write reports its real rate: finite, not 0, not above the copy
# rate (8 GiB/s).
out=$("$sim" --json --domain a --writer a,bytes=64K)
tp=$(printf '%s\n' "$out" | sed -n 's/.*"kind":"writer".*"throughput":\([0-9]*\),.*/\1/p')
if [ -z "$tp" ] || [ "$tp" -le 0 ] || [ "$tp" -gt 8589934592 ]; then
	echo "FAIL: one block: throughput '$tp': $out"
	fail=1
fi
# --policy no-reclaim-wait (the memcg seed's unpatched kernel), scaled:
# OOM-killed under 5M, not under 2G; virtual time only.
ext3=--backend=bw=40M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,commit-lat=20ms,journal=128M
out=$("$sim" --policy no-reclaim-wait --memory 4G "$ext3" --domain a,max=5M --writer a,bytes=100M,bs=64K)
case $out in
*'OOM 1,'*'lost 0 bytes'*) ;;
*)
	echo "FAIL: no-reclaim-wait at 5M: $out"
	fail=1
	;;
esac
out=$("$sim" --json --policy no-reclaim-wait --memory 4G "$ext3" --domain a,max=2G --writer a,bytes=100M,bs=64K)
case $out in
*'"bytes":104857600,'*'"oom":0,'*'"lost_bytes":0'*) ;;
*)
	echo "FAIL: no-reclaim-wait at 2G: $out"
	fail=1
	;;
esac
expect 2 --realtime --policy no-reclaim-wait --domain a,max=8M --writer a,bytes=8M
# The memcg table under no-reclaim-wait says, per limit, whether its outcome
# (OOM or not) is the seed's unpatched kernel's, and why not where it is not:
# 300M, where the seed's dd survived.
out=$("$sim" --json --scenario memcg --policy no-reclaim-wait)
for want in '"domain":"5M","seed_unpatched":"OOM","seed_oom":true,"oom":true,"match":true}' \
	'"domain":"60M","seed_unpatched":"OOM","seed_oom":true,"oom":true,"match":true}' \
	'"domain":"300M","seed_unpatched":"51.8","seed_oom":false,"oom":true,"match":false,"why":"' \
	'"domain":"2G","seed_unpatched":"368.0","seed_oom":false,"oom":false,"match":true}'; do
	if ! printf '%s\n' "$out" | grep '"kind":"seed"' | grep -qF "$want"; then
		echo "FAIL: memcg no-reclaim-wait against the seed, no '$want': $out"
		fail=1
	fi
done
out=$("$sim" --scenario memcg)
case $out in
*'no-reclaim-wait       OOM      OOM     OOM*'*"('*': the seed's unpatched dd survived"*) ;;
*)
	echo "FAIL: memcg: no-reclaim-wait's 300M not marked and explained: $out"
	fail=1
	;;
esac
# --trace writes a CSV time series with its header and both kinds of rows.
trace=$(mktemp)
"$sim" --domain a,max=16M --writer a,bytes=48M --trace "$trace" >/dev/null
if ! head -1 "$trace" | grep -q '^time_s,kind,name,dirty,writeback,unstable' ||
	! grep -q ',domain,a,' "$trace" || ! grep -q ',writer,0,' "$trace"; then
	echo "FAIL: --trace output"
	fail=1
fi
rm -f "$trace"
expect 2 --scenario lustre-2 --trace /tmp/x.csv
# --realtime and --backend file:PATH: what they refuse, and a short run each.
expect 2 --backend file:/tmp/x --domain a,max=8M --writer a,bytes=8M
expect 2 --realtime --backend file: --domain a,max=8M --writer a,bytes=8M
expect 2 --realtime --scenario lustre-1
expect 2 --realtime --scenario seeds
expect 2 --realtime --domain a,max=8M --writer a,bytes=8M --trace /tmp/x.csv
expect 2 --realtime --domain a --writer a,bytes=1T
expect 2 --realtime
rt=--backend=bw=400M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=1s,commit-lat=2ms,journal=1G
out=$("$sim" --realtime --json "$rt" --domain a,max=8M --writer a,bytes=32M,bs=256K) || out="exit $?: $out"
case $out in
*'"kind":"writer"'*'"enomem":0'*'"lost_bytes":0'*'"mode":"realtime","backend":"sim","peak_rss":'*) ;;
*)
	echo "FAIL: --realtime --json output: $out"
	fail=1
	;;
esac
dir=$(mktemp -d)
out=$("$sim" --realtime "$rt" --backend "file:$dir/data" --domain a,max=8M \
	--writer a,bytes=32M,bs=256K) || out="exit $?: $out"
case $out in
*'ENOMEM 0'*'lost 0 bytes'*'peak RSS'*'file '"$dir"'/data: '*) ;;
*)
	echo "FAIL: --realtime --backend file: output: $out"
	fail=1
	;;
esac
rm -rf "$dir"
# Any number of domains and writers: count= replicates them.
expect 2 --domain d,count=0 --writer d,bytes=1M
expect 2 --domain d,count=x --writer d,bytes=1M
expect 2 --domain d,count=2 --domain d-2 --writer d,bytes=1M
expect 2 --domain d,count=2 --writer e,bytes=1M
expect 2 --domain d --writer d,bytes=1M,count=0
expect 0 --domain d,count=100,max=4M --writer d,bytes=8M,count=2
# 1,000 equal domains writing twice their max at once, more than the 64 the
# simulator once took: every writer is there, nothing lost, and they share
# the backend fairly (Jain's index of their throughput >= 0.99).
out=$("$sim" --domain d,count=1000,max=16M --writer d,bytes=32M) || out="exit $?: $out"
writers=$(printf '%s\n' "$out" | grep -c '^writer .*ENOMEM 0, .*lost 0 bytes$')
jain=$(printf '%s\n' "$out" | sed -n 's/^Jain index \([0-9.]*\);.*/\1/p')
if [ "$writers" -ne 1000 ] || [ -z "$jain" ] ||
	! awk -v j="$jain" 'BEGIN { exit !(j >= 0.99) }'; then
	echo "FAIL: 1,000 domains: $writers writers without ENOMEM or loss, Jain '$jain'"
	fail=1
else
	echo "1,000 domains: Jain $jain"
fi
# Several backends and striping: the forms, and what they refuse.
o='bw=100M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=1s,commit-lat=10ms,journal=64M'
osts="--backend o0:$o --backend o1:$o --backend o2:$o --backend o3:$o"
# shellcheck disable=SC2086
expect 0 $osts --domain d,max=128M --writer d,bytes=64M,backend=o1
# shellcheck disable=SC2086
expect 0 $osts --stripe o0,o1,size=2M --domain d,max=128M --writer d,bytes=64M,count=2 \
	--stripe none --writer d,bytes=8M
expect 0 --backend bw=200M/s --backend f:bw=1G/s --domain d --writer d,bytes=8M,backend=default
expect 2 --domain d --writer d,bytes=8M,backend=nope
expect 2 --backend a:bw=1G/s --domain d --writer d,bytes=8M,stripe=a+nope
expect 2 --backend a:bw=1G/s --stripe a,nope --domain d --writer d,bytes=8M
expect 2 --backend a:bw=1G/s --stripe a,a --domain d --writer d,bytes=8M
expect 2 --backend a:bw=1G/s --domain d --writer d,bytes=8M,bs=3M,stripe=a
expect 2 --backend a:bw=1G/s --domain d --writer d,bytes=8M,stripe=a,backend=a
expect 2 --backend a,b:bw=1G/s --domain d --writer d,bytes=8M
expect 2 --backend a:bw=1G/s --scenario two-backends
expect 2 --realtime --backend a:bw=1G/s --domain d,max=8M --writer d,bytes=8M,backend=a
# commit-lat=FIXED+RATE; bad forms exit 2 with a message naming commit-lat.
expect 0 --backend commit-lat=5ms+500M/s --domain d,max=16M --writer d,bytes=64M
expect 0 --backend s:commit-lat=5ms+500M/s --domain d,max=16M --writer d,bytes=64M,backend=s
for bad in 5ms+ 5ms+fast 5ms+500M +500M/s 5+500M/s 5ms+0/s; do
	expect 2 --backend "commit-lat=$bad" --domain d --writer d,bytes=8M
	if ! "$sim" --backend "commit-lat=$bad" 2>&1 | grep -q 'commit-lat'; then
		echo "FAIL: --backend commit-lat=$bad: no message naming commit-lat"
		fail=1
	fi
done
# A file striped over four OSTs of 100 MiB/s drains faster than one OST.
# shellcheck disable=SC2086
out=$("$sim" --json $osts --domain d,max=128M \
	--writer d,bytes=512M,stripe=o0+o1+o2+o3,stripe-size=1M) || out="exit $?: $out"
tp=$(printf '%s\n' "$out" | sed -n 's/.*"kind":"writer".*"throughput":\([0-9]*\).*"lost_bytes":0}$/\1/p')
if [ -z "$tp" ] || [ "$tp" -le $((300 * 1048576)) ]; then
	echo "FAIL: striped over 4 OSTs: throughput '$tp': $out"
	fail=1
else
	echo "striped over 4 OSTs of 100 MiB/s: $tp B/s"
fi
# Every built-in scenario is within the bounds of a run (seeds: the five of
# lustre-1 .. lustre-4 and memcg).
for sc in seeds lustre-striped two-backends; do
	# a figure marked '!' (ENOMEM, lost bytes, a crossed max) fails
	out=$("$sim" --scenario $sc) || out="exit $?: $out"
	if printf '%s\n' "$out" | grep -v "marks" | grep -Eq '[0-9]!|ENOMEM|^exit'; then
		echo "FAIL: --scenario $sc: $out"
		fail=1
	fi
done
# --trace changes nothing: the JSON with and without it is the same byte
# for byte, wall-clock time aside.
tmp=$(mktemp -d)
for run in "--domain a,max=16M --writer a,bytes=64M --writer a,bytes=64M,bs=4K" \
	"--backend bw=100M/s,commit-lat=200ms --domain a,max=16M --writer a,bytes=32M --writer a,bytes=32M"; do
	# shellcheck disable=SC2086 # the run's words
	"$sim" --json $run | sed 's/"wall_seconds":[0-9.]*,//' >"$tmp/plain"
	# shellcheck disable=SC2086
	"$sim" --json $run --trace "$tmp/trace.csv" |
		sed 's/"wall_seconds":[0-9.]*,//' >"$tmp/traced"
	if ! cmp -s "$tmp/plain" "$tmp/traced" || [ ! -s "$tmp/trace.csv" ]; then
		echo "FAIL: --trace changed the run $run:"
		diff "$tmp/plain" "$tmp/traced"
		fail=1
	fi
done
# Lustre table 4: the unlimited writer beside a memcg-limited one keeps
# its solo throughput at every limit (it lost up to 0.063 of it, with
# 200 ms stalls, while its context's lock-free credit was bounded by its
# share of the root, which it shares with the memcg's).
worst=$("$sim" --json --scenario lustre-4 |
	grep '"kind":"writer".*"domain":"B-unlimited"' |
	sed 's/.*"ratio_to_ceiling":\([0-9.]*\).*/\1/' | sort -n | head -1)
if [ -z "$worst" ] || awk -v r="$worst" 'BEGIN { exit !(r < 0.99) }'; then
	echo "FAIL: lustre-4's unlimited writer at ${worst:-?} of its ceiling (want 0.99 or more)"
	fail=1
fi
rm -rf "$tmp"
[ "$fail" -eq 0 ] && echo "sim_cli: all passed"
exit $fail
