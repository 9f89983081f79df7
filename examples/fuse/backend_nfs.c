/*
 * unstable-fuse: the NFSv3 backend (libnfs). The mount target is a libnfs
 * URL, nfs://SERVER/EXPORT[?nfsport=N&mountport=N&...].
 *
 * TWO CONTEXTS AND A CONNECTION
 *
 *   ns    the namespace: libnfs's synchronous high-level calls (stat, open,
 *         create, unlink, rename, readdir, setattr...), one at a time under
 *         ns_lock (a libnfs context is not thread-safe). libnfs reconnects
 *         it by itself.
 *   data  raw async COMMIT3, READ3 and --no-cache WRITE3 FILE_SYNC on the
 *         RPC context of a second mount, owned by one service thread that
 *         polls its socket (rpc_which_events/rpc_service). Every call on it
 *         is made under lock, by the service thread or by a thread queueing
 *         a request (which then wakes the service thread through a pipe).
 *         Its file handles are the raw NFS handles (nfs_get_fh() of the
 *         namespace's open files), valid on any connection.
 *   write the engine's WRITE3 UNSTABLE calls: a TCP connection of our own
 *         to the same NFS port, our own ONC RPC encoding, sent by the
 *         flushing thread straight from the chunks (no copy in user space),
 *         replies read by the service thread ("The write connection").
 *
 * THE DATA PATH
 *
 *   flush    the run is cut into WRITE3 RPCs of adjacent chunks, up to
 *            NB_RPC_BYTES (256 KiB) and the server's wtmax, stable = UNSTABLE,
 *            clipped to the logical size, each sent with one sendmsg() from
 *            the chunks under the inode's data_lock (shared). At most
 *            --rpcs RPCs are in flight on the server, NB_FILE_RPCS of one
 *            file: the flush waits for a slot before it takes data_lock. A
 *            reply UNSTABLE completes its chunks US_WRITE_UNSTABLE with a
 *            sequence number taken when the reply is handled; a reply
 *            FILE_SYNC or DATA_SYNC completes them
 *            stable. 1 GiB through a 60 MiB max: 122 and 135 MB/s with one
 *            libnfs WRITE3 per 128 KiB chunk (copied into the RPC), 233 and
 *            234 MB/s this way (runs alternating, raw stream 316 and 275).
 *   commit   COMMIT3 of the file, with the last sequence number handed out
 *            and the backend's epoch sampled before it is sent: every write
 *            numbered up to it had its reply, so the server had it.
 *   verifier every WRITE3 and COMMIT3 reply carries the server's write
 *            verifier. The first one is kept; a reply with another one
 *            means the server restarted and forgot what it had not
 *            committed: us_backend_commit_lost() (every unstable chunk is
 *            dirty again and written again from the cache, and commits of
 *            the old epoch are refused), the new verifier kept, counted.
 *            A commit reply with the verifier the writes got reports
 *            us_object_commit_done_epoch().
 *   replies  are handled by the service thread, in order: the verifier is
 *            compared in one place, and engine completions are made
 *            without lock, after rpc_service() returns.
 *   loss     a dead data context (rpc_service() fails, or the socket
 *            closes): it is destroyed, which fails every RPC in flight on
 *            it; commits are kept and sent again after the reconnect. The
 *            service thread mounts again with backoff (50 ms doubling to
 *            250 ms); meanwhile a commit is kept to be sent on reconnect,
 *            and reads wait (a hard mount). A dead write connection (an
 *            error, the server's close, no reply in 10 s): its writes
 *            complete US_WRITE_ERROR (the engine makes them dirty again and
 *            retries with backoff) and it is connected again with the same
 *            backoff; meanwhile a flush waits up to 1 s for it, then fails
 *            its writes (kept dirty, retried by the engine, so writers
 *            throttle at their dirty limit and the domain's max holds).
 *   read     uncached chunks: READ3 through the data context, waited for.
 *   --no-cache  writes are WRITE3 FILE_SYNC, sent and waited for.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "backend.h"
#include "rpc_reply.h"
#include "ufuse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/* What nfs_get_fh() returns: libnfs's struct nfs_fh (libnfs-private.h),
 * which its public headers leave opaque. */
struct lnfs_fh {
	int len;
	char *val;
};

#define NB_MAX_WSIZE ((uint64_t)1 << 20)
#define NB_MAX_GROUP 64 /* chunks in one WRITE3 at most */
/*
 * Bytes in one WRITE3 at most (and the server's wtmax). 1 GiB through a
 * 60 MiB and a 2 GiB max, runs alternating, MB/s: 542, 480 / 241, 193 with
 * 256 KiB; 429, 258 / 177, 151 with 512 KiB; 533, 166 / 129, 142 with
 * 1 MiB (ganesha receives a large record into a buffer of its own).
 */
#define NB_RPC_BYTES ((uint64_t)256 << 10)
/*
 * WRITE3s of one file in flight at most (--rpcs caps the mount's). The
 * server's writes to one file take its inode lock in turn (ext4's i_rwsem
 * under ganesha's VFS FSAL), and with more in flight its waiting threads
 * spin on it while the holder copies. Paired single runs (1 GiB, runs
 * alternating, median of the pairs' ratios, files removed through the
 * server): 4 against 2, 1.19x at 2 GiB; 8 against 4, 1.14x at 2 GiB; 16
 * against 8, 1.01x; 8 against 2, 1.02x at 5 MiB and 1.21x at 60 MiB, for
 * 0.1-0.3 s more of the server's CPU per GiB. (2 had been chosen from runs
 * against a server that kept every earlier run's removed file open, and
 * spent 3 to 5 times the CPU per GiB: there 4 had lost to 2.)
 */
#define NB_FILE_RPCS 8
#define WC_TIMEOUT_MS 10000 /* no reply for this long: the write connection is dropped */
#define WC_HDR_MAX 512	    /* a WRITE3 call's bytes before its data */
#define WC_RBUF (UFS_RPC_RECORD_MAX + 4) /* received bytes: a whole fragment fits */

struct ufs_bfile {
	char *path;	    /* absolute in the export, as opened */
	struct nfsfh *nfh;  /* files: open on the namespace context */
	struct nfsdir *dir; /* directories */
	char fh[NFS3_FHSIZE];
	unsigned fhlen;
	unsigned inflight; /* data RPCs in flight or waiting to be resent; under nb->lock */
	unsigned wslots;   /* WRITE3s on the write connection (wc_slot); under nb->lock */
};

enum req_kind { REQ_WRITE, REQ_COMMIT, REQ_READ };

/*
 * A chunk written in several WRITE3s (its pages to write are not all
 * adjacent): it is completed once every one of them has ended, with the
 * worst of their results (enum us_write_result is in that order).
 */
struct part {
	atomic_uint left; /* WRITE3s not ended, plus one while the flush sends */
	/* The worst result so far (high 32 bits) and its errno (low), moved
	 * together. */
	_Atomic uint64_t worst;
};

struct req {
	enum req_kind kind;
	struct nb *nb;
	struct ufs_bfile *file;
	struct req *next;
	/* engine writes on the write connection: its list, call id, when queued */
	struct req *wnext;
	uint32_t xid;
	struct timespec queued;
	/* engine writes and commits */
	us_object *obj;
	us_buf *bufs[NB_MAX_GROUP];
	unsigned nbufs;
	struct part *part; /* a write of some pages of bufs[0] (nfs_flush()) */
	uint64_t seq, epoch; /* commit: what it covers, of which epoch */
	/* waited-for requests (reads, --no-cache writes) */
	bool waited, done;
	/* the request */
	uint64_t offset;
	uint32_t count;
	stable_how stable;
	char *data; /* write: the bytes (freed once encoded); read: where to put them */
	/* the result: 0, a negative errno, or -ENOTCONN (the connection went) */
	int status;
	stable_how committed;
	char verf[NFS3_WRITEVERFSIZE];
	uint32_t got; /* bytes written or read */
	bool eof;
};

/* Its four locks, ns_lock, send_lock, lock and ac_lock, are ranks 7 to 10
 * of the client's order (ufuse.h "LOCKS"). */
struct nb {
	struct ufs *fs;
	char *url;
	char *server, *export;

	pthread_mutex_t ns_lock;
	struct nfs_context *ns;
	/* The attribute cache (below): its slots, generation, lifetime. */
	pthread_mutex_t ac_lock;
	struct ac_ent *ac;
	uint64_t ac_gen, ac_ttl_ns;
	uint32_t name_max; /* the server's, from PATHCONF3 (0: not known) */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* a slot, a reply, the connection back */
	struct nfs_context *data;
	struct rpc_context *rpc;
	bool up, stop;
	int wake[2];
	unsigned inflight, cap;
	uint64_t wsize, rsize;
	struct req *done, **done_tail; /* engine completions to make, without lock */
	struct req *retry;	       /* commits to send again after a reconnect */
	pthread_t thread;
	bool thread_started;

	/* The write connection (see "The write connection"): wfd and wgen
	 * change under send_lock and lock both; wq, wup, xid under lock. */
	pthread_mutex_t send_lock;
	int wfd;
	bool wup;
	uint64_t wgen;
	uint32_t xid;
	struct req *wq, **wq_tail; /* in flight, oldest first */
	struct sockaddr_storage waddr;
	socklen_t waddrlen;
	uint8_t cred[128]; /* AUTH_UNIX: flavor, length, body */
	size_t credlen;
	/* only the service thread */
	uint8_t *rbuf;
	size_t rlen;
	struct ufs_rpc_record *rec; /* a reply record's fragments (rpc_reply.h) */
	struct timespec wnext_try;
	unsigned wbackoff_ms;
	char verf[NFS3_WRITEVERFSIZE];
	bool have_verf;

