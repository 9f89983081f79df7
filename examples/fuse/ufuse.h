/*
 * unstable-fuse: a libfuse3 passthrough filesystem whose writes are cached,
 * accounted and written back by the unstable engine.
 *
 * SPDX-License-Identifier: MIT
 *
 * THE DATA PATH
 *
 * A regular file opened through the mount gets an inode record (struct
 * ufs_inode), keyed by the backing file's (st_dev, st_ino), with one
 * read-write backend file (a descriptor, or an NFS file handle) and one
 * engine object (unless --no-cache). The file's data is
 * cached in fixed chunks of ufs_chunk_bytes (--chunk: 4 to 128 KiB, a power
 * of two; by default 128 KiB, the NFS backend's 16 KiB) at chunk-aligned
 * offsets, one engine buffer each:
 *
 *   write    each chunk touched: us_buf_get() (the charge may wait for
 *            reclaim), the data is copied in, us_buf_dirty() (which
 *            throttles the writer), and the write returns at once. A chunk
 *            created for a partial write holds only the pages written
 *            (and those past the end of the file): nothing is read from
 *            the backend, except a page that the write covers in part
 *            (struct ufs_pmap below, fs.c "Partial writes").
 *   read     each chunk: from the cached buffer when there is one (its
 *            pages not valid from the backend), else pread() of the
 *            backing file. Reads do not populate the cache.
 *   flush    (engine callback, the backend's: backend.h) the directory
 *            backend: pwritev() of the run to the backing file (runs of
 *            whole chunks O_DIRECT, see backend_dir.c): the data is
 *            in the backing filesystem but not durable, so each buffer is
 *            acknowledged US_WRITE_UNSTABLE with a sequence number taken
 *            after the pwrite returned. The NFS backend: WRITE3 UNSTABLE
 *            RPCs, completed when the server answers (nfs/).
 *   commit   (engine callback) fdatasync() of the backing file, then
 *            us_object_commit_done() with the last sequence number handed
 *            out before it started: every write it covers had returned.
 *            NFS: COMMIT3, its reply's write verifier checked.
 *   fsync    us_object_sync(), the engine's integrity sync (write back,
 *            commit, report errors once).
 *   close    of a descriptor that wrote: write-back of the file, waited
 *            for, without a commit (fs.c, "Closed files"); with
 *            --close=sync, as fsync.
 *
 * The logical size of a cached file is kept here (the backing file is
 * shorter until its tail is written back); bytes of a cached chunk past the
 * logical size are always zero.
 *
 * LOCKS
 *
 * The client's locks, outermost first: a thread takes a lock only while it
 * holds none of the same or a later rank (enum ufs_lock_rank below). Builds
 * with US_WITNESS check it at every lock taken (witness.h); every lock and
 * unlock goes through the helpers there, named with the lock's rank.
 *
 * The engine's own locks are not in this order: they are taken inside the
 * engine's calls, which the client makes with its locks held (us_buf_get()
 * under io_lock, us_object_sync() under a handle's lock), and the engine
 * calls the backend's flush and commit back on whatever thread writes back
 * (a flusher, a writer reclaiming room, an fsync, a close). So those
 * callbacks take their locks (wb_lock, data_lock, wb_mutex, the NFS
 * backend's) over whatever client locks that thread already holds, which
 * are of ranks 1 to 3 only: data_lock and wb_lock are never held across an
 * engine call that may call back.
 *
 *   1 fs->itable_lock  the inode table, each inode's open count, the hidden
 *                      names and the list of closed files (fs.c). Held
 *                      across a new inode's reopen and fstat by the backend,
 *                      its object's creation and its domain's lookup
 *                      (inode_get()), and across the wait for an inode
 *                      being torn down (itable_cond; the request loop
 *                      yielded).
 *   2 h->lock          an open file's errseq cursor (fs.c struct
 *                      ufs_handle). Held across us_object_sync(), whose
 *                      write-back and commit call the backend on this
 *                      thread (ranks 4 to 11). Never with io_lock.
 *   3 ino->io_lock     rwlock: writers and truncate exclusive, readers shared.
 *                      It is what makes a chunk's read-modify-write fill
 *                      invisible to others. Held across blocking engine calls
 *                      (reclaim, throttle), which may flush any inode on this
 *                      thread: the engine's callbacks never take it.
 *   4 ino->wb_lock     rwlock: a write-back (shared: the directory
 *                      backend's of a run across its pwrite, the NFS
 *                      backend's across the sendmsg() of one WRITE3) against truncate
 *                      (exclusive), so that a run read before a truncate is
 *                      not written past the new end after it. Writers do not
 *                      take it: a writer copies into a chunk only when it is
 *                      not under write-back (checked under data_lock, which
 *                      the flush takes before it writes), else waits for
 *                      that write-back on wb_cond (stable chunks, as the
 *                      kernel's stable pages), so that a sequential writer
 *                      fills new chunks while the old are written. Not held
 *                      across drop_from() (which waits for write-backs).
 *   5 ino->data_lock   rwlock over the chunks' payload, the page map and the
 *                      logical size: copying in (exclusive) against the
 *                      flush callback's reading of the size and the dirty
 *                      pages (shared; not across the backend's write: both
 *                      backends are unlocked_writeback). A truncate holds it exclusive across the
 *                      backend's ftruncate and fstat (ranks 7 to 11). Never
 *                      held across an engine call that may call a callback.
 *   6 ino->wb_mutex    with wb_cond: a writer waiting for a chunk's
 *                      write-back (data_lock given back first), the flush's
 *                      broadcast once it completed its buffers (a leaf).
 *   7 nb->ns_lock      the NFS backend's calls by path (libnfs's, on its
 *                      first namespace context) and its namespace
 *                      connection (nfs/nfs.h "LOCK ORDER").
 *   8 ch->lock         one NFS namespace context (a channel of the pool),
 *                      across one call on it; one at a time per thread.
 *   9 nb->send_lock    the NFS write connection's socket, across a WRITE3's
 *                      sendmsg() (under wb_lock, shared); before nb->lock
 *                      when the connection is dropped or made again.
 *  10 nb->lock         the NFS data context, its RPC slots, the requests in
 *                      flight; held across rpc_service() and the parsing of
 *                      write replies, whose callbacks take no other lock.
 *  11 nb->ac_lock      the NFS attribute and handle caches (a leaf; taken
 *                      under ns_lock by the calls that change names).
 *  12 fs->dom_lock     the domain table (a leaf; under itable_lock when a new
 *                      inode's domain is looked up).
 *  13 fs->links_lock   the names of files with several links and their
 *                      notifier's queue (links.c; a leaf, taken with no
 *                      other lock held).
 *  14 l->lock          the request loop's hand-over of the reading (loop.c;
 *                      a leaf): ufs_loop_yield() takes it with any of the
 *                      above held, before a blocking take, a backend's read,
 *                      a wait.
 *
 * No two locks of one rank are ever held at once, and the witness aborts on
 * a second one as on a reversal: no operation locks two inodes (rename,
 * link and unlink go to the backend by name, then look an inode up, one at
 * a time), and a flush the engine runs on a writer's thread may be another
 * inode's, but takes only that inode's wb_lock and data_lock under the
 * writer's io_lock, never a second io_lock.
 */
