/*
 * unstable-fuse: the NFSv3 backend (libnfs), its private header: the state
 * its files share (struct nb, struct req, struct ufs_bfile), its limits, and
 * the functions one of its files calls in another (prefixed nfsb_). The
 * mount target is a libnfs URL, nfs://SERVER/EXPORT[?nfsport=N&mountport=N&...].
 *
 * LOCK ORDER
 *
 * The backend's locks are ranks 7 to 11 of the client's order (ufuse.h
 * "LOCKS", enum ufs_lock_rank), outermost first; each is taken through the
 * helpers of witness.h naming its rank, and only while the thread holds no
 * lock of the same or a later rank. The engine calls the flush and the
 * commit (engine.c) with client locks of ranks 1 to 3 held at most.
 *
 *    7 nb->ns_lock    UFS_RANK_NFS_NS: libnfs's synchronous calls by path
 *                     (link, mknod, readlink, statfs...: namespace.c), one
 *                     at a time on the first namespace context, which they
 *                     take under it (chan[0].lock); mount.c's attach and
 *                     detach use it alone, before and after every other
 *                     thread; and the namespace's own connection (conn.c
 *                     nfsb_nc_call(), which takes lock under it to read
 *                     nb->stop). A call by path may make raw calls under it
 *                     (each taking a channel), and takes ac_lock (the
 *                     caches) under it.
 *    8 ch->lock       UFS_RANK_NFS_CHAN: one namespace context of the pool
 *                     (nb->chan[], --ns-conns of them), across one call on
 *                     it: a raw call on a handle takes any free one
 *                     (nfsb_chan_get(): a trylock of each in turn, else a
 *                     wait for one), a call by path the first under ns_lock.
 *                     A thread holds one at a time (never across another
 *                     call), and takes no other lock of this backend under
 *                     it but ac_lock.
 *    9 nb->send_lock  UFS_RANK_NFS_SEND: the write connection's socket,
 *                     across a WRITE3's sendmsg() (conn.c nfsb_wc_send(),
 *                     with the inode's wb_lock held shared, lock not held);
 *                     taken before lock when the connection is dropped or
 *                     made again (conn.c wc_down(), nfsb_wc_try_up()).
 *   10 nb->lock       UFS_RANK_NFS: the data context, its RPC slots, the
 *                     requests in flight and the write connection's queue;
 *                     held across rpc_service() and the parsing of write
 *                     replies, whose callbacks take no other lock.
 *   11 nb->ac_lock    UFS_RANK_NFS_AC: the attribute cache (namespace.c) and
 *                     the handle cache (handles.c), with their generations;
 *                     a leaf.
 *
 * Namespace calls run at once on several contexts, so the caches do not
 * rely on ns_lock: an answer is kept only if nothing was forgotten since
 * the call was sent (ac_gen for the attributes, fh_gen for the handles,
 * sampled before it and compared under ac_lock when it is kept), and what a
 * call changes is forgotten after its reply.
 *
 * THE CONTEXTS AND THE TWO CONNECTIONS
 *
 *   ns    the namespace: --ns-conns contexts (default 4), each mounted on
 *         the URL, one call at a time on each under its channel lock (a
 *         libnfs context is not thread-safe): raw LOOKUP3, GETATTR3,
 *         SETATTR3, CREATE3, MKDIR3, REMOVE3, RMDIR3, RENAME3 and
 *         READDIRPLUS3 on handles on any free one (handles.c: a path
 *         resolved from the handle cache, a LOOKUP3 per component it
 *         lacks), and libnfs's synchronous calls by path for the rest
 *         (link, mknod, readlink, statfs...) on the first, under ns_lock.
 *         libnfs reconnects each by itself.
 *         A SYMLINK3 goes on a connection of its own (below): libnfs
 *         encodes a call into 4 KiB, too small for a long target.
 *   data  raw async COMMIT3, READ3 and --no-cache WRITE3 FILE_SYNC on the
 *         RPC context of a second mount, owned by one service thread that
 *         polls its socket (rpc_which_events/rpc_service). Every call on it
 *         is made under lock, by the service thread or by a thread queueing
 *         a request (which then wakes the service thread through a pipe).
 *         Its file handles are the raw NFS handles of the namespace's
 *         files, valid on any connection.
 *   write the engine's WRITE3 UNSTABLE calls: a TCP connection of our own
 *         to the same NFS port, our own ONC RPC encoding, sent by the
 *         flushing thread straight from the chunks (no copy in user space),
 *         replies read by the service thread (conn.c).
 *   nc    the namespace's own connection: SYMLINK3 (of targets up to
 *         PATH_MAX - 1 bytes), our own encoding, one call at a time under
 *         ns_lock, sent and its reply read by the calling thread (conn.c).
 *
 * THE DATA PATH
 *
 *   flush    the run is cut into WRITE3 RPCs of adjacent chunks, up to
 *            NB_RPC_BYTES (256 KiB) and the server's wtmax, stable = UNSTABLE,
 *            clipped to the logical size, each sent with one sendmsg() from
 *            the chunks under the inode's wb_lock (shared: a truncate
 *            waits for the send), data_lock only to read the size; a
 *            writer does not copy into the pages a write-back took
 *            (unlocked_writeback), so they do not change meanwhile.
 *            At most --rpcs RPCs are in flight on the server, NB_FILE_RPCS
 *            of one file: the flush waits for a slot before it takes wb_lock. A
 *            reply UNSTABLE completes its chunks US_WRITE_UNSTABLE with a
 *            sequence number taken when the reply is handled; a reply
 *            FILE_SYNC or DATA_SYNC completes them
 *            stable. 1 GiB through a 60 MiB max: 122 and 135 MB/s with one
 *            libnfs WRITE3 per 128 KiB chunk (copied into the RPC), 233 and
 *            234 MB/s this way (runs alternating, raw stream 316 and 275).
 *   commit   COMMIT3 of the file, with the last sequence number handed out
 *            and the backend's epoch sampled before it is sent: every write
 *            numbered up to it had its reply, so the server had it. The
 *            engine's, and the backend's own every NB_EARLY_BYTES answered
 *            (nfsb_early_commit(), NB_EARLY_COMMITS of a file in flight).
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
 * THE FILES
 *
 *   mount.c      mounting (the URL, the two contexts, the write
 *                connection's address), start, detach, statistics
 *   service.c    the service thread: the data context's RPCs and their
 *                callbacks, the engine completions, reconnecting
 *   conn.c       the write connection: its socket, slots, sendmsg() of a
 *                WRITE3, its replies read and matched; the namespace's own
 *                connection
 *   xdr.c        the ONC RPC / XDR encoding done here (a WRITE3 call's
 *                header, the AUTH_UNIX credential); the replies' decoding is
 *                ../rpc_reply.c
 *   engine.c     the engine's callbacks: flush, commit, drain
 *   namespace.c  the files and names (open, stat, setattr, readdir,
 *                rename...), the attribute cache, the backend's table
 *   handles.c    the handle cache and the namespace's raw calls
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef UFS_NFS_H
#define UFS_NFS_H

#include "../backend.h"
#include "../rpc_reply.h"
#include "../ufuse.h"

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
/* The backend's own COMMIT3s of a file (engine.c nfsb_early_commit()):
 * one every NB_EARLY_BYTES answered, NB_EARLY_COMMITS in flight at most. */
