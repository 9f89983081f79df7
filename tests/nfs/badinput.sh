#!/usr/bin/env bash
# Bad mount targets for the NFS backend: a URL that does not parse, one with
# a port that is not a number, a server that does not answer (a port nobody
# listens on), an export the server does not have. Each: a message naming
# the problem on stderr, exit status 2, nothing mounted.
source "$(dirname "$0")/common.sh"

mkdir -p "$WORK/mnt"
# expect_bad NAME PATTERN URL: unstable-fuse URL exits 2 with a message
# matching PATTERN.
expect_bad() {
	local name=$1 pattern=$2 url=$3 rc=0
	timeout 60 "$UFS" "$url" "$WORK/mnt" -f >"$WORK/$name.out" 2>&1 || rc=$?
	mountpoint -q "$WORK/mnt" && { fusermount3 -u "$WORK/mnt"; fail "$name: mounted"; }
	[[ $rc -eq 2 ]] || { cat "$WORK/$name.out"; fail "$name: exit status $rc, not 2"; }
	grep -qE "$pattern" "$WORK/$name.out" ||
		{ cat "$WORK/$name.out"; fail "$name: no message matching '$pattern'"; }
	echo "$name: exit 2: $(head -1 "$WORK/$name.out")"
}

expect_bad no-server-part "bad NFS URL" "nfs://"
expect_bad no-export-part "bad NFS URL" "nfs://127.0.0.1"
expect_bad bad-port "bad NFS URL.*nfsport=abc is not a number" "nfs://127.0.0.1/x?nfsport=abc"

nfs_server_start "$WORK/export"
nfs__port dead
expect_bad no-server "does not answer" \
	"nfs://127.0.0.1$NFS_EXPORT?nfsport=$dead&mountport=$dead&version=3"
expect_bad no-export "no such export" "${NFS_URL/$NFS_EXPORT/$WORK/nonexistent}"
# And the right URL mounts.
nfs_mount ok "$WORK/mnt"
echo hello >"$WORK/mnt/f"
ufs_unmount ok "$WORK/mnt"
[[ $(cat "$WORK/export/f") == hello ]] || fail "the good URL did not work"
echo PASS
