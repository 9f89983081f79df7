/*
 * unstable-fuse: the FUSE operations, the inode table and the engine's
 * backend callbacks. The data path and the lock order are described in
 * ufuse.h.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include "ufuse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

uint64_t ufs_chunk_bytes = UFS_CHUNK_DEFAULT;

/* Closed files kept at most (see "Closed files" below), and at most within
 * the descriptors the process may open: the hard cap a half of
 * RLIMIT_NOFILE, the soft one a quarter (ufs_engine_start()). */
#define UFS_CLOSED_SOFT 4096u
#define UFS_CLOSED_HARD 16384u

/* An open file or directory. */
struct ufs_handle {
	struct ufs_bfile *file; /* opened with the caller's flags */
	bool dir;		/* a directory */
	struct ufs_inode *ino;	/* NULL: not cached, I/O goes to file directly */
	pthread_mutex_t lock;	/* since (rank 2, ufuse.h "LOCKS") */
	uint64_t since;		/* the errseq cursor of this open file */
	uint64_t trust_seen;	/* ino->trust_errs it was told of (--trust-backing) */
	atomic_bool wrote;	/* a write came through this handle */
	bool direct;		/* direct I/O: writes take set-user-ID away here (privs_kill()) */
	char *path;		/* the name it was opened by (links.c), or NULL */
};

static struct ufs *ufs_self(void)
{
	return fuse_get_context()->private_data;
}

static struct ufs_handle *handle_of(const struct fuse_file_info *fi)
{
	return fi ? (struct ufs_handle *)(uintptr_t)fi->fh : NULL;
}

/* The path relative to the backing directory ("/" is "."). */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