#define NB_EARLY_BYTES ((uint64_t)16 << 20)
#define NB_EARLY_COMMITS 2
#define WC_TIMEOUT_MS 10000 /* no reply for this long: the write connection is dropped */
#define WC_HDR_MAX 512	    /* a WRITE3 call's bytes before its data */
#define WC_RBUF (UFS_RPC_RECORD_MAX + 4) /* received bytes: a whole fragment fits */

/* The namespace's own connection (conn.c nfsb_nc_call()), under ns_lock:
 * its socket, call ids, the reply bytes read and not yet taken. */
struct nb_nc {
	int fd; /* -1: not connected */
	uint32_t xid;
	size_t len;
	uint8_t buf[WC_RBUF];
	struct ufs_rpc_record rec;
};

/* A namespace context of the pool (a channel), under its lock. */
struct nb_chan {
	pthread_mutex_t lock;
	struct nfs_context *nfs;
};

#define NB_MAX_NS_CONNS 64

/* A raw NFS3 file handle. */
struct nb_fh {
	unsigned len;
	char data[NFS3_FHSIZE];
};

/* The handle cache's slots (handles.c), under ac_lock. */
#define NB_FH_SLOTS 4096

struct nb_fh_ent {
	char *path; /* NULL: free */
	struct nb_fh fh;
	uint64_t until_ns;
};

/* The most entries a directory read gives before it is taken for a server
 * that never ends it. */
#define NB_DIR_MAX (1u << 24)

/* An entry of a directory read with READDIRPLUS3 (nfsb_readdir()). */
struct nb_dirent {
	char *name;
	uint64_t ino, cookie;
	bool have_st, have_fh;
	struct stat st; /* when have_st */
	struct nb_fh fh; /* when have_fh */
};

