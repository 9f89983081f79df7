# A real NFSv3 server for the tests and benchmarks: nfs-ganesha (FSAL VFS)
# on 127.0.0.1, on free ports, exporting one directory. Sourced (as root)
# by tests/nfs/*.sh and bench/nfs-vs-sync:
#
#   source tests/nfs/server.sh
#   nfs_server_start DIR       # sets NFS_URL, NFS_PID, NFS_PORT, NFS_MNT_PORT
#   ...                        # nfs://127.0.0.1/DIR?nfsport=P&mountport=Q&version=3
#   nfs-cat "$(nfs_file_url f)"  # a file of the export, for nfs-cp, nfs-cat...
#   nfs_server_kill9           # SIGKILL: what it had not committed is "lost"
#   nfs_server_restart         # same ports, same export, a new write verifier
#   nfs_server_stop_for 5      # down (connections refused) for 5 s, then back
#   nfs_server_pause_for 5     # SIGSTOP for 5 s: up but not answering
#   nfs_server_stop            # SIGTERM, then SIGKILL after 20 s
#
# Sourcing it exits 77 (skipped) when root, ganesha.nfsd, its VFS FSAL,
# rpcbind or nfs-ls (libnfs-utils) are missing; the functions return
# non-zero with a message on failure. Call them from the sourcing shell
# itself, not from a subshell ($(...), a pipeline): ganesha is its child,
# and it waits for it.
#
# Only one ganesha may run on this machine at a time (rpcbind registrations
# collide): sourcing takes `flock /tmp/us-nfs.lock` for the life of the
# script (waiting up to NFS_LOCK_WAIT seconds, default 240), held by a
# helper process that lets go when the script exits; no process the script
# starts inherits the lock, so a leftover never holds it.
#
# Cleanup: nfs_server_cleanup stops exactly the processes this library
# started, by pid (ganesha; rpcbind only when it started it) and removes its
# temporary directory (never DIR). Sourcing installs it on EXIT after any
# EXIT trap already set (so a FUSE client's cleanup, which writes back to
# the server, runs first); a script that sets its EXIT trap after sourcing
# must call nfs_server_cleanup from it, after its unmounts.

nfs__skip() {
	echo "SKIP: $*"
	exit 77
}

[[ $(id -u) -eq 0 ]] || nfs__skip "needs root (ganesha, rpcbind)"
command -v ganesha.nfsd >/dev/null || nfs__skip "no ganesha.nfsd (Debian: nfs-ganesha)"
compgen -G "/usr/lib/*/ganesha/libfsalvfs.so" >/dev/null ||
	compgen -G "/usr/lib*/ganesha/libfsalvfs.so" >/dev/null ||
	nfs__skip "no ganesha VFS FSAL (Debian: nfs-ganesha-vfs)"
NFS_RPCBIND=$(PATH=$PATH:/usr/sbin:/sbin command -v rpcbind || true)
[[ -n $NFS_RPCBIND ]] || nfs__skip "no rpcbind (Debian: rpcbind)"
command -v nfs-ls >/dev/null || nfs__skip "no nfs-ls (Debian: libnfs-utils)"

NFS_SRV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/us-nfs-srv.XXXXXX")
NFS_LOCK_PID=      # the lock holder's pid (see nfs__lock)