static bool ts_before(struct timespec a, struct timespec b)
{
	return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

static uint64_t ts_ns(struct timespec t)
{
	return t.tv_sec < 0 ? 0 : (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The bits of mode a write by a user other than root takes away: the
 * set-user-ID bit, and set-group-ID from a group-executable file. */
static mode_t privs_of(mode_t mode)
{
	return mode & (S_ISUID | ((mode & S_IXGRP) ? S_ISGID : 0));
}

/* Raises ino's shown_ns to the later of st's mtime and ctime. */
static void times_shown(struct ufs_inode *ino, const struct stat *st)
{
	uint64_t t = ts_ns(ts_before(st->st_mtim, st->st_ctim) ? st->st_ctim : st->st_mtim);
	uint64_t old = atomic_load(&ino->shown_ns);

	while (old < t && !atomic_compare_exchange_weak(&ino->shown_ns, &old, t))
		;
}

/*
 * A cached write's time: the coarse clock, which the kernel stamps files
 * with (the fine clock may run a tick ahead of it, so that a later change
 * of the backing file, a rename's ctime, would be stamped earlier than the
 * write), but later than any time getattr has shown for the file (as the
 * kernel takes a fine-grained stamp for a file whose times were looked
 * at): a write after a stat always moves mtime.
 */
static struct timespec write_time(struct ufs_inode *ino)
{
	uint64_t shown = atomic_load(&ino->shown_ns);
	struct timespec now;

	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	if (ts_ns(now) <= shown) {
		now.tv_sec = (time_t)((shown + 1) / 1000000000ull);
		now.tv_nsec = (long)((shown + 1) % 1000000000ull);
	}
	if (!ino->times_set && ts_before(now, ino->mtime))
		now = ino->mtime;
	return now;
}

/* Takes l (of rank r) exclusive; when another thread holds it, lets
 * another thread read requests first (loop.c). Only the blocking take is
 * checked by the witness: a trylock that succeeds cannot deadlock. */
static void wrlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	if (!ufs_rwlock_trywrlock(l, r)) {
		ufs_loop_yield();
		ufs_rwlock_wrlock(l, r);
	}
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (ns && clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void sleep_ms(unsigned ms)
{
	ufs_loop_yield();
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

static void *reaper_main(void *arg);

int ufs_engine_start(struct ufs *fs)
{
	struct us_engine_options opts;
	struct us_backend_ops ops = { .size = sizeof(ops) };
	int rc;

	us_engine_options_init(&opts);
	opts.memory_bytes = fs->opt.max_bytes;
	opts.flusher_threads = fs->opt.flushers;
	/* A first touch of a 4 KiB page costs about 15 us on a paravirtualised
	 * guest: a cache cycling through 1 GiB spent 4 s in page faults. */
	opts.hugepages = !fs->opt.no_hugepages;
	ops.flush = fs->be->flush;
	ops.commit = fs->be->commit;
	if ((rc = us_engine_create(&opts, &fs->engine)))
		return rc;
	if (fs->opt.dirty_expire_ns) {
		uint64_t every = fs->opt.dirty_expire_ns / 2;

		/* Checked often enough for the expiry to mean something. */
		if (every < 1000000)
			every = 1000000;
		if ((rc = us_engine_set_param(fs->engine, US_PARAM_DIRTY_EXPIRE_NS,
					      fs->opt.dirty_expire_ns)) ||
		    (every < 5000000000ull &&
		     (rc = us_engine_set_param(fs->engine, US_PARAM_WRITEBACK_INTERVAL_NS,
					       every)))) {
			us_engine_destroy(fs->engine);
			fs->engine = NULL;
			return rc;
		}
	}
	if ((rc = us_engine_set_param(fs->engine, US_PARAM_COMMIT_INTERVAL_NS,
				      fs->opt.commit_interval_ns)) ||
	    (rc = us_backend_create(fs->engine, &ops, fs, &fs->backend))) {
		us_engine_destroy(fs->engine);
		fs->engine = NULL;
		return rc;
	}
	ufs_domain_ratios(fs, us_engine_root(fs->engine));
	/* The reaper of closed files (with the cache only). Without it every
	 * last close syncs its file. */
	if (!fs->opt.no_cache) {
		pthread_condattr_t ca;
		struct rlimit rl;

		fs->closed_hard = UFS_CLOSED_HARD;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur / 2 < fs->closed_hard)
			fs->closed_hard = (unsigned)(rl.rlim_cur / 2);
		fs->closed_soft = fs->closed_hard / 2 < UFS_CLOSED_SOFT ? fs->closed_hard / 2 :
									  UFS_CLOSED_SOFT;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&fs->reaper_cond, &ca);
		pthread_condattr_destroy(&ca);
		fs->reaper_stop = false;
		if (pthread_create(&fs->reaper, NULL, reaper_main, fs) == 0)
			fs->reaper_on = true;
		else
			pthread_cond_destroy(&fs->reaper_cond);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The inode table                                                           */

static unsigned ihash(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^ (uint64_t)ino;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (unsigned)((h ^ (h >> 32)) % UFS_HASH);
}

/* With itable_lock held. */
static struct ufs_inode *ifind(struct ufs *fs, dev_t dev, ino_t ino)
{
	struct ufs_inode *i;

	for (i = fs->itable[ihash(dev, ino)]; i; i = i->next)
		if (i->dev == dev && i->ino == ino && !i->gone)
			return i;
	return NULL;
}

/* With itable_lock held. */
static void iremove(struct ufs *fs, struct ufs_inode *ino)
{
	struct ufs_inode **p = &fs->itable[ihash(ino->dev, ino->ino)];

	while (*p != ino)
		p = &(*p)->next;
	*p = ino->next;
}

/* The list of closed files (see "Closed files" below). With itable_lock
 * held. */
static void closed_add(struct ufs *fs, struct ufs_inode *ino)
{
	ino->lingering = true;
	ino->cnext = NULL;
	ino->cprev = fs->closed_tail;
	if (fs->closed_tail)
		fs->closed_tail->cnext = ino;
	else
		fs->closed_head = ino;
	fs->closed_tail = ino;
	fs->nclosed++;
}

static void closed_del(struct ufs *fs, struct ufs_inode *ino)
{
	if (!ino->lingering)
		return;
	if (ino->cprev)
		ino->cprev->cnext = ino->cnext;
	else
		fs->closed_head = ino->cnext;
	if (ino->cnext)
		ino->cnext->cprev = ino->cprev;
	else
		fs->closed_tail = ino->cprev;
	ino->lingering = false;
	fs->nclosed--;
}

static bool ts_eq(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* The inode of (dev, ino) with one more open, or NULL; waits while it is
 * being torn down (its teardown decides whether it stays). *stale: it was
 * closed, and st (the backing file now, when given) has other times or
 * another size than when it was closed: the caller forgets it
 * (inode_release(), not kept) and looks again. With itable_lock held. */
static struct ufs_inode *iget(struct ufs *fs, dev_t dev, ino_t ino, const struct stat *st,
			      bool *stale)
{
	struct ufs_inode *i;

	*stale = false;
	while ((i = ifind(fs, dev, ino)) && (i->closing || i->unlinking)) {
		ufs_loop_yield();
		ufs_cond_wait(&fs->itable_cond, &fs->itable_lock, UFS_RANK_ITABLE);
	}
	if (i) {
		*stale = st && i->lingering && !i->closed_pending &&
			 (!ts_eq(st->st_mtim, i->closed_mtim) || !ts_eq(st->st_ctim, i->closed_ctim) ||
			  (uint64_t)st->st_size != i->closed_size);
		closed_del(fs, i);
		i->opens++;
	}
	return i;
}

static void ifree(struct ufs *fs, struct ufs_inode *ino)
{
	if (ino->mode_set)
		atomic_fetch_sub(&fs->modes_pending, 1);
	free(ino->pages.key);
	free((void *)ino->pages.bits);
	free(ino->pages.valid);
	free((void *)ino->pages.inflight);
	fs->be->close(fs, ino->file);
	pthread_rwlock_destroy(&ino->io_lock);
	pthread_rwlock_destroy(&ino->wb_lock);
	pthread_mutex_destroy(&ino->wb_mutex);
	pthread_cond_destroy(&ino->wb_cond);
	pthread_rwlock_destroy(&ino->data_lock);
	free(ino);
}

/*
 * The cached inode of the regular file open as f, with one more open;
 * NULL when f is not a regular file, its backing file cannot be opened
 * read-write, or the cache is off (--no-cache): it is then served without
 * cache. A new inode's object is charged to the domain of the process that
 * opens it (pid, uid).
 */

/*
 * The data lock prefers writers: the flush callbacks hold it shared across
 * pwritev() of runs of several MiB, one flusher after another, and glibc's
 * default rwlock let them take turns for seconds while a writer waited to
 * copy its data in (stalls of 0.4-2.9 s at 300 MiB and 2 GiB in
 * bench/fuse-vs-kernel, seen in gdb). Nothing takes it shared twice on one
 * thread, which this kind of lock would deadlock on.
 */
static void data_lock_init(pthread_rwlock_t *l)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(l, &a);
	pthread_rwlockattr_destroy(&a);
}

static void inode_release(struct ufs *fs, struct ufs_inode *ino, bool may_keep);

static struct ufs_inode *inode_get(struct ufs *fs, struct ufs_bfile *f, pid_t pid, uid_t uid)
{
	struct ufs_inode *ino;
	struct stat st;
	bool stale;

	if (fs->opt.no_cache || fs->be->fstat(fs, f, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	/* One being torn down is waited for: a new object would read stale
	 * data from the backing file while its last data is written back. */
	ino = iget(fs, st.st_dev, st.st_ino, &st, &stale);
	if (ino && stale) {
		/* Closed, and changed behind the cache since (another NFS
		 * client wrote it): written back, forgotten, read anew. */
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
		inode_release(fs, ino, false);
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
		ino = iget(fs, st.st_dev, st.st_ino, NULL, &stale);
	}
	if (ino)
		goto out;
	if (!(ino = calloc(1, sizeof(*ino))))
		goto out;
	if (fs->be->reopen_rw(fs, f, &ino->file) != 0) {
		free(ino);
		ino = NULL;
		goto out;
	}
	if (fs->be->fstat(fs, ino->file, &st) != 0) {
		fs->be->close(fs, ino->file);
		free(ino);
		ino = NULL;
		goto out;
	}
	ino->dev = st.st_dev;
	ino->ino = st.st_ino;
	ino->size = (uint64_t)st.st_size;
	ino->atime.tv_nsec = UTIME_OMIT;
	atomic_store(&ino->privs, privs_of(st.st_mode) != 0);
	times_shown(ino, &st);
	ino->opens = 1;
	pthread_rwlock_init(&ino->io_lock, NULL);
	data_lock_init(&ino->wb_lock);
	pthread_mutex_init(&ino->wb_mutex, NULL);
	pthread_cond_init(&ino->wb_cond, NULL);
	data_lock_init(&ino->data_lock);
	if (us_object_create(fs->backend, ufs_domain_for(fs, pid, uid), ino, &ino->obj) != 0) {
		ifree(fs, ino);
		ino = NULL;
		goto out;
	}
	atomic_init(&ino->err_seen, us_object_errseq(ino->obj));
	ino->next = fs->itable[ihash(ino->dev, ino->ino)];
	fs->itable[ihash(ino->dev, ino->ino)] = ino;
out:
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	return ino;
}

/* The cached inode of (dev, ino) with one more open, or NULL. */
static struct ufs_inode *inode_find(struct ufs *fs, const struct stat *st)
{
	struct ufs_inode *ino;
	bool stale;

	if (!S_ISREG(st->st_mode))
		return NULL;
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	ino = iget(fs, st->st_dev, st->st_ino, st, &stale);
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	if (ino && stale) {
		/* Changed behind the cache since it was closed (iget()). */
		inode_release(fs, ino, false);
		ino = NULL;
	}
	return ino;
}

/*
 * Drops every cached chunk at or past from (truncate, unlink): the data is
 * gone by the user's decision. A chunk in writeback cannot be dropped until
 * its write completes (the flush callback is synchronous, so that is soon):
 * wait and retry. The caller holds io_lock exclusive or the last open, so no
 * writer or reader holds a reference.
 */
static void drop_from(struct ufs_inode *ino, uint64_t from)
{
	for (;;) {
		uint64_t off = from;
		bool busy = false;
		us_buf *b;

		while (us_buf_next(ino->obj, off, &b) == 0) {
			off = us_buf_offset(b) + us_buf_length(b);
			if (us_buf_drop(b) != 0) {
				us_buf_put(b);
				busy = true;
			}
		}
		if (!busy)
			return;
		sleep_ms(1);
	}
}

/* Whether the inode's file lost its last name (on an NFS server, unlinking
 * removes the file at once: its handle is then stale). */
static bool inode_gone_st(struct ufs *fs, struct ufs_inode *ino, struct stat *st)
{
	int rc = fs->be->fstat(fs, ino->file, st);

	if (rc != 0)
		memset(st, 0, sizeof(*st)); /* unknown: found changed at the next open */
	return (rc == 0 && st->st_nlink == 0) || rc == -ESTALE || rc == -ENOENT;
}

static bool inode_gone(struct ufs *fs, struct ufs_inode *ino)
{
	struct stat st;

	return inode_gone_st(fs, ino, &st);
}

static int inode_times_of(struct ufs *fs, struct ufs_inode *ino);
static void mode_forget(struct ufs *fs, struct ufs_inode *ino, mode_t mode);
static bool hidden_name(const char *path);
static void links_changed(struct ufs *fs, const char *path, struct ufs_handle *h);

/*
 * CLOSED FILES. A close is not an fsync (unless --close=sync): as on a
 * local Linux filesystem, a close that wrote starts the file's write-back
 * (inode_writeback_start(); with --close=writeback it waits for it, not
 * for the commit: inode_writeback()) and returns the write-back errors its
 * descriptor was not told of (ufs_flush()); the data becomes durable at
 * fsync(), when the engine
 * commits it (unstable data older than --commit-interval, dirty data older
 * than --dirty-expire written back first, or under memory pressure), or at
 * unmount. So a file's cache outlives its last close: its inode stays in
 * the table, unopened, on the list of closed files, and a later open or
 * stat finds it there. The reaper thread forgets (destroys the objects of)
 * closed files whose data is clean, oldest first, every 100 ms, and gives
 * those whose data is written back the time of their writes (or the times
 * set since: times_defer()), which until then only getattr shows. A closed
 * file keeps its backing descriptor: past fs->closed_soft of them the
 * reaper syncs the oldest itself, and past fs->closed_hard a last close
 * syncs its own file, as --close=sync does. A closed file found changed
 * since its close is forgotten and read anew (iget()); one with an error
 * no descriptor was told of is kept for the next opener (err_seen()).
 *
 * Teardown (a file unlinked, or forgotten) marks the inode closing: whoever
 * looks it up meanwhile waits (iget()), since its data may be on its way
 * to the backing file, which alone would show it stale. So does a name's
 * removal (inode_unlink_begin()): once the server removed the file, it may
 * give its inode number to a file made at once by another thread, which
 * must not be taken for the cached one.
 */
#define UFS_REAP_BATCH 256

/* Ends a teardown: the object destroyed (rc 0: the inode leaves the table
 * and is freed) or not (it stays, closed). */
static void inode_teardown_end(struct ufs *fs, struct ufs_inode *ino, int rc)
{
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	ino->closing = false;
	if (ino->reaping) {
		ino->reaping = false;
		fs->nreaping--;
	}
	if (rc == 0)
		iremove(fs, ino);
	else if (ino->opens == 0)
		closed_add(fs, ino);
	pthread_cond_broadcast(&fs->itable_cond);
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	if (rc == 0)
		ifree(fs, ino);
}

/* Whether ino has a chunk dirty or in writeback, or (with unstable) one
 * written and not committed yet. */
static bool inode_holds(struct ufs_inode *ino, bool unstable)
{
	uint64_t off = 0;
	us_buf *b;

	while (us_buf_next(ino->obj, off, &b) == 0) {
		int state = us_buf_state(b);

		off = us_buf_offset(b) + us_buf_length(b);
		us_buf_put(b);
		if (state == US_BUF_DIRTY || state == US_BUF_WRITEBACK ||
		    (unstable && state == US_BUF_UNSTABLE))
			return true;
	}
	return false;
}

static bool inode_unwritten(struct ufs_inode *ino)
{
	return inode_holds(ino, false);
}

/* Destroys ino's object (the inode is closing); tries while a flusher's call
 * on it is still returning (brief) when wait. 0 or -EBUSY. */
static int inode_destroy(struct ufs *fs, struct ufs_inode *ino, bool wait)
{
	int rc, tries;

	/* The reaper's: an error nobody was told of stays with the file. */
	if (!wait && us_object_errseq(ino->obj) != atomic_load(&ino->err_seen))
		return -EBUSY;
	/* Data still to write or commit keeps the object (its chunks are
	 * pinned), and a seal would refuse the commits it waits for: the
	 * engine's slot for each stayed taken until its commit timed out. */
	if (inode_holds(ino, true))
		return -EBUSY;
	/* No reply of the backend's may name the object once destroyed: no
	 * commit is sent from here on (one the engine is calling for would
	 * leave after the drain), and those in flight are waited for. */
	if (fs->be->seal)
		fs->be->seal(fs, ino->file, true);
	if (fs->be->drain)
		fs->be->drain(fs, ino->file);
	for (tries = 0; (rc = us_object_destroy(ino->obj)) == -EBUSY && wait && tries < 1000;
	     tries++)
		sleep_ms(1);
	/* Kept: its commits are sent again. */
	if (rc && fs->be->seal)
		fs->be->seal(fs, ino->file, false);
	return rc;
}

/* Times or a mode that waited for the write-back (times_defer(),
 * mode_defer()) given to the backing file after the last close, when no
 * descriptor is left to tell of a failure: it goes to standard error. */
static void attrs_closed(struct ufs *fs, struct ufs_inode *ino)
{
	int rc = inode_times_of(fs, ino);

	if (rc)
		fprintf(stderr,
			"unstable-fuse: inode %llu: the times or mode set after its writes could not be "
			"given to the backing file: %s\n",
			(unsigned long long)ino->ino, strerror(-rc));
}

/*
 * Gives back an open. The last one leaves the file on the list of closed
 * files; or, with --close=sync or past fs->closed_hard closed files,
 * writes back and commits what is left (close has done it then, normally)
 * and destroys the object; a file unlinked has its cache dropped. If the
 * object cannot be destroyed (a write keeps failing), the inode stays in
 * the table, closed, and is written back at unmount.
 */
static void inode_release(struct ufs *fs, struct ufs_inode *ino, bool may_keep)
{
	struct stat st;
	uint64_t since;
	bool gone, keep;
	int rc;

	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	if (--ino->opens > 0) {
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
		return;
	}
	ino->closing = true;
	keep = may_keep && !fs->opt.close_sync && fs->reaper_on && fs->nclosed < fs->closed_hard;
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	if (!keep)
		ufs_loop_yield(); /* a sync follows */

	gone = inode_gone_st(fs, ino, &st);
	if (keep && !gone) {
		ino->closed_mtim = st.st_mtim;
		ino->closed_ctim = st.st_ctim;
		ino->closed_size = (uint64_t)st.st_size;
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		ino->closed_pending = ino->mtime.tv_sec != 0 || ino->mode_set;
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		inode_teardown_end(fs, ino, -EBUSY);
		return;
	}
	if (gone) {
		drop_from(ino, 0);
	} else {
		since = us_object_errseq(ino->obj);
		us_object_sync(ino->obj, &since);
	}
	rc = inode_destroy(fs, ino, true);
	/* Written back: the backing file takes the time of the cached
	 * writes, not the time of their write-back. */
	if (rc == 0 && !gone)
		attrs_closed(fs, ino);
	inode_teardown_end(fs, ino, rc);
}

static void inode_put(struct ufs *fs, struct ufs_inode *ino)
{
	inode_release(fs, ino, true);
}

/* A closed file, taken by the reaper, with times or a mode that wait for
 * its write-back (closed_pending, or waiting again after the data was
 * written again): once nothing of it is dirty or in writeback, the backing
 * file gets them, and the times and size to compare at the next open are
 * taken anew. One try: what fails is tried again (and reported) when the
 * file is forgotten. */
static void closed_times(struct ufs *fs, struct ufs_inode *ino)
{
	struct stat st;
	bool pending;

	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	pending = ino->mtime.tv_sec || ino->mode_set;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	if (!pending || ino->attrs_failed || inode_unwritten(ino))
		return;
	/* Its own changes are then done: those the backing file shows from
	 * here on are another client's. */
	ino->closed_pending = false;
	if (inode_times_of(fs, ino) != 0) {
		ino->attrs_failed = true;
		return;
	}
	if (fs->be->fstat(fs, ino->file, &st) != 0)
		return;
	ino->closed_mtim = st.st_mtim;
	ino->closed_ctim = st.st_ctim;
	ino->closed_size = (uint64_t)st.st_size;
}

/* One round of the reaper: the oldest closed files past fs->closed_soft
 * synced, then those whose data is clean forgotten, and those whose data
 * is written back given the time of their writes. */
static void reap(struct ufs *fs)
{
	struct ufs_inode *batch[UFS_REAP_BATCH], *ino;
	int n = 0, i;

	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	while (fs->nclosed > fs->closed_soft && n < UFS_REAP_BATCH) {
		ino = fs->closed_head;
		closed_del(fs, ino);
		ino->opens++;
		batch[n++] = ino;
	}
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	/* Not kept: the release syncs and destroys it (or drops it, if it
	 * was unlinked meanwhile: an NFS server would refuse its commit for
	 * ever), unless it was opened again meanwhile. */
	for (i = 0; i < n; i++)
		inode_release(fs, batch[i], false);

	/* One at a time, each as long as its round trips (a SETATTR3 and a
	 * GETATTR3 through NFS): whoever looks a file up meanwhile waits for
	 * that file only (iget()). A file kept goes back to the end of the
	 * list, so that each is looked at once a round. */
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	n = (int)(fs->nclosed < UFS_REAP_BATCH ? fs->nclosed : UFS_REAP_BATCH);
	for (i = 0; i < n && (ino = fs->closed_head); i++) {
		int rc;

		closed_del(fs, ino);
		ino->closing = true;
		/* Still a closed file kept, for the statistics, until
		 * inode_teardown_end() keeps or forgets it. */
		ino->reaping = true;
		fs->nreaping++;
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
		/* (One with an error no descriptor was told of is kept for the
		 * next opener, but past the soft cap: inode_destroy() leaves
		 * it.) */
		rc = inode_destroy(fs, ino, false);
		if (rc == 0)
			attrs_closed(fs, ino);
		else
			closed_times(fs, ino);
		inode_teardown_end(fs, ino, rc);
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	}
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
}

static void *reaper_main(void *arg)
{
	struct ufs *fs = arg;

	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	while (!fs->reaper_stop) {
		struct timespec t = ufs_deadline(CLOCK_MONOTONIC, 100000000L);

		ufs_cond_timedwait(&fs->reaper_cond, &fs->itable_lock, &t, UFS_RANK_ITABLE);
		if (fs->reaper_stop || !fs->closed_head)
			continue;
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
		reap(fs);
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	}
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	return NULL;
}

/*
 * Before a name of the file st is removed (unlink, a rename over it): its
 * cached inode, with one more open, marked so that a lookup of its (dev,
 * ino) waits (iget()) until inode_unlink_end(). Without it, a file made by
 * another thread while the removal was under way, given the same inode
 * number by the server (ext4 reuses them at once), was taken for the
 * removed file's cached inode, and its data written to the removed file
 * (four cp -a at once beside a loop of unlinks: tests/nfs/nsconns.sh).
 */
static struct ufs_inode *inode_unlink_begin(struct ufs *fs, const struct stat *st)
{
	struct ufs_inode *ino = inode_find(fs, st);

	if (ino) {
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
		ino->unlinking++;
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	}
	return ino;
}

/* After the removal (rc: its result): if the file lost its last name, its
 * inode is never found by (dev, ino) again (ifind()), whoever else still
 * holds it; the lookups that waited go on, and the open is given back (the
 * last one forgets the inode then, its cache dropped). */
static void inode_unlink_end(struct ufs *fs, struct ufs_inode *ino, int rc)
{
	bool gone;

	if (!ino)
		return;
	gone = rc == 0 && inode_gone(fs, ino);
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	ino->unlinking--;
	if (gone)
		ino->gone = true;
	pthread_cond_broadcast(&fs->itable_cond);
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	inode_put(fs, ino);
}

/* Sets the logical size: the backing file is truncated (or extended) at
 * once, the cached chunks past the end dropped and the tail of the last one
 * zeroed. */
static int inode_truncate(struct ufs *fs, struct ufs_inode *ino, uint64_t size)
{
	int rc;

	wrlock(&ino->io_lock, UFS_RANK_IO);
	wrlock(&ino->wb_lock, UFS_RANK_WB);
	/* The backend's replies to the writes of the file reported first
	 * (none is sent while wb_lock is held): the report of one may take
	 * data_lock (ufs_writeback_ending()), and the backend's truncate
	 * waits for them. */
	if (fs->be->drain)
		fs->be->drain(fs, ino->file);
	wrlock(&ino->data_lock, UFS_RANK_DATA);
	rc = fs->be->ftruncate(fs, ino->file, size);
	if (rc == 0) {
		uint64_t old = ino->size, tail = size % ufs_chunk_bytes;
		struct stat st;
		us_buf *b;

		ino->size = size;
		/* The backing file has the truncate's time: later than any
		 * cached write's. Its own stamp, not our clock's: the kernel
		 * may stamp a later change (a chmod) with a coarser clock that
		 * is behind ours, and getattr reports the later of the two. */
		if (ino->mtime.tv_sec) {
			if (fs->be->fstat(fs, ino->file, &st) == 0)
				ino->mtime = st.st_mtim;
			else
				ino->mtime = write_time(ino);
			ino->times_set = false;
		}
		atomic_store(&ino->times_applied, false);
		if (size < old && tail && us_buf_lookup(ino->obj, size, &b) == 0) {
			memset((char *)us_buf_data(b) + tail, 0, ufs_chunk_bytes - tail);
			us_buf_put(b);
		}
	}
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
	if (rc == 0)
		drop_from(ino, (size + ufs_chunk_bytes - 1) / ufs_chunk_bytes * ufs_chunk_bytes);
	ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	return rc;
}

/* A descriptor of ino was told of the errors up to since. */
static void err_seen(struct ufs_inode *ino, uint64_t since)
{
	uint64_t was = atomic_load(&ino->err_seen);

	while (since > was && !atomic_compare_exchange_weak(&ino->err_seen, &was, since))
		;
}

/* The error of the backing file's fdatasync() (--trust-backing) that h has
 * not been told of (0: none), told now. */
static int trust_told(struct ufs_handle *h, struct ufs_inode *ino)
{
	uint64_t n = atomic_load(&ino->trust_errs);
	int err = 0;

	ufs_mutex_lock(&h->lock, UFS_RANK_HANDLE);
	if (h->trust_seen != n) {
		err = atomic_load(&ino->trust_err);
		h->trust_seen = n;
	}
	ufs_mutex_unlock(&h->lock, UFS_RANK_HANDLE);
	return err;
}

/* Writes back and commits the inode's data (fsync, close, before utimens). */
static int inode_sync(struct ufs_handle *h, struct ufs_inode *ino)
{
	uint64_t since;
	int rc;

	ufs_loop_yield();
	if (h) {
		ufs_mutex_lock(&h->lock, UFS_RANK_HANDLE);
		rc = us_object_sync(ino->obj, &h->since);
		err_seen(ino, h->since);
		ufs_mutex_unlock(&h->lock, UFS_RANK_HANDLE);
	} else {
		since = us_object_errseq(ino->obj);
		rc = us_object_sync(ino->obj, &since);
	}
	/* --trust-backing: every commit left the data in the backing file's
	 * page cache; this is the integrity point. Its error is kept for every
	 * descriptor (one fdatasync() reports it once: to whichever asks
	 * first), and told to this one now if it has not been. */
	if (ufs_self()->opt.trust_backing) {
		int err = ufs_dir_datasync(ino->file);

		if (err < 0) {
			atomic_store(&ino->trust_err, err);
			atomic_fetch_add(&ino->trust_errs, 1);
		}
		if (h)
			err = trust_told(h, ino);
		if (rc == 0)
			rc = err;
	}
	/* Written back: the backing file takes the time of the cached
	 * writes, not the time of their write-back (which getattr no longer
	 * overrides once the file is closed), and the times and mode set
	 * since, whose failure the sync reports. */
	if (rc == 0)
		rc = ufs_inode_times(ino);
	return rc;
}

/* The write-back error of ino that h has not been told of yet (0: none),
 * told now. */
static int errors_told(struct ufs_handle *h, struct ufs_inode *ino)
{
	int err = 0, rc = 0;

	ufs_mutex_lock(&h->lock, UFS_RANK_HANDLE);
	if (us_object_check_error(ino->obj, &h->since, &err) == 1)
		rc = err;
	err_seen(ino, h->since);
	ufs_mutex_unlock(&h->lock, UFS_RANK_HANDLE);
	if (rc == 0)
		rc = trust_told(h, ino);
	return rc;
}

/*
 * ino's cached writes written back: every chunk that was dirty or in
 * writeback when it was called is then unstable or clean (on the backing
 * file or the server, where other openers see it; not committed). A chunk
 * that went back to dirty (a write that failed for now, a server down) is
 * written again: as for a sync, the wait is as long as the backend needs
 * (a hard mount), and a chunk rewritten all the while holds it. 0, or the
 * write-back error h has not seen yet (a permanent one cleans its chunk).
 */
static int inode_writeback(struct ufs_handle *h, struct ufs_inode *ino)
{
	uint64_t *offs = NULL, off = 0;
	size_t n = 0, cap = 0, i, k;
	us_buf *b;

	ufs_loop_yield();
	us_object_flush(ino->obj, 0, US_UNLIMITED, 0);
	while (us_buf_next(ino->obj, off, &b) == 0) {
		int state = us_buf_state(b);

		off = us_buf_offset(b) + us_buf_length(b);
		if (state == US_BUF_DIRTY || state == US_BUF_WRITEBACK) {
			if (n == cap) {
				uint64_t *more = realloc(offs, (cap ? 2 * cap : 64) * sizeof(*offs));

				if (!more) {
					us_buf_put(b);
					free(offs);
					return -ENOMEM;
				}
				offs = more;
				cap = cap ? 2 * cap : 64;
			}
			offs[n++] = us_buf_offset(b);
		}
		us_buf_put(b);
	}
	/* Polled: from 50 us (a WRITE3 to a server nearby is answered in
	 * 0.1-0.2 ms; a sleep of 1 ms each time made the wait of a small
	 * file's close or utimens that long), doubling to 1 ms. */
	for (uint64_t wait_ns = 50000; n; wait_ns = wait_ns < 1000000 ? 2 * wait_ns : wait_ns) {
		ufs_loop_yield();
		sleep_ns(wait_ns);
		for (i = k = 0; i < n; i++) {
			int state;

			if (us_buf_lookup(ino->obj, offs[i], &b) != 0)
				continue; /* dropped (truncate, unlink) */
			state = us_buf_state(b);
			us_buf_put(b);
			if (state == US_BUF_DIRTY)
				us_object_flush(ino->obj, offs[i], ufs_chunk_bytes, 0);
			if (state == US_BUF_DIRTY || state == US_BUF_WRITEBACK)
				offs[k++] = offs[i];
		}
		n = k;
	}
	free(offs);
	return h ? errors_told(h, ino) : 0;
}

/* By default, at a close: ino's dirty chunks handed to the write-back, not
 * waited for; 0, or the write-back error h has not seen yet. */
static int inode_writeback_start(struct ufs_handle *h, struct ufs_inode *ino)
{
	us_object_flush(ino->obj, 0, US_UNLIMITED, 0);
	return errors_told(h, ino);
}

/* Before times are set: the writes written back (a write that ends later
 * would move the times); with --close=sync committed too. */
static int inode_times_writeback(struct ufs *fs, struct ufs_handle *h, struct ufs_inode *ino)
{
	return fs->opt.close_sync ? inode_sync(h, ino) : inode_writeback(h, ino);
}

int ufs_engine_stop(struct ufs *fs)
{
	int rc, i;

	if (!fs->engine)
		return 0;
	if (fs->reaper_on) {
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
		fs->reaper_stop = true;
		pthread_cond_signal(&fs->reaper_cond);
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
		pthread_join(fs->reaper, NULL);
		fs->reaper_on = false;
		pthread_cond_destroy(&fs->reaper_cond);
	}
	/* A reply of the backend's still on its way (a commit of its own,
	 * sent as the last writes were answered, beside the one that cleaned
	 * the data) must not name an object destroyed: the backend sends no
	 * commit of its own from here on, and every file is drained. Each
	 * whose data is all written and committed (the caller synced) is
	 * sealed too, no commit being asked for it; one still holding data is
	 * written back and committed by the shutdown, with the engine's
	 * commits, one of an object at a time. */
	if (fs->be->seal)
		fs->be->seal(fs, NULL, true);
	for (i = 0; fs->be->drain && i < UFS_HASH; i++) {
		struct ufs_inode *ino;

		for (ino = fs->itable[i]; ino; ino = ino->next) {
			if (fs->be->seal && !inode_holds(ino, true))
				fs->be->seal(fs, ino->file, true);
			fs->be->drain(fs, ino->file);
		}
	}
	/* Writes back and commits everything, then destroys the objects. */
	rc = us_engine_shutdown(fs->engine);
	if (rc) {
		fprintf(stderr, "unstable-fuse: engine shutdown: %s\n", us_strerror(rc));
		return rc;
	}
	fs->engine = NULL;
	for (i = 0; i < UFS_HASH; i++) {
		while (fs->itable[i]) {
			struct ufs_inode *ino = fs->itable[i];

			fs->itable[i] = ino->next;
			/* Closed files: the time of their cached writes, once
			 * the backend has reported the ends of their writes
			 * (a write-back after the times moves them: they wait
			 * again, ufs_writeback_ending()). */
			if (fs->be->drain)
				fs->be->drain(fs, ino->file);
			attrs_closed(fs, ino);
			ifree(fs, ino);
		}
	}
	/* Files unlinked and still open at the unmount. */
	while (fs->hidden) {
		struct ufs_hidden *hd = fs->hidden;

		fs->hidden = hd->next;
		free(hd);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

/* Fills a new chunk from the backing file (read-modify-write); past the
 * backing file's end, zeros. */
static int chunk_fill(struct ufs *fs, struct ufs_inode *ino, us_buf *b)
{
	ssize_t r;

	ufs_loop_yield();
	r = fs->be->pread(fs, ino->file, us_buf_data(b), ufs_chunk_bytes, us_buf_offset(b));

	if (r < 0)
		return (int)r;
	atomic_fetch_add(&fs->fill_bytes, (uint64_t)r);
	memset((char *)us_buf_data(b) + r, 0, ufs_chunk_bytes - (uint64_t)r);
	return 0;
}

/* The page map (ufuse.h struct ufs_pmap): open addressing. */
_Static_assert(UFS_CHUNK_MAX / UFS_PAGE_BYTES <= 32, "a chunk's pages in 32 bits");
#define UFS_ALL_PAGES ufs_all_pages()

static size_t pmap_slot(const struct ufs_pmap *m, uint64_t key)
{
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);

	while (m->key[i] && m->key[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* The entry of chunk in m: its slot, or m->cap for none. */
static size_t pmap_find(const struct ufs_pmap *m, uint64_t chunk)
{
	size_t i;

	if (!m->cap)
		return 0;
	i = pmap_slot(m, chunk + 1);
	return m->key[i] ? i : m->cap;
}

/* Whether slot i of m says something: pages to write, or pages not valid;
 * and whether ino still caches its chunk (entries of chunks evicted since
 * are forgotten). */
static bool pmap_live(const struct ufs_inode *ino, const struct ufs_pmap *m, size_t i)
{
	us_buf *b;

	if (!m->key[i] || (!atomic_load(&m->bits[i]) && m->valid[i] == UFS_ALL_PAGES))
		return false;
	if (us_buf_lookup(ino->obj, (m->key[i] - 1) * ufs_chunk_bytes, &b) != 0)
		return false;
	us_buf_put(b);
	return true;
}

/* Rebuilds ino's map with room to spare for one more entry, keeping only
 * the live ones. With io_lock and data_lock exclusive. false: no memory
 * (the map is unchanged). */
static bool pmap_rebuild(struct ufs_inode *ino)
{
	struct ufs_pmap *m = &ino->pages, n = { 0 };
	size_t live = 0, i;
	bool *keep = m->cap ? calloc(m->cap, sizeof(*keep)) : NULL;

	if (m->cap && !keep)
		return false;
	for (i = 0; i < m->cap; i++)
		live += keep[i] = pmap_live(ino, m, i);
	for (n.cap = 64; n.cap < 4 * (live + 1); n.cap *= 2)
		;
	n.key = calloc(n.cap, sizeof(*n.key));
	n.bits = calloc(n.cap, sizeof(*n.bits));
	n.valid = calloc(n.cap, sizeof(*n.valid));
	n.inflight = calloc(n.cap, sizeof(*n.inflight));
	if (!n.key || !n.bits || !n.valid || !n.inflight) {
		free(n.key);
		free((void *)n.bits);
		free(n.valid);
		free((void *)n.inflight);
		free(keep);
		return false;
	}
	for (i = 0; i < m->cap; i++) {
		if (keep[i]) {
			size_t j = pmap_slot(&n, m->key[i]);

			n.key[j] = m->key[i];
			atomic_store(&n.bits[j], atomic_load(&m->bits[i]));
			n.valid[j] = m->valid[i];
			atomic_store(&n.inflight[j], atomic_load(&m->inflight[i]));
			n.used++;
		}
	}
	free(keep);
	free(m->key);
	free((void *)m->bits);
	free(m->valid);
	free((void *)m->inflight);
	*m = n;
	return true;
}

/* The slot of chunk's entry in ino's map, made (nothing dirty, every page
 * valid) when there is none. With io_lock and data_lock exclusive. m->cap:
 * no memory. */
static size_t pmap_entry(struct ufs_inode *ino, uint64_t chunk)
{
	struct ufs_pmap *m = &ino->pages;
	size_t i = pmap_find(m, chunk);

	if (i < m->cap)
		return i;
	if ((m->used + 1) * 2 > m->cap && !pmap_rebuild(ino))
		return m->cap;
	i = pmap_slot(m, chunk + 1);
	m->key[i] = chunk + 1;
	atomic_store(&m->bits[i], 0);
	m->valid[i] = UFS_ALL_PAGES;
	atomic_store(&m->inflight[i], 0);
	m->used++;
	return i;
}

/* The valid pages of chunk (cached): all, unless the map says otherwise.
 * With io_lock held (shared is enough: only writers change it). */
static uint32_t pages_valid(const struct ufs_inode *ino, uint64_t chunk)
{
	const struct ufs_pmap *m = &ino->pages;
	size_t i = pmap_find(m, chunk);

	return i < m->cap ? m->valid[i] : UFS_ALL_PAGES;
}

/* The pages of a chunk that bytes [off, off + n) of it touch. */
static uint32_t page_bits(uint64_t off, uint64_t n)
{
	unsigned first = (unsigned)(off / UFS_PAGE_BYTES);
	unsigned count = (unsigned)((off + n - 1) / UFS_PAGE_BYTES) - first + 1;

	return count >= ufs_chunk_pages() ? UFS_ALL_PAGES : ((1u << count) - 1) << first;
}

uint32_t ufs_pages_take(struct ufs_inode *ino, uint64_t chunk)
{
	struct ufs_pmap *m = &ino->pages;
	size_t i = pmap_find(m, chunk);
	uint32_t d;

	if (i == m->cap)
		return 0;
	/* Dirty pages are valid; none noted: every valid page. */
	d = atomic_exchange(&m->bits[i], 0);
	atomic_store(&m->inflight[i], d ? d : m->valid[i]);
	return d ? d : m->valid[i] == UFS_ALL_PAGES ? 0 : m->valid[i];
}

/* Whether a write to pages of chunk (under write-back) must wait for that
 * write-back: some of them are in flight, or the map does not say (the
 * chunk goes whole). With data_lock. */
static bool pages_busy(const struct ufs_inode *ino, uint64_t chunk, uint32_t pages)
{
	const struct ufs_pmap *m = &ino->pages;
	size_t i = pmap_find(m, chunk);

	return i == m->cap || (atomic_load(&m->inflight[i]) & pages);
}

/* Until chunk b of ino is no longer under write-back. */
static void writeback_wait(struct ufs_inode *ino, us_buf *b)
{
	ufs_loop_yield();
	ufs_mutex_lock(&ino->wb_mutex, UFS_RANK_WB_MUTEX);
	while (us_buf_state(b) == US_BUF_WRITEBACK)
		ufs_cond_wait(&ino->wb_cond, &ino->wb_mutex, UFS_RANK_WB_MUTEX);
	ufs_mutex_unlock(&ino->wb_mutex, UFS_RANK_WB_MUTEX);
}

void ufs_writeback_ending(struct ufs_inode *ino)
{
	atomic_fetch_add(&ino->wb_ends, 1);
	/* Written after its times were given to the backing file: they wait
	 * again, for the reaper, the next fsync, or the unmount. */
	if (atomic_load(&ino->times_applied)) {
		ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
		if (atomic_load(&ino->times_applied) && !ino->mtime.tv_sec) {
			ino->mtime = ino->applied_mtime;
			ino->atime = ino->applied_atime;
			ino->times_set = true;
			atomic_store(&ino->times_applied, false);
		}
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	}
}

void ufs_writeback_done(struct ufs_inode *ino)
{
	ufs_mutex_lock(&ino->wb_mutex, UFS_RANK_WB_MUTEX);
	pthread_cond_broadcast(&ino->wb_cond);
	ufs_mutex_unlock(&ino->wb_mutex, UFS_RANK_WB_MUTEX);
}

/*
 * A write of n bytes at off into a chunk in state (its index: chunk), with
 * io_lock and data_lock exclusive, before us_buf_dirty(); the pages it
 * touches were valid or are filled (fill_edges()). They become valid. A
 * clean chunk (new, or committed: its other pages are what the backing
 * file durably holds) gets these pages to write only, or none for a
 * whole-chunk write (0: every valid page). A chunk dirty, in writeback or
 * unstable keeps what it had plus these: a whole one stays whole (its
 * earlier pages may still have to be written, or written again after a
 * lost commit). No memory for the map: whole.
 */
static void pages_note(struct ufs_inode *ino, enum us_buf_state state, uint64_t chunk, uint64_t off,
		       uint64_t n)
{
	struct ufs_pmap *m = &ino->pages;
	uint32_t bits = page_bits(off, n);
	bool clean = state == US_BUF_CLEAN;
	size_t i = pmap_find(m, chunk);

	if (i < m->cap) {
		uint32_t old = atomic_load(&m->bits[i]);

		m->valid[i] |= bits;
		atomic_store(&m->bits[i], clean ? (bits == UFS_ALL_PAGES ? 0 : bits) :
					  old ? old | bits : 0);
		return;
	}
	if (!clean || bits == UFS_ALL_PAGES)
		return; /* no entry: the whole chunk, as wanted */
	if ((i = pmap_entry(ino, chunk)) < m->cap)
		atomic_store(&m->bits[i], bits);
}

/*
 * Partial writes. A chunk created for a write of part of it holds valid
 * data in the pages that write covers and in the pages from the logical
 * size on (zeros); its other pages are not valid, and nothing is read from
 * the backend for them: a 4 KiB write into an uncached chunk reads
 * nothing, and its payload is not even zeroed (US_GET_UNINIT) but for the
 * pages past the size. What a page that is not valid holds is never seen:
 * reads of it go to the backend (ufs_read()), which holds its data;
 * write-back sends only valid pages (ufs_pages_take()). Only a write that
 * covers part of a page that is not valid reads that page first
 * (fill_edges()).
 */

/* The valid pages of a chunk at co created now: those at or past the
 * logical size. With io_lock exclusive. */
static uint32_t fresh_valid(const struct ufs_inode *ino, uint64_t co)
{
	uint64_t zero_from;

	if (ino->size <= co)
		return UFS_ALL_PAGES;
	if (ino->size >= co + ufs_chunk_bytes)
		return 0;
	zero_from = (ino->size - co + UFS_PAGE_BYTES - 1) / UFS_PAGE_BYTES;
	return zero_from >= ufs_chunk_pages() ? 0 : (UFS_ALL_PAGES << zero_from) & UFS_ALL_PAGES;
}

/* Zeroes the pages of fresh chunk b that are valid (past the size) and
 * that the write of [off, off + n) does not cover whole. */
static void zero_fresh(us_buf *b, uint32_t valid, uint64_t off, uint64_t n)
{
	uint64_t whole_from = (off + UFS_PAGE_BYTES - 1) / UFS_PAGE_BYTES;
	uint64_t whole_to = (off + n) / UFS_PAGE_BYTES;
	unsigned p = 0;

	while (p < ufs_chunk_pages()) {
		unsigned q;

		if (!(valid >> p & 1) || (p >= whole_from && p < whole_to)) {
			p++;
			continue;
		}
		for (q = p + 1; q < ufs_chunk_pages() && (valid >> q & 1) && !(q >= whole_from && q < whole_to); q++)
			;
		memset((char *)us_buf_data(b) + p * UFS_PAGE_BYTES, 0, (q - p) * UFS_PAGE_BYTES);
		p = q;
	}
}

/* Reads the pages that the write of [off, off + n) covers only in part and
 * that are not valid, from the backend, into chunk b. With io_lock
 * exclusive: no reader sees them, and no flush writes a page not valid. */
static int fill_edges(struct ufs *fs, struct ufs_inode *ino, us_buf *b, uint32_t valid,
		      uint64_t off, uint64_t n)
{
	unsigned edge[2] = { (unsigned)(off / UFS_PAGE_BYTES),
			     (unsigned)((off + n - 1) / UFS_PAGE_BYTES) };

	for (int k = 0; k < 2; k++) {
		uint64_t ps = edge[k] * UFS_PAGE_BYTES;
		char *at = (char *)us_buf_data(b) + ps;
		ssize_t r;

		if ((k == 1 && edge[1] == edge[0]) || (off <= ps && off + n >= ps + UFS_PAGE_BYTES) ||
		    (valid >> edge[k] & 1))
			continue;
		ufs_loop_yield();
		r = fs->be->pread(fs, ino->file, at, UFS_PAGE_BYTES, us_buf_offset(b) + ps);
		if (r < 0)
			return (int)r;
		atomic_fetch_add(&fs->fill_bytes, (uint64_t)r);
		memset(at + r, 0, UFS_PAGE_BYTES - (uint64_t)r);
	}
	return 0;
}

/* A chunk just created: its entry says valid (any entry left by an earlier
 * chunk at this index is reset). With io_lock and data_lock exclusive.
 * Returns 0; or 1 when there was no memory for the entry and the chunk was
 * filled whole from the backend instead (every page valid); or a negative
 * errno from that fill. */
static int pages_fresh(struct ufs *fs, struct ufs_inode *ino, us_buf *b, uint64_t chunk,
		       uint32_t valid)
{
	struct ufs_pmap *m = &ino->pages;
	size_t i = valid == UFS_ALL_PAGES ? pmap_find(m, chunk) : pmap_entry(ino, chunk);
	int rc;

	if (i < m->cap) {
		m->valid[i] = valid;
		atomic_store(&m->bits[i], 0);
		return 0;
	}
	if (valid == UFS_ALL_PAGES)
		return 0;
	rc = chunk_fill(fs, ino, b);
	return rc < 0 ? rc : 1;
}

/* Whether a new chunk of ino needs no write-back or commit to be charged:
 * its domain and every parent have room, or clean data to evict. A guess
 * (the state moves meanwhile), for the request loop. */
static bool room_at_hand(struct ufs_inode *ino)
{
	us_domain *d = us_object_domain(ino->obj);

	for (; d; d = us_domain_parent(d)) {
		struct us_domain_stats st = { .size = sizeof(st) };
		uint64_t max;

		if (us_domain_get_limit(d, US_LIMIT_MAX, &max) != 0 || us_domain_stats(d, &st) != 0)
			return false;
		if (max != US_UNLIMITED && st.charged_bytes + ufs_chunk_bytes > max &&
		    st.evictable_bytes < ufs_chunk_bytes)
			return false;
	}
	return true;
}

/* Reads bytes [off, off + n) of cached chunk b whose valid pages are
 * valid: those from the payload, the others from the backend (zeros past
 * its end). With io_lock shared. */
static int read_pages(struct ufs *fs, struct ufs_inode *ino, us_buf *b, uint32_t valid, char *out,
		      uint64_t off, uint64_t n)
{
	uint64_t end = off + n;

	while (off < end) {
		bool v = valid >> (off / UFS_PAGE_BYTES) & 1;
		uint64_t to = (off / UFS_PAGE_BYTES + 1) * UFS_PAGE_BYTES;

		/* The run of pages alike. */
		while (to < end && (bool)(valid >> (to / UFS_PAGE_BYTES) & 1) == v)
			to += UFS_PAGE_BYTES;
		to = min_u64(to, end);
		if (v) {
			memcpy(out, (char *)us_buf_data(b) + off, to - off);
		} else {
			ssize_t r;

			ufs_loop_yield();
			r = fs->be->pread(fs, ino->file, out, to - off, us_buf_offset(b) + off);

			if (r < 0)
				return (int)r;
			memset(out + r, 0, to - off - (uint64_t)r);
		}
		out += to - off;
		off = to;
	}
	return 0;
}

/*
 * Drop-behind (--clean-max). A clean chunk is a copy of data the backend
 * holds (for a backing directory, in its page cache too), kept only to
 * answer reads. A cache let fill up with them grows into fresh memory up to
 * the max, and on a paravirtualised guest the first touch of that memory
 * (its page faults and the zeroing of each page) cost more than the writes:
 * 1 GiB through a 2 GiB max ran at a quarter of the passthrough's speed.
 * So a writer that took a new chunk while its domain holds more than
 * clean_max of clean data drops up to two clean chunks of its own file,
 * walking the file from a cursor; the engine's pool then hands their memory,
 * still resident, to the next chunks. Reads of a dropped chunk go to the
 * backend, which has its data. The caller holds io_lock exclusive, so no
 * writer of this file can dirty a chunk between the state check and the
 * drop; a reader's or the flusher's reference makes us_buf_drop() refuse
 * (-EBUSY) and the chunk stays.
 */
#define UFS_DROP_WALK 8

static void drop_behind(struct ufs *fs, struct ufs_inode *ino, uint64_t skip)
{
	struct us_domain_stats st = { .size = sizeof(st) };
	unsigned dropped = 0, seen = 0;
	bool wrapped = false;
	us_buf *b;

	if (us_domain_stats(us_object_domain(ino->obj), &st) != 0 ||
	    st.clean_bytes <= fs->opt.clean_max)
		return;
	while (dropped < 2 && seen < UFS_DROP_WALK) {
		uint64_t bo;

		if (us_buf_next(ino->obj, ino->drop_cursor, &b) != 0) {
			if (wrapped || ino->drop_cursor == 0)
				return;
			wrapped = true;
			ino->drop_cursor = 0;
			continue;
		}
		seen++;
		bo = us_buf_offset(b);
		ino->drop_cursor = bo + us_buf_length(b);
		if (bo != skip && us_buf_state(b) == US_BUF_CLEAN && us_buf_drop(b) == 0) {
			dropped++;
			atomic_fetch_add(&fs->dropped_behind, 1);
		}
		else
			us_buf_put(b);
	}
}

/*
 * A write by a caller other than root through a direct-I/O descriptor
 * (attach()): the kernel, which takes the set-user-ID bit away (and the
 * set-group-ID bit of a group-executable file) for writes through its page
 * cache, leaves it to the filesystem then, and the backing file, written
 * by root, would keep them. Looked at while ino->privs says the file may
 * have them (set from its mode when cached, and by every chmod that sets
 * them). With io_lock exclusive (the attributes' lock: inode_times_of());
 * true: the mode changed, and the caller has the kernel drop the file's
 * attributes, which it keeps for a second (links.c), once io_lock is
 * given back.
 */
static bool privs_kill(struct ufs *fs, struct ufs_handle *h)
{
	struct ufs_inode *ino = h->ino;
	struct stat st;
	mode_t m, kill;

	if (fs->be->fstat(fs, h->file, &st) != 0)
		return false; /* looked at again at the next write */
	m = st.st_mode & 07777;
	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	if (ino->mode_set)
		m = ino->mode;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	kill = privs_of(m);
	if (!kill) {
		atomic_store(&ino->privs, false);
		return false;
	}
	if (fs->be->fchmod(fs, h->file, m & ~kill) != 0)
		return false;
	mode_forget(fs, ino, (mode_t)-1);
	atomic_store(&ino->privs, privs_of(m & ~kill) != 0);
	return true;
}

static int ufs_write(const char *path, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = h->ino;
	size_t done = 0;
	bool killed = false;
	int rc = 0;

	(void)path;
	if (!ino) {
		ufs_loop_yield();
		return (int)fs->be->pwrite(fs, h->file, buf, size, (uint64_t)off);
	}
	atomic_store(&h->wrote, true);
	wrlock(&ino->io_lock, UFS_RANK_IO);
	if (h->direct && atomic_load(&ino->privs) && fuse_get_context()->uid != 0)
		killed = privs_kill(fs, h);
	while (done < size) {
		uint64_t pos = (uint64_t)off + done, co = pos - pos % ufs_chunk_bytes;
		uint64_t n = min_u64(size - done, co + ufs_chunk_bytes - pos);
		uint32_t valid = UFS_ALL_PAGES;
		enum us_buf_state state;
		uint64_t pause;
		unsigned flags;
		bool fresh, waited = false;
		us_buf *b;

		/* May wait for reclaim: writeback and commits of this domain.
		 * A write of the whole chunk overwrites all of a new payload
		 * before anyone can see it (io_lock keeps readers out, and the
		 * buffer is clean until dirtied): no need to zero it. Nor for a
		 * part of it with a page map: see "Partial writes". */
		flags = n == ufs_chunk_bytes || fs->be->page_writeback ? US_GET_UNINIT : 0;
		/* A cached chunk is taken without a charge. Making room for
		 * a new one may write back and commit on this thread, even
		 * with US_GET_NOWAIT: another thread reads requests meanwhile. */
		rc = us_buf_get(ino->obj, co, ufs_chunk_bytes, US_GET_NOCREATE, &b);
		if (rc == -ENOENT) {
			if (!room_at_hand(ino))
				ufs_loop_yield();
			rc = us_buf_get(ino->obj, co, ufs_chunk_bytes, flags | US_GET_NOWAIT, &b);
		}
		if (rc == -EAGAIN) {
			ufs_loop_yield();
			rc = us_buf_get(ino->obj, co, ufs_chunk_bytes, flags, &b);
		}
		if (rc < 0)
			break;
		fresh = rc == 1;
		/* A new chunk: recycle up to two old ones for the next (the
		 * pool then stays the same size). */
		if (fresh && fs->opt.clean_max != UINT64_MAX)
			drop_behind(fs, ino, co);
		/* A new chunk's page map entry first, so that it never exists
		 * without one: a fill that fails below leaves it holding only
		 * the pages past the size, if it cannot be dropped. */
		if (fresh && fs->be->page_writeback) {
			wrlock(&ino->data_lock, UFS_RANK_DATA);
			rc = pages_fresh(fs, ino, b, co / ufs_chunk_bytes,
					 n == ufs_chunk_bytes ? UFS_ALL_PAGES : fresh_valid(ino, co));
			ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
			if (rc < 0) {
				if (us_buf_drop(b) != 0)
					us_buf_put(b);
				break;
			}
			if (rc == 0)
				zero_fresh(b, pages_valid(ino, co / ufs_chunk_bytes), pos - co, n);
		}
		if (n < ufs_chunk_bytes) {
			/* Without a page map, a new chunk is read whole first. */
			if (!fs->be->page_writeback) {
				rc = fresh ? chunk_fill(fs, ino, b) : 0;
			} else {
				valid = pages_valid(ino, co / ufs_chunk_bytes);
				rc = fill_edges(fs, ino, b, valid, pos - co, n);
			}
			if (rc < 0) {
				if (!fresh || us_buf_drop(b) != 0)
					us_buf_put(b);
				break;
			}
		}
		wrlock(&ino->data_lock, UFS_RANK_DATA);
		state = fs->be->unlocked_writeback || fs->be->page_writeback ? us_buf_state(b) :
									       US_BUF_DIRTY;
		/* Not into the pages of a chunk being written back without
		 * data_lock (into its others, yes: the write-back reads only
		 * its own, and the chunk is written again for these). */
		while (fs->be->unlocked_writeback && state == US_BUF_WRITEBACK &&
		       (!fs->be->page_writeback ||
			pages_busy(ino, co / ufs_chunk_bytes, page_bits(pos - co, n)))) {
			if (!waited)
				atomic_fetch_add(&fs->wb_waits, 1);
			waited = true;
			ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
			writeback_wait(ino, b);
			ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
			state = us_buf_state(b);
		}
		if (fs->be->unlocked_writeback && state == US_BUF_WRITEBACK && !waited)
			atomic_fetch_add(&fs->wb_passes, 1);
		memcpy((char *)us_buf_data(b) + (pos - co), buf + done, n);
		if (fs->be->page_writeback)
			pages_note(ino, state, co / ufs_chunk_bytes, pos - co, n);
		if (pos + n > ino->size)
			ino->size = pos + n;
		ino->mtime = write_time(ino);
		ino->times_set = false;
		atomic_store(&ino->times_applied, false);
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		/* Throttles this writer: pauses, or waits at the dirty limit
		 * (the blocking form of us_buf_dirty(), in two steps, so that
		 * another thread reads requests meanwhile). */
		rc = us_buf_dirty(b, &pause);
		us_buf_put(b);
		if (rc < 0)
			break;
		if (pause || rc == US_DIRTY_OVER_LIMIT) {
			ufs_loop_yield();
			sleep_ns(pause);
			if (rc == US_DIRTY_OVER_LIMIT && (rc = us_object_balance_wait(ino->obj)) < 0)
				break;
		}
		done += n;
	}
	ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	if (killed)
		ufs_links_self(fs, h->path && !hidden_name(h->path) ? h->path : NULL, ino->dev,
			       ino->ino);
	return done ? (int)done : rc;
}

static int ufs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = h->ino;
	uint64_t end, pos;
	int rc = 0;

	(void)path;
	if (!ino) {
		ufs_loop_yield();
		return (int)fs->be->pread(fs, h->file, buf, size, (uint64_t)off);
	}
	/* Shared with other readers; writers and truncate wait. */
	if (!ufs_rwlock_tryrdlock(&ino->io_lock, UFS_RANK_IO)) {
		ufs_loop_yield();
		ufs_rwlock_rdlock(&ino->io_lock, UFS_RANK_IO);
	}
	end = min_u64((uint64_t)off + size, ino->size);
	for (pos = (uint64_t)off; pos < end;) {
		uint64_t co = pos - pos % ufs_chunk_bytes;
		uint64_t n = min_u64(end - pos, co + ufs_chunk_bytes - pos);
		char *out = buf + (pos - (uint64_t)off);
		us_buf *b;

		if (us_buf_lookup(ino->obj, pos, &b) == 0) {
			uint32_t valid = fs->be->page_writeback ?
						 pages_valid(ino, co / ufs_chunk_bytes) :
						 UFS_ALL_PAGES;

			if (valid == UFS_ALL_PAGES)
				memcpy(out, (char *)us_buf_data(b) + (pos - co), n);
			else
				rc = read_pages(fs, ino, b, valid, out, pos - co, n);
			us_buf_put(b);
			if (rc < 0)
				goto out;
		} else {
			/* Not cached: the backing file has its latest data, up to
			 * its end; past it (a tail not yet written back, a
			 * hole) the file reads as zeros. */
			ssize_t r;

			ufs_loop_yield();
			r = fs->be->pread(fs, ino->file, out, n, pos);

			if (r < 0) {
				rc = (int)r;
				goto out;
			}
			memset(out + r, 0, n - (uint64_t)r);
		}
		pos += n;
	}
out:
	ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	if (pos > (uint64_t)off)
		return (int)(pos - (uint64_t)off);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Open, close, sync                                                         */

/* A descriptor of f opened by path: trunc for O_TRUNC; made when the open
 * has just made the file, which is then empty and not truncated (as Linux
 * skips that truncate), unless the inode table still holds data of its
 * number (a server may give a removed file's number to a new one). */
static int attach(struct ufs *fs, struct ufs_bfile *f, struct fuse_file_info *fi, bool trunc,
		  bool made, const char *path)
{
	struct fuse_context *ctx = fuse_get_context();
	struct ufs_handle *h = calloc(1, sizeof(*h));
	int rc = 0;

	if (!h) {
		fs->be->close(fs, f);
		return -ENOMEM;
	}
	h->file = f;
	h->path = path ? strdup(path) : NULL;
	pthread_mutex_init(&h->lock, NULL);
	h->ino = inode_get(fs, f, ctx->pid, ctx->uid);
	/* From the last error a descriptor was told of: one that came after
	 * the file's last close is reported to the next opener's fsync or
	 * close (as Linux's errseq does for an error nobody has seen). */
	if (h->ino) {
		h->since = atomic_load(&h->ino->err_seen);
		h->trust_seen = atomic_load(&h->ino->trust_errs);
	}
	if (trunc && made) {
		if (h->ino) {
			ufs_rwlock_rdlock(&h->ino->data_lock, UFS_RANK_DATA);
			trunc = h->ino->size != 0;
			ufs_rwlock_unlock(&h->ino->data_lock, UFS_RANK_DATA);
		} else {
			trunc = false;
		}
	}
	if (trunc)
		rc = h->ino ? inode_truncate(fs, h->ino, 0) : fs->be->ftruncate(fs, f, 0);
	/* A descriptor that only writes into the cache: its writes skip the
	 * kernel's page cache (FOPEN_DIRECT_IO), which without the kernel's
	 * writeback cache copies every byte written into page cache of its
	 * own first (write-through), 1 GiB of fresh memory for a 1 GiB dd,
	 * and only then hands the request over. It cannot read nor be
	 * mapped; other descriptors' cached pages are dropped at their next
	 * read (auto_inval_data: the mtime moved, attr_timeout is 0). */
	if (h->ino && !fs->opt.kernel_writeback && (fi->flags & O_ACCMODE) == O_WRONLY &&
	    !(fi->flags & O_APPEND)) {
		fi->direct_io = 1;
		h->direct = true;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	if (trunc && rc == 0)
		links_changed(fs, path, h);
	return rc;
}

/* The caller's flags for the backing open: no O_TRUNC (done through the
 * cache), no O_APPEND (the kernel gives the offsets; pwrite must not
 * append). */
static int backing_flags(int flags)
{
	return flags & ~(O_TRUNC | O_APPEND);
}

static int ufs_open(const char *path, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_bfile *f;
	int rc = fs->be->open(fs, rel(path), backing_flags(fi->flags), 0, &f);

	if (rc)
		return rc;
	return attach(fs, f, fi, fi->flags & O_TRUNC, false, path);
}

/*
 * What a user creates belongs to that user (the daemon creates as root):
 * the caller's uid, and its gid unless the parent directory is
 * set-group-ID (the backing filesystem then gave the directory's group, as
 * it would to the caller). By fd when there is one (before anyone else can
 * open it), else by name. On failure the new entry is removed: nothing is
 * left owned by root. 0 or a negative errno.
 */
static int own(const char *path, struct ufs_bfile *f, mode_t mode, bool dir)
{
	struct fuse_context *ctx = fuse_get_context();
	struct ufs *fs = ctx->private_data;
	const struct ufs_backend *be = fs->be;
	const char *r = rel(path), *slash = strrchr(r, '/');
	gid_t gid = ctx->gid;
	struct stat pst;
	int rc;

	/* The daemon's own uid and gid: nothing to change, whichever group
	 * the parent gave (no stat of it). */
	if (ctx->uid == geteuid() && ctx->gid == getegid())
		return 0;
	if (slash) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - r), r);
		rc = be->stat(fs, parent, &pst);
	} else {
		rc = be->stat(fs, ".", &pst);
	}
	if (rc == 0 && (pst.st_mode & S_ISGID))
		gid = (gid_t)-1;
	if (ctx->uid == geteuid() && (gid == (gid_t)-1 || gid == getegid()))
		return 0;
	if (f)
		rc = be->fchown(fs, f, ctx->uid, gid);
	else
		rc = be->chown(fs, r, ctx->uid, gid);
	/* chown clears a file's set-user-ID and set-group-ID: give them back. */
	if (rc == 0 && !dir && (mode & (S_ISUID | S_ISGID)) && !S_ISLNK(mode))
		rc = f ? be->fchmod(fs, f, mode & 07777) : be->chmod(fs, r, mode & 07777);
	if (rc == 0)
		return 0;
	if (dir)
		be->rmdir(fs, r);
	else
		be->unlink(fs, r);
	return rc;
}

static int ufs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_bfile *f;
	int rc = fs->be->open(fs, rel(path), backing_flags(fi->flags) | O_CREAT | O_EXCL, mode, &f);
	bool made = rc == 0;

	if (rc == -EEXIST && !(fi->flags & O_EXCL)) /* raced: open it */
		rc = fs->be->open(fs, rel(path), backing_flags(fi->flags), mode, &f);
	else if (rc == 0 && (rc = own(path, f, mode, false))) {
		fs->be->close(fs, f);
		return rc;
	}
	if (rc)
		return rc;
	/* A file made here is empty: O_TRUNC has nothing to do, a SETATTR3
	 * per file less in a copy through the NFS backend (attach()). */
	return attach(fs, f, fi, fi->flags & O_TRUNC, made, path);
}

/* close(): a descriptor that wrote starts the file's write-back and gets
 * the write-back errors seen since it was opened (or last told), once;
 * with --close=writeback it waits for the write-back (the writes are on
 * the backing file or the server when it returns, where other openers see
 * them: close-to-open; not committed); with --close=sync the integrity
 * sync (committed too). See "Closed files" above. */
static int ufs_flush(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);
	int rc;

	(void)path;
	if (!h->ino || !atomic_load(&h->wrote))
		return 0;
	if (inode_gone(ufs_self(), h->ino))
		return 0; /* unlinked: dropped at the last release */
	if (ufs_self()->opt.close_sync)
		return inode_sync(h, h->ino);
	if (!ufs_self()->opt.close_wait)
		return inode_writeback_start(h, h->ino);
	rc = inode_writeback(h, h->ino);
	/* Written back: the backing file takes the time of the cached
	 * writes, not the time of their write-back. */
	ufs_inode_times(h->ino);
	return rc;
}

static int ufs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	(void)datasync;
	if (!h->ino)
		return ufs_self()->be->fsync(ufs_self(), h->file);
	return inode_sync(h, h->ino);
}

static int ufs_release(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	if (h->ino)
		inode_put(ufs_self(), h->ino);
	ufs_self()->be->close(ufs_self(), h->file);
	pthread_mutex_destroy(&h->lock);
	free(h->path);
	free(h);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Metadata: passthrough, with the cached size and coherent truncate,        */
/* unlink and rename.                                                        */

/*
 * Open files unlinked. libfuse keeps an open file's node by a name: when a
 * file is unlinked (or renamed over) while open, it first renames it to
 * ".fuse_hidden" and 16 hex digits, and unlinks that name after the last
 * release. A node that lost its name instead (hard_remove) makes libfuse
 * answer fstat() with ESTALE, since the kernel sends no handle with it; and
 * a backing file renamed so would show in its directory and keep its link
 * count. So that rename, for a file with an inode record here (open and
 * cached), unlinks the backing file at once and remembers the hidden name
 * for the inode: getattr (fstat: nlink 0, as on the backing filesystem),
 * truncate, chmod, chown and utimens of that name use the inode's own
 * descriptor, and the unlink after the last release forgets the name. It is
 * seen nowhere else: it is not in the backing directory. (A user renaming an
 * open file to such a name himself would unlink it: libfuse reserves them.)
 */
static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static bool hidden_name(const char *path)
{
	const char *b = base_name(path);

	return strncmp(b, ".fuse_hidden", 12) == 0 && strlen(b) == 28 &&
	       strspn(b + 12, "0123456789abcdef") == 16;
}

/* The inode behind a hidden name, with one more open, or NULL. */
static struct ufs_inode *hidden_find(struct ufs *fs, const char *path)
{
	struct ufs_hidden *hd;
	struct ufs_inode *ino = NULL;
	bool stale;

	if (!path || !hidden_name(path))
		return NULL;
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	for (hd = fs->hidden; hd && strcmp(hd->name, base_name(path)) != 0; hd = hd->next)
		;
	if (hd)
		ino = iget(fs, hd->dev, hd->ino, NULL, &stale);
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	return ino;
}

/* Forgets a hidden name: whether it was one. */
static bool hidden_forget(struct ufs *fs, const char *path)
{
	struct ufs_hidden **pp, *hd = NULL;

	if (!hidden_name(path))
		return false;
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	for (pp = &fs->hidden; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->name, base_name(path)) == 0) {
			hd = *pp;
			*pp = hd->next;
			break;
		}
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	free(hd);
	return hd != NULL;
}

/* libfuse hides the open file from (see above): 1 when done here, 0 when
 * the file has no inode record (the backing file is then renamed), or a
 * negative errno. */
static int hidden_make(struct ufs *fs, const char *from, const char *to)
{
	struct ufs_hidden *hd;
	struct ufs_inode *ino;
	struct stat st;
	int rc;

	/* Over NFS the hidden name is the backend's own (libfuse removes it
	 * at the last release): the server would remove an unlinked file at
	 * once, and its open descriptors would go stale. */
	if (!hidden_name(to) || !fs->be->unlinked_lives || fs->be->lstat(fs, rel(from), &st) != 0 ||
	    !(ino = inode_find(fs, &st)))
		return 0;
	if (!(hd = calloc(1, sizeof(*hd)))) {
		inode_put(fs, ino);
		return -ENOMEM;
	}
	snprintf(hd->name, sizeof(hd->name), "%s", base_name(to));
	hd->dev = ino->dev;
	hd->ino = ino->ino;
	if ((rc = fs->be->unlink(fs, rel(from))) == 0) {
		ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
		hd->next = fs->hidden;
		fs->hidden = hd;
		ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	} else {
		free(hd);
	}
	inode_put(fs, ino);
	if (rc == 0)
		ufs_links_unlinked(fs, from, st.st_dev, st.st_ino);
	return rc ? rc : 1;
}

/* After a change through path (or handle h) to a file that may have other
 * names: the kernel drops what it caches for them (links.c). */
static void links_changed(struct ufs *fs, const char *path, struct ufs_handle *h)
{
	struct stat st;

	if (!atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		return;
	if (!path && h)
		path = h->path; /* a call through a descriptor: not its own name */
	if (path && hidden_name(path))
		path = NULL;
	if (h && h->ino)
		ufs_links_changed(fs, path, h->ino->dev, h->ino->ino);
	else if (h && fs->be->fstat(fs, h->file, &st) == 0)
		ufs_links_changed(fs, path, st.st_dev, st.st_ino);
	else if (!h && path && fs->be->lstat(fs, rel(path), &st) == 0)
		ufs_links_changed(fs, path, st.st_dev, st.st_ino);
}

static int ufs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	/* Attributes that waited and were given to a backing file since its
	 * stat below: taken again (the waiting ones may be gone by then). */
	uint64_t applied = atomic_load(&fs->attrs_applied);
	struct ufs_inode *ino;
	int rc, again = 0;

	if (h) {
		rc = fs->be->fstat(fs, h->file, st);
	} else if ((ino = hidden_find(fs, path))) {
		rc = fs->be->fstat(fs, ino->file, st);
		inode_put(fs, ino);
	} else {
		rc = fs->be->lstat(fs, rel(path), st);
	}
	if (rc != 0)
		return rc;
	if (path && !h && !hidden_name(path))
		ufs_links_note(fs, path, st);
	if ((ino = inode_find(fs, st))) {
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		while (atomic_load(&fs->attrs_applied) != applied && again++ < 3) {
			struct stat now;

			ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
			applied = atomic_load(&fs->attrs_applied);
			if (fs->be->fstat(fs, ino->file, &now) == 0)
				*st = now;
			ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		}
		st->st_size = (off_t)ino->size;
		/* Cached writes not yet on the backing file: their time, and
		 * the blocks their data will take. */
		if (ino->mtime.tv_sec) {
			blkcnt_t blocks = (blkcnt_t)((ino->size + 4095) / 4096 * 8);

			st->st_mtim = ino->mtime;
			if (ts_before(st->st_ctim, ino->mtime))
				st->st_ctim = ino->mtime;
			if (ts_before(st->st_ctim, ino->ctime))
				st->st_ctim = ino->ctime;
			if (ino->atime.tv_nsec != UTIME_OMIT)
				st->st_atim = ino->atime;
			if (st->st_blocks < blocks)
				st->st_blocks = blocks;
		}
		if (ino->mode_set) {
			st->st_mode = (st->st_mode & S_IFMT) | ino->mode;
			if (ts_before(st->st_ctim, ino->ctime))
				st->st_ctim = ino->ctime;
		}
		times_shown(ino, st);
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		inode_put(fs, ino);
	}
	return 0;
}

int ufs_inode_times(struct ufs_inode *ino)
{
	return inode_times_of(ufs_self(), ino);
}

/* A chmod that waited (mode_set) made on the backing file. With io_lock
 * exclusive. */
static int inode_mode_of(struct ufs *fs, struct ufs_inode *ino)
{
	bool set;
	mode_t mode;
	int rc;

	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	set = ino->mode_set;
	mode = ino->mode;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	if (!set)
		return 0;
	rc = fs->be->fchmod(fs, ino->file, mode);
	if (rc == 0)
		mode_forget(fs, ino, mode);
	return rc;
}

static int inode_times_of_locked(struct ufs *fs, struct ufs_inode *ino)
{
	struct timespec tv[2];
	uint64_t ends = atomic_load(&ino->wb_ends);
	bool mset, again = false;
	mode_t mode;
	int rc = 0;

	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	tv[0] = ino->atime;
	tv[1] = ino->mtime;
	mset = ino->mode_set;
	mode = ino->mode;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	if (!tv[1].tv_sec && !mset)
		return 0;
	if (!tv[1].tv_sec)
		tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
	/* A chmod that waited first, or with them. */
	if (fs->be->fsetattrs) {
		rc = fs->be->fsetattrs(fs, ino->file, mset ? mode : (mode_t)-1, tv);
	} else {
		if (mset)
			rc = fs->be->fchmod(fs, ino->file, mode);
		if (!rc && tv[1].tv_nsec != UTIME_OMIT)
			rc = fs->be->futimens(fs, ino->file, tv);
	}
	if (rc)
		return rc;
	atomic_fetch_add(&fs->attrs_applied, 1); /* before they stop waiting: ufs_getattr() */
	if (mset)
		mode_forget(fs, ino, mode);
	ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
	/* A write since: its time is still to come. */
	if (tv[1].tv_nsec != UTIME_OMIT && ts_eq(ino->mtime, tv[1])) {
		bool was_set = ino->times_set;

		ino->mtime.tv_sec = 0;
		ino->times_set = false;
		ino->applied_mtime = tv[1];
		ino->applied_atime = tv[0];
		atomic_store(&ino->times_applied, true);
		/* A write-back that ended meanwhile (data written again after
		 * a server's restart) may have reached the server after the
		 * times, on another connection: they wait again. (One that
		 * ends after this load sees times_applied:
		 * ufs_writeback_ending().) */
		if (atomic_load(&ino->wb_ends) != ends) {
			ino->mtime = tv[1];
			ino->times_set = was_set;
			atomic_store(&ino->times_applied, false);
			again = true;
		}
	}
	if (tv[0].tv_nsec != UTIME_OMIT && ts_eq(ino->atime, tv[0]) && !again)
		ino->atime.tv_nsec = UTIME_OMIT;
	if (!ino->mtime.tv_sec)
		ino->ctime.tv_sec = 0;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	return 0;
}

/*
 * The backing file gets the mtime of the cached writes (or the times set
 * since) and a chmod that waited. Under io_lock exclusive, the file's
 * attribute lock: what is read here as waiting is made and forgotten
 * before a chmod or chown made at once (chmod_of(), chown_of()) or a
 * write's loss of set-user-ID (privs_kill()) can come between.
 */
static int inode_times_of(struct ufs *fs, struct ufs_inode *ino)
{
	int rc;

	wrlock(&ino->io_lock, UFS_RANK_IO);
	rc = inode_times_of_locked(fs, ino);
	ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	return rc;
}

/* Explicit times, given to the backing file at once, replace those of the
 * cached writes. An explicit mtime (not UTIME_NOW or UTIME_OMIT) stands as
 * given: should the file's data be written again afterwards (its unstable
 * data after a server's restart), it is given again (ufs_writeback_ending()),
 * as for the times given after a write-back. Without that, times set by
 * path once the write-back was done (tar and cp -a, slower than the dirty
 * expiry) were lost to the data written again. */
static void inode_times_set(struct ufs_inode *ino, const struct timespec tv[2])
{
	bool stand = tv[1].tv_nsec != UTIME_NOW && tv[1].tv_nsec != UTIME_OMIT;

	ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
	ino->mtime.tv_sec = 0;
	ino->times_set = false;
	ino->atime.tv_nsec = UTIME_OMIT;
	ino->ctime.tv_sec = 0;
	if (stand) {
		ino->applied_mtime = tv[1];
		ino->applied_atime = tv[0];
		if (tv[0].tv_nsec == UTIME_NOW)
			ino->applied_atime.tv_nsec = UTIME_OMIT;
	}
	atomic_store(&ino->times_applied, stand);
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
}

static int truncate_of(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino;
	struct stat st;
	int rc;

	if (size < 0)
		return -EINVAL;
	if (h && h->ino)
		return inode_truncate(fs, h->ino, (uint64_t)size);
	if (h)
		return fs->be->ftruncate(fs, h->file, (uint64_t)size);
	if ((ino = hidden_find(fs, path))) {
		rc = inode_truncate(fs, ino, (uint64_t)size);
		inode_put(fs, ino);
		return rc;
	}
	if ((rc = fs->be->stat(fs, rel(path), &st)))
		return rc;
	if ((ino = inode_find(fs, &st))) {
		rc = inode_truncate(fs, ino, (uint64_t)size);
		inode_put(fs, ino);
		return rc;
	}
	return fs->be->truncate(fs, rel(path), (uint64_t)size);
}

static int ufs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	int rc = truncate_of(path, size, fi);

	if (rc == 0)
		links_changed(ufs_self(), path, handle_of(fi));
	return rc;
}

static int ufs_unlink(const char *path)
{
	struct ufs *fs = ufs_self();
	struct ufs_inode *ino = NULL;
	struct stat st;
	bool had;
	int rc;

	if (hidden_forget(fs, path))
		return 0; /* after the last release of an open file unlinked */
	had = fs->be->lstat(fs, rel(path), &st) == 0;
	if (had)
		ino = inode_unlink_begin(fs, &st);
	rc = fs->be->unlink(fs, rel(path));
	inode_unlink_end(fs, ino, rc);
	if (rc)
		return rc;
	if (had)
		ufs_links_unlinked(fs, path, st.st_dev, st.st_ino);
	return 0;
}

static int ufs_rename(const char *from, const char *to, unsigned int flags)
{
	struct ufs *fs = ufs_self();
	struct ufs_inode *ino = NULL;
	struct stat st, mst;
	bool had, moved;
	int rc;

	if (!flags && (rc = hidden_make(fs, from, to)) != 0)
		return rc < 0 ? rc : 0;
	had = fs->be->lstat(fs, rel(to), &st) == 0;
	moved = atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed) &&
		fs->be->lstat(fs, rel(from), &mst) == 0;
	if (had && !(flags & RENAME_EXCHANGE))
		ino = inode_unlink_begin(fs, &st);
	/* The cache follows the inode, not the name: nothing moves. */
	rc = fs->be->rename(fs, rel(from), rel(to), flags);
	inode_unlink_end(fs, ino, rc);
	if (rc)
		return rc;
	if (had && !(flags & RENAME_EXCHANGE))
		ufs_links_unlinked(fs, to, st.st_dev, st.st_ino);
	if (moved)
		ufs_links_renamed(fs, from, to, mst.st_dev, mst.st_ino);
	if (moved && had && (flags & RENAME_EXCHANGE))
		ufs_links_renamed(fs, to, from, st.st_dev, st.st_ino);
	return 0;
}

/* The chmod that waited, mode (any: UINT_MAX), is made or replaced. */
static void mode_forget(struct ufs *fs, struct ufs_inode *ino, mode_t mode)
{
	ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
	if (ino->mode_set && (mode == (mode_t)-1 || ino->mode == mode)) {
		ino->mode_set = false;
		atomic_fetch_sub(&fs->modes_pending, 1);
	}
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
}

/*
 * With --close=start, a chmod of a file whose cached writes the backing
 * file does not have yet waits for them too, when it only adds permissions
 * (cp -a and tar make a file with few and chmod it after writing it): it
 * is made on the backing file before the writes' times (inode_times_of()),
 * and until then getattr shows it and the backing file is the stricter.
 * One that takes a permission away is made at once. true: taken so.
 */
static bool mode_defer(struct ufs *fs, struct ufs_inode *ino, mode_t mode)
{
	struct timespec now;
	struct stat st;
	bool pending, set, taken = false;
	mode_t cur;

	if (fs->opt.close_sync || fs->opt.close_wait)
		return false;
	mode &= 07777;
	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	pending = ino->mtime.tv_sec != 0;
	set = ino->mode_set;
	cur = ino->mode;
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	if (!pending)
		return false;
	if (!set) {
		if (fs->be->fstat(fs, ino->file, &st) != 0)
			return false;
		cur = st.st_mode & 07777;
	}
	if ((mode & cur) != cur)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
	/* Unless a chmod or the write-back came between. */
	if (ino->mtime.tv_sec && ino->mode_set == set && (!set || ino->mode == cur)) {
		if (!ino->mode_set)
			atomic_fetch_add(&fs->modes_pending, 1);
		ino->mode_set = true;
		ino->mode = mode;
		ino->ctime = now;
		taken = true;
	}
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	return taken;
}

/*
 * With --close=start, times set on a file whose cached writes the backing
 * file does not have yet wait for them: they take the place of the writes'
 * time in ino (getattr shows them, and a later write its own time) and go
 * to the backing file with it once the writes are written back (an fsync,
 * the reaper after the last close, the unmount), so that cp -a and tar do
 * not wait for each file's write-back. true: taken so. (An mtime of 0 s is
 * "none" there: set at once.)
 */
static bool times_defer(struct ufs *fs, struct ufs_inode *ino, const struct timespec tv[2])
{
	struct timespec now, t[2];
	bool taken = false;

	if (fs->opt.close_sync || fs->opt.close_wait)
		return false;
	clock_gettime(CLOCK_REALTIME, &now);
	for (int k = 0; k < 2; k++)
		t[k] = tv[k].tv_nsec == UTIME_NOW ? now : tv[k];
	if (t[1].tv_nsec != UTIME_OMIT && t[1].tv_sec == 0)
		return false;
	ufs_rwlock_wrlock(&ino->data_lock, UFS_RANK_DATA);
	if (ino->mtime.tv_sec) {
		if (t[1].tv_nsec != UTIME_OMIT) {
			ino->mtime = t[1];
			ino->times_set = true;
		}
		if (t[0].tv_nsec != UTIME_OMIT)
			ino->atime = t[0];
		ino->ctime = now;
		taken = true;
	}
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	return taken;
}

static int utimens_of(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = NULL;
	struct stat st;
	int rc = 0;

	/* Write back first, or the write-back would move the times set here
	 * (cp -a, tar, rsync set them after writing): with --close=sync the
	 * integrity sync, as before; with --close=writeback the writes only
	 * (their commit leaves the times alone); by default the times wait
	 * for the write-back instead (times_defer()). */
	if (h && h->ino) {
		if (times_defer(fs, h->ino, tv))
			return 0;
		rc = inode_times_writeback(fs, h, h->ino);
	} else if (!h && ((ino = hidden_find(fs, path)) ||
			  (fs->be->lstat(fs, rel(path), &st) == 0 && (ino = inode_find(fs, &st))))) {
		if (times_defer(fs, ino, tv)) {
			inode_put(fs, ino);
			return 0;
		}
		rc = inode_times_writeback(fs, NULL, ino);
	}
	if (!rc && h)
		rc = fs->be->futimens(fs, h->file, tv);
	else if (!rc && ino && hidden_name(path))
		rc = fs->be->futimens(fs, ino->file, tv);
	else if (!rc)
		rc = fs->be->utimens(fs, rel(path), tv);
	if (!rc && (ino || (h && h->ino)))
		inode_times_set(ino ? ino : h->ino, tv);
	if (ino)
		inode_put(fs, ino);
	return rc;
}

static int ufs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	int rc = utimens_of(path, tv, fi);

	if (rc == 0)
		links_changed(ufs_self(), path, handle_of(fi));
	return rc;
}

static int ufs_readlink(const char *path, char *buf, size_t size)
{
	return ufs_self()->be->readlink(ufs_self(), rel(path), buf, size);
}

static int ufs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	int rc = ufs_self()->be->mknod(ufs_self(), rel(path), mode, rdev);

	return rc ? rc : own(path, NULL, mode, false);
}

static int ufs_mkdir(const char *path, mode_t mode)
{
	int rc = ufs_self()->be->mkdir(ufs_self(), rel(path), mode);

	return rc ? rc : own(path, NULL, mode, true);
}

static int ufs_rmdir(const char *path)
{
	return ufs_self()->be->rmdir(ufs_self(), rel(path));
}

static int ufs_symlink(const char *target, const char *path)
{
	int rc = ufs_self()->be->symlink(ufs_self(), target, rel(path));

	return rc ? rc : own(path, NULL, S_IFLNK | 0777, false);
}

static int ufs_link(const char *from, const char *to)
{
	struct ufs *fs = ufs_self();
	struct stat st;
	int rc = fs->be->link(fs, rel(from), rel(to));

	if (rc == 0 && fs->be->lstat(fs, rel(to), &st) == 0)
		ufs_links_linked(fs, from, to, &st);
	return rc;
}

/* The cached inode of path (not open through h; the kernel names the file
 * of an fchmod or fchown by its path): a chmod may wait with it
 * (mode_defer()); a chown needs it only while one waits. */
static struct ufs_inode *mode_inode(struct ufs *fs, const char *path, bool chmod)
{
	struct ufs_inode *ino = hidden_find(fs, path);
	bool defer = chmod && !fs->opt.close_sync && !fs->opt.close_wait;
	struct stat st;

	if (!ino && (defer || atomic_load(&fs->modes_pending)) &&
	    fs->be->lstat(fs, rel(path), &st) == 0 && S_ISREG(st.st_mode))
		ino = inode_find(fs, &st);
	return ino;
}

static int chmod_of(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = h ? h->ino : mode_inode(fs, path, true);
	int rc;

	/* Under the file's attribute lock (inode_times_of()): a chmod made
	 * at once is not undone by one that waited and is being made. */
	if (ino) {
		wrlock(&ino->io_lock, UFS_RANK_IO);
		if (privs_of(mode))
			atomic_store(&ino->privs, true);
	}
	if (ino && mode_defer(fs, ino, mode)) {
		rc = 0;
	} else {
		if (h)
			rc = fs->be->fchmod(fs, h->file, mode);
		else if (ino && hidden_name(path))
			rc = fs->be->fchmod(fs, ino->file, mode);
		else
			rc = fs->be->chmod(fs, rel(path), mode);
		if (rc == 0 && ino)
			mode_forget(fs, ino, (mode_t)-1);
	}
	if (ino)
		ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	if (ino && !h)
		inode_put(fs, ino);
	return rc;
}

static int ufs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int rc = chmod_of(path, mode, fi);

	if (rc == 0)
		links_changed(ufs_self(), path, handle_of(fi));
	return rc;
}

static int chown_of(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);

	struct ufs_inode *ino = h ? h->ino : mode_inode(fs, path, false);
	int rc = 0;

	/* A chown may take the set-user-ID bit away: a chmod that waits is
	 * made first, not after it (under the attribute lock, as a chmod). */
	if (ino) {
		wrlock(&ino->io_lock, UFS_RANK_IO);
		rc = inode_mode_of(fs, ino);
	}
	if (rc == 0 && h)
		rc = fs->be->fchown(fs, h->file, uid, gid);
	else if (rc == 0 && ino && hidden_name(path))
		rc = fs->be->fchown(fs, ino->file, uid, gid);
	else if (rc == 0)
		rc = fs->be->chown(fs, rel(path), uid, gid);
	if (ino)
		ufs_rwlock_unlock(&ino->io_lock, UFS_RANK_IO);
	if (ino && !h)
		inode_put(fs, ino);
	return rc;
}

