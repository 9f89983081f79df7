# Helpers for the unstable-fuse tests, sourced by each tests/fuse/*.sh with
# the path of unstable-fuse as $1.
#
# A test exits 77 (skipped) when it cannot run here: not root, no
# /dev/fuse, no fusermount3, FUSE mounts refused, or (for the cgroup tests)
# no memory cgroup controller. Every mount, daemon and cgroup it makes is
# undone on exit, whatever happens (trap).
set -euo pipefail

UFS=${1:?usage: $0 PATH/TO/unstable-fuse}
UFS=$(realpath "$UFS")

skip() {
	echo "SKIP: $*"
	exit 77
}

# fail MESSAGE: fails the test, showing the end of every log and command
# output it kept in $WORK (daemon logs, dd's reports), so that a failure on
# a CI machine says why.
fail() {
	local f
	echo "FAIL: $*" >&2
	[[ -n ${WORK:-} ]] || exit 1
	for f in "$WORK"/*.log "$WORK"/*.out; do
		[[ -f $f ]] || continue
		# A sanitizer's report: its first lines (the error and the
		# stacks), which the end of a long report leaves out.
		if grep -q -E '^==[0-9]+==ERROR|runtime error:' "$f"; then
			echo "--- ${f##*/} (the sanitizer's report, first 60 lines)" >&2
			grep -m1 -A60 -E '^==[0-9]+==ERROR|runtime error:' "$f" >&2
		fi
		echo "--- ${f##*/} (last 15 lines)" >&2
		tail -n 15 "$f" >&2
	done
	exit 1
}

[[ $(id -u) -eq 0 ]] || skip "needs root (FUSE mounts, memory cgroups)"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
command -v fusermount3 >/dev/null || skip "no fusermount3 (Debian: fuse3)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/us-fuse-test.XXXXXX")
MOUNTS=()
PIDS=()
CGROUPS=()

cleanup() {
	local m p cg
	set +e
	for m in "${MOUNTS[@]}"; do
		# A mount whose daemon died answers stat with ENOTCONN, which
		# mountpoint(1) does not count as mounted: ask the mount table.
		if mountpoint -q "$m" || awk -v m="$m" '$5 == m { f = 1 } END { exit !f }' \
			/proc/self/mountinfo; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	for p in "${PIDS[@]}"; do
		# A daemon still running after its unmount is writing back:
		# give it time, then stop it.
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	for cg in "${CGROUPS[@]}"; do
		rmdir "$cg" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

# ufs_mount NAME BACKING MOUNTPOINT [unstable-fuse options...]: starts the
# daemon in the foreground (log in $WORK/NAME.log) and waits for the mount;
# sets UFS_PID_<NAME>.
ufs_mount() {
	local name=$1 backing=$2 mnt=$3 pid i
	shift 3
	mkdir -p "$backing" "$mnt"
	"$UFS" "$backing" "$mnt" -f "$@" >"$WORK/$name.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	MOUNTS+=("$mnt")
	for i in $(seq 200); do
		mountpoint -q "$mnt" && break
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$WORK/$name.log" >&2
			if grep -qiE "device not found|operation not permitted|permission denied" \
				"$WORK/$name.log"; then
				skip "FUSE mounts are refused here"
			fi
			fail "unstable-fuse exited before mounting"
		fi
		sleep 0.05
	done
	mountpoint -q "$mnt" || fail "$mnt was not mounted in 10 s"
	printf -v "UFS_PID_$name" %s "$pid"
}

# ufs_unmount NAME MOUNTPOINT: unmounts and waits for the daemon, which
# writes back and commits everything before it exits; fails unless it exits 0.
ufs_unmount() {
	local name=$1 mnt=$2 var="UFS_PID_$1" rc=0
	fusermount3 -u "$mnt" || fail "fusermount3 -u $mnt"
	wait "${!var}" || rc=$?
	if [[ $rc -ne 0 ]]; then
		cat "$WORK/$name.log" >&2
		fail "unstable-fuse ($name) exited with $rc"
	fi
}

# stat_of FILE DOMAIN KEY: a figure of one domain in a stats file ("/" is
# the root; otherwise the domain whose "cgroup" line is DOMAIN, or whose
# name is DOMAIN).
# chunk_check STATS DEFAULT ARGS: fails unless the stats file says the
# chunks were of the size ARGS ask with --chunk (N, NK or NM, "--chunk N"
# or "--chunk=N"), or DEFAULT bytes without it; prints the size.
chunk_check() {
	local want=$2 got mult=1
	if [[ $3 =~ --chunk[=\ ]([0-9]+)([kKmM]?) ]]; then
		case ${BASH_REMATCH[2]} in
		k | K) mult=1024 ;;
		m | M) mult=1048576 ;;
		esac
		want=$((BASH_REMATCH[1] * mult))
	fi
	got=$(awk '$1 == "chunk_bytes" { print $2; exit }' "$1")
	echo "chunks of ${got:-?} bytes"
	[[ $got == "$want" ]] || fail "chunks of ${got:-?} bytes, not $want"
	CHUNK=$got
}

stat_of() {
	awk -v dom="$2" -v key="$3" '
		BEGIN { RS = ""; FS = "\n" }
		{
			hit = 0
			for (i = 1; i <= NF; i++)
				if ($i == "domain " dom || $i == "cgroup " dom)
					hit = 1
			if (!hit)
				next
			for (i = 1; i <= NF; i++) {
				split($i, kv, " ")
				if (kv[1] == key) { print kv[2]; exit }
			}
		}' "$1"
}

# dd_rate LOGFILE: dd's throughput line ("... copied, 7.5 s, 71 MB/s") as MB/s.
dd_rate() {
	awk '/copied/ { print $(NF-1) " " $NF }' "$1" | tail -1
}

# Memory cgroups. cg_setup finds the controller (v1 or v2, whichever the
# machine has); cg_create NAME BYTES makes a cgroup under this process's own
# memory cgroup with that limit and sets CG_DIR to its directory.
cg_setup() {
	local rel
	if [[ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
		CG_VERSION=1
		rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
		CG_PARENT=/sys/fs/cgroup/memory${rel%/}
	elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		CG_VERSION=2
		rel=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
		CG_PARENT=/sys/fs/cgroup${rel%/}
		grep -qw memory "$CG_PARENT/cgroup.subtree_control" 2>/dev/null ||
			echo +memory >"$CG_PARENT/cgroup.subtree_control" 2>/dev/null ||
			skip "cannot enable the memory controller under $CG_PARENT"
	else
		skip "no memory cgroup controller"
	fi
}

cg_create() {
	local dir=$CG_PARENT/us-fuse-$1-$$
	mkdir "$dir" || skip "cannot create a memory cgroup in $CG_PARENT"
	CGROUPS+=("$dir")
	cg_limit "$dir" "$2"
	CG_DIR=$dir
}

cg_limit() {
	if [[ $CG_VERSION == 1 ]]; then
		echo "$2" >"$1/memory.limit_in_bytes"
	else
		echo "$2" >"$1/memory.max"
	fi
}

# cg_oom_kills DIR: processes the kernel OOM-killed in the cgroup.
cg_oom_kills() {
	local f=$1/memory.events
	[[ $CG_VERSION == 1 ]] && f=$1/memory.oom_control
	awk '$1 == "oom_kill" { print $2; found = 1 } END { if (!found) print 0 }' "$f"
}

# cg_run DIR COMMAND...: runs COMMAND inside the cgroup.
cg_run() {
	local dir=$1
	shift
	bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' cg_run "$dir" "$@"
}
