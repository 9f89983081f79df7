# Helpers for the NFS backend tests (tests/nfs/*.sh), sourced with the path
# of unstable-fuse as $1: tests/fuse/common.sh (root, /dev/fuse, cleanup of
# mounts and daemons; skip with 77) and tests/nfs/server.sh (a ganesha on
# 127.0.0.1 on free ports, under /tmp/us-nfs.lock; skip with 77 without it).
# The FUSE cleanup runs first at exit (it writes back to the server), then
# the server's.
here_nfs=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here_nfs/../fuse/common.sh"
[[ $("$UFS" --help 2>/dev/null) == *nfs://SERVER* ]] ||
	skip "unstable-fuse was built without libnfs (Debian: libnfs-dev): no NFS backend"
source "$here_nfs/server.sh"

# nfs_mount NAME MOUNTPOINT [unstable-fuse options...]: mounts $NFS_URL
# (log in $WORK/NAME.log), waits for the mount; sets UFS_PID_<NAME>.
nfs_mount() {
	local name=$1 mnt=$2 pid
	shift 2
	mkdir -p "$mnt"
	# (fd 9, the NFS server lock, not inherited)
	"$UFS" "$NFS_URL" "$mnt" -f "$@" >"$WORK/$name.log" 2>&1 9>&- &
	pid=$!
	PIDS+=("$pid")
	MOUNTS+=("$mnt")
	for _ in $(seq 200); do
		mountpoint -q "$mnt" && break
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$WORK/$name.log" >&2
			if grep -qiE "device not found|operation not permitted" "$WORK/$name.log"; then
				skip "FUSE mounts are refused here"
			fi
			fail "unstable-fuse exited before mounting"
		fi
		sleep 0.05
	done
	mountpoint -q "$mnt" || fail "$mnt was not mounted in 10 s"
	printf -v "UFS_PID_$name" %s "$pid"
}

# nfs_stat FILE KEY: a line "KEY N" of the stats file's "backend nfs" block.
nfs_stat() {
	awk -v key="$2" '$1 == key { print $2; exit }' "$1"
}

# wait_exported FILE BYTES PID: until FILE (in the export) holds BYTES, or
# PID has exited (the caller checks which). Polls every 10 ms, 5 s at most:
# a fixed delay could miss a write of about a second.
wait_exported() {
	local size
	for _ in $(seq 500); do
		size=$(stat -c %s "$1" 2>/dev/null || echo 0)
		[[ $size -ge $2 ]] && return 0
		kill -0 "$3" 2>/dev/null || return 0
		sleep 0.01
	done
}
