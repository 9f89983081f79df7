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

# stats_next FILE: returns once the daemon has written FILE again (it
# renames a new one into place each second), so that what is read next was
# taken after this call; waited for with inotify, 5 s at most (status 1).
stats_next() {
	python3 - "$1" <<'PY'
import ctypes, os, select, struct, sys, time
d, name = os.path.split(os.path.abspath(sys.argv[1]))
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
IN_MOVED_TO, IN_CLOSE_WRITE = 0x80, 0x8
if fd < 0 or libc.inotify_add_watch(fd, d.encode(), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
    sys.exit("inotify: " + os.strerror(ctypes.get_errno()))
end = time.monotonic() + 5
while time.monotonic() < end:
    if not select.select([fd], [], [], end - time.monotonic())[0]:
        break
    buf, off = os.read(fd, 65536), 0
    while off < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, off)
        ev = buf[off + 16:off + 16 + n].rstrip(b"\0").decode()
        off += 16 + n
        if ev == name:
            sys.exit(0)
sys.exit(1)
PY
}