	/* statistics (atomic: the stats thread reads them) */
	atomic_uint_fast64_t writes, write_bytes, stable_replies, commits, verf_changes, lost_bufs,
		reconnects, write_errors, commit_errors, reads, outage_ms, outage_last_ms,
		wreconnects, peak_file_rpcs, page_writes, ac_hits, ac_misses;
	struct timespec down_since;
};

static struct nb *nb_of(struct ufs *fs)
{
	return fs->be_priv;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - t->tv_sec) * 1000 +
	       (uint64_t)((now.tv_nsec - t->tv_nsec) / 1000000);
}

/* "." or "a/b" to "/" or "/a/b". NULL on ENOMEM. */
static char *abs_path(const char *rel)
{
	char *p;

	if (strcmp(rel, ".") == 0)
		return strdup("/");
	if (asprintf(&p, "/%s", rel) < 0)
		return NULL;
	return p;
}

/*
 * The attribute cache. With the kernel asking for every attribute
 * (attr_timeout 0, fs.c) and libnfs walking each path from the export's
 * root, a stat through NFS is a round trip per path component: a copy of
 * 792 files and directories (cp -a /usr/include/linux) made 8,472 path
 * stats, 11 per file, most of them of a name looked at a moment before. So
 * an lstat or stat by path is answered from here for up to --attr-cache
 * (default 1 s, like the Linux NFS client's attribute cache, whose shortest
 * is 3 s), and a name found missing too. What this client changes it
 * forgets at once: a name and its parent after a call that makes, removes
 * or changes it, everything after a rename, link or unlink (other names of
 * the same file), a file's name when a write of its data is answered. A
 * change made by another client shows after the lifetime at most, as with
 * NFS's own attribute cache. An answer that raced a change (the cache's
 * generation moved while it was asked) is not kept.
 */
#define AC_SLOTS 4096

struct ac_ent {
	char *path; /* NULL: free */
	bool follow;
	int rc; /* 0, or -ENOENT */
	struct stat st;
	uint64_t until_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static size_t ac_slot(const char *path, bool follow)
{
	uint64_t h = 1469598103934665603ull ^ follow;

	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 1099511628211ull;
	return (size_t)(h % AC_SLOTS);
}

/* A cached answer for path: true with *rc (and *st); false with the
 * generation to give ac_put(). */
static bool ac_get(struct nb *nb, const char *path, bool follow, struct stat *st, int *rc,
		   uint64_t *gen)
{
	struct ac_ent *e;
	bool hit = false;

	*gen = 0;
	if (!nb->ac)
		return false;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	e = &nb->ac[ac_slot(path, follow)];
	if (e->path && e->follow == follow && strcmp(e->path, path) == 0 &&
	    mono_ns() < e->until_ns) {
		*rc = e->rc;
		*st = e->st;
		hit = true;
	}
	*gen = nb->ac_gen;
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	atomic_fetch_add(hit ? &nb->ac_hits : &nb->ac_misses, 1);
	return hit;
}

static void ac_put(struct nb *nb, const char *path, bool follow, int rc, const struct stat *st,
		   uint64_t gen)
{
	struct ac_ent *e;
	char *copy;

	if (!nb->ac || (rc != 0 && rc != -ENOENT) || !(copy = strdup(path)))
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (gen == nb->ac_gen) {
		e = &nb->ac[ac_slot(path, follow)];
		free(e->path);
		e->path = copy;
		copy = NULL;
		e->follow = follow;
		e->rc = rc;
		if (rc == 0)
			e->st = *st;
		e->until_ns = mono_ns() + nb->ac_ttl_ns;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	free(copy);
}

/* Under ac_lock: forgets path's answers. */
static void ac_drop(struct nb *nb, const char *path)
{
	for (int follow = 0; follow < 2; follow++) {
		struct ac_ent *e = &nb->ac[ac_slot(path, follow)];

		if (e->path && strcmp(e->path, path) == 0) {
			free(e->path);
			e->path = NULL;
		}
	}
}

/* Forgets what is cached of path and of its parent directory. */
static void ac_forget(struct nb *nb, const char *path)
{
	const char *slash;

	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	ac_drop(nb, path);
	if ((slash = strrchr(path, '/'))) {
		char parent[PATH_MAX];
		size_t n = slash == path ? 1 : (size_t)(slash - path);

		if (n < sizeof(parent)) {
			memcpy(parent, path, n);
			parent[n] = '\0';
			ac_drop(nb, parent);
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets everything. */
static void ac_clear(struct nb *nb)
{
	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	for (size_t i = 0; i < AC_SLOTS; i++) {
		free(nb->ac[i].path);
		nb->ac[i].path = NULL;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

static void st_from(struct stat *st, const struct nfs_stat_64 *s)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = (dev_t)s->nfs_dev;
	st->st_ino = (ino_t)s->nfs_ino;
	st->st_mode = (mode_t)s->nfs_mode;
	st->st_nlink = (nlink_t)s->nfs_nlink;
	st->st_uid = (uid_t)s->nfs_uid;
	st->st_gid = (gid_t)s->nfs_gid;
	st->st_rdev = (dev_t)s->nfs_rdev;
	st->st_size = (off_t)s->nfs_size;
	st->st_blksize = (blksize_t)s->nfs_blksize;
	st->st_blocks = (blkcnt_t)s->nfs_blocks;
	st->st_atim.tv_sec = (time_t)s->nfs_atime;
	st->st_atim.tv_nsec = (long)s->nfs_atime_nsec;
	st->st_mtim.tv_sec = (time_t)s->nfs_mtime;
	st->st_mtim.tv_nsec = (long)s->nfs_mtime_nsec;
	st->st_ctim.tv_sec = (time_t)s->nfs_ctime;
	st->st_ctim.tv_nsec = (long)s->nfs_ctime_nsec;
}

/* ------------------------------------------------------------------------ */
/* Mounting                                                                  */

/* Whether a numeric argument of the URL is not a number (libnfs reads
 * "nfsport=abc" as 0: the portmapper); the reason in err. */
static bool bad_args(const char *url, char *err, size_t errlen)
{
	static const char *const numeric[] = { "nfsport=", "mountport=", "version=",	  "uid=",
					       "gid=",	   "readahead=", "autoreconnect=" };
	const char *q = strchr(url, '?');

	while (q && *q) {
		q++;
		for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
			size_t n = strlen(numeric[i]);
			const char *v = q + n;

			if (strncmp(q, numeric[i], n) != 0)
				continue;
			if (*v == '-')
				v++;
			if (!(*v >= '0' && *v <= '9')) {
				snprintf(err, errlen, "bad NFS URL '%s': %.*s is not a number", url,
					 (int)strcspn(q, "&"), q);
				return true;
			}
			while (*v >= '0' && *v <= '9')
				v++;
			if (*v && *v != '&') {
				snprintf(err, errlen, "bad NFS URL '%s': %.*s is not a number", url,
					 (int)strcspn(q, "&"), q);
				return true;
			}
		}
		q = strchr(q, '&');
	}
	return false;
}

/* A new context mounted on the URL; NULL with the reason in err. */
static struct nfs_context *mount_ctx(const char *url, bool data, char *err, size_t errlen,
				     char **server, char **export)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u;

	if (!nfs) {
		snprintf(err, errlen, "cannot create an NFS context");
		return NULL;
	}
	if (bad_args(url, err, errlen)) {
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (!(u = nfs_parse_url_dir(nfs, url))) {
		snprintf(err, errlen, "bad NFS URL '%s': %s", url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	if (!u->server || !*u->server || !u->path || !*u->path) {
		snprintf(err, errlen, "bad NFS URL '%s': no server or no export", url);
		goto fail;
	}
	/* The ports are the URL's; NFSv3 only. */
	nfs_set_version(nfs, NFS_V3);
	nfs_set_timeout(nfs, 10000);
	/* The data context is reconnected by the service thread, with
	 * backoff; libnfs's own reconnect would retry at once, for ever, and
	 * resend by itself. */
	if (data)
		nfs_set_autoreconnect(nfs, 0);
	if (nfs_mount(nfs, u->server, u->path) != 0) {
		const char *e = nfs_get_error(nfs) ? nfs_get_error(nfs) : "?";
		const char *why = "cannot mount";

		if (strstr(e, "NOENT") || strstr(e, "not exported") || strstr(e, "ACCES"))
			why = "no such export (or not exported to us)";
		else if (strstr(e, "nfs_service failed") || strstr(e, "connect") ||
			 strstr(e, "not available") || strstr(e, "timed out") ||
			 strstr(e, "Connection"))
			why = "the NFS server does not answer";
		snprintf(err, errlen, "%s:%s: %s (%s)", u->server, u->path, why, e);
		goto fail;
	}
	if (server && !*server)
		*server = strdup(u->server);
	if (export && !*export)
		*export = strdup(u->path);
	nfs_destroy_url(u);
	return nfs;
fail:
	nfs_destroy_url(u);
	nfs_destroy_context(nfs);
	return NULL;
}

static void wc_cred(struct nb *nb);
static int wc_connect(struct nb *nb);

struct pathconf_wait {
	bool done;
	uint32_t name_max;
};

static void pathconf_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct pathconf_wait *w = priv;
	PATHCONF3res *res = data;

	(void)rpc;
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK)
		w->name_max = res->PATHCONF3res_u.resok.name_max;
	w->done = true;
}

/* The longest name the server takes (PATHCONF3 of the export's root), for
 * statfs: libnfs's own statvfs reports 256, so that a program that
 * creates a name of NAME_MAX bytes (as pjdfstest does) was refused. 0
 * when the server does not say. Before the service thread runs: the call is
 * serviced here, on the namespace context, within 5 s. */
static uint32_t server_name_max(struct nb *nb)
{
	struct rpc_context *rpc = nfs_get_rpc_context(nb->ns);
	struct pathconf_wait *w = calloc(1, sizeof(*w));
	struct nfsfh *root = NULL;
	struct lnfs_fh *fh;
	uint32_t max = 0;
	PATHCONF3args a;
	int i;

	if (!w || nfs_open(nb->ns, "/", O_RDONLY, &root) != 0 ||
	    !(fh = (struct lnfs_fh *)nfs_get_fh(root)))
		goto out;
	a.object.data.data_len = (u_int)fh->len;
	a.object.data.data_val = fh->val;
	if (rpc_nfs3_pathconf_async(rpc, pathconf_cb, &a, w) != 0)
		goto out;
	for (i = 0; i < 50 && !w->done; i++) {
		struct pollfd pfd = { .fd = rpc_get_fd(rpc), .events = (short)rpc_which_events(rpc) };

		if (poll(&pfd, 1, 100) < 0 || rpc_service(rpc, pfd.revents) < 0)
			break;
	}
	if (!w->done) {
		/* Not answered in time: the call stays queued on the context,
		 * whose callback may still write into w; left to it. */
		w = NULL;
		goto out;
	}
	/* As the Linux NFS client: at most NFS3's 255 (ganesha says 1024
	 * over a filesystem that takes 255). */
	max = w->name_max < 255 ? w->name_max : 255;
out:
	free(w);
	if (root)
		nfs_close(nb->ns, root);
	return max;
}

static int nfs_attach(struct ufs *fs, const char *target)
{
	struct nb *nb = calloc(1, sizeof(*nb));
	char err[1024];

	if (!nb || !(nb->url = strdup(target))) {
		free(nb);
		fprintf(stderr, "unstable-fuse: out of memory\n");
		return -ENOMEM;
	}
	nb->fs = fs;
	nb->wake[0] = nb->wake[1] = -1;
	pthread_mutex_init(&nb->ns_lock, NULL);
	pthread_mutex_init(&nb->ac_lock, NULL);
	nb->ac_ttl_ns = fs->opt.attr_cache_ns;
	if (nb->ac_ttl_ns && !(nb->ac = calloc(AC_SLOTS, sizeof(*nb->ac)))) {
		free(nb->url);
		free(nb);
		fprintf(stderr, "unstable-fuse: out of memory\n");
		return -ENOMEM;
	}
	pthread_mutex_init(&nb->lock, NULL);
	pthread_mutex_init(&nb->send_lock, NULL);
	pthread_cond_init(&nb->cond, NULL);
	nb->done_tail = &nb->done;
	nb->wq_tail = &nb->wq;
	nb->wfd = -1;
	nb->wbackoff_ms = 50;
	nb->cap = fs->opt.rpcs ? fs->opt.rpcs : 16;
	fs->be_priv = nb;
	if (!(nb->ns = mount_ctx(target, false, err, sizeof(err), &nb->server, &nb->export)) ||
	    !(nb->data = mount_ctx(target, true, err, sizeof(err), NULL, NULL))) {
		fprintf(stderr, "unstable-fuse: %s\n", err);
		goto fail;
	}
	nb->rpc = nfs_get_rpc_context(nb->data);
	nb->wsize = min_u64(nfs_get_writemax(nb->data), NB_MAX_WSIZE);
	nb->rsize = min_u64(nfs_get_readmax(nb->data), NB_MAX_WSIZE);
	if (nb->wsize < UFS_CHUNK_BYTES || nb->rsize < 4096) {
		fprintf(stderr, "unstable-fuse: %s: the server's write size %llu is under %llu\n",
			target, (unsigned long long)nb->wsize, (unsigned long long)UFS_CHUNK_BYTES);
		goto fail;
	}
	nb->wsize -= nb->wsize % UFS_CHUNK_BYTES;
	/* The write connection goes where the data context went: the
	 * server's NFS port. */
	nb->waddrlen = sizeof(nb->waddr);
	if (getpeername(rpc_get_fd(nb->rpc), (struct sockaddr *)&nb->waddr, &nb->waddrlen) != 0 ||
	    !(nb->rbuf = malloc(WC_RBUF)) || !(nb->rec = calloc(1, sizeof(*nb->rec)))) {
		fprintf(stderr, "unstable-fuse: %s: no address for the write connection: %s\n",
			target, strerror(errno));
		goto fail;
	}
	wc_cred(nb);
	if ((nb->wfd = wc_connect(nb)) < 0) {
		fprintf(stderr, "unstable-fuse: %s: the write connection: %s\n", target,
			strerror(errno));
		goto fail;
	}
	nb->wup = true;
	if (pipe2(nb->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "unstable-fuse: pipe: %s\n", strerror(errno));
		goto fail;
	}
	nb->name_max = server_name_max(nb);
	nb->up = true;
	return 0;
fail:
	if (nb->wfd >= 0)
		close(nb->wfd);
	free(nb->rbuf);
	free(nb->rec);
	if (nb->ns)
		nfs_destroy_context(nb->ns);
	if (nb->data)
		nfs_destroy_context(nb->data);
	free(nb->server);
	free(nb->export);
	free(nb->url);
	free(nb->ac); /* (empty: nothing was looked up yet) */
	free(nb);
	fs->be_priv = NULL;
	return -EHOSTUNREACH;
}

/* ------------------------------------------------------------------------ */
/* The service thread                                                        */

static void poke(struct nb *nb)
{
	char c = 1;

	if (write(nb->wake[1], &c, 1) < 0) {
		/* full: the thread is awake anyway */
	}
}

/* Under lock: a request is over (its RPC answered or failed). */
static void req_finish(struct nb *nb, struct req *r)
{
	if (r->waited) {
		r->done = true;
	} else {
		r->next = NULL;
		*nb->done_tail = r;
		nb->done_tail = &r->next;
	}
	pthread_cond_broadcast(&nb->cond);
}

/* Under lock: one fewer RPC in flight. An engine's commit counts for its
 * file until its completion is reported (req_complete()): a drain that
 * returned before would let the object be destroyed under the report. */
static void rpc_gone(struct nb *nb, struct req *r)
{
	nb->inflight--;
	if (r->kind != REQ_COMMIT || r->waited)
		r->file->inflight--;
}

static int reply_status(int status, int nfsstat)
{
	if (status != RPC_STATUS_SUCCESS)
		return -ENOTCONN;
	if (nfsstat == NFS3ERR_JUKEBOX)
		return -EAGAIN;
	return nfsstat == NFS3_OK ? 0 : nfsstat3_to_errno(nfsstat);
}

/* The callbacks run on the service thread, inside rpc_service() (or the
 * context's destruction), under lock: they record the reply and finish the
 * request. */
static void write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	WRITE3res *res = data;

	(void)rpc;
	rpc_gone(r->nb, r);
	r->status = reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == 0) {
		r->committed = res->WRITE3res_u.resok.committed;
		r->got = res->WRITE3res_u.resok.count;
		memcpy(r->verf, res->WRITE3res_u.resok.verf, sizeof(r->verf));
		if (r->got < r->count)
			r->status = -EAGAIN; /* a short write: all of it again */
	}
	req_finish(r->nb, r);
}

static void commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	struct nb *nb = r->nb;
	COMMIT3res *res = data;

	(void)rpc;
	r->status = reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == -ENOTCONN && !nb->stop && !r->waited) {
		/* Sent again once reconnected: still counted in flight. */
		r->next = nb->retry;
		nb->retry = r;
		return;
	}
	rpc_gone(nb, r);
	if (r->status == 0)
		memcpy(r->verf, res->COMMIT3res_u.resok.verf, sizeof(r->verf));
	req_finish(nb, r);
}

static void read_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	READ3res *res = data;