struct ufs_bfile {
	char *path; /* absolute in the export, as opened */
	/* Directories (fhlen 0): the entries, read whole at opendir. */
	struct nb_dirent *ents;
	size_t nents;
	char fh[NFS3_FHSIZE]; /* files: the handle, for every call on them */
	unsigned fhlen;
	unsigned inflight; /* data RPCs in flight or waiting to be resent; under nb->lock */
	unsigned wslots;   /* WRITE3s on the write connection (nfsb_wc_slot); under nb->lock */
	bool sealed;	   /* no COMMIT3 is sent (nfsb_seal()); under nb->lock */
	/* Bytes answered UNSTABLE since the last COMMIT3 of the file was
	 * sent, and the backend's own commits of it in flight (nfsb_early_commit()). */
	_Atomic uint64_t acked;
	atomic_uint early;
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
	struct part *part;   /* a write of some pages of bufs[0] (nfsb_flush()) */
	uint64_t seq, epoch; /* commit: what it covers, of which epoch */
	/* waited-for requests (reads, --no-cache writes) */
	bool waited, done;
	bool early; /* a commit of the backend's own (nfsb_early_commit()) */
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

/* Its locks, ns_lock, the channels', send_lock, lock and ac_lock, are
 * ranks 7 to 11 of the client's order (ufuse.h "LOCKS"). */
struct nb {
	struct ufs *fs;
	char *url;
	char *server, *export;

	pthread_mutex_t ns_lock;
	struct nfs_context *ns;	  /* chan[0].nfs: the calls by path */
	struct nb_chan *chan;	  /* the namespace contexts, nchan of them */
	unsigned nchan;
	atomic_uint chan_next;	  /* where nfsb_chan_get() starts looking */
	atomic_uint ns_busy;	  /* channels in use, and the namespace connection */
	struct nb_fh root;	  /* the export's root */
	struct nb_fh_ent *fhc;	  /* the handle cache (handles.c), under ac_lock */
	uint64_t fh_gen;	  /* moved by every forgetting of handles, under ac_lock */
	/* The attribute cache (below): its slots, generation, lifetime. */
	pthread_mutex_t ac_lock;
	struct ac_ent *ac;
	uint64_t ac_gen, ac_ttl_ns;
	struct nb_made *made; /* directories this client made (namespace.c), NB_MADE_DIRS */
	uint64_t made_seq;
	uint32_t name_max; /* the server's, from PATHCONF3 (0: not known) */
	struct nb_nc *nc;  /* made at its first call (conn.c nfsb_nc_call()) */

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

	/* The write connection (conn.c): wfd and wgen
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
	/* The server answered READDIRPLUS3 with NFS3ERR_NOTSUPP: directories
	 * are read with READDIR3 (handles.c nfsb_readdir()). */
	atomic_bool no_rdplus;
	/* The engine is shutting down: no commit of the backend's own is
	 * sent (nfsb_seal() of no file). */
	atomic_bool no_early;

	/* statistics (atomic: the stats thread reads them) */
	atomic_uint_fast64_t writes, write_bytes, stable_replies, commits, verf_changes, lost_bufs,
		reconnects, write_errors, commit_errors, commit_resends, reads, outage_ms, outage_last_ms,
		wreconnects, peak_file_rpcs, page_writes, ac_hits, ac_misses, ns_rpcs, early_commits, ns_peak,
		made_misses, sealed_commits;
	struct timespec down_since;
	/* A test hook (tests/nfs/seal.sh): UFS_TEST_COMMIT_DELAY_MS in the
	 * daemon's environment delays each commit callback of the engine's
	 * that long before it sends, widening the window nfsb_seal() closes.
	 * Not for any other use. */
	unsigned test_commit_delay_ms;
};

static inline struct nb *nb_of(struct ufs *fs)
{
	return fs->be_priv;
}

/* The attribute cache's slots (namespace.c). */
#define AC_SLOTS 4096

struct ac_ent {
	char *path; /* NULL: free */
	bool follow;
	int rc; /* 0, or -ENOENT */
	struct stat st;
	uint64_t until_ns;
};

/* A directory this client made, and the names it made in it since
 * (namespace.c "Made directories"), under ac_lock. */
#define NB_MADE_DIRS 64
#define NB_MADE_NAMES 16384 /* more made in one: it is forgotten */

struct nb_made {
	char *path;	   /* absolute; NULL: free */
	uint64_t until_ns; /* its names known until then */
	uint64_t seq;	   /* the newest made is kept when the table is full */
	char **names;	   /* open addressing, cap a power of two */
	size_t n, cap;
};

/* mount.c */
struct nfs_context *nfsb_mount_ctx(const char *url, bool data, char *err, size_t errlen,
				   char **server, char **export);
int nfsb_attach(struct ufs *fs, const char *target);
int nfsb_start(struct ufs *fs);
void nfsb_detach(struct ufs *fs);
void nfsb_stats(struct ufs *fs, FILE *f);

/* service.c */
uint64_t nfsb_ms_since(const struct timespec *t);
void nfsb_poke(struct nb *nb);
void nfsb_req_finish(struct nb *nb, struct req *r);
int nfsb_reply_status(int status, int nfsstat);
int nfsb_req_submit(struct nb *nb, struct req *r, bool wait_up);
int nfsb_req_wait(struct nb *nb, struct req *r);
void nfsb_part_end(struct nb *nb, us_buf *b, struct part *p, enum us_write_result res, int err);
void *nfsb_service_main(void *arg);

/* conn.c */
int nfsb_wc_connect(struct nb *nb);
void nfsb_wc_receive(struct nb *nb);
void nfsb_wc_check_timeout(struct nb *nb);
void nfsb_wc_try_up(struct nb *nb);
int nfsb_wc_slot(struct nb *nb, struct ufs_bfile *f);
void nfsb_wc_slot_put(struct nb *nb, struct ufs_bfile *f);
int nfsb_wc_send(struct nb *nb, struct req *r, struct iovec *iov, int niov);
int nfsb_nc_call(struct nb *nb, uint32_t proc, const uint8_t *args, size_t len);
void nfsb_nc_close(struct nb *nb);

/* xdr.c */
uint8_t *nfsb_put32(uint8_t *p, uint32_t v);
uint8_t *nfsb_put64(uint8_t *p, uint64_t v);
uint8_t *nfsb_put_opaque(uint8_t *p, const void *d, uint32_t n);
void nfsb_wc_cred(struct nb *nb);

/* engine.c */
int nfsb_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
	       uint64_t length, enum us_reason reason);