static int ufs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	int rc = chown_of(path, uid, gid, fi);

	if (rc == 0)
		links_changed(ufs_self(), path, handle_of(fi));
	return rc;
}

static int ufs_statfs(const char *path, struct statvfs *st)
{
	return ufs_self()->be->statfs(ufs_self(), rel(path), st);
}

static int ufs_access(const char *path, int mask)
{
	return ufs_self()->be->access(ufs_self(), rel(path), mask);
}

/* Extended attributes, when the backend has them. Without --xattr they
 * answer ENOSYS, as libfuse's passthrough_ll does without -o xattr: the
 * kernel then stops asking (EOPNOTSUPP to the caller, as a filesystem
 * without extended attributes), and above all stops sending GETXATTR
 * security.capability before every write (file_remove_privs()), one request
 * per write otherwise. */
static bool xattr_on(struct ufs *fs)
{
	return fs->opt.xattr && fs->be->setxattr;
}

static int ufs_setxattr(const char *path, const char *name, const char *value, size_t size,
			int flags)
{
	struct ufs *fs = ufs_self();

	if (!xattr_on(fs))
		return -ENOSYS;
	return fs->be->setxattr(fs, rel(path), name, value, size, flags);
}

static int ufs_getxattr(const char *path, const char *name, char *value, size_t size)
{
	struct ufs *fs = ufs_self();

	if (!xattr_on(fs))
		return -ENOSYS;
	return fs->be->getxattr(fs, rel(path), name, value, size);
}