#ifndef UFUSE_H
#define UFUSE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <unstable/unstable.h>

#include "backend.h"

struct fuse;

/* The ranks of the client's locks, outermost first ("LOCKS" above). */
enum ufs_lock_rank {
	UFS_RANK_ITABLE = 1,
	UFS_RANK_HANDLE = 2,
	UFS_RANK_IO = 3,
	UFS_RANK_WB = 4,
	UFS_RANK_DATA = 5,
	UFS_RANK_WB_MUTEX = 6,
	UFS_RANK_NFS_NS = 7,
	UFS_RANK_NFS_CHAN = 8,
	UFS_RANK_NFS_SEND = 9,
	UFS_RANK_NFS = 10,
	UFS_RANK_NFS_AC = 11,
	UFS_RANK_DOM = 12,
	UFS_RANK_LINKS = 13,
	UFS_RANK_LOOP = 14,
};

/* The witness, and the lock helpers every lock site goes through. */
#include "witness.h"

/*
 * The size of every chunk (--chunk), set once before the mount, read-only
 * after (one mount a process): a power of two from UFS_PAGE_BYTES to
 * UFS_CHUNK_MAX, so that a chunk's pages fit the 32 bits of a page map.
 */
#define UFS_CHUNK_DEFAULT ((uint64_t)128 << 10)
#define UFS_CHUNK_NFS ((uint64_t)16 << 10) /* the NFS backend's default */
#define UFS_CHUNK_MAX ((uint64_t)128 << 10)
extern uint64_t ufs_chunk_bytes;

