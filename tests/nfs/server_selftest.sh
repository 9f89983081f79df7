#!/usr/bin/env bash
# The NFS server harness (tests/nfs/server.sh) itself: start ganesha on a
# temporary export, write a file with nfs-cp, SIGKILL the server, restart
# it on the same ports, read the file back with nfs-cat, stop it; no
# ganesha (nor an rpcbind it started) is left.
#
# With the path of us-bench-nfs-raw (bench/nfs-raw.c) as $1, also: the
# write verifier is the same for two streams to one server, and differs
# after the restart.
set -euo pipefail
RAW=${1:-}

here=$(cd "$(dirname "$0")" && pwd)

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

command -v nfs-cp >/dev/null && command -v nfs-cat >/dev/null ||
	{ echo "SKIP: no nfs-cp/nfs-cat (Debian: libnfs-utils)"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/us-nfs-selftest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
source "$here/server.sh"

nfs_server_start "$WORK/export"
[[ $NFS_URL == "nfs://127.0.0.1$WORK/export?nfsport=$NFS_PORT&mountport=$NFS_MNT_PORT&version=3" ]] ||
	fail "unexpected NFS_URL $NFS_URL"
pid1=$NFS_PID
rpcbind_pid=$NFS_RPCBIND_PID
kill -0 "$pid1" || fail "no ganesha after nfs_server_start"

head -c 3000000 /dev/urandom >"$WORK/src"
base=${NFS_URL%%\?*}
args=${NFS_URL#*\?}
[[ $(nfs_file_url d/f) == "$base/d/f?$args" ]] || fail "nfs_file_url d/f gives $(nfs_file_url d/f)"
nfs-cp "$WORK/src" "$base/f?$args" >/dev/null || fail "nfs-cp to the export"
cmp "$WORK/src" "$WORK/export/f" || fail "the exported file differs from what nfs-cp wrote"

# verifier FILE: the write verifier of a short WRITE3 UNSTABLE + COMMIT3 stream.
verifier() {
	"$RAW" --size 4M --block 256K "$base/$1?$args" >"$WORK/raw.json" ||
		fail "us-bench-nfs-raw to the export"
	sed -E 's/.*"verifier": "([0-9a-f]+)".*/\1/' "$WORK/raw.json"
}
if [[ -n $RAW ]]; then
	v1=$(verifier r1)
	v2=$(verifier r2)
	[[ $v1 =~ ^[0-9a-f]{16}$ ]] || fail "no verifier in $(cat "$WORK/raw.json")"
	[[ $v1 == "$v2" ]] || fail "the verifier changed without a restart: $v1 $v2"
fi

nfs_server_kill9
[[ -z $NFS_PID ]] || fail "NFS_PID still set after kill9"
[[ ! -e /proc/$pid1 ]] || fail "ganesha $pid1 still exists after kill9"
if timeout 5 nfs-ls "$NFS_URL" >/dev/null 2>&1; then
	fail "the export answers while the server is killed"
fi

nfs_server_restart
[[ -n $NFS_PID && $NFS_PID != "$pid1" ]] || fail "no new ganesha after restart"
nfs-cat "$base/f?$args" >"$WORK/back" || fail "nfs-cat after restart"
cmp "$WORK/src" "$WORK/back" || fail "read back after restart differs"
if [[ -n $RAW ]]; then
	v3=$(verifier r3)
	[[ $v3 != "$v1" ]] || fail "the write verifier did not change across the restart ($v1)"
fi

nfs_server_stop_for 1
nfs-cat "$base/f?$args" | cmp - "$WORK/src" || fail "read back after stop_for"

pid2=$NFS_PID
nfs_server_stop
[[ ! -e /proc/$pid2 ]] || fail "ganesha $pid2 still exists after stop"
grep -q "$WORK/export" "$NFS_SRV_DIR/ganesha.conf" || fail "no export in the config"

# The cleanup stops the rpcbind it started, and only that one.
nfs_server_cleanup
if [[ -n $rpcbind_pid ]]; then
	[[ ! -e /proc/$rpcbind_pid ]] || fail "rpcbind $rpcbind_pid (ours) left running"
fi
echo "PASS"