static int ufs_listxattr(const char *path, char *list, size_t size)
{
	struct ufs *fs = ufs_self();

	if (!xattr_on(fs))
		return -ENOSYS;
	return fs->be->listxattr(fs, rel(path), list, size);
}

static int ufs_removexattr(const char *path, const char *name)
{
	struct ufs *fs = ufs_self();

	if (!xattr_on(fs))
		return -ENOSYS;
	return fs->be->removexattr(fs, rel(path), name);
}

static int ufs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return -ENOMEM;
	if ((rc = fs->be->opendir(fs, rel(path), &h->file))) {
		free(h);
		return rc;
	}
	h->dir = true;
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

struct fill_ctx {
	void *buf;
	fuse_fill_dir_t filler;
};

static int fill_one(void *ctx, const char *name, const struct stat *st)
{
	struct fill_ctx *c = ctx;

	return c->filler(c->buf, name, st, 0, 0);
}

static int ufs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct ufs *fs = ufs_self();
	struct fill_ctx c = { buf, filler };

	(void)path;
	(void)flags;
	/* Offsets of 0: the library reads the whole directory at once. */
	return fs->be->readdir(fs, handle_of(fi)->file, (uint64_t)off, fill_one, &c);
}

static int ufs_releasedir(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	ufs_self()->be->close(ufs_self(), h->file);
	free(h);
	return 0;
}