	(void)rpc;
	rpc_gone(r->nb, r);
	r->status = reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == 0) {
		READ3resok *ok = &res->READ3res_u.resok;

		r->got = (uint32_t)min_u64(ok->data.data_len, r->count);
		memcpy(r->data, ok->data.data_val, r->got);
		r->eof = ok->eof;
	}
	req_finish(r->nb, r);
}

/* Under lock, connected: queues the RPC of r. 0, or a negative errno. */
static int req_send(struct nb *nb, struct req *r)
{
	struct nfs_fh3 fh = { .data = { .data_len = r->file->fhlen, .data_val = r->file->fh } };
	int rc;

	if (r->kind == REQ_WRITE) {
		WRITE3args a = {
			.file = fh, .offset = r->offset, .count = r->count, .stable = r->stable
		};

		a.data.data_len = r->count;
		a.data.data_val = r->data;
		rc = rpc_nfs3_write_async(nb->rpc, write_cb, &a, r);
	} else if (r->kind == REQ_COMMIT) {
		COMMIT3args a = { .file = fh, .offset = 0, .count = 0 };

		rc = rpc_nfs3_commit_async(nb->rpc, commit_cb, &a, r);
	} else {
		READ3args a = { .file = fh, .offset = r->offset, .count = r->count };

		rc = rpc_nfs3_read_async(nb->rpc, read_cb, &a, r);
	}
	return rc ? -EIO : 0;
}

/*
 * Sends r: waits for a slot under the cap (writes only) and, when wait_up,
 * for the connection. An engine commit while the connection is down is kept
 * and sent once it is back. 0 once queued (its callback will finish it),
 * or -ENOTCONN (down and not waiting), -ESHUTDOWN, -EIO.
 */