/* The smaller of a and b. */
static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* How requests are mapped to accounting domains. */
enum ufs_domain_by {
	UFS_DOMAIN_NONE = 0,   /* every file in the root domain */
	UFS_DOMAIN_UID = 1,    /* one domain per user id of the opener */
	UFS_DOMAIN_CGROUP = 2, /* one per memory cgroup of the opener */
};

struct ufs_options {
	const char *backing; /* the backing directory, or the nfs:// URL */
	uint64_t max_bytes;  /* the root domain's max */
	enum ufs_domain_by domain_by;
	unsigned cgroup_percent; /* a cgroup domain's max: this % of its limit */
	uint64_t commit_interval_ns;
	uint64_t dirty_expire_ns; /* 0: the engine's 30 s */
	char *stats_path;	  /* NULL: no stats file */
	unsigned flushers;	  /* the engine's flusher threads */
	unsigned dirty_ratio;	  /* each domain's dirty limit, % of its max (0: the engine's 20) */
	bool xattr;		  /* pass extended attributes through (else ENOSYS) */
	bool no_cache;		  /* no engine cache: every write goes to the backend at once */
	bool kernel_writeback;	  /* FUSE_CAP_WRITEBACK_CACHE: the kernel caches writes */
	bool no_hugepages;	  /* the cache's memory without transparent huge pages */
	bool direct_writeback;	  /* directory backend: aligned runs written O_DIRECT */
	bool buffered_writeback;  /* --buffered-writeback: not (the default is direct) */
	bool trust_backing;	  /* --trust-backing: the directory backend releases what
				     it wrote without fdatasync but for an integrity sync */
	uint64_t clean_max;	  /* clean data a domain keeps before writers drop it behind
				     (UINT64_MAX: all, up to the max) */
	uint64_t dirty_max;	  /* the root's dirty limit at most, in bytes (0: the ratio's) */
	unsigned rpcs;		  /* NFS: WRITE3 RPCs in flight at most */
	unsigned ns_conns;	  /* NFS: namespace contexts (calls at once) */
	bool close_sync;	  /* --close=sync: a close that wrote is an fsync */
	bool close_wait;	  /* --close=writeback: it waits for the write-back */
	uint64_t attr_cache_ns;	  /* NFS: how long attributes by path are kept (0: not) */
	uint64_t chunk_bytes;	  /* --chunk: the chunks' size (0: the backend's); then
				     the size taken (ufs_chunk_bytes) */
};