static void *ufs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->use_ino = 1;
	/* Operations on an open file use its handle; unlinking an open file
	 * unlinks it, under a hidden name for libfuse (hidden_make()). */
	cfg->nullpath_ok = 1;
	cfg->hard_remove = 0; /* hidden names, handled here (hidden_make()) */
	/* The kernel keeps attributes for a second: a stat costs no request.
	 * A change through one name of a file with several (a link, an unlink,
	 * a setattr) has the kernel drop what it caches for the others
	 * (links.c, which says what a write does not reach at once); a write
	 * and a truncate through a name update that name's. A server's files,
	 * which other clients change: as long as --attr-cache keeps them (0:
	 * the kernel asks at every stat). */
	cfg->attr_timeout = ufs_self()->be->shared ? (double)ufs_self()->opt.attr_cache_ns / 1e9 : 1.0;
	/* The filesystem is the cache: the kernel writes through to it;
	 * unless --kernel-writeback (the kernel's page cache in front of this
	 * one, or of an uncached client with --no-cache). */
	if (ufs_self()->opt.kernel_writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* A read checks the mtime first and drops the kernel's cached pages
	 * when it moved (libfuse's default, asked for explicitly): writes of
	 * a write-only descriptor do not go through them (attach()). */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	return ufs_self();
}

static const struct fuse_operations ops = {
	.init = ufs_init,
	.getattr = ufs_getattr,
	.readlink = ufs_readlink,
	.mknod = ufs_mknod,
	.mkdir = ufs_mkdir,
	.unlink = ufs_unlink,
	.rmdir = ufs_rmdir,
	.symlink = ufs_symlink,
	.rename = ufs_rename,
	.link = ufs_link,
	.chmod = ufs_chmod,
	.chown = ufs_chown,
	.truncate = ufs_truncate,
	.open = ufs_open,
	.create = ufs_create,
	.read = ufs_read,
	.write = ufs_write,
	.statfs = ufs_statfs,
	.flush = ufs_flush,
	.release = ufs_release,
	.fsync = ufs_fsync,
	.setxattr = ufs_setxattr,
	.getxattr = ufs_getxattr,
	.listxattr = ufs_listxattr,
	.removexattr = ufs_removexattr,
	.opendir = ufs_opendir,
	.readdir = ufs_readdir,
	.releasedir = ufs_releasedir,
	.access = ufs_access,
	.utimens = ufs_utimens,
};

const struct fuse_operations *ufs_operations(void)
{
	return &ops;
}