static int req_submit(struct nb *nb, struct req *r, bool wait_up)
{
	struct timespec until;
	int rc;

	/* An engine write waits a little for a connection being made again:
	 * it goes out as soon as it is back, rather than after the engine's
	 * retry backoff. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	r->nb = nb;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	for (;;) {
		if (nb->stop) {
			rc = -ESHUTDOWN;
			goto out;
		}
		if (!nb->up && r->kind == REQ_COMMIT && !r->waited) {
			r->next = nb->retry;
			nb->retry = r;
			nb->inflight++;
			r->file->inflight++;
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			return 0;
		}
		if (nb->up && (r->kind != REQ_WRITE || nb->inflight < nb->cap))
			break;
		if (!nb->up && !wait_up) {
			int w = ufs_cond_timedwait(&nb->cond, &nb->lock, &until, UFS_RANK_NFS);

			if (w == ETIMEDOUT && !nb->up) {
				rc = -ENOTCONN;
				goto out;
			}
			continue;
		}
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	}
	if ((rc = req_send(nb, r)) == 0) {
		nb->inflight++;
		r->file->inflight++;
	}
out:
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (rc == 0)
		poke(nb);
	return rc;
}

/* Sends r and waits for its reply, again after a lost connection (a hard
 * mount). Its status. */
static int req_wait(struct nb *nb, struct req *r)
{
	int rc;

	r->waited = true;
	for (;;) {
		r->done = false;
		if ((rc = req_submit(nb, r, true)))
			return rc;
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		while (!r->done)
			ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (r->status != -ENOTCONN && r->status != -EAGAIN)
			return r->status;
	}
}

/* Service thread, no lock: the server restarted (a new verifier). */
static void verifier_changed(struct nb *nb, const char *verf)
{
	int n;

	memcpy(nb->verf, verf, sizeof(nb->verf));
	atomic_fetch_add(&nb->verf_changes, 1);
	n = us_backend_commit_lost(nb->fs->backend);
	if (n > 0)
		atomic_fetch_add(&nb->lost_bufs, (uint64_t)n);
	fprintf(stderr,
		"unstable-fuse: %s: the server's write verifier changed (it restarted): "
		"%d unstable chunks are written again\n",
		nb->url, n);
}

/* One WRITE3 of chunk b's pages ended with res (err); the last one that
 * ends completes b. Any thread, no lock. */
static void part_end(struct nb *nb, us_buf *b, struct part *p, enum us_write_result res, int err)
{
	uint64_t mine = (uint64_t)res << 32 | (uint32_t)err, worst = atomic_load(&p->worst);

	while ((uint32_t)res > (uint32_t)(worst >> 32) &&
	       !atomic_compare_exchange_weak(&p->worst, &worst, mine))
		;
	if (atomic_fetch_sub(&p->left, 1) != 1)
		return;
	worst = atomic_load(&p->worst);
	res = (enum us_write_result)(worst >> 32);
	/* A number taken after every one of its replies: a commit that reads
	 * it or a later one was sent after them all. */
	us_buf_write_done(b, res, res == US_WRITE_UNSTABLE ? atomic_fetch_add(&nb->fs->seq, 1) + 1 : 0,
			  (int)(uint32_t)worst);
	free(p);
}

/* Service thread, no lock: the engine completions of a finished request. */
static void req_complete(struct nb *nb, struct req *r)
{
	unsigned i;

	if (r->kind == REQ_WRITE) {
		enum us_write_result res = US_WRITE_UNSTABLE;
		uint64_t seq = 0;

		if (r->status == -ENOTCONN || r->status == -EAGAIN || r->status == -ENOMEM ||
		    r->status == -EIO) {
			res = US_WRITE_ERROR;
			atomic_fetch_add(&nb->write_errors, 1);
		} else if (r->status) {
			res = US_WRITE_LOST;
			atomic_fetch_add(&nb->write_errors, 1);
		} else if (r->committed != UNSTABLE) {
			res = US_WRITE_STABLE;
			atomic_fetch_add(&nb->stable_replies, 1);
		} else {
			if (!nb->have_verf) {
				memcpy(nb->verf, r->verf, sizeof(nb->verf));
				nb->have_verf = true;
			} else if (memcmp(nb->verf, r->verf, sizeof(nb->verf)) != 0) {
				verifier_changed(nb, r->verf);
			}
			if (!r->part)
				seq = atomic_fetch_add(&nb->fs->seq, 1) + 1;
		}
		/* The server's times and size of the file moved. */
		ac_forget(nb, r->file->path);
		if (r->part)
			part_end(nb, r->bufs[0], r->part, res, r->status);
		for (i = 0; !r->part && i < r->nbufs; i++)
			us_buf_write_done(r->bufs[i], res, seq, r->status);
		/* Only now may the file be drained (its object destroyed, the
		 * file closed): nothing of r's is used after this. */
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		r->file->inflight--;
		pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	} else if (r->kind == REQ_COMMIT) {
		if (r->status) {
			atomic_fetch_add(&nb->commit_errors, 1);
			fprintf(stderr, "unstable-fuse: %s: COMMIT: %s\n", nb->url,
				strerror(-r->status));
		} else if (nb->have_verf && memcmp(nb->verf, r->verf, sizeof(nb->verf)) != 0) {
			verifier_changed(nb, r->verf);
		} else {
			if (!nb->have_verf) {
				memcpy(nb->verf, r->verf, sizeof(nb->verf));
				nb->have_verf = true;
			}
			/* -ESTALE: a verifier change since it was sent. */
			us_object_commit_done_epoch(r->obj, r->epoch, r->seq);
		}
		/* Only now may the file be drained (rpc_gone()). */
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		r->file->inflight--;
		pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	}
	free(r);
}

/* Under lock, connected: sends the commits kept to be sent again (their
 * connection went, or their RPC timed out). */
static void resend(struct nb *nb)
{
	struct req *r = nb->retry, *next;

	nb->retry = NULL;
	for (; r; r = next) {
		next = r->next;
		if (req_send(nb, r) != 0) {
			r->status = -EIO;
			rpc_gone(nb, r);
			req_finish(nb, r);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* The write connection                                                      */

/*
 * The engine's WRITE3 UNSTABLE calls go on a TCP connection of our own to
 * the server's NFS port, not through libnfs: libnfs 4.0 encodes a call's
 * data into a buffer of its own (one more copy of every byte) and takes one
 * buffer per call. Here the flushing thread sends the call itself with one
 * sendmsg(): the header it encodes, then the chunks' payload in place (a
 * run of adjacent chunks in one WRITE3 of up to the server's wtmax),
 * under send_lock and the inode's data_lock (so the chunks do not change
 * while the kernel copies them). The service thread reads the replies
 * (wc_receive) and finishes the requests like libnfs's callbacks do.
 *
 * Lost: an error or end of file on the socket, a reply that does not
 * parse, or no reply for WC_TIMEOUT_MS: wc_down() shuts the socket down
 * (which wakes a sender blocked in sendmsg), fails every write in flight on
 * it (-ENOTCONN: the engine keeps them dirty and writes them again), and
 * the service thread connects again with backoff (wc_try_up).
 */

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	return put32(put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

static uint8_t *put_opaque(uint8_t *p, const void *d, uint32_t n)
{
	uint32_t pad = (4 - n % 4) % 4;

	p = put32(p, n);
	memcpy(p, d, n);
	memset(p + n, 0, pad);
	return p + n + pad;
}

/* "uid=N" of the URL's arguments, else def. */
static uint32_t url_num(const char *url, const char *key, uint32_t def)
{
	const char *q = strchr(url, '?');
	size_t n = strlen(key);

	while (q && *q) {
		q++;
		if (strncmp(q, key, n) == 0)
			return (uint32_t)strtoul(q + n, NULL, 10);
		q = strchr(q, '&');
	}
	return def;
}

/* The AUTH_UNIX credential of every call: the URL's uid and gid, else
 * ours (as libnfs does). */
static void wc_cred(struct nb *nb)
{
	uint8_t body[64], *b = body;
	static const char host[] = "unstable-fuse";

	b = put32(b, 0); /* stamp */
	b = put_opaque(b, host, sizeof(host) - 1);
	b = put32(b, url_num(nb->url, "uid=", (uint32_t)getuid()));
	b = put32(b, url_num(nb->url, "gid=", (uint32_t)getgid()));
	b = put32(b, 0); /* no other groups */
	nb->credlen = (size_t)(put_opaque(put32(nb->cred, 1 /* AUTH_UNIX */), body,
					  (uint32_t)(b - body)) -
			       nb->cred);
}

/* A connected socket to waddr (1 s at most), or -1 with errno. */
static int wc_connect(struct nb *nb)
{
	int fd = socket(nb->waddr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&nb->waddr, nb->waddrlen) != 0) {
		if (errno != EINPROGRESS)
			goto fail;
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 1000) != 1) {
			errno = ETIMEDOUT;
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			goto fail;
		if (err) {
			errno = err;
			goto fail;
		}
	}
	/* Blocking for the senders; the service thread reads with
	 * MSG_DONTWAIT. */
	if (fcntl(fd, F_SETFL, 0) != 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Service thread, no lock: the write connection is gone; every write in
 * flight on it fails (finished with -ENOTCONN). */
static void wc_down(struct nb *nb, const char *why)
{
	int fd = nb->wfd;
	struct req *r, *next;

	if (fd < 0)
		return;
	/* Wakes a sender blocked in sendmsg(), which then lets send_lock go. */
	shutdown(fd, SHUT_RDWR);
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	if (!nb->stop)
		fprintf(stderr, "unstable-fuse: %s: write connection lost: %s\n", nb->url, why);
	nb->wup = false;
	nb->wgen++;
	nb->wfd = -1;
	r = nb->wq;
	nb->wq = NULL;
	nb->wq_tail = &nb->wq;
	for (; r; r = next) {
		next = r->wnext;
		r->status = -ENOTCONN;
		nb->inflight--; /* r->file's count: once completed */
		r->file->wslots--;
		req_finish(nb, r);
	}
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	close(fd);
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	nb->rlen = 0;
	nb->rec->len = 0;
	nb->wbackoff_ms = 50;
	clock_gettime(CLOCK_MONOTONIC, &nb->wnext_try);
}

/* Service thread, no lock: connects the write connection when it is down
 * and its backoff has passed. */
static void wc_try_up(struct nb *nb)
{
	struct timespec now;
	int fd;

	if (nb->wfd >= 0 || nb->stop)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec < nb->wnext_try.tv_sec ||
	    (now.tv_sec == nb->wnext_try.tv_sec && now.tv_nsec < nb->wnext_try.tv_nsec))
		return;
	if ((fd = wc_connect(nb)) < 0) {
		uint64_t ns = now.tv_nsec + (uint64_t)nb->wbackoff_ms * 1000000;

		nb->wnext_try.tv_sec = now.tv_sec + (time_t)(ns / 1000000000);
		nb->wnext_try.tv_nsec = (long)(ns % 1000000000);
		nb->wbackoff_ms = nb->wbackoff_ms * 2 > 250 ? 250 : nb->wbackoff_ms * 2;
		return;
	}
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->wfd = fd;
	nb->wup = true;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	atomic_fetch_add(&nb->wreconnects, 1);
}

/* Under lock: a reply record on the write connection; nonzero when it
 * does not parse (the connection is then dropped). */
static int wc_reply(void *ctx, const uint8_t *p, size_t len)
{
	struct nb *nb = ctx;
	struct ufs_write_reply w;
	int rc = ufs_rpc_write_reply(p, len, &w);
	struct req *r, **pp;

	if (rc == -EBADMSG)
		return -1;
	for (pp = &nb->wq; (r = *pp); pp = &r->wnext)
		if (r->xid == w.xid)
			break;
	if (!r)
		return rc; /* a reply to a call already failed (a late one), or a duplicate */
	*pp = r->wnext;
	if (!*pp)
		nb->wq_tail = pp;
	nb->inflight--; /* r->file's count: once completed (req_complete) */
	r->file->wslots--;
	if (rc) {
		r->status = -ENOTCONN; /* written again once reconnected */
	} else if (w.denied) {
		r->status = -EACCES; /* the credential is refused */
	} else if (w.accept_stat) {
		r->status = w.accept_stat == 5 /* SYSTEM_ERR */ ? -EIO : -EPROTO;
	} else {
		r->status = reply_status(RPC_STATUS_SUCCESS, (int)w.nfsstat);
		if (w.nfsstat == NFS3_OK) {
			r->got = w.count;
			r->committed = (stable_how)w.committed;
			memcpy(r->verf, w.verf, NFS3_WRITEVERFSIZE);
			if (r->got < r->count)
				r->status = -EAGAIN; /* a short write: all of it again */
			else if (r->got > r->count)
				r->status = -ENOTCONN, rc = -1; /* more than was sent: not ours */
		}
	}
	req_finish(nb, r);
	return rc;
}

/* Service thread: reads what came on the write connection and completes
 * the calls it answers. */
static void wc_receive(struct nb *nb)
{
	for (;;) {
		ssize_t got = recv(nb->wfd, nb->rbuf + nb->rlen, WC_RBUF - nb->rlen, MSG_DONTWAIT);
		ssize_t used;

		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
			wc_down(nb, got == 0 ? "closed by the server" : strerror(errno));
			return;
		}
		if (got < 0)
			return;
		nb->rlen += (size_t)got;
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		used = ufs_rpc_records(nb->rec, nb->rbuf, nb->rlen, wc_reply, nb);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (used < 0) {
			wc_down(nb, "a reply that does not parse");
			return;
		}
		memmove(nb->rbuf, nb->rbuf + used, nb->rlen - (size_t)used);
		nb->rlen -= (size_t)used;
	}
}

/* Service thread, no lock: drops the connection when its oldest write had
 * no reply for WC_TIMEOUT_MS (the server is stopped or gone unseen). */
static void wc_check_timeout(struct nb *nb)
{
	bool late;

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	late = nb->wq && ms_since(&nb->wq->queued) > WC_TIMEOUT_MS;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (late)
		wc_down(nb, "no reply in 10 s");
}

/*
 * The flushing thread, before it takes the inode's data_lock: waits for a
 * slot under the cap and f's (NB_FILE_RPCS) and up to 1 s for a
 * connection, and takes the slot. 0, or -ENOTCONN (no connection),
 * -ESHUTDOWN.
 */
static int wc_slot(struct nb *nb, struct ufs_bfile *f)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	for (;;) {
		if (nb->stop) {
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			return -ESHUTDOWN;
		}
		if (nb->wup && nb->inflight < nb->cap && f->wslots < NB_FILE_RPCS)
			break;
		if (!nb->wup) {
			int w = ufs_cond_timedwait(&nb->cond, &nb->lock, &until, UFS_RANK_NFS);

			if (w == ETIMEDOUT && !nb->wup) {
				ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
				return -ENOTCONN;
			}
			continue;
		}
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	}
	nb->inflight++;
	if (++f->wslots > atomic_load(&nb->peak_file_rpcs))
		atomic_store(&nb->peak_file_rpcs, f->wslots);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	return 0;
}

/* A slot taken by wc_slot() and not used. */
static void wc_slot_put(struct nb *nb, struct ufs_bfile *f)
{
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->inflight--;
	f->wslots--;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
}

/*
 * The flushing thread, with a slot (wc_slot) and the inode's data_lock
 * held: sends r, a WRITE3 of r->count bytes from iov[1..niov) (iov[0] is
 * set here to the header; one more entry is used for the padding). 0 once
 * sent (its reply, or the connection's loss, finishes it: r is then no
 * longer the caller's), or -ENOTCONN (the connection went since the slot
 * was taken; the slot is given back).
 */
static int wc_send(struct nb *nb, struct req *r, struct iovec *iov, int niov)
{
	uint8_t hdr[WC_HDR_MAX], *h = hdr;
	uint32_t count = r->count, pad = (4 - count % 4) % 4;
	static const uint8_t zeros[4];
	uint64_t gen;
	size_t total;
	struct msghdr msg = { 0 };

	r->nb = nb;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	if (!nb->wup || nb->stop) {
		nb->inflight--;
		r->file->wslots--;
		pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		return -ENOTCONN;
	}
	r->xid = ++nb->xid;
	gen = nb->wgen;
	clock_gettime(CLOCK_MONOTONIC, &r->queued);
	r->wnext = NULL;
	*nb->wq_tail = r;
	nb->wq_tail = &r->wnext;
	r->file->inflight++;
	/* The header, from what r holds: r may be finished (and freed) by the
	 * service thread from here on. */
	h = put32(h, 0); /* the record mark, below */
	h = put32(h, r->xid);
	h = put32(h, 0); /* CALL */
	h = put32(h, 2); /* RPC version */
	h = put32(h, NFS_PROGRAM);
	h = put32(h, NFS_V3);
	h = put32(h, NFS3_WRITE);
	memcpy(h, nb->cred, nb->credlen);
	h += nb->credlen;
	h = put32(put32(h, 0), 0); /* verifier AUTH_NONE */
	h = put_opaque(h, r->file->fh, r->file->fhlen);
	h = put64(h, r->offset);
	h = put32(h, r->count);
	h = put32(h, (uint32_t)r->stable);
	h = put32(h, r->count);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t)(h - hdr);
	if (pad) {
		iov[niov].iov_base = (void *)zeros;
		iov[niov++].iov_len = pad;
	}
	total = (size_t)(h - hdr) + count + pad; /* (r may be gone: not r->count) */
	put32(hdr, 0x80000000u | (uint32_t)(total - 4));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)niov;
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	/* Gone since it was queued: wc_down() failed it already. */
	if (nb->wgen == gen && nb->wfd >= 0) {
		while (total) {
			ssize_t n = sendmsg(nb->wfd, &msg, MSG_NOSIGNAL);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				/* The service thread sees the end and fails r. */
				shutdown(nb->wfd, SHUT_RDWR);
				break;
			}
			total -= (size_t)n;
			while (msg.msg_iovlen && (size_t)n >= msg.msg_iov->iov_len) {
				n -= (ssize_t)msg.msg_iov->iov_len;
				msg.msg_iov++;
				msg.msg_iovlen--;
			}
			if (n) {
				msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + n;
				msg.msg_iov->iov_len -= (size_t)n;
			}
		}
	}
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	return 0;
}