/*
 * The pages of partly written chunks, for a backend that writes back only
 * a chunk's dirty pages (ufs_backend.page_writeback): chunk index -> two
 * bitmaps of its 4 KiB pages. bits: the pages to write back, where 0, or
 * no entry, means every valid page. valid: the pages whose data the chunk
 * holds (no entry: all); a chunk created for a partial write holds only
 * what was written (fs.c, "Partial writes"), the backend the rest.
 * Writers set both under io_lock and data_lock exclusive (fs.c
 * pages_note()); readers read valid under io_lock shared; the flush
 * callback takes a chunk's pages under data_lock shared (ufs_pages_take(),
 * an atomic exchange of bits with 0), so a chunk whose bits were taken and
 * is then written again whole (after a failed write, a lost commit) is
 * written whole: every valid page. inflight: the pages the last take gave
 * a write-back (every valid page for a whole one), set there too; a writer
 * copies into a chunk under write-back without waiting when the pages it
 * writes are none of them (fs.c ufs_write()). A value left from an earlier
 * write-back is safe: until its take, a write-back has read nothing, and
 * the take comes after the writer's copy (data_lock).
 */
#define UFS_PAGE_BYTES ((uint64_t)4096)

/* A chunk's pages, and the map of them all (every bit of a chunk's). */
static inline unsigned ufs_chunk_pages(void)
{
	return (unsigned)(ufs_chunk_bytes / UFS_PAGE_BYTES);
}

static inline uint32_t ufs_all_pages(void)
{
	unsigned n = ufs_chunk_pages();

	return n >= 32 ? UINT32_MAX : ((uint32_t)1 << n) - 1;
}
struct ufs_pmap {
	uint64_t *key; /* chunk index + 1; 0: a free slot */
	_Atomic uint32_t *bits;
	uint32_t *valid;
	_Atomic uint32_t *inflight;
	size_t cap, used;
};

struct ufs_inode {
	dev_t dev;
	ino_t ino;
	struct ufs_bfile *file; /* read-write on the backend's file */
	us_object *obj;
	unsigned opens;		/* open handles; protected by itable_lock */
	bool closing;		/* being torn down; protected by itable_lock */
	unsigned unlinking;	/* names being removed (fs.c inode_unlink_begin());
				   protected by itable_lock */
	bool gone;		/* lost its last name: not found by (dev, ino) again
				   (fs.c ifind()); protected by itable_lock */
	/* Closed and kept until its data is clean (fs.c, "Closed files"): on
	 * fs->closed_head's list, oldest first, while opens is 0. Under
	 * itable_lock. */
	bool lingering;
	bool reaping; /* taken off that list by the reaper to be forgotten */
	struct ufs_inode *cnext, *cprev;
	/* The backing file's times and size when it was last closed: a file
	 * found changed since (another NFS client wrote it) is forgotten and
	 * read anew (fs.c iget()). */
	struct timespec closed_mtim, closed_ctim;
	uint64_t closed_size;
	/* Closed with cached writes whose time the backing file does not have
	 * yet (--close=start): its own write-back still changes the backing
	 * file, so those are not compared until the reaper gave it the times
	 * and took them anew. */
	bool closed_pending;
	bool attrs_failed; /* the reaper could not set them: left to the teardown */
	/* The latest error cursor a descriptor was told of (fs.c err_seen());
	 * a new descriptor starts there. */
	_Atomic uint64_t err_seen;
	/* --trust-backing: the errors of the backing file's fdatasync() at an
	 * integrity sync (fs.c inode_sync()), errseq style: trust_errs counts
	 * them, trust_err is the last; each descriptor reports each once. */
	_Atomic uint64_t trust_errs;
	_Atomic int trust_err;
	struct ufs_inode *next; /* hash chain */
	pthread_rwlock_t io_lock;
	pthread_rwlock_t wb_lock;
	pthread_mutex_t wb_mutex;
	pthread_cond_t wb_cond;
	pthread_rwlock_t data_lock;
	uint64_t size; /* logical size; under data_lock */
	/* The time of the last cached write, reported by getattr as mtime and
	 * ctime until the backing file has it (ufs_inode_times()); tv_sec 0:
	 * none. Under data_lock. */
	struct timespec mtime;
	/* mtime was set by utimens, not by a write (a later write's time is
	 * its own, not later than it); atime: the access time set with it
	 * (tv_nsec UTIME_OMIT: none); ctime: when. Given to the backing file
	 * with mtime. Under data_lock. */
	bool times_set;
	struct timespec atime, ctime;
	/* A chmod that only added permissions, made on the backing file
	 * before the times (mode_defer()): its permission bits. Under
	 * data_lock. */
	bool mode_set;
	mode_t mode;
	/* The times last given to the backing file after its write-back, and
	 * whether they still stand (no write since): a write-back after them
	 * (the data written again when the server restarted or refused a
	 * commit) moves the backing file's mtime, and they wait again
	 * (ufs_writeback_ending()). Times under data_lock. */
	atomic_bool times_applied;
	struct timespec applied_atime, applied_mtime;
	/* Write-backs ended (ufs_writeback_ending()): one that ends while the
	 * times are being given may reach the server after them, so they are
	 * not taken as standing then, and are given again. */
	_Atomic uint64_t wb_ends;
	/* The file may have a set-user-ID bit that a write takes away (fs.c
	 * privs_kill()). */
	atomic_bool privs;
	/* The latest time getattr has shown for the file (its mtime or
	 * ctime, ns since the epoch): a cached write's time is later. */
	_Atomic uint64_t shown_ns;
	uint64_t drop_cursor; /* where drop-behind looks next; under io_lock */
	struct ufs_pmap pages; /* dirty pages of partly written chunks */
};

