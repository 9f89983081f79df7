#!/usr/bin/env bash
# Namespace calls of several threads at once (--ns-conns, nfs/handles.c):
# four cp -a of a tree of small files, directories, symlinks and modes into
# four directories at once, beside a loop of creates, renames (of files and
# of directories), stats and unlinks; every copy checked with diff -r
# through the mount and on the export, with modes and times, the loop's
# names checked as it goes (a renamed or removed name is gone at once, its
# new name there: no handle or attribute answered before the change is
# kept after it), and the stats file shows more than one namespace call in
# flight at once (nfs_ns_peak). With --ns-conns 1, one at a time; a bad
# --ns-conns is refused.
source "$(dirname "$0")/common.sh"

for bad in 0 65 x 4x ''; do
	out=$("$UFS" nfs://127.0.0.1/x "$WORK/nomnt" --ns-conns "$bad" 2>&1) && fail "--ns-conns '$bad' accepted"
	[[ $out == *"--ns-conns: '$bad' is not 1..64"* ]] || fail "--ns-conns '$bad': $out"
done
echo "a bad --ns-conns is refused"

src=$WORK/src
for d in 0 1 2 3 4 5; do
	for e in a b c; do
		mkdir -p "$src/d$d/$e"
		for f in $(seq 12); do
			head -c $(((d * 37 + f * 101) % 9000)) /dev/urandom >"$src/d$d/$e/f$f"
		done
		ln -s "f1" "$src/d$d/$e/link"
	done
	chmod 750 "$src/d$d/a"
	chmod 640 "$src/d$d/b/f2"
	touch -d '2001-02-03 04:05:06' "$src/d$d/c/f3"
done
echo "source: $(find "$src" | wc -l) entries"

nfs_server_start "$WORK/export"
nfs_mount ns "$WORK/mnt" --max 32M --ns-conns 4 --stats "$WORK/stats"
m=$WORK/mnt

# The loop: names made, renamed, looked at and removed while the copies run.
churn() {
	local i
	mkdir "$m/r"
	for i in $(seq 60); do
		echo "$i" >"$m/r/x$i" || return 1
		stat "$m/r/x$i" >/dev/null || return 1
		mv "$m/r/x$i" "$m/r/y$i" || return 1
		[[ ! -e $m/r/x$i && $(cat "$m/r/y$i") == "$i" ]] || { echo "r/y$i after mv" >&2; return 1; }
		mkdir "$m/r/d$i" && echo "$i" >"$m/r/d$i/f" || return 1
		stat "$m/r/d$i/f" >/dev/null || return 1
		mv "$m/r/d$i" "$m/r/e$i" || return 1
		[[ ! -e $m/r/d$i/f && $(cat "$m/r/e$i/f") == "$i" ]] || { echo "r/e$i/f after mv" >&2; return 1; }
		if ((i % 2)); then
			rm "$m/r/y$i" "$m/r/e$i/f" || return 1
			[[ ! -e $m/r/y$i && ! -e $m/r/e$i/f ]] || { echo "r/y$i after rm" >&2; return 1; }
		fi
	done
}

start=$(date +%s.%N)
pids=()
for c in 1 2 3 4; do
	cp -a "$src" "$m/c$c" &
	pids+=($!)
done
churn &
churn_pid=$!
for p in "${pids[@]}"; do
	wait "$p" || fail "cp -a"
done
wait "$churn_pid" || fail "the rename and unlink loop"
sync
end=$(date +%s.%N)
echo "4 cp -a and the loop: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f s", b - a }')"

for c in 1 2 3 4; do
	diff -r --no-dereference "$src" "$m/c$c" || fail "diff -r of c$c through the mount"
done
stats_next "$WORK/stats" || fail "no stats"
peak=$(nfs_stat "$WORK/stats" nfs_ns_peak)
conns=$(nfs_stat "$WORK/stats" nfs_ns_conns)
echo "namespace contexts: $conns, most calls in flight at once: $peak"
[[ $conns == 4 ]] || fail "nfs_ns_conns $conns"
[[ $peak -gt 1 ]] || fail "nfs_ns_peak $peak: one namespace call at a time"
ufs_unmount ns "$m"

meta() {
	(cd "$1" && find . \( -type l -printf '%p %y %m %s %n\n' \) -o -printf '%p %y %m %s %n %Ts\n' | sort)
}
for c in 1 2 3 4; do
	diff -r --no-dereference "$src" "$WORK/export/c$c" || fail "diff -r of c$c on the export"
	diff <(meta "$src") <(meta "$WORK/export/c$c") || fail "metadata of c$c on the export"
done
for i in $(seq 60); do
	[[ ! -e $WORK/export/r/x$i && ! -e $WORK/export/r/d$i ]] || fail "r/x$i or r/d$i on the export"
	if ((i % 2)); then
		[[ ! -e $WORK/export/r/y$i && ! -e $WORK/export/r/e$i/f ]] || fail "r/y$i on the export"
	else
		[[ $(cat "$WORK/export/r/y$i") == "$i" && $(cat "$WORK/export/r/e$i/f") == "$i" ]] ||
			fail "r/y$i or r/e$i/f on the export"
	fi
done
echo "every copy and the loop's names right through the mount and on the export"

# One context: one call at a time.
nfs_mount one "$m" --ns-conns 1 --stats "$WORK/stats1"
pids=()
for c in 1 2 3; do
	cp -a "$src/d$c" "$m/one$c" &
	pids+=($!)
done
for p in "${pids[@]}"; do
	wait "$p" || fail "cp -a with --ns-conns 1"
done
for c in 1 2 3; do
	diff -r --no-dereference "$src/d$c" "$m/one$c" || fail "diff -r of one$c"
done
stats_next "$WORK/stats1" || fail "no stats"
peak=$(nfs_stat "$WORK/stats1" nfs_ns_peak)
echo "--ns-conns 1: most calls in flight at once: $peak"
[[ $peak == 1 ]] || fail "nfs_ns_peak $peak with --ns-conns 1"
ufs_unmount one "$m"
echo PASS