/* Service thread: a new data connection, with backoff. */
static void reconnect(struct nb *nb)
{
	unsigned backoff_ms = 50;
	char err[1024];

	while (!nb->stop) {
		struct nfs_context *c = mount_ctx(nb->url, true, err, sizeof(err), NULL, NULL);

		if (c) {
			uint64_t ms = ms_since(&nb->down_since);

			ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
			nb->data = c;
			nb->rpc = nfs_get_rpc_context(c);
			nb->up = true;
			/* The commits the connection took with it. */
			resend(nb);
			pthread_cond_broadcast(&nb->cond);
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			atomic_fetch_add(&nb->reconnects, 1);
			atomic_fetch_add(&nb->outage_ms, ms);
			atomic_store(&nb->outage_last_ms, ms);
			fprintf(stderr, "unstable-fuse: %s: reconnected after %llu ms\n", nb->url,
				(unsigned long long)ms);
			return;
		}
		poll(NULL, 0, (int)backoff_ms);
		backoff_ms = backoff_ms * 2 > 250 ? 250 : backoff_ms * 2;
	}
}

/* Under lock: the data connection is dead. Every RPC on it fails (its
 * callback runs now). */
static void go_down(struct nb *nb)
{
	struct nfs_context *c = nb->data;

	fprintf(stderr, "unstable-fuse: %s: connection lost: %s\n", nb->url,
		rpc_get_error(nb->rpc) ? rpc_get_error(nb->rpc) : "?");
	nb->up = false;
	nb->data = NULL;
	nb->rpc = NULL;
	clock_gettime(CLOCK_MONOTONIC, &nb->down_since);
	nfs_destroy_context(c);
	pthread_cond_broadcast(&nb->cond);
}