/* A write-back of ino's chunks ended on the backing file (reached it, or
 * failed): called before its buffers are completed, so that times given
 * to the backing file before it wait again while the chunks still show
 * as being written (the reaper and the unmount give them after). */
void ufs_writeback_ending(struct ufs_inode *ino);
/* Wakes the writers waiting for a write-back of ino's chunks (a backend
 * with unlocked_writeback, once it completed a run's buffers). */
void ufs_writeback_done(struct ufs_inode *ino);

/* The pages of chunk (index) of ino to write back, taken: a bitmap of its
 * pages, 0 for the whole chunk. With ino's data_lock held (shared is
 * enough). */
uint32_t ufs_pages_take(struct ufs_inode *ino, uint64_t chunk);

/* Gives the backing file the mtime of the cached writes (call after the
 * last run of them is written back) and stops getattr overriding it.
 * 0 or a negative errno. */
int ufs_inode_times(struct ufs_inode *ino);

/* An open file unlinked: the hidden name libfuse gave it (fs.c). */
struct ufs_hidden {
	char name[64];
	dev_t dev;
	ino_t ino;
	struct ufs_hidden *next;
};

/* A domain made for a uid or a cgroup. */
struct ufs_domain {
	char key[256];	       /* "uid:N" or the cgroup path */
	char limit_path[4096]; /* the cgroup directory; "" for uid domains */
	us_domain *dom;
	uint64_t applied_max; /* the max last set (US_UNLIMITED: none) */
	struct ufs_domain *next;
};

#define UFS_HASH 1024

struct ufs {
	struct ufs_options opt;
	const struct ufs_backend *be;
	void *be_priv;	/* the backend's state */
	int backing_fd; /* the directory backend's backing directory */
	us_engine *engine;
	us_backend *backend;
	atomic_uint_fast64_t seq; /* the last write sequence number handed out */
	atomic_uint_fast64_t dropped_behind; /* clean chunks dropped by writers (fs.c) */
	/* Writes into a chunk under write-back: that waited for it to end,
	 * and that did not (none of their pages in flight; fs.c ufs_write()). */
	atomic_uint_fast64_t wb_waits, wb_passes;
	/* Commits of the directory backend taken as done without an
	 * fdatasync (--trust-backing; backend_dir.c dir_commit()). */
	atomic_uint_fast64_t trusted_commits;
	atomic_uint_fast64_t fill_bytes;     /* read from the backend for partial writes */
	atomic_uint modes_pending;	     /* inodes with a chmod not yet made (mode_set) */
	atomic_uint_fast64_t attrs_applied;  /* attributes that waited given to backing files */