# nfs__lock_leaked: the lock is held, but only by processes that will never
# release it: an rpcbind (`flock /tmp/us-nfs.lock rpcbind -w` daemonizes
# with the locked fd) or an orphan (a test's child that outlived it, with
# the fd inherited); waiters (blocked in flock) are not holders. Prints
# them ("pid:name").
nfs__lock_leaked() {
	local fd p comm ppid leak=
	for fd in $(find /proc/[0-9]*/fd -lname /tmp/us-nfs.lock 2>/dev/null); do
		p=${fd#/proc/}
		p=${p%%/*}
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		[[ $(cat "/proc/$p/wchan" 2>/dev/null) == *lock* ]] && continue
		ppid=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null) || continue
		if [[ $comm == rpcbind || ($ppid == 1 && $comm != flock) ]]; then
			leak+=" $p:$comm"
		else
			return 1
		fi
	done
	[[ -n $leak ]] && echo "$leak"
}

# nfs__lock: takes /tmp/us-nfs.lock, waiting up to NFS_LOCK_WAIT seconds.
# The lock is held by a process of its own, `flock ... bash -c LOOP`, out
# of the script's process tree (no bare `wait` waits for it) and watching
# the script: it lets go when the script exits, however it exits. The
# script itself keeps no fd on the lock, so nothing it starts inherits it.
# A leaked lock (nfs__lock_leaked) is passed over when no ganesha runs
# (checked twice, a second apart): a script that holds the lock runs one.
nfs__lock() {
	local i leak ready=$NFS_SRV_DIR/lock.holder
	(
		flock -o -w "${NFS_LOCK_WAIT:-240}" /tmp/us-nfs.lock \
			bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1"
				while kill -0 "$2" 2>/dev/null; do sleep 0.5; done' \
			nfs-lock "$ready" "$$" </dev/null >/dev/null 2>&1 9>&- &
		echo $! >"$NFS_SRV_DIR/lock.flock"
	)
	for ((i = 0; ; i++)); do
		if [[ -s $ready ]]; then
			NFS_LOCK_PID=$(<"$ready")
			return 0
		fi
		kill -0 "$(<"$NFS_SRV_DIR/lock.flock")" 2>/dev/null || return 1 # timed out
		if ((i % 50 == 10)) && ! pgrep -x ganesha.nfsd >/dev/null &&
			leak=$(nfs__lock_leaked) && sleep 1 &&
			! pgrep -x ganesha.nfsd >/dev/null && [[ ! -s $ready ]]; then
			kill "$(<"$NFS_SRV_DIR/lock.flock")" 2>/dev/null || true
			echo "nfs_server: /tmp/us-nfs.lock is held only by$leak, which will" \
				"never release it, and no ganesha runs: going on without it" >&2
			return 0
		fi
		sleep 0.1
	done
}

nfs__lock || {
	echo "FAIL: another NFS server holds /tmp/us-nfs.lock" >&2
	rm -rf "$NFS_SRV_DIR"
	exit 1
}

NFS_PID=
NFS_URL=
NFS_EXPORT=
NFS_RPCBIND_PID=   # set only when this library started rpcbind
NFS_START_SEC=0    # a second in which the current ganesha answered

# nfs__port VAR: sets VAR to a port nobody listens on (TCP or UDP), not
# one this library already took.
nfs__taken=" "
nfs__port() {
	local p used
	used=$(ss -Hltun 2>/dev/null | awk '{ n = split($5, a, ":"); print a[n] }')
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 40000))
		[[ $nfs__taken == *" $p "* ]] && continue
		grep -qx "$p" <<<"$used" && continue
		nfs__taken+="$p "
		printf -v "$1" %s "$p"
		return 0
	done
	echo "nfs_server: no free port" >&2
	return 1
}

nfs__rpcbind() {
	pgrep -x rpcbind >/dev/null && return 0
	"$NFS_RPCBIND" -f -w </dev/null >"$NFS_SRV_DIR/rpcbind.log" 2>&1 9>&- &
	NFS_RPCBIND_PID=$!
	for _ in $(seq 50); do
		[[ -S /run/rpcbind.sock ]] && return 0
		kill -0 "$NFS_RPCBIND_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$NFS_RPCBIND_PID" 2>/dev/null && return 0
	cat "$NFS_SRV_DIR/rpcbind.log" >&2
	NFS_RPCBIND_PID=
	echo "nfs_server: rpcbind did not start" >&2
	return 1
}

nfs__config() {
	cat >"$NFS_SRV_DIR/ganesha.conf" <<EOF
# Written by tests/nfs/server.sh
NFS_CORE_PARAM {
	Bind_Addr = 127.0.0.1;
	NFS_Port = $NFS_PORT;
	MNT_Port = $NFS_MNT_PORT;
	NLM_Port = $NFS_NLM_PORT;
	Rquota_Port = $NFS_RQUOTA_PORT;
	# No rpc.statd here: no locking protocol, no quota protocol.
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Protocols = 3;
}
NFSv4 {
	RecoveryBackend = fs;
	RecoveryRoot = "$NFS_SRV_DIR/recovery";
	Graceless = true;
}
NFS_KRB5 {
	Active_krb5 = false;
}
LOG {
	Default_Log_Level = EVENT;
}
EXPORT {
	Export_Id = 1;
	Path = "$NFS_EXPORT";
	Pseudo = "$NFS_EXPORT";
	Protocols = 3;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	FSAL {
		Name = VFS;
	}
}
EOF
}

# nfs__launch: starts ganesha on the current config and waits until the
# export answers a directory listing (30 s at most).
nfs__launch() {
	local i
	# ganesha's write verifier derives from its boot time (in seconds):
	# start in a later second than the one in which the previous instance
	# was seen answering (its boot time is no later), so that it differs.
	while (($(date +%s) <= NFS_START_SEC)); do sleep 0.05; done
	ganesha.nfsd -F -f "$NFS_SRV_DIR/ganesha.conf" -L "$NFS_SRV_DIR/ganesha.log" \
		-p "$NFS_SRV_DIR/ganesha.pid" </dev/null >>"$NFS_SRV_DIR/ganesha.out" 2>&1 9>&- &
	NFS_PID=$!
	for i in $(seq 300); do
		if ! nfs__alive; then
			{ wait "$NFS_PID"; } 2>/dev/null || true
			NFS_PID=
			tail -n 20 "$NFS_SRV_DIR/ganesha.log" "$NFS_SRV_DIR/ganesha.out" >&2
			echo "nfs_server: ganesha.nfsd exited at start" >&2
			# It resolves Bind_Addr with AI_ADDRCONFIG: with no
			# address but loopback's (a bare network namespace),
			# 127.0.0.1 does not resolve.
			grep -q "No IP address found for 127.0.0.1" "$NFS_SRV_DIR/ganesha.log" &&
				echo "nfs_server: ganesha needs a network interface other" \
					"than lo with an address" >&2
			return 1
		fi
		if timeout 5 nfs-ls "$NFS_URL" >/dev/null 2>&1; then
			NFS_START_SEC=$(date +%s)
			return 0
		fi
		sleep 0.1
	done
	tail -n 20 "$NFS_SRV_DIR/ganesha.log" >&2
	echo "nfs_server: the export did not answer in 30 s" >&2
	nfs__reap KILL
	return 1
}

# nfs__alive: ganesha runs (a zombie, killed but not yet waited for, does not).
nfs__alive() {
	[[ -n $NFS_PID ]] && kill -0 "$NFS_PID" 2>/dev/null &&
		[[ $(awk '{ print $3 }' "/proc/$NFS_PID/stat" 2>/dev/null) != Z ]]
}

# nfs__reap SIGNAL [SECONDS]: signals ganesha and waits for it; SIGKILL
# when it is still there after SECONDS (default 20).
nfs__reap() {
	local sig=$1 secs=${2:-20} i
	[[ -n $NFS_PID ]] || return 0
	# (stderr closed: no "Killed" notice from the shell)
	{
		kill -CONT "$NFS_PID" || true
		kill -"$sig" "$NFS_PID" || true
		for ((i = 0; i < secs * 10; i++)); do
			nfs__alive || break
			sleep 0.1
		done
		! nfs__alive || kill -KILL "$NFS_PID" || true
		wait "$NFS_PID" || true
	} 2>/dev/null
	NFS_PID=
	return 0
}

# nfs_server_start DIR: exports DIR (created if missing) and starts the
# server; sets NFS_URL (the export's libnfs URL), NFS_PID, NFS_PORT,
# NFS_MNT_PORT.
nfs_server_start() {
	local dir=${1:?usage: nfs_server_start DIR}
	[[ -z $NFS_PID ]] || { echo "nfs_server_start: already running ($NFS_PID)" >&2; return 1; }
	mkdir -p "$dir" "$NFS_SRV_DIR/recovery" || return 1
	NFS_EXPORT=$(realpath "$dir")
	nfs__port NFS_PORT && nfs__port NFS_MNT_PORT && nfs__port NFS_NLM_PORT &&
		nfs__port NFS_RQUOTA_PORT || return 1
	NFS_URL="nfs://127.0.0.1$NFS_EXPORT?nfsport=$NFS_PORT&mountport=$NFS_MNT_PORT&version=3"
	export NFS_URL NFS_PID NFS_PORT NFS_MNT_PORT NFS_EXPORT
	nfs__rpcbind || return 1
	nfs__config
	nfs__launch
}

# nfs_server_kill9: SIGKILL, as a crash; returns when it is gone.
nfs_server_kill9() {
	[[ -n $NFS_PID ]] || { echo "nfs_server_kill9: not running" >&2; return 1; }
	nfs__reap KILL
}

# nfs_server_stop: a clean stop (SIGTERM; SIGKILL after 20 s).
nfs_server_stop() {
	nfs__reap TERM 20
}

# nfs_server_restart: starts it again (after a stop or kill9, or stops it
# first if it runs) on the same ports with the same export; its write
# verifier differs from the previous instance's.
nfs_server_restart() {
	[[ -n $NFS_EXPORT ]] || { echo "nfs_server_restart: never started" >&2; return 1; }
	[[ -z $NFS_PID ]] || nfs__reap TERM 20
	nfs__launch
}

# nfs_server_stop_for SECONDS: stopped (SIGKILL: ports closed, connections
# reset) for SECONDS, then restarted.
nfs_server_stop_for() {
	local secs=${1:?usage: nfs_server_stop_for SECONDS}
	nfs_server_kill9 || return 1
	sleep "$secs"
	nfs_server_restart
}

# nfs_server_pause_for SECONDS: SIGSTOP for SECONDS, then SIGCONT: the
# connections stay up but nothing is answered meanwhile.
nfs_server_pause_for() {
	local secs=${1:?usage: nfs_server_pause_for SECONDS}
	[[ -n $NFS_PID ]] || { echo "nfs_server_pause_for: not running" >&2; return 1; }
	kill -STOP "$NFS_PID" && sleep "$secs" && kill -CONT "$NFS_PID"
}

# nfs_file_url NAME: the URL of the file NAME in the export (libnfs form,
# for nfs-cp, nfs-cat, us-bench-nfs-raw).
nfs_file_url() {
	echo "${NFS_URL%%\?*}/${1#/}?${NFS_URL#*\?}"
}

# nfs_server_log: ganesha's log file.
nfs_server_log() {
	echo "$NFS_SRV_DIR/ganesha.log"
}

nfs_server_cleanup() {
	set +e
	nfs__reap TERM 20
	if [[ -n $NFS_RPCBIND_PID ]]; then
		kill "$NFS_RPCBIND_PID" 2>/dev/null
		wait "$NFS_RPCBIND_PID" 2>/dev/null || true
		NFS_RPCBIND_PID=
	fi
	# The lock last: its holder exits, and its flock with it.
	if [[ -n $NFS_LOCK_PID ]]; then
		kill "$NFS_LOCK_PID" 2>/dev/null
		NFS_LOCK_PID=
	fi
	[[ -n $NFS_SRV_DIR ]] && rm -rf "$NFS_SRV_DIR"
	NFS_SRV_DIR=
}

# Chain after the EXIT trap already set, and make INT/TERM run it too.
nfs__prev_trap=
nfs__trap_cmd() { nfs__prev_trap=${3-}; }
nfs__t=$(trap -p EXIT)
eval "nfs__trap_cmd $nfs__t"
# shellcheck disable=SC2064
trap "${nfs__prev_trap:+$nfs__prev_trap; }nfs_server_cleanup" EXIT
[[ -n $(trap -p INT) ]] || trap 'exit 130' INT
[[ -n $(trap -p TERM) ]] || trap 'exit 143' TERM
