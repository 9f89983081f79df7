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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* An open file or directory. */
struct ufs_handle {
	int fd;		       /* opened with the caller's flags (files) */
	DIR *dir;	       /* directories */
	struct ufs_inode *ino; /* NULL: not cached, I/O goes to fd directly */
	pthread_mutex_t lock;  /* since */
	uint64_t since;	       /* the errseq cursor of this open file */
	atomic_bool wrote;     /* a write came through this handle */
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

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* Backend callbacks (called by the engine without its lock, from a flusher  */
/* thread or from the FUSE thread whose engine call triggered them).         */

/* Writes every byte of iov[0..n) at off; 0 or a negative errno. */
static int pwritev_all(int fd, struct iovec *iov, int n, off_t off)
{
	while (n > 0) {
		ssize_t w = pwritev(fd, iov, n < IOV_MAX ? n : IOV_MAX, off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += w;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/*
 * flush: pwritev() of the run to the backing file, clipped to the logical
 * size (a truncate may have cut the run). The data is then in the backing
 * filesystem's page cache, not durable: acknowledged UNSTABLE with a
 * sequence number taken after the write returned, so that a commit that
 * read a later number covers it. EINTR, EAGAIN and ENOMEM are transient
 * (the engine re-dirties and retries with backoff); any other error is
 * permanent, as the kernel treats a failed page write: the buffers become
 * clean and the error reaches the next fsync() or close() of the file.
 */
static int ufs_flush_cb(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
			uint64_t length, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct ufs_inode *ino = us_object_user(obj);
	struct iovec stack_iov[64], *iov = stack_iov;
	enum us_write_result res = US_WRITE_UNSTABLE;
	uint64_t end, seq = 0;
	int niov = 0, err = 0;
	size_t i;

	(void)length;
	(void)reason;
	if (n > 64 && !(iov = malloc(n * sizeof(*iov))))
		return -ENOMEM;
	pthread_rwlock_rdlock(&ino->data_lock);
	end = ino->size;
	for (i = 0; i < n; i++) {
		uint64_t bo = us_buf_offset(bufs[i]);

		if (bo >= end)
			break;
		iov[niov].iov_base = us_buf_data(bufs[i]);
		iov[niov].iov_len = (size_t)min_u64(us_buf_length(bufs[i]), end - bo);
		niov++;
	}
	if (niov)
		err = pwritev_all(ino->fd, iov, niov, (off_t)offset);
	pthread_rwlock_unlock(&ino->data_lock);
	if (iov != stack_iov)
		free(iov);

	if (err == -EINTR || err == -EAGAIN || err == -ENOMEM)
		res = US_WRITE_ERROR;
	else if (err)
		res = US_WRITE_LOST;
	else if (!niov)
		res = US_WRITE_STABLE; /* wholly past the end: nothing to keep */
	else
		seq = atomic_fetch_add(&fs->seq, 1) + 1;
	for (i = 0; i < n; i++)
		us_buf_write_done(bufs[i], res, seq, err);
	return 0;
}

/* commit: fdatasync() of the backing file. Every write acknowledged with a
 * number <= seq had returned before the fdatasync started. */
static int ufs_commit_cb(void *ctx, us_object *obj, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct ufs_inode *ino = us_object_user(obj);
	uint64_t seq = atomic_load(&fs->seq);

	(void)reason;
	if (fdatasync(ino->fd) != 0) {
		int err = -errno;

		/*
		 * Linux reports a writeback error once and may drop the pages:
		 * a second fdatasync could succeed with the data gone. So the
		 * cache rewrites everything not yet committed, from its own
		 * copy, before any commit can count it durable.
		 */
		us_backend_commit_lost(us_object_backend(obj));
		return err;
	}
	if (seq)
		us_object_commit_done(obj, seq);
	return 0;
}

int ufs_engine_start(struct ufs *fs)
{
	struct us_engine_options opts;
	struct us_backend_ops ops = { .size = sizeof(ops) };
	int rc;

	us_engine_options_init(&opts);
	opts.memory_bytes = fs->opt.max_bytes;
	opts.flusher_threads = fs->opt.flushers;
	ops.flush = ufs_flush_cb;
	ops.commit = ufs_commit_cb;
	if ((rc = us_engine_create(&opts, &fs->engine)))
		return rc;
	if ((rc = us_engine_set_param(fs->engine, US_PARAM_COMMIT_INTERVAL_NS,
				      fs->opt.commit_interval_ns)) ||
	    (rc = us_backend_create(fs->engine, &ops, fs, &fs->backend))) {
		us_engine_destroy(fs->engine);
		fs->engine = NULL;
		return rc;
	}
	ufs_domain_ratios(fs, us_engine_root(fs->engine));
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
		if (i->dev == dev && i->ino == ino)
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

static void ifree(struct ufs_inode *ino)
{
	close(ino->fd);
	pthread_rwlock_destroy(&ino->io_lock);
	pthread_rwlock_destroy(&ino->data_lock);
	free(ino);
}

/*
 * The cached inode of the regular file open on fd, with one more open;
 * NULL when fd is not a regular file or its backing file cannot be opened
 * read-write (it is then served without cache). A new inode's object is
 * charged to the domain of the process that opens it (pid, uid).
 */
static struct ufs_inode *inode_get(struct ufs *fs, int fd, pid_t pid, uid_t uid)
{
	struct ufs_inode *ino;
	struct stat st;
	char proc[64];

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	pthread_mutex_lock(&fs->itable_lock);
	for (;;) {
		ino = ifind(fs, st.st_dev, st.st_ino);
		if (!ino || !ino->closing)
			break;
		/* Its last data is still being written back: a new object
		 * would read stale data from the backing file. */
		pthread_cond_wait(&fs->itable_cond, &fs->itable_lock);
	}
	if (ino) {
		ino->opens++;
		goto out;
	}
	if (!(ino = calloc(1, sizeof(*ino))))
		goto out;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ino->fd = open(proc, O_RDWR | O_CLOEXEC);
	if (ino->fd < 0 || fstat(ino->fd, &st) != 0) {
		if (ino->fd >= 0)
			close(ino->fd);
		free(ino);
		ino = NULL;
		goto out;
	}
	ino->dev = st.st_dev;
	ino->ino = st.st_ino;
	ino->size = (uint64_t)st.st_size;
	ino->opens = 1;
	pthread_rwlock_init(&ino->io_lock, NULL);
	pthread_rwlock_init(&ino->data_lock, NULL);
	if (us_object_create(fs->backend, ufs_domain_for(fs, pid, uid), ino, &ino->obj) != 0) {
		ifree(ino);
		ino = NULL;
		goto out;
	}
	ino->next = fs->itable[ihash(ino->dev, ino->ino)];
	fs->itable[ihash(ino->dev, ino->ino)] = ino;
out:
	pthread_mutex_unlock(&fs->itable_lock);
	return ino;
}

/* The cached inode of (dev, ino) with one more open, or NULL. */
static struct ufs_inode *inode_find(struct ufs *fs, const struct stat *st)
{
	struct ufs_inode *ino;

	if (!S_ISREG(st->st_mode))
		return NULL;
	pthread_mutex_lock(&fs->itable_lock);
	ino = ifind(fs, st->st_dev, st->st_ino);
	if (ino && !ino->closing)
		ino->opens++;
	else
		ino = NULL;
	pthread_mutex_unlock(&fs->itable_lock);
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

/*
 * Gives back an open. The last one writes back and commits what is left
 * (close has already done it, normally), or drops it when the file was
 * unlinked, and destroys the object. If the object cannot be destroyed (a
 * write keeps failing), the inode stays in the table, unopened, and is
 * written back at unmount.
 */
static void inode_put(struct ufs *fs, struct ufs_inode *ino)
{
	struct stat st;
	uint64_t since;
	int rc;

	pthread_mutex_lock(&fs->itable_lock);
	if (--ino->opens > 0) {
		pthread_mutex_unlock(&fs->itable_lock);
		return;
	}
	ino->closing = true;
	pthread_mutex_unlock(&fs->itable_lock);

	if (fstat(ino->fd, &st) == 0 && st.st_nlink == 0) {
		drop_from(ino, 0);
	} else {
		since = us_object_errseq(ino->obj);
		us_object_sync(ino->obj, &since);
	}
	/* -EBUSY while a flusher's call on it is still returning: brief. */
	for (int tries = 0; (rc = us_object_destroy(ino->obj)) == -EBUSY && tries < 1000; tries++) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, NULL);
	}

	pthread_mutex_lock(&fs->itable_lock);
	ino->closing = false;
	if (rc == 0)
		iremove(fs, ino);
	pthread_cond_broadcast(&fs->itable_cond);
	pthread_mutex_unlock(&fs->itable_lock);
	if (rc == 0)
		ifree(ino);
}

/* A name of (dev, ino) went away (unlink, rename over it): if that was its
 * last link and nobody has it open, its cache is dropped now. */
static void inode_unlinked(struct ufs *fs, const struct stat *st)
{
	struct ufs_inode *ino = inode_find(fs, st);

	if (ino)
		inode_put(fs, ino);
}

/* Sets the logical size: the backing file is truncated (or extended) at
 * once, the cached chunks past the end dropped and the tail of the last one
 * zeroed. */
static int inode_truncate(struct ufs_inode *ino, uint64_t size)
{
	int rc = 0;

	pthread_rwlock_wrlock(&ino->io_lock);
	pthread_rwlock_wrlock(&ino->data_lock);
	if (ftruncate(ino->fd, (off_t)size) != 0) {
		rc = -errno;
	} else {
		uint64_t old = ino->size, tail = size % UFS_CHUNK_BYTES;
		us_buf *b;

		ino->size = size;
		/* The backing file has the truncate's time: later than any
		 * cached write's. */
		if (ino->mtime.tv_sec)
			clock_gettime(CLOCK_REALTIME, &ino->mtime);
		if (size < old && tail && us_buf_lookup(ino->obj, size, &b) == 0) {
			memset((char *)us_buf_data(b) + tail, 0, UFS_CHUNK_BYTES - tail);
			us_buf_put(b);
		}
	}
	pthread_rwlock_unlock(&ino->data_lock);
	if (rc == 0)
		drop_from(ino, (size + UFS_CHUNK_BYTES - 1) / UFS_CHUNK_BYTES * UFS_CHUNK_BYTES);
	pthread_rwlock_unlock(&ino->io_lock);
	return rc;
}

/* Writes back and commits the inode's data (fsync, close, before utimens). */
static int inode_sync(struct ufs_handle *h, struct ufs_inode *ino)
{
	uint64_t since;
	int rc;

	if (h) {
		pthread_mutex_lock(&h->lock);
		rc = us_object_sync(ino->obj, &h->since);
		pthread_mutex_unlock(&h->lock);
		return rc;
	}
	since = us_object_errseq(ino->obj);
	return us_object_sync(ino->obj, &since);
}

int ufs_engine_stop(struct ufs *fs)
{
	int rc, i;

	if (!fs->engine)
		return 0;
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
			ifree(ino);
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

/* Fills a new chunk from the backing file (read-modify-write). */
static int chunk_fill(struct ufs_inode *ino, us_buf *b)
{
	char *p = us_buf_data(b);
	uint64_t done = 0, off = us_buf_offset(b);

	while (done < UFS_CHUNK_BYTES) {
		ssize_t r = pread(ino->fd, p + done, UFS_CHUNK_BYTES - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break; /* past the backing file's end: the rest stays zero */
		done += (uint64_t)r;
	}
	return 0;
}

static int ufs_write(const char *path, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = h->ino;
	size_t done = 0;
	int rc = 0;

	(void)path;
	if (!ino) {
		ssize_t w = pwrite(h->fd, buf, size, off);

		return w < 0 ? -errno : (int)w;
	}
	atomic_store(&h->wrote, true);
	pthread_rwlock_wrlock(&ino->io_lock);
	while (done < size) {
		uint64_t pos = (uint64_t)off + done, co = pos - pos % UFS_CHUNK_BYTES;
		uint64_t n = min_u64(size - done, co + UFS_CHUNK_BYTES - pos);
		us_buf *b;

		/* May wait for reclaim: writeback and commits of this domain. */
		rc = us_buf_get(ino->obj, co, UFS_CHUNK_BYTES, 0, &b);
		if (rc < 0)
			break;
		if (rc == 1 && n < UFS_CHUNK_BYTES && (rc = chunk_fill(ino, b)) < 0) {
			us_buf_drop(b);
			break;
		}
		pthread_rwlock_wrlock(&ino->data_lock);
		memcpy((char *)us_buf_data(b) + (pos - co), buf + done, n);
		if (pos + n > ino->size)
			ino->size = pos + n;
		clock_gettime(CLOCK_REALTIME, &ino->mtime);
		pthread_rwlock_unlock(&ino->data_lock);
		/* Throttles this writer: pauses, or waits at the dirty limit. */
		rc = us_buf_dirty(b, NULL);
		us_buf_put(b);
		if (rc < 0)
			break;
		done += n;
	}
	pthread_rwlock_unlock(&ino->io_lock);
	return done ? (int)done : rc;
}

static int ufs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = h->ino;
	uint64_t end, pos;
	int rc = 0;

	(void)path;
	if (!ino) {
		ssize_t r = pread(h->fd, buf, size, off);

		return r < 0 ? -errno : (int)r;
	}
	/* Shared with other readers; writers and truncate wait. */
	pthread_rwlock_rdlock(&ino->io_lock);
	end = min_u64((uint64_t)off + size, ino->size);
	for (pos = (uint64_t)off; pos < end;) {
		uint64_t co = pos - pos % UFS_CHUNK_BYTES;
		uint64_t n = min_u64(end - pos, co + UFS_CHUNK_BYTES - pos);
		char *out = buf + (pos - (uint64_t)off);
		us_buf *b;

		if (us_buf_lookup(ino->obj, pos, &b) == 0) {
			memcpy(out, (char *)us_buf_data(b) + (pos - co), n);
			us_buf_put(b);
		} else {
			uint64_t got = 0;

			/* Not cached: the backing file has its latest data, up to
			 * its end; past it (a tail not yet written back, a
			 * hole) the file reads as zeros. */
			while (got < n) {
				ssize_t r = pread(ino->fd, out + got, n - got, (off_t)(pos + got));

				if (r < 0 && errno == EINTR)
					continue;
				if (r < 0) {
					rc = -errno;
					goto out;
				}
				if (r == 0)
					break;
				got += (uint64_t)r;
			}
			memset(out + got, 0, n - got);
		}
		pos += n;
	}
out:
	pthread_rwlock_unlock(&ino->io_lock);
	if (pos > (uint64_t)off)
		return (int)(pos - (uint64_t)off);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Open, close, sync                                                         */

static int attach(struct ufs *fs, int fd, struct fuse_file_info *fi, bool trunc)
{
	struct fuse_context *ctx = fuse_get_context();
	struct ufs_handle *h = calloc(1, sizeof(*h));
	int rc = 0;

	if (!h) {
		close(fd);
		return -ENOMEM;
	}
	h->fd = fd;
	pthread_mutex_init(&h->lock, NULL);
	h->ino = inode_get(fs, fd, ctx->pid, ctx->uid);
	if (h->ino)
		h->since = us_object_errseq(h->ino->obj);
	if (trunc)
		rc = h->ino ? inode_truncate(h->ino, 0) : (ftruncate(fd, 0) ? -errno : 0);
	fi->fh = (uint64_t)(uintptr_t)h;
	return rc;
}

/* The caller's flags for the backing open: no O_TRUNC (done through the
 * cache), no O_APPEND (the kernel gives the offsets; pwrite must not
 * append). */
static int backing_flags(int flags)
{
	return (flags & ~(O_TRUNC | O_APPEND)) | O_CLOEXEC;
}

static int ufs_open(const char *path, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	int fd = openat(fs->backing_fd, rel(path), backing_flags(fi->flags));

	if (fd < 0)
		return -errno;
	return attach(fs, fd, fi, fi->flags & O_TRUNC);
}

/*
 * What a user creates belongs to that user (the daemon creates as root):
 * the caller's uid, and its gid unless the parent directory is
 * set-group-ID (the backing filesystem then gave the directory's group, as
 * it would to the caller). By fd when there is one (before anyone else can
 * open it), else by name. On failure the new entry is removed: nothing is
 * left owned by root. 0 or a negative errno.
 */
static int own(const char *path, int fd, mode_t mode, bool dir)
{
	struct fuse_context *ctx = fuse_get_context();
	struct ufs *fs = ctx->private_data;
	const char *r = rel(path), *slash = strrchr(r, '/');
	gid_t gid = ctx->gid;
	struct stat pst;
	int rc, err;

	if (slash) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - r), r);
		rc = fstatat(fs->backing_fd, parent, &pst, 0);
	} else {
		rc = fstat(fs->backing_fd, &pst);
	}
	if (rc == 0 && (pst.st_mode & S_ISGID))
		gid = (gid_t)-1;
	if (ctx->uid == geteuid() && (gid == (gid_t)-1 || gid == getegid()))
		return 0;
	if (fd >= 0)
		rc = fchown(fd, ctx->uid, gid);
	else
		rc = fchownat(fs->backing_fd, r, ctx->uid, gid, AT_SYMLINK_NOFOLLOW);
	/* chown clears a file's set-user-ID and set-group-ID: give them back. */
	if (rc == 0 && !dir && (mode & (S_ISUID | S_ISGID)) && !S_ISLNK(mode))
		rc = fd >= 0 ? fchmod(fd, mode & 07777) : fchmodat(fs->backing_fd, r, mode & 07777, 0);
	if (rc == 0)
		return 0;
	err = -errno;
	unlinkat(fs->backing_fd, r, dir ? AT_REMOVEDIR : 0);
	return err;
}

static int ufs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	int fd = openat(fs->backing_fd, rel(path),
			backing_flags(fi->flags) | O_CREAT | O_EXCL, mode);
	int rc;

	if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL)) /* raced: open it */
		fd = openat(fs->backing_fd, rel(path), backing_flags(fi->flags), mode);
	else if (fd >= 0 && (rc = own(path, fd, mode, false))) {
		close(fd);
		return rc;
	}
	if (fd < 0)
		return -errno;
	return attach(fs, fd, fi, fi->flags & O_TRUNC);
}

/* close(): a descriptor that wrote gets the integrity sync, like NFS's
 * close-to-open; its errors are returned here, once. */
static int ufs_flush(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);
	struct stat st;