int nfsb_commit(void *ctx, us_object *obj, enum us_reason reason);
void nfsb_early_commit(struct nb *nb, struct ufs_bfile *f, us_object *obj, uint64_t bytes);
void nfsb_drain(struct ufs *fs, struct ufs_bfile *f);
void nfsb_seal(struct ufs *fs, struct ufs_bfile *f, bool sealed);

/* namespace.c */
void nfsb_ac_forget(struct nb *nb, const char *path);
void nfsb_ac_forget_file(struct nb *nb, const char *path);
void nfsb_ac_clear(struct nb *nb);

/* handles.c */
struct nb_chan *nfsb_chan_get(struct nb *nb);
void nfsb_chan_put(struct nb *nb, struct nb_chan *c);
void nfsb_ns_busy(struct nb *nb);
void nfsb_ns_idle(struct nb *nb);
int nfsb_fh_root(struct nb *nb);
bool nfsb_fh_get_locked(struct nb *nb, const char *path, size_t len, struct nb_fh *fh);
void nfsb_fh_forget(struct nb *nb, const char *path);
void nfsb_fh_forget_tree(struct nb *nb, const char *path);
void nfsb_fh_clear(struct nb *nb);
void nfsb_st_from_fattr(struct stat *st, const fattr3 *a);
int nfsb_resolve(struct nb *nb, const char *path, struct nb_fh *fh, struct stat *st,
		 bool *have_st);
int nfsb_getattr(struct nb *nb, const struct nb_fh *fh, struct stat *st);
int nfsb_setattr(struct nb *nb, const struct nb_fh *fh, const sattr3 *sa, struct stat *st,
		 bool *have_st);
int nfsb_make(struct nb *nb, const char *path, bool dir, bool excl, mode_t mode,
	      struct nb_fh *fh, struct stat *st, bool *have_st, struct stat *pst, bool *have_pst);
int nfsb_symlink(struct nb *nb, const char *target, const char *path);
int nfsb_remove(struct nb *nb, const char *path, bool dir, struct stat *pst, bool *have_pst);
int nfsb_rename(struct nb *nb, const char *from, const char *to);
int nfsb_link(struct nb *nb, const char *from, const char *to);
int nfsb_readlink(struct nb *nb, const char *path, char *buf, size_t size);
int nfsb_mknod(struct nb *nb, const char *path, mode_t mode, dev_t rdev);
/* An FSSTAT3 reply's figures: bytes (total, free, free to the caller) and
 * files (likewise). */
struct nb_fsstat {
	uint64_t tbytes, fbytes, abytes, tfiles, ffiles, afiles;
};
int nfsb_fsstat(struct nb *nb, const char *path, struct nb_fsstat *out);
int nfsb_access(struct nb *nb, const char *path, uint32_t asked, uint32_t *granted);
int nfsb_readdir(struct nb *nb, const char *path, struct nb_dirent **out, size_t *n);
void nfsb_dirents_free(struct nb_dirent *ents, size_t n);

#endif /* UFS_NFS_H */