	pthread_mutex_t itable_lock;
	pthread_cond_t itable_cond; /* an inode finished closing */
	struct ufs_inode *itable[UFS_HASH];
	struct ufs_hidden *hidden; /* open files unlinked (fs.c); under itable_lock */
	/* Closed files kept until their data is clean, oldest first, and
	 * their number; the thread that forgets them (fs.c). Under
	 * itable_lock. */
	struct ufs_inode *closed_head, *closed_tail;
	unsigned nclosed, closed_soft, closed_hard;
	unsigned nreaping; /* closed files the reaper is looking at */
	pthread_t reaper;
	bool reaper_on, reaper_stop;
	pthread_cond_t reaper_cond;

	/* The names of files with several links (links.c): a table of
	 * nlinks entries under links_lock; nlinks_any once there was one. */
	pthread_mutex_t links_lock;
	struct ufs_link *links[UFS_HASH];
	unsigned nlinks;
	atomic_bool nlinks_any;
	/* Their notifier thread (links.c), its queue and its progress;
	 * under links_lock. */
	struct ufs_notice *links_head;
	uint64_t links_queued, links_sent;
	pthread_cond_t links_cond, links_done;
	pthread_t links_thread;
	bool links_on, links_stop;
	struct fuse *links_fuse;

	pthread_mutex_t dom_lock;
	struct ufs_domain *domains;
	unsigned ndomains;
	/* cgroup mode: where the memory controller is mounted, and its version. */
	char cg_mount[512];
	int cg_version;	  /* 1 or 2; 0 when none was found */
	const char *proc; /* where /proc is: NULL for "/proc" (tests point it elsewhere) */
};

/* links.c: the names of files with more than one link, kept so that a
 * change through one name reaches the kernel's cache of the others. */
struct stat;
void ufs_links_note(struct ufs *fs, const char *path, const struct stat *st);
void ufs_links_changed(struct ufs *fs, const char *path, dev_t dev, ino_t ino);
/* The same, path's own attributes too: a change the kernel does not see
 * made (a write's loss of the set-user-ID bit). */
void ufs_links_self(struct ufs *fs, const char *path, dev_t dev, ino_t ino);
void ufs_links_unlinked(struct ufs *fs, const char *path, dev_t dev, ino_t ino);
void ufs_links_linked(struct ufs *fs, const char *from, const char *to, const struct stat *st);
void ufs_links_renamed(struct ufs *fs, const char *from, const char *to, dev_t dev, ino_t ino);
/* Before fuse_destroy(): the notifier ends. */
void ufs_links_stop(struct ufs *fs);
void ufs_links_free(struct ufs *fs);

/* fs.c */
const struct fuse_operations *ufs_operations(void);
int ufs_engine_start(struct ufs *fs);
int ufs_engine_stop(struct ufs *fs);

/* loop.c: serves the session's requests with up to max_threads threads
 * until it ends (unmount, a signal): 0, or a negative errno. quick_names:
 * the backend's namespace calls are served by the reader itself. */
struct fuse_session;
int ufs_loop_run(struct fuse_session *se, unsigned max_threads, bool quick_names);
/* Before anything that may wait, in a request: another thread reads the
 * next requests meanwhile. */
void ufs_loop_yield(void);

/* domain.c */
void ufs_domain_ratios(struct ufs *fs, us_domain *d);
us_domain *ufs_domain_for(struct ufs *fs, pid_t pid, uid_t uid);
void ufs_domain_refresh(struct ufs *fs);
int ufs_cgroup_detect(struct ufs *fs);
/* The memory cgroup path of pid ("/a/b") from its /proc/PID/cgroup: 0, or
 * -ENOENT when it names none for the version in fs. */
int ufs_cgroup_of(struct ufs *fs, pid_t pid, char *out, size_t len);
/* The smallest memory limit of the cgroup directory dir (under cg_mount)
 * and its ancestors; US_UNLIMITED for none. */
uint64_t ufs_cgroup_limit(struct ufs *fs, const char *dir);
void ufs_stats_write(struct ufs *fs, FILE *f);

#endif /* UFUSE_H */