	(void)path;
	if (!h->ino || !atomic_load(&h->wrote))
		return 0;
	if (fstat(h->ino->fd, &st) == 0 && st.st_nlink == 0)
		return 0; /* unlinked: dropped at the last release */
	return inode_sync(h, h->ino);
}

static int ufs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	(void)datasync;
	if (!h->ino)
		return fsync(h->fd) ? -errno : 0;
	return inode_sync(h, h->ino);
}

static int ufs_release(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	if (h->ino)
		inode_put(ufs_self(), h->ino);
	close(h->fd);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Metadata: passthrough, with the cached size and coherent truncate,        */
/* unlink and rename.                                                        */

static int ufs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino;
	int rc;

	if (h && h->dir)
		rc = fstat(dirfd(h->dir), st);
	else if (h)
		rc = fstat(h->fd, st);
	else
		rc = fstatat(fs->backing_fd, rel(path), st, AT_SYMLINK_NOFOLLOW);
	if (rc != 0)
		return -errno;
	if ((ino = inode_find(fs, st))) {
		pthread_rwlock_rdlock(&ino->data_lock);
		st->st_size = (off_t)ino->size;
		/* Cached writes not yet on the backing file: their time, and
		 * the blocks their data will take. */
		if (ino->mtime.tv_sec) {
			blkcnt_t blocks = (blkcnt_t)((ino->size + 4095) / 4096 * 8);

			st->st_mtim = ino->mtime;
			if (ts_before(st->st_ctim, ino->mtime))
				st->st_ctim = ino->mtime;
			if (st->st_blocks < blocks)
				st->st_blocks = blocks;
		}
		pthread_rwlock_unlock(&ino->data_lock);
		inode_put(fs, ino);
	}
	return 0;
}

