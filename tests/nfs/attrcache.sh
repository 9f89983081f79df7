#!/usr/bin/env bash
# The NFS backend's attribute cache (--attr-cache): what this client changes
# shows at once (chmod, a write, truncate, create, unlink, rename), what
# another client changes on the server shows within the cache's lifetime,
# names found missing included; --attr-cache 0 keeps nothing.
source "$(dirname "$0")/common.sh"

nfs_server_start "$WORK/export"
nfs_mount ac "$WORK/mnt" --attr-cache 2s --stats "$WORK/stats"
# Another client: a second mount that caches nothing (the server's own
# attribute cache does not see changes made in the export directly).
nfs_mount other "$WORK/other" --no-cache --attr-cache 0
m=$WORK/mnt e=$WORK/other

mode() { stat -c %a "$1"; }
mode_is() { [[ $(mode "$1") == "$2" ]]; }
# within SECONDS CMD...: until CMD succeeds, polling every 0.1 s; fails after.
within() {
	local s=$1 t
	shift
	for ((t = 0; t < s * 10; t++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

echo hello >"$m/a"
[[ $(mode "$m/a") == 644 ]] || fail "a's mode $(mode "$m/a")"
chmod 600 "$m/a"
[[ $(mode "$m/a") == 600 ]] || fail "our chmod not shown at once: $(mode "$m/a")"
echo more >>"$m/a"
[[ $(stat -c %s "$m/a") == 11 ]] || fail "our write not shown at once: size $(stat -c %s "$m/a")"
truncate -s 3 "$m/a"
[[ $(stat -c %s "$m/a") == 3 ]] || fail "our truncate not shown at once"
mv "$m/a" "$m/b"
[[ ! -e $m/a && -e $m/b ]] || fail "our rename not shown at once"
rm "$m/b"
[[ ! -e $m/b ]] || fail "our unlink not shown at once"
stat "$m/c" 2>/dev/null && fail "c exists"
echo c >"$m/c"
[[ -e $m/c ]] || fail "our create after a lookup that found nothing not shown at once"
echo "this client's changes show at once"

# Another client's changes: within the lifetime (2 s), not necessarily at once.
mode "$m/c" >/dev/null
chmod 640 "$e/c"
within 3 mode_is "$m/c" 640 || fail "another client's chmod not shown within 3 s"
stat "$m/d" 2>/dev/null && fail "d exists"
echo d >"$e/d"
within 3 test -e "$m/d" || fail "another client's create not shown within 3 s"
stats_next "$WORK/stats"
hits=$(nfs_stat "$WORK/stats" nfs_attr_cache_hits)
echo "another client's changes show within the lifetime; cache hits $hits"
[[ ${hits:-0} -gt 0 ]] || fail "nothing was answered from the attribute cache"
ufs_unmount ac "$WORK/mnt"

# --attr-cache 0: every stat asks the server.
nfs_mount ac0 "$WORK/mnt" --attr-cache 0 --stats "$WORK/stats0"
mode "$m/c" >/dev/null
chmod 604 "$e/c"
[[ $(mode "$m/c") == 604 ]] || fail "--attr-cache 0: another client's chmod not shown at once"
ufs_unmount ac0 "$WORK/mnt"
ufs_unmount other "$WORK/other"
[[ $(nfs_stat "$WORK/stats0" nfs_attr_cache_hits) == 0 ]] || fail "--attr-cache 0 answered from a cache"
echo PASS
