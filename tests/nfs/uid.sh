#!/usr/bin/env bash
# Domains by uid with the NFS backend (-o allow_other): root and nobody
# each write a file; each write is charged to its user's domain, the files
# on the export belong to their writers and hold what was written.
source "$(dirname "$0")/common.sh"
command -v setpriv >/dev/null || skip "no setpriv (Debian: util-linux)"

# (made writable before ganesha starts: it caches the export's attributes)
mkdir -p "$WORK/export"
chmod 777 "$WORK/export"
chmod 755 "$WORK"
head -c 20M /dev/urandom >"$WORK/src"
chmod 644 "$WORK/src"
nfs_server_start "$WORK/export"
nfs_mount uid "$WORK/mnt" --domain-by uid --stats "$WORK/stats" -o allow_other
setpriv --reuid=65534 --regid=65534 --clear-groups \
	dd if="$WORK/src" of="$WORK/mnt/nobody" bs=1M conv=fsync status=none ||
	fail "nobody could not write"
head -c 10M "$WORK/src" >"$WORK/mnt/root"
stats_next "$WORK/stats" || fail "no stats file written"
n=$(stat_of "$WORK/stats" uid:65534 peak_charged)
r=$(stat_of "$WORK/stats" uid:0 peak_charged)
ufs_unmount uid "$WORK/mnt"
echo "peak charged: uid 65534 $n, uid 0 $r"
[[ -n $n && $n -gt 0 && -n $r && $r -gt 0 ]] || fail "the writes were not charged to their users' domains"
[[ $(stat -c %u:%g "$WORK/export/nobody") == 65534:65534 ]] || fail "nobody's file is not nobody's"
[[ $(stat -c %u "$WORK/export/root") == 0 ]] || fail "root's file is not root's"
cmp "$WORK/src" "$WORK/export/nobody" || fail "nobody's file differs"
cmp <(head -c 10M "$WORK/src") "$WORK/export/root" || fail "root's file differs"
echo PASS