static void *service_main(void *arg)
{
	struct nb *nb = arg;

	for (;;) {
		struct pollfd p[3] = { { .fd = -1 },
				       { .fd = nb->wake[0], .events = POLLIN },
				       { .fd = nb->wfd, .events = POLLIN } };
		struct req *done, *next;
		bool down;
		char sink[256];

		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		if (nb->stop && (!nb->up || nb->inflight == 0)) {
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			break;
		}
		down = !nb->up;
		if (!down) {
			p[0].fd = rpc_get_fd(nb->rpc);
			p[0].events = (short)rpc_which_events(nb->rpc);
		}
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (down) {
			reconnect(nb);
			continue;
		}
		poll(p, 3, 100);
		if (p[1].revents)
			while (read(nb->wake[0], sink, sizeof(sink)) > 0)
				;
		if (p[2].revents)
			wc_receive(nb);
		wc_check_timeout(nb);
		wc_try_up(nb);
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		/* With 0 too: libnfs times RPCs out there. */
		if (rpc_service(nb->rpc, p[0].revents) < 0 || rpc_get_fd(nb->rpc) < 0)
			go_down(nb);
		else if (nb->retry)
			resend(nb); /* commits that timed out */
		done = nb->done;
		nb->done = NULL;
		nb->done_tail = &nb->done;
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		for (; done; done = next) {
			next = done->next;
			req_complete(nb, done);
		}
	}
	return NULL;
}

static int nfs_start(struct ufs *fs)
{
	struct nb *nb = nb_of(fs);
	int rc;

	/* The engine keeps no more in writeback than the RPCs can carry. */
	us_backend_set_max_inflight(fs->backend, nb->cap * nb->wsize);
	if ((rc = pthread_create(&nb->thread, NULL, service_main, nb)))
		return -rc;
	nb->thread_started = true;
	return 0;
}

static void nfs_detach(struct ufs *fs)
{
	struct nb *nb = nb_of(fs);

	if (!nb)
		return;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->stop = true;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (nb->thread_started) {
		poke(nb);
		pthread_join(nb->thread, NULL);
	}
	if (nb->data)
		nfs_destroy_context(nb->data);
	if (nb->wfd >= 0)
		close(nb->wfd);
	while (nb->wq) {
		struct req *r = nb->wq;

		nb->wq = r->wnext;
		free(r);
	}
	free(nb->rbuf);
	free(nb->rec);
	while (nb->done) {
		struct req *r = nb->done;

		nb->done = r->next;
		free(r);
	}
	while (nb->retry) {
		struct req *r = nb->retry;

		nb->retry = r->next;
		free(r);
	}
	if (nb->ns) {
		nfs_umount(nb->ns);
		nfs_destroy_context(nb->ns);
	}
	ac_clear(nb);
	free(nb->ac);
	close(nb->wake[0]);
	close(nb->wake[1]);
	free(nb->server);
	free(nb->export);
	free(nb->url);
	free(nb);
	fs->be_priv = NULL;
}

static void nfs_stats(struct ufs *fs, FILE *f)
{
	struct nb *nb = nb_of(fs);
	bool up;

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	up = nb->up;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	fprintf(f,
		"backend nfs\n"
		"nfs_url %s\n"
		"nfs_connected %d\n"
		"nfs_rpcs_max %u\n"
		"nfs_wsize %llu\n"
		"nfs_peak_file_rpcs %llu\n"
		"nfs_writes %llu\n"
		"nfs_write_bytes %llu\n"
		"nfs_page_writes %llu\n"
		"nfs_stable_replies %llu\n"
		"nfs_write_errors %llu\n"
		"nfs_commits %llu\n"
		"nfs_commit_errors %llu\n"
		"nfs_verifier_changes %llu\n"
		"nfs_resent_bytes %llu\n"
		"nfs_reconnects %llu\n"
		"nfs_write_connects %llu\n"
		"nfs_outage_ms %llu\n"
		"nfs_last_outage_ms %llu\n"
		"nfs_reads %llu\n"
		"nfs_attr_cache_hits %llu\n"
		"nfs_attr_cache_misses %llu\n\n",
		nb->url, up, nb->cap, (unsigned long long)nb->wsize,
		(unsigned long long)atomic_load(&nb->peak_file_rpcs),
		(unsigned long long)atomic_load(&nb->writes),
		(unsigned long long)atomic_load(&nb->write_bytes),
		(unsigned long long)atomic_load(&nb->page_writes),
		(unsigned long long)atomic_load(&nb->stable_replies),
		(unsigned long long)atomic_load(&nb->write_errors),
		(unsigned long long)atomic_load(&nb->commits),
		(unsigned long long)atomic_load(&nb->commit_errors),
		(unsigned long long)atomic_load(&nb->verf_changes),
		(unsigned long long)(atomic_load(&nb->lost_bufs) * UFS_CHUNK_BYTES),
		(unsigned long long)atomic_load(&nb->reconnects),
		(unsigned long long)atomic_load(&nb->wreconnects),
		(unsigned long long)atomic_load(&nb->outage_ms),
		(unsigned long long)atomic_load(&nb->outage_last_ms),
		(unsigned long long)atomic_load(&nb->reads),
		(unsigned long long)atomic_load(&nb->ac_hits),
		(unsigned long long)atomic_load(&nb->ac_misses));
}

/* ------------------------------------------------------------------------ */
/* The engine's callbacks                                                    */

/* Completes bufs[0..n) now with a transient error (kept dirty). */
static void fail_bufs(us_buf *const *bufs, size_t n, int err)
{
	for (size_t i = 0; i < n; i++)
		us_buf_write_done(bufs[i], US_WRITE_ERROR, 0, err);
}

/*
 * Sends the WRITE3s of the pages of chunk b in bits (ufs_pages_take(): some
 * of its pages, not all adjacent or not all valid), one per range of
 * adjacent pages clipped to end, each from the chunk in place. With the
 * flush's hold on p; 0, or the negative errno that stopped the sending (p
 * then has it).
 */
static int send_pages(struct nb *nb, struct ufs_inode *ino, us_object *obj, us_buf *b,
		      uint32_t bits, struct part *p)
{
	unsigned pg = 0;

	while (pg < 32) {
		uint64_t from, to, end;
		struct iovec iov[3];
		struct req *r;
		int rc;

		while (pg < 32 && !(bits >> pg & 1))
			pg++;
		if (pg == 32)
			return 0;
		from = pg * UFS_PAGE_BYTES;
		while (pg < 32 && (bits >> pg & 1))
			pg++;
		to = pg * UFS_PAGE_BYTES;
		if ((rc = wc_slot(nb, ino->file)))
			return rc == -ESHUTDOWN ? -EAGAIN : rc;
		if (!(r = calloc(1, sizeof(*r)))) {
			wc_slot_put(nb, ino->file);
			return -ENOMEM;
		}
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		end = ino->size;
		if (us_buf_offset(b) + from >= end) {
			/* Past the end (a truncate cut it): nothing to keep. */
			ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
			wc_slot_put(nb, ino->file);
			free(r);
			return 0;
		}
		to = min_u64(to, end - us_buf_offset(b));
		iov[1].iov_base = (char *)us_buf_data(b) + from;
		iov[1].iov_len = (size_t)(to - from);
		r->kind = REQ_WRITE;
		r->file = ino->file;
		r->obj = obj;
		r->offset = us_buf_offset(b) + from;
		r->count = (uint32_t)(to - from);
		r->stable = UNSTABLE;
		r->nbufs = 1;
		r->bufs[0] = b;
		r->part = p;
		atomic_fetch_add(&p->left, 1);
		rc = wc_send(nb, r, iov, 2);
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		if (rc) {
			atomic_fetch_sub(&p->left, 1);
			free(r);
			return rc;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, to - from);
		atomic_fetch_add(&nb->page_writes, 1);
	}
	return 0;
}