int ufs_inode_times(struct ufs_inode *ino)
{
	struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT } };
	int rc = 0;

	pthread_rwlock_rdlock(&ino->data_lock);
	tv[1] = ino->mtime;
	pthread_rwlock_unlock(&ino->data_lock);
	if (!tv[1].tv_sec)
		return 0;
	if (futimens(ino->fd, tv) != 0)
		rc = -errno;
	pthread_rwlock_wrlock(&ino->data_lock);
	/* A write since: its time is still to come. */
	if (!rc && ino->mtime.tv_sec == tv[1].tv_sec && ino->mtime.tv_nsec == tv[1].tv_nsec)
		ino->mtime.tv_sec = 0;
	pthread_rwlock_unlock(&ino->data_lock);
	return rc;
}

/* Explicit times replace those of the cached writes. */
static void inode_times_set(struct ufs_inode *ino)
{
	pthread_rwlock_wrlock(&ino->data_lock);
	ino->mtime.tv_sec = 0;
	pthread_rwlock_unlock(&ino->data_lock);
}

static int ufs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino;
	struct stat st;
	int rc;

	if (size < 0)
		return -EINVAL;
	if (h && h->ino)
		return inode_truncate(h->ino, (uint64_t)size);
	if (h)
		return ftruncate(h->fd, size) ? -errno : 0;
	if (fstatat(fs->backing_fd, rel(path), &st, 0) != 0)
		return -errno;
	if ((ino = inode_find(fs, &st))) {
		rc = inode_truncate(ino, (uint64_t)size);
		inode_put(fs, ino);
		return rc;
	}
	rc = openat(fs->backing_fd, rel(path), O_WRONLY | O_CLOEXEC);
	if (rc < 0)
		return -errno;
	if (ftruncate(rc, size) != 0) {
		int err = -errno;

		close(rc);
		return err;
	}
	close(rc);
	return 0;
}