static int nfs_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct nb *nb = nb_of(fs);
	struct ufs_inode *ino = us_object_user(obj);
	size_t i = 0, per = (size_t)(min_u64(nb->wsize, NB_RPC_BYTES) / UFS_CHUNK_BYTES);
	uint32_t stack_bits[64], *bits;

	(void)offset;
	(void)length;
	(void)reason;
	if (per > NB_MAX_GROUP)
		per = NB_MAX_GROUP;
	bits = n > 64 ? malloc(n * sizeof(*bits)) : stack_bits;
	if (!bits) {
		fail_bufs(bufs, n, -ENOMEM); /* nothing taken */
		return 0;
	}
	/* The pages to write of chunks written in part (0: whole). */
	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	for (i = 0; i < n; i++)
		bits[i] = ufs_pages_take(ino, us_buf_offset(bufs[i]) / UFS_CHUNK_BYTES);
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	i = 0;
	while (i < n) {
		uint64_t end, start = us_buf_offset(bufs[i]), bytes = 0;
		size_t k, take = n - i < per ? n - i : per;
		struct iovec iov[NB_MAX_GROUP + 2];
		struct req *r;
		int rc;

		if (bits[i]) {
			/* Some pages of it only, in WRITE3s of their own. */
			struct part *p = calloc(1, sizeof(*p));

			if (!p) {
				fail_bufs(bufs + i, n - i, -ENOMEM);
				break;
			}
			atomic_init(&p->left, 1);
			atomic_init(&p->worst, (uint64_t)US_WRITE_STABLE << 32);
			rc = send_pages(nb, ino, obj, bufs[i], bits[i], p);
			part_end(nb, bufs[i], p, rc ? US_WRITE_ERROR : US_WRITE_STABLE, rc);
			if (rc) {
				fail_bufs(bufs + i + 1, n - i - 1, rc);
				break;
			}
			i++;
			continue;
		}
		/* The slot first: data_lock is held only while one WRITE3 is
		 * built and sent, so that a writer of the file waits for one
		 * RPC's send at most, never for the server. */
		if ((rc = wc_slot(nb, ino->file))) {
			fail_bufs(bufs + i, n - i, rc == -ESHUTDOWN ? -EAGAIN : rc);
			break;
		}
		if (!(r = calloc(1, sizeof(*r)))) {
			wc_slot_put(nb, ino->file);
			fail_bufs(bufs + i, n - i, -ENOMEM);
			break;
		}
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		end = ino->size;
		if (start >= end) {
			/* Wholly past the end (a truncate cut it): nothing to keep. */
			ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
			wc_slot_put(nb, ino->file);
			free(r);
			for (; i < n; i++)
				us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0);
			break;
		}
		/* Adjacent whole chunks, up to the server's wtmax, clipped to
		 * the logical size: one WRITE3 sent from the chunks in place. */
		for (k = 0; k < take && us_buf_offset(bufs[i + k]) == start + bytes &&
			    start + bytes < end && !bits[i + k];
		     k++) {
			uint64_t len = min_u64(us_buf_length(bufs[i + k]), end - (start + bytes));

			iov[1 + k].iov_base = us_buf_data(bufs[i + k]);
			iov[1 + k].iov_len = (size_t)len;
			bytes += len;
		}
		r->kind = REQ_WRITE;
		r->file = ino->file;
		r->obj = obj;
		r->offset = start;
		r->count = (uint32_t)bytes;
		r->stable = UNSTABLE;
		r->nbufs = (unsigned)k;
		memcpy(r->bufs, bufs + i, k * sizeof(*bufs));
		/* Once queued, r belongs to the service thread, which may
		 * complete and free it before wc_send() returns here. */
		rc = wc_send(nb, r, iov, (int)(1 + k));
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		if (rc) {
			free(r);
			fail_bufs(bufs + i, n - i, rc);
			break;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, bytes);
		i += k;
	}
	if (bits != stack_bits)
		free(bits);
	return 0;
}

static int nfs_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct nb *nb = nb_of(fs);
	struct ufs_inode *ino = us_object_user(obj);
	struct req *r = calloc(1, sizeof(*r));
	int rc;

	(void)reason;
	if (!r)
		return -ENOMEM;
	r->kind = REQ_COMMIT;
	r->file = ino->file;
	r->obj = obj;
	/* Before sending: every write numbered up to seq had its reply. */
	r->epoch = us_backend_epoch(fs->backend);
	r->seq = atomic_load(&fs->seq);
	if (r->seq == 0) {
		free(r);
		return 0;
	}
	if ((rc = req_submit(nb, r, false))) {
		free(r);
		return rc;
	}
	atomic_fetch_add(&nb->commits, 1);
	return 0;
}

static void nfs_drain(struct ufs *fs, struct ufs_bfile *f)
{
	struct nb *nb = nb_of(fs);

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	while (f->inflight && !(nb->stop && !nb->thread_started))
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

#define NS_BEGIN(fs)               \
	struct nb *nb = nb_of(fs); \
	int rc;                    \
	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS)
#define NS_END()                                         \
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS); \
	return rc < 0 ? rc : 0

static struct ufs_bfile *bfile_new(const char *rel)
{
	struct ufs_bfile *f = calloc(1, sizeof(*f));

	if (f && !(f->path = abs_path(rel))) {
		free(f);
		f = NULL;
	}
	return f;
}

static void bfile_fh(struct ufs_bfile *f)
{
	struct lnfs_fh *fh = (struct lnfs_fh *)nfs_get_fh(f->nfh);

	f->fhlen = fh->len > 0 && fh->len <= NFS3_FHSIZE ? (unsigned)fh->len : 0;
	memcpy(f->fh, fh->val, f->fhlen);
}

static int open_path(struct nb *nb, struct ufs_bfile *f, int flags, mode_t mode)
{
	int rc;

	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	if (flags & O_CREAT) {
		rc = nfs_create(nb->ns, f->path, flags & (O_ACCMODE | O_EXCL | O_CREAT),
				(int)(mode & 07777), &f->nfh);
		ac_forget(nb, f->path);
	} else {
		rc = nfs_open(nb->ns, f->path, flags & O_ACCMODE, &f->nfh);
	}
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
	if (rc == 0)
		bfile_fh(f);
	return rc < 0 ? rc : 0;
}

static int nfs_open_file(struct ufs *fs, const char *rel, int flags, mode_t mode,
			 struct ufs_bfile **out)
{
	struct ufs_bfile *f = bfile_new(rel);
	int rc;

	if (!f)
		return -ENOMEM;
	if ((rc = open_path(nb_of(fs), f, flags, mode))) {
		free(f->path);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

static int nfs_reopen_rw(struct ufs *fs, struct ufs_bfile *f, struct ufs_bfile **out)
{
	struct ufs_bfile *g;

	if (!f->nfh)
		return -EISDIR;
	if (!(g = calloc(1, sizeof(*g))) || !(g->path = strdup(f->path))) {
		free(g);
		return -ENOMEM;
	}
	if (open_path(nb_of(fs), g, O_RDWR, 0) != 0 || g->fhlen != f->fhlen ||
	    memcmp(g->fh, f->fh, f->fhlen) != 0) {
		/* Renamed since: the same handle is all the data path needs;
		 * the namespace calls then use the old name. */
		if (g->nfh) {
			ufs_mutex_lock(&nb_of(fs)->ns_lock, UFS_RANK_NFS_NS);
			nfs_close(nb_of(fs)->ns, g->nfh);
			ufs_mutex_unlock(&nb_of(fs)->ns_lock, UFS_RANK_NFS_NS);
			g->nfh = NULL;
		}
		free(g->path);
		free(g);
		return -ESTALE;
	}
	*out = g;
	return 0;
}

static void nfs_close_file(struct ufs *fs, struct ufs_bfile *f)
{
	struct nb *nb = nb_of(fs);

	nfs_drain(fs, f);
	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	if (f->nfh)
		nfs_close(nb->ns, f->nfh);
	if (f->dir)
		nfs_closedir(nb->ns, f->dir);
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
	free(f->path);
	free(f);
}

static int nfs_fstat_file(struct ufs *fs, struct ufs_bfile *f, struct stat *st)
{
	struct nfs_stat_64 s;
	NS_BEGIN(fs);
	if (f->nfh)
		rc = nfs_fstat64(nb->ns, f->nfh, &s);
	else
		rc = nfs_stat64(nb->ns, f->path, &s);
	if (rc == 0)
		st_from(st, &s);
	NS_END();
}

static ssize_t nfs_pread_file(struct ufs *fs, struct ufs_bfile *f, void *buf, size_t n,
			      uint64_t off)
{
	struct nb *nb = nb_of(fs);
	size_t got = 0;

	while (got < n) {
		struct req r = { .kind = REQ_READ,
				 .file = f,
				 .offset = off + got,
				 .count = (uint32_t)min_u64(n - got, nb->rsize),
				 .data = (char *)buf + got };
		int rc = req_wait(nb, &r);

		if (rc)
			return got ? (ssize_t)got : rc;
		atomic_fetch_add(&nb->reads, 1);
		got += r.got;
		if (r.eof || r.got == 0)
			break;
	}
	return (ssize_t)got;
}

/* Uncached (--no-cache): WRITE3 FILE_SYNC, waited for. */
static ssize_t nfs_pwrite_file(struct ufs *fs, struct ufs_bfile *f, const void *buf, size_t n,
			       uint64_t off)
{
	struct nb *nb = nb_of(fs);
	size_t done = 0;

	while (done < n) {
		struct req r = { .kind = REQ_WRITE,
				 .file = f,
				 .offset = off + done,
				 .count = (uint32_t)min_u64(n - done, nb->wsize),
				 .stable = FILE_SYNC,
				 .data = (char *)buf + done };
		int rc = req_wait(nb, &r);

		if (rc) {
			ac_forget(nb, f->path);
			return done ? (ssize_t)done : rc;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, r.count);
		if (r.committed != UNSTABLE)
			atomic_fetch_add(&nb->stable_replies, 1);
		done += r.count;
	}
	ac_forget(nb, f->path);
	return (ssize_t)done;
}

static int nfs_fsync_file(struct ufs *fs, struct ufs_bfile *f)
{
	struct req r = { .kind = REQ_COMMIT, .file = f };

	return req_wait(nb_of(fs), &r);
}

static int nfs_ftruncate_file(struct ufs *fs, struct ufs_bfile *f, uint64_t size)
{
	/* A WRITE3 still in flight could land after the SETATTR. */
	nfs_drain(fs, f);
	NS_BEGIN(fs);
	if (f->nfh)
		rc = nfs_ftruncate(nb->ns, f->nfh, size);
	else
		rc = nfs_truncate(nb->ns, f->path, size);
	ac_forget(nb, f->path);
	NS_END();
}

static int nfs_fchmod_file(struct ufs *fs, struct ufs_bfile *f, mode_t mode)
{
	NS_BEGIN(fs);
	if (f->nfh)
		rc = nfs_fchmod(nb->ns, f->nfh, (int)(mode & 07777));
	else
		rc = nfs_chmod(nb->ns, f->path, (int)(mode & 07777));
	ac_forget(nb, f->path);
	NS_END();
}

static int nfs_fchown_file(struct ufs *fs, struct ufs_bfile *f, uid_t uid, gid_t gid)
{
	NS_BEGIN(fs);
	if (f->nfh)
		rc = nfs_fchown(nb->ns, f->nfh, (int)uid, (int)gid);
	else
		rc = nfs_lchown(nb->ns, f->path, (int)uid, (int)gid);
	ac_forget(nb, f->path);
	NS_END();
}

/* utimensat() by path (libnfs has no futimes): microseconds; UTIME_NOW
 * and UTIME_OMIT resolved here. */
static int utimes_path(struct nb *nb, const char *path, const struct timespec tv[2])
{
	struct timeval t[2];
	struct nfs_stat_64 s;
	int i, rc = 0;

	if (tv[0].tv_nsec == UTIME_OMIT || tv[1].tv_nsec == UTIME_OMIT)
		rc = nfs_lstat64(nb->ns, path, &s);
	if (rc < 0)
		return rc;
	for (i = 0; i < 2; i++) {
		if (tv[i].tv_nsec == UTIME_NOW) {
			gettimeofday(&t[i], NULL);
		} else if (tv[i].tv_nsec == UTIME_OMIT) {
			t[i].tv_sec = (time_t)(i ? s.nfs_mtime : s.nfs_atime);
			t[i].tv_usec =
				(suseconds_t)((i ? s.nfs_mtime_nsec : s.nfs_atime_nsec) / 1000);
		} else {
			t[i].tv_sec = tv[i].tv_sec;
			t[i].tv_usec = tv[i].tv_nsec / 1000;
		}
	}
	return nfs_lutimes(nb->ns, path, t);
}

static int nfs_futimens_file(struct ufs *fs, struct ufs_bfile *f, const struct timespec tv[2])
{
	NS_BEGIN(fs);
	rc = utimes_path(nb, f->path, tv);
	ac_forget(nb, f->path);
	NS_END();
}

static int nfs_opendir_path(struct ufs *fs, const char *rel, struct ufs_bfile **out)
{
	struct ufs_bfile *f = bfile_new(rel);
	struct nb *nb = nb_of(fs);
	int rc;

	if (!f)
		return -ENOMEM;
	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	rc = nfs_opendir(nb->ns, f->path, &f->dir);
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
	if (rc) {
		free(f->path);
		free(f);
		return rc < 0 ? rc : -EIO;
	}
	*out = f;
	return 0;
}

static mode_t type_bits(uint32_t type)
{
	switch (type) {
	case NF3REG:
		return S_IFREG;
	case NF3DIR:
		return S_IFDIR;
	case NF3BLK:
		return S_IFBLK;
	case NF3CHR:
		return S_IFCHR;
	case NF3LNK:
		return S_IFLNK;
	case NF3SOCK:
		return S_IFSOCK;
	case NF3FIFO:
		return S_IFIFO;
	default:
		return 0;
	}
}

static int nfs_readdir_dir(struct ufs *fs, struct ufs_bfile *d, uint64_t off, ufs_fill_fn fill,
			   void *ctx)
{
	struct nb *nb = nb_of(fs);
	struct nfsdirent *de;

	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	if (off == 0)
		nfs_rewinddir(nb->ns, d->dir);
	while ((de = nfs_readdir(nb->ns, d->dir))) {
		struct stat st = { .st_ino = (ino_t)de->inode,
				   .st_mode = type_bits(de->type) | (de->mode & 07777) };

		if (fill(ctx, de->name, &st))
			break;
	}
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */

#define PATH_OP(name, call)                              \
	static int name(struct ufs *fs, const char *rel) \
	{                                                \
		char *p = abs_path(rel);                 \
		if (!p)                                  \
			return -ENOMEM;                  \
		NS_BEGIN(fs);                            \
		rc = call;                               \
		ac_clear(nb); /* other names' nlink */   \
		free(p);                                 \
		NS_END();                                \
	}

PATH_OP(nfs_unlink_path, nfs_unlink(nb->ns, p))
PATH_OP(nfs_rmdir_path, nfs_rmdir(nb->ns, p))

static int stat_path(struct ufs *fs, const char *rel, struct stat *st, bool follow)
{
	struct nfs_stat_64 s;
	char *p = abs_path(rel);
	uint64_t gen;
	int cached;

	if (!p)
		return -ENOMEM;
	if (ac_get(nb_of(fs), p, follow, st, &cached, &gen)) {
		free(p);
		return cached;
	}
	NS_BEGIN(fs);
	rc = follow ? nfs_stat64(nb->ns, p, &s) : nfs_lstat64(nb->ns, p, &s);
	if (rc == 0)
		st_from(st, &s);
	ac_put(nb, p, follow, rc < 0 ? rc : 0, st, gen);
	free(p);
	NS_END();
}

static int nfs_lstat_path(struct ufs *fs, const char *rel, struct stat *st)
{
	return stat_path(fs, rel, st, false);
}

static int nfs_stat_path(struct ufs *fs, const char *rel, struct stat *st)
{
	return stat_path(fs, rel, st, true);
}

static int nfs_truncate_path(struct ufs *fs, const char *rel, uint64_t size)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_truncate(nb->ns, p, size);
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_mkdir_path(struct ufs *fs, const char *rel, mode_t mode)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_mkdir2(nb->ns, p, (int)(mode & 07777));
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_mknod_path(struct ufs *fs, const char *rel, mode_t mode, dev_t rdev)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_mknod(nb->ns, p, (int)mode, (int)rdev);
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_symlink_path(struct ufs *fs, const char *target, const char *rel)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_symlink(nb->ns, target, p);
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_readlink_path(struct ufs *fs, const char *rel, char *buf, size_t size)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	memset(buf, 0, size);
	NS_BEGIN(fs);
	rc = nfs_readlink(nb->ns, p, buf, (int)size - 1);
	free(p);
	NS_END();
}

static int nfs_rename_path(struct ufs *fs, const char *from, const char *to, unsigned flags)
{
	char *a, *b;

	if (flags)
		return -EINVAL; /* no RENAME_NOREPLACE or RENAME_EXCHANGE in NFSv3 */
	a = abs_path(from);
	b = abs_path(to);
	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	NS_BEGIN(fs);
	rc = nfs_rename(nb->ns, a, b);
	ac_clear(nb);
	free(a);
	free(b);
	NS_END();
}

static int nfs_link_path(struct ufs *fs, const char *from, const char *to)
{
	char *a = abs_path(from), *b = abs_path(to);

	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	NS_BEGIN(fs);
	rc = nfs_link(nb->ns, a, b);
	ac_clear(nb);
	free(a);
	free(b);
	NS_END();
}

static int nfs_chmod_path(struct ufs *fs, const char *rel, mode_t mode)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_chmod(nb->ns, p, (int)(mode & 07777));
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_chown_path(struct ufs *fs, const char *rel, uid_t uid, gid_t gid)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_lchown(nb->ns, p, (int)uid, (int)gid);
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_utimens_path(struct ufs *fs, const char *rel, const struct timespec tv[2])
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = utimes_path(nb, p, tv);
	ac_forget(nb, p);
	free(p);
	NS_END();
}

static int nfs_statfs_path(struct ufs *fs, const char *rel, struct statvfs *st)
{
	struct nfs_statvfs_64 s;
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_statvfs64(nb->ns, p, &s);
	free(p);
	if (rc == 0) {
		memset(st, 0, sizeof(*st));
		st->f_bsize = s.f_bsize;
		st->f_frsize = s.f_frsize ? s.f_frsize : s.f_bsize;
		st->f_blocks = s.f_blocks;
		st->f_bfree = s.f_bfree;
		st->f_bavail = s.f_bavail;
		st->f_files = s.f_files;
		st->f_ffree = s.f_ffree;
		st->f_favail = s.f_favail;
		st->f_fsid = s.f_fsid;
		st->f_flag = s.f_flag;
		st->f_namemax = nb->name_max ? nb->name_max : s.f_namemax ? s.f_namemax : 255;
	}
	NS_END();
}

static int nfs_access_path(struct ufs *fs, const char *rel, int mask)
{
	char *p = abs_path(rel);

	if (!p)
		return -ENOMEM;
	NS_BEGIN(fs);
	rc = nfs_access(nb->ns, p, mask);
	free(p);
	NS_END();
}

const struct ufs_backend ufs_backend_nfs = {
	.name = "nfs",
	.page_writeback = true,
	.attach = nfs_attach,
	.start = nfs_start,
	.detach = nfs_detach,
	.stats = nfs_stats,
	.flush = nfs_flush,
	.commit = nfs_commit,
	.drain = nfs_drain,
	.open = nfs_open_file,
	.reopen_rw = nfs_reopen_rw,
	.close = nfs_close_file,
	.fstat = nfs_fstat_file,
	.pread = nfs_pread_file,
	.pwrite = nfs_pwrite_file,
	.fsync = nfs_fsync_file,
	.ftruncate = nfs_ftruncate_file,
	.fchmod = nfs_fchmod_file,
	.fchown = nfs_fchown_file,
	.futimens = nfs_futimens_file,
	.opendir = nfs_opendir_path,
	.readdir = nfs_readdir_dir,
	.lstat = nfs_lstat_path,
	.stat = nfs_stat_path,
	.truncate = nfs_truncate_path,
	.mkdir = nfs_mkdir_path,
	.mknod = nfs_mknod_path,
	.unlink = nfs_unlink_path,
	.rmdir = nfs_rmdir_path,
	.symlink = nfs_symlink_path,
	.readlink = nfs_readlink_path,
	.rename = nfs_rename_path,
	.link = nfs_link_path,
	.chmod = nfs_chmod_path,
	.chown = nfs_chown_path,
	.utimens = nfs_utimens_path,
	.statfs = nfs_statfs_path,
	.access = nfs_access_path,
};