static int ufs_unlink(const char *path)
{
	struct ufs *fs = ufs_self();
	struct stat st;
	bool had = fstatat(fs->backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0;

	if (unlinkat(fs->backing_fd, rel(path), 0) != 0)
		return -errno;
	if (had)
		inode_unlinked(fs, &st);
	return 0;
}

static int ufs_rename(const char *from, const char *to, unsigned int flags)
{
	struct ufs *fs = ufs_self();
	struct stat st;
	bool had = fstatat(fs->backing_fd, rel(to), &st, AT_SYMLINK_NOFOLLOW) == 0;

	/* The cache follows the inode, not the name: nothing moves. */
	if (renameat2(fs->backing_fd, rel(from), fs->backing_fd, rel(to), flags) != 0)
		return -errno;
	if (had && !(flags & RENAME_EXCHANGE))
		inode_unlinked(fs, &st);
	return 0;
}

static int ufs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct ufs *fs = ufs_self();
	struct ufs_handle *h = handle_of(fi);
	struct ufs_inode *ino = NULL;
	struct stat st;
	int rc = 0;

	/* Write back first, or the write-back would move the times set here
	 * (cp -a, tar, rsync set them after writing). */
	if (h && h->ino)
		rc = inode_sync(h, h->ino);
	else if (!h && fstatat(fs->backing_fd, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		 (ino = inode_find(fs, &st)))
		rc = inode_sync(NULL, ino);
	if (!rc && h)
		rc = futimens(h->dir ? dirfd(h->dir) : h->fd, tv) ? -errno : 0;
	else if (!rc)
		rc = utimensat(fs->backing_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
	if (!rc && (ino || (h && h->ino)))
		inode_times_set(ino ? ino : h->ino);
	if (ino)
		inode_put(fs, ino);
	return rc;
}

static int ufs_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n = readlinkat(ufs_self()->backing_fd, rel(path), buf, size - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int ufs_mknod(const char *path, mode_t mode, dev_t rdev)
{
	if (mknodat(ufs_self()->backing_fd, rel(path), mode, rdev))
		return -errno;
	return own(path, -1, mode, false);
}

static int ufs_mkdir(const char *path, mode_t mode)
{
	if (mkdirat(ufs_self()->backing_fd, rel(path), mode))
		return -errno;
	return own(path, -1, mode, true);
}

static int ufs_rmdir(const char *path)
{
	return unlinkat(ufs_self()->backing_fd, rel(path), AT_REMOVEDIR) ? -errno : 0;
}

static int ufs_symlink(const char *target, const char *path)
{
	if (symlinkat(target, ufs_self()->backing_fd, rel(path)))
		return -errno;
	return own(path, -1, S_IFLNK | 0777, false);
}

static int ufs_link(const char *from, const char *to)
{
	struct ufs *fs = ufs_self();

	return linkat(fs->backing_fd, rel(from), fs->backing_fd, rel(to), 0) ? -errno : 0;
}

static int ufs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	if (h)
		return fchmod(h->dir ? dirfd(h->dir) : h->fd, mode) ? -errno : 0;
	return fchmodat(ufs_self()->backing_fd, rel(path), mode, 0) ? -errno : 0;
}

static int ufs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	if (h)
		return fchown(h->dir ? dirfd(h->dir) : h->fd, uid, gid) ? -errno : 0;
	return fchownat(ufs_self()->backing_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno :
											    0;
}

static int ufs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(ufs_self()->backing_fd, st) ? -errno : 0;
}

static int ufs_access(const char *path, int mask)
{
	return faccessat(ufs_self()->backing_fd, rel(path), mask, 0) ? -errno : 0;
}

/* Extended attributes go through /proc/self/fd/N/PATH: the l*xattr calls
 * have no *at form. Without --xattr they answer ENOSYS, as libfuse's
 * passthrough_ll does without -o xattr: the kernel then stops asking
 * (EOPNOTSUPP to the caller, as a filesystem without extended attributes),
 * and above all stops sending GETXATTR security.capability before every
 * write (file_remove_privs()), one request per write otherwise. */
static void xpath(char *out, size_t len, const char *path)
{
	snprintf(out, len, "/proc/self/fd/%d/%s", ufs_self()->backing_fd, rel(path));
}

static int ufs_setxattr(const char *path, const char *name, const char *value, size_t size,
			int flags)
{
	char p[PATH_MAX + 64];

	if (!ufs_self()->opt.xattr)
		return -ENOSYS;

	xpath(p, sizeof(p), path);
	return lsetxattr(p, name, value, size, flags) ? -errno : 0;
}

static int ufs_getxattr(const char *path, const char *name, char *value, size_t size)
{
	char p[PATH_MAX + 64];
	ssize_t n;

	if (!ufs_self()->opt.xattr)
		return -ENOSYS;

	xpath(p, sizeof(p), path);
	n = lgetxattr(p, name, value, size);
	return n < 0 ? -errno : (int)n;
}

static int ufs_listxattr(const char *path, char *list, size_t size)
{
	char p[PATH_MAX + 64];
	ssize_t n;

	if (!ufs_self()->opt.xattr)
		return -ENOSYS;

	xpath(p, sizeof(p), path);
	n = llistxattr(p, list, size);
	return n < 0 ? -errno : (int)n;
}

static int ufs_removexattr(const char *path, const char *name)
{
	char p[PATH_MAX + 64];

	if (!ufs_self()->opt.xattr)
		return -ENOSYS;

	xpath(p, sizeof(p), path);
	return lremovexattr(p, name) ? -errno : 0;
}

static int ufs_opendir(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = calloc(1, sizeof(*h));
	int fd, err;

	if (!h)
		return -ENOMEM;
	fd = openat(ufs_self()->backing_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(h->dir = fdopendir(fd))) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		free(h);
		return err;
	}
	h->fd = -1;
	fi->fh = (uint64_t)(uintptr_t)h;
	return 0;
}

static int ufs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct ufs_handle *h = handle_of(fi);
	struct dirent *de;

	(void)path;
	(void)flags;
	/* Offsets of 0: the library reads the whole directory at once. */
	if (off == 0)
		rewinddir(h->dir);
	while ((errno = 0, de = readdir(h->dir))) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = DTTOIF(de->d_type) };

		if (filler(buf, de->d_name, &st, 0, 0))
			break;
	}
	return errno ? -errno : 0;
}

static int ufs_releasedir(const char *path, struct fuse_file_info *fi)
{
	struct ufs_handle *h = handle_of(fi);

	(void)path;
	closedir(h->dir);
	free(h);
	return 0;
}

static void *ufs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	cfg->use_ino = 1;
	/* Operations on an open file use its handle, and unlinking an open
	 * file unlinks it (no .fuse_hidden rename). */
	cfg->nullpath_ok = 1;
	cfg->hard_remove = 1;
	/* The filesystem is the cache: the kernel writes through to it. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
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
