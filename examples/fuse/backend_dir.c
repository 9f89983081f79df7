/*
 * unstable-fuse: the backing-directory backend. Every call is the *at()
 * system call on the backing directory's descriptor; the engine's flush is
 * a pwritev() of the run (UNSTABLE: in the backing filesystem's page cache),
 * its commit an fdatasync() (see ufuse.h).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "backend.h"
#include "ufuse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

struct ufs_bfile {
	int fd;
	DIR *dir; /* directories */
	/* --direct-writeback: the file opened O_DIRECT for write-back, on
	 * first use (-1: not yet; -2: refused, write-back stays buffered). */
	atomic_int dfd;
};

static int neg(int rc)
{
	return rc < 0 ? -errno : rc;
}

static struct ufs_bfile *bfile_new(int fd)
{
	struct ufs_bfile *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = fd;
	atomic_init(&f->dfd, -1);
	return f;
}

/* The test hook of pages_pwritev() (below), read at attach: 0 off, 1 slow,
 * 2 slow and stamped pages checked. */
static int slow_pages;
/*
 * A test hook (tests/fuse/pages.sh): with UFS_TEST_DATASYNC_EIO=N in the
 * daemon's environment, the Nth ufs_dir_datasync() (from 1) fails with EIO
 * without calling fdatasync(), as one would after the backing device lost
 * a write-back of the page cache. Not for any other use. 0: none.
 */
static uint64_t datasync_eio;
static atomic_uint_fast64_t datasync_calls;

static int dir_attach(struct ufs *fs, const char *target)
{
	{
		const char *v = getenv("UFS_TEST_SLOW_PAGES");

		slow_pages = !v ? 0 : strcmp(v, "stamps") == 0 ? 2 : 1;
	}
	{
		const char *v = getenv("UFS_TEST_DATASYNC_EIO");

		datasync_eio = v ? strtoull(v, NULL, 10) : 0;
	}
	fs->backing_fd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->backing_fd < 0) {
		int err = -errno;

		fprintf(stderr, "unstable-fuse: %s: %s\n", target, strerror(errno));
		return err;
	}
	return 0;
}

static int dir_start(struct ufs *fs)
{
	(void)fs;
	return 0;
}

static void dir_detach(struct ufs *fs)
{
	if (fs->backing_fd >= 0)
		close(fs->backing_fd);
	fs->backing_fd = -1;
}

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
 * A test hook (tests/fuse/pages.sh): with UFS_TEST_SLOW_PAGES set in the
 * daemon's environment, the pages that write_pages() sends are first
 * copied out of the chunks slowly (a yield every KiB), so that a writer
 * copying into a page while it is read would leave a torn page in the
 * backing file, which the test looks for. With UFS_TEST_SLOW_PAGES=stamps,
 * every whole page of the copy must be one 8-byte stamp repeated (the
 * test writes only such pages): one that is not is told on standard error,
 * "torn page sent at OFFSET" (a reader of the backing file cannot tell a
 * torn page from one whose pwritev() is still copying it). Not for any
 * other use.
 */

static int pages_pwritev(int fd, struct iovec *iov, int n, off_t off)
{
	struct iovec one;
	size_t total = 0, at = 0;
	char *copy;
	int i, rc;

	if (!slow_pages)
		return pwritev_all(fd, iov, n, off);
	for (i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (!(copy = malloc(total)))
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const volatile char *src = iov[i].iov_base;

		for (size_t k = 0; k < iov[i].iov_len; k++) {
			copy[at++] = src[k];
			if ((k & 1023) == 1023)
				sched_yield();
		}
	}
	if (slow_pages == 2)
		for (at = 0; at + UFS_PAGE_BYTES <= total; at += UFS_PAGE_BYTES)
			if (memcmp(copy + at, copy + at + 8, UFS_PAGE_BYTES - 8) != 0)
				fprintf(stderr, "unstable-fuse: torn page sent at %lld\n",
					(long long)off + (long long)at);
	one.iov_base = copy;
	one.iov_len = total;
	rc = pwritev_all(fd, &one, 1, off);
	free(copy);
	return rc;
}

/*
 * Direct write-back (the default; --buffered-writeback turns it off). A
 * buffered pwritev() copies the chunks into the backing file's page cache:
 * a second copy of the cached data, in memory the kernel must find and
 * touch (at 2 GiB the cache and that copy are 2 GiB of fresh memory per GiB
 * written, where the peers need one). So runs whose offset, chunk addresses
 * and lengths are all 4 KiB aligned (whole chunks: payloads are
 * page-aligned) are written with O_DIRECT through a second descriptor of
 * the same file: from the chunks to the device, no page cache. A run with a
 * chunk written in part since it was clean goes as its dirty page ranges,
 * buffered (write_pages()): a 4 KiB random write costs a 4 KiB write, not
 * its chunk's. The kernel writes back and invalidates cached pages of the
 * range first, so buffered reads of the backing file stay coherent, and
 * the commit's fdatasync() still makes the data and the size durable (the
 * device's cache included). A run that is not aligned (a file's tail), a
 * filesystem that refuses O_DIRECT, or EINVAL from the direct write: the
 * buffered write as before.
 */
/* Runs written O_DIRECT and bytes, for the stats file (one mount a process). */
static atomic_uint_fast64_t direct_runs, direct_bytes;
/* Ranges of dirty pages written back alone (write_pages()), and bytes. */
static atomic_uint_fast64_t page_ranges, page_bytes;
/* fdatasync() calls on backing files: commits, and integrity syncs with
 * --trust-backing (ufs_dir_datasync()). */
static atomic_uint_fast64_t datasyncs;

static void dir_stats(struct ufs *fs, FILE *f)
{
	(void)fs;
	fprintf(f,
		"backend dir\ndirect_runs %llu\ndirect_bytes %llu\npage_ranges %llu\npage_bytes %llu\n"
		"fdatasyncs %llu\n\n",
		(unsigned long long)atomic_load(&direct_runs),
		(unsigned long long)atomic_load(&direct_bytes),
		(unsigned long long)atomic_load(&page_ranges),
		(unsigned long long)atomic_load(&page_bytes), (unsigned long long)atomic_load(&datasyncs));
}

static int direct_fd(struct ufs_bfile *f)
{
	int fd = atomic_load(&f->dfd), nfd, expect = -1;
	char proc[64];

	if (fd != -1)
		return fd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
	nfd = open(proc, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (nfd < 0)
		nfd = -2;
	if (!atomic_compare_exchange_strong(&f->dfd, &expect, nfd)) {
		if (nfd >= 0)
			close(nfd);
		return expect;
	}
	return nfd;
}

static bool direct_aligned(const struct iovec *iov, int n, uint64_t offset)
{
	int i;

	if (offset % 4096)
		return false;
	for (i = 0; i < n; i++)
		if ((uintptr_t)iov[i].iov_base % 4096 || iov[i].iov_len % 4096)
			return false;
	return true;
}

/* The run's iovecs, clipped to the logical size end; their count. */
static int run_iov(us_buf *const *bufs, size_t n, uint64_t end, struct iovec *iov)
{
	int niov = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t bo = us_buf_offset(bufs[i]);

		if (bo >= end)
			break;
		iov[niov].iov_base = us_buf_data(bufs[i]);
		iov[niov].iov_len = (size_t)min_u64(us_buf_length(bufs[i]), end - bo);
		niov++;
	}
	return niov;
}

/*
 * The run's dirty pages only, when some chunk of it has a page map
 * (ufuse.h struct ufs_pmap; bits: each chunk's, 0 for the whole chunk):
 * each range of consecutive dirty pages, clipped to end, in one pwritev()
 * that may span chunks. The number of ranges written, or a negative errno.
 */
static int write_pages(int fd, us_buf *const *bufs, size_t n, const uint32_t *bits, uint64_t end)
{
	struct iovec iov[64];
	uint64_t start = 0, next = 0;
	int niov = 0, ranges = 0, err;
	size_t i;
	unsigned p;

	for (i = 0; i < n; i++) {
		for (p = 0; p < ufs_chunk_pages(); p++) {
			uint64_t at = us_buf_offset(bufs[i]) + p * UFS_PAGE_BYTES, len;
			bool dirty = at < end && (!bits[i] || (bits[i] >> p & 1));
			char *data = (char *)us_buf_data(bufs[i]) + p * UFS_PAGE_BYTES;

			/* A range ends at a clean page, a gap, the iovecs' room. */
			if (niov && (!dirty || at != next || niov == 64)) {
				if ((err = pages_pwritev(fd, iov, niov, (off_t)start)) < 0)
					return err;
				atomic_fetch_add(&page_bytes, next - start);
				ranges++;
				niov = 0;
			}
			if (!dirty)
				continue;
			len = min_u64(UFS_PAGE_BYTES, end - at);
			if (!niov)
				start = at;
			/* Pages of one chunk are adjacent in memory: one iovec. */
			if (niov && (char *)iov[niov - 1].iov_base + iov[niov - 1].iov_len == data) {
				iov[niov - 1].iov_len += (size_t)len;
			} else {
				iov[niov].iov_base = data;
				iov[niov].iov_len = (size_t)len;
				niov++;
			}
			next = at + len;
		}
	}
	if (niov) {
		if ((err = pages_pwritev(fd, iov, niov, (off_t)start)) < 0)
			return err;
		atomic_fetch_add(&page_bytes, next - start);
		ranges++;
	}
	atomic_fetch_add(&page_ranges, (uint64_t)ranges);
	return ranges;
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
static int dir_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct ufs_inode *ino = us_object_user(obj);
	struct iovec stack_iov[64], *iov = stack_iov;
	uint32_t stack_bits[64], *bits = NULL;
	enum us_write_result res = US_WRITE_UNSTABLE;
	bool partial = false;
	uint64_t end, seq = 0;
	int niov = 0, err = 0;
	size_t i;

	(void)length;
	(void)reason;
	if (n > 64 && !(iov = malloc(n * sizeof(*iov))))
		return -ENOMEM;
	bits = n > 64 ? malloc(n * sizeof(*bits)) : stack_bits;
	if (!bits) {
		if (iov != stack_iov)
			free(iov);
		return -ENOMEM; /* nothing taken: the engine retries */
	}
	/* wb_lock across the writes (a truncate waits for them); data_lock
	 * only to read the size and take the dirty pages: writers wait for
	 * these chunks' write-back to end before they copy into the pages
	 * taken (unlocked_writeback, ufuse.h). */
	ufs_rwlock_rdlock(&ino->wb_lock, UFS_RANK_WB);
	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	end = ino->size;
	/* Chunks written in part since they were clean: their dirty pages
	 * only. */
	for (i = 0; i < n; i++) {
		bits[i] = ufs_pages_take(ino, us_buf_offset(bufs[i]) / ufs_chunk_bytes);
		partial |= bits[i] != 0;
	}
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	if (partial) {
		err = write_pages(ino->file->fd, bufs, n, bits, end);
		niov = err > 0 ? err : 0;
		err = err < 0 ? err : 0;
		goto written;
	}
	niov = run_iov(bufs, n, end, iov);
	if (niov && fs->opt.direct_writeback && direct_aligned(iov, niov, offset)) {
		int dfd = direct_fd(ino->file);

		err = dfd >= 0 ? pwritev_all(dfd, iov, niov, (off_t)offset) : -EINVAL;
		if (err == -EINVAL) { /* pwritev_all() moved the iovecs */
			niov = run_iov(bufs, n, end, iov);
		} else {
			if (!err) {
				atomic_fetch_add(&direct_runs, 1);
				atomic_fetch_add(&direct_bytes, min_u64(length, end - offset));
			}
			niov = -niov; /* written */
		}
	}
	if (niov > 0)
		err = pwritev_all(ino->file->fd, iov, niov, (off_t)offset);
	niov = niov < 0 ? -niov : niov;
written:
	ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
	if (bits != stack_bits)
		free(bits);
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
	ufs_writeback_ending(ino);
	for (i = 0; i < n; i++)
		us_buf_write_done(bufs[i], res, seq, err);
	ufs_writeback_done(ino);
	return 0;
}

/* commit: fdatasync() of the backing file. Every write acknowledged with a
 * number <= seq had returned before the fdatasync started. */
static int dir_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct ufs_inode *ino = us_object_user(obj);
	uint64_t seq = atomic_load(&fs->seq);

	/* --trust-backing: what the backing file has is taken as kept (its
	 * page cache writes it; a passthrough leaves it there too), whatever
	 * the reason: an integrity sync ends with the one fdatasync() of fs.c
	 * inode_sync(), whose error every descriptor is told of (an fdatasync
	 * here would take that error for data the cache no longer holds). */
	(void)reason;
	if (fs->opt.trust_backing) {
		if (seq)
			us_object_commit_done(obj, seq);
		atomic_fetch_add(&fs->trusted_commits, 1);
		return 0;
	}
	atomic_fetch_add(&datasyncs, 1);
	if (fdatasync(ino->file->fd) != 0) {
		int err = -errno;

		/*
		 * Linux reports a writeback error once and may drop the pages:
		 * a second fdatasync could succeed with the data gone. So the
		 * cache rewrites everything of the file not yet committed, from
		 * its own copy, before any commit can count it durable (the
		 * error and the pages are the file's: the others stay).
		 */
		us_object_commit_lost(obj);
		return err;
	}
	if (seq)
		us_object_commit_done(obj, seq);
	return 0;
}

int ufs_dir_datasync(struct ufs_bfile *f)
{
	if (datasync_eio && atomic_fetch_add(&datasync_calls, 1) + 1 == datasync_eio)
		return -EIO;
	atomic_fetch_add(&datasyncs, 1);
	return fdatasync(f->fd) != 0 ? -errno : 0;
}

static int dir_open(struct ufs *fs, const char *rel, int flags, mode_t mode, struct ufs_bfile **out)
{
	int fd = openat(fs->backing_fd, rel, flags | O_CLOEXEC, mode);

	if (fd < 0)
		return -errno;
	if (!(*out = bfile_new(fd))) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

static int dir_reopen_rw(struct ufs *fs, struct ufs_bfile *f, struct ufs_bfile **out)
{
	char proc[64];
	int fd;

	(void)fs;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->fd);
	fd = open(proc, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!(*out = bfile_new(fd))) {
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

static void dir_close(struct ufs *fs, struct ufs_bfile *f)
{
	(void)fs;
	if (f->dir)
		closedir(f->dir);
	else
		close(f->fd);
	if (atomic_load(&f->dfd) >= 0)
		close(atomic_load(&f->dfd));
	free(f);
}

static int dir_fstat(struct ufs *fs, struct ufs_bfile *f, struct stat *st)
{
	(void)fs;
	return neg(fstat(f->fd, st));
}

static ssize_t dir_pread(struct ufs *fs, struct ufs_bfile *f, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	(void)fs;
	while (got < n) {
		ssize_t r = pread(f->fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return got ? (ssize_t)got : -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static ssize_t dir_pwrite(struct ufs *fs, struct ufs_bfile *f, const void *buf, size_t n,
			  uint64_t off)
{
	ssize_t w;

	(void)fs;
	w = pwrite(f->fd, buf, n, (off_t)off);
	return w < 0 ? -errno : w;
}

static int dir_fsync(struct ufs *fs, struct ufs_bfile *f)
{
	(void)fs;
	return neg(fsync(f->fd));
}

static int dir_ftruncate(struct ufs *fs, struct ufs_bfile *f, uint64_t size)
{
	(void)fs;
	return neg(ftruncate(f->fd, (off_t)size));
}

static int dir_fchmod(struct ufs *fs, struct ufs_bfile *f, mode_t mode)
{
	(void)fs;
	return neg(fchmod(f->fd, mode));
}

static int dir_fchown(struct ufs *fs, struct ufs_bfile *f, uid_t uid, gid_t gid)
{
	(void)fs;
	return neg(fchown(f->fd, uid, gid));
}

static int dir_futimens(struct ufs *fs, struct ufs_bfile *f, const struct timespec tv[2])
{
	(void)fs;
	return neg(futimens(f->fd, tv));
}

static int dir_opendir(struct ufs *fs, const char *rel, struct ufs_bfile **out)
{
	int fd = openat(fs->backing_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err;
	struct ufs_bfile *f;

	if (fd < 0)
		return -errno;
	if (!(f = bfile_new(fd))) {
		close(fd);
		return -ENOMEM;
	}
	if (!(f->dir = fdopendir(fd))) {
		err = -errno;
		close(fd);
		free(f);
		return err;
	}
	*out = f;
	return 0;
}

static int dir_readdir(struct ufs *fs, struct ufs_bfile *d, uint64_t off, ufs_fill_fn fill,
		       void *ctx)
{
	struct dirent *de;

	(void)fs;
	if (off == 0)
		rewinddir(d->dir);
	while ((errno = 0, de = readdir(d->dir))) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = DTTOIF(de->d_type) };

		if (fill(ctx, de->d_name, &st))
			break;
	}
	return errno ? -errno : 0;
}

static int dir_lstat(struct ufs *fs, const char *rel, struct stat *st)
{
	return neg(fstatat(fs->backing_fd, rel, st, AT_SYMLINK_NOFOLLOW));
}

static int dir_stat(struct ufs *fs, const char *rel, struct stat *st)
{
	return neg(fstatat(fs->backing_fd, rel, st, 0));
}

static int dir_truncate(struct ufs *fs, const char *rel, uint64_t size)
{
	int fd = openat(fs->backing_fd, rel, O_WRONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = neg(ftruncate(fd, (off_t)size));
	close(fd);
	return rc;
}

static int dir_mkdir(struct ufs *fs, const char *rel, mode_t mode)
{
	return neg(mkdirat(fs->backing_fd, rel, mode));
}

static int dir_mknod(struct ufs *fs, const char *rel, mode_t mode, dev_t rdev)
{
	return neg(mknodat(fs->backing_fd, rel, mode, rdev));
}

static int dir_unlink(struct ufs *fs, const char *rel)
{
	return neg(unlinkat(fs->backing_fd, rel, 0));
}

static int dir_rmdir(struct ufs *fs, const char *rel)
{
	return neg(unlinkat(fs->backing_fd, rel, AT_REMOVEDIR));
}

static int dir_symlink(struct ufs *fs, const char *target, const char *rel)
{
	return neg(symlinkat(target, fs->backing_fd, rel));
}

static int dir_readlink(struct ufs *fs, const char *rel, char *buf, size_t size)
{
	ssize_t n = readlinkat(fs->backing_fd, rel, buf, size - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int dir_rename(struct ufs *fs, const char *from, const char *to, unsigned flags)
{
	return neg(renameat2(fs->backing_fd, from, fs->backing_fd, to, flags));
}

static int dir_link(struct ufs *fs, const char *from, const char *to)
{
	return neg(linkat(fs->backing_fd, from, fs->backing_fd, to, 0));
}

static int dir_chmod(struct ufs *fs, const char *rel, mode_t mode)
{
	return neg(fchmodat(fs->backing_fd, rel, mode, 0));
}

static int dir_chown(struct ufs *fs, const char *rel, uid_t uid, gid_t gid)
{
	return neg(fchownat(fs->backing_fd, rel, uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int dir_utimens(struct ufs *fs, const char *rel, const struct timespec tv[2])
{
	return neg(utimensat(fs->backing_fd, rel, tv, AT_SYMLINK_NOFOLLOW));
}

static int dir_statfs(struct ufs *fs, const char *rel, struct statvfs *st)
{
	(void)rel;
	return neg(fstatvfs(fs->backing_fd, st));
}

static int dir_access(struct ufs *fs, const char *rel, int mask)
{
	return neg(faccessat(fs->backing_fd, rel, mask, 0));
}

/* Extended attributes go through /proc/self/fd/N/PATH: the l*xattr calls
 * have no *at form. */
static void xpath(struct ufs *fs, char *out, size_t len, const char *rel)
{
	snprintf(out, len, "/proc/self/fd/%d/%s", fs->backing_fd, rel);
}

static int dir_setxattr(struct ufs *fs, const char *rel, const char *name, const char *value,
			size_t size, int flags)
{
	char p[PATH_MAX + 64];

	xpath(fs, p, sizeof(p), rel);
	return neg(lsetxattr(p, name, value, size, flags));
}

static int dir_getxattr(struct ufs *fs, const char *rel, const char *name, char *value, size_t size)
{
	char p[PATH_MAX + 64];
	ssize_t n;

	xpath(fs, p, sizeof(p), rel);
	n = lgetxattr(p, name, value, size);
	return n < 0 ? -errno : (int)n;
}

static int dir_listxattr(struct ufs *fs, const char *rel, char *list, size_t size)
{
	char p[PATH_MAX + 64];
	ssize_t n;

	xpath(fs, p, sizeof(p), rel);
	n = llistxattr(p, list, size);
	return n < 0 ? -errno : (int)n;
}

static int dir_removexattr(struct ufs *fs, const char *rel, const char *name)
{
	char p[PATH_MAX + 64];

	xpath(fs, p, sizeof(p), rel);
	return neg(lremovexattr(p, name));
}

const struct ufs_backend ufs_backend_dir = {
	.name = "dir",
	.page_writeback = true,
	.unlocked_writeback = true,
	.quick_names = true,
	.unlinked_lives = true,
	.attach = dir_attach,
	.start = dir_start,
	.detach = dir_detach,
	.stats = dir_stats,
	.flush = dir_flush,
	.commit = dir_commit,
	.open = dir_open,
	.reopen_rw = dir_reopen_rw,
	.close = dir_close,
	.fstat = dir_fstat,
	.pread = dir_pread,
	.pwrite = dir_pwrite,
	.fsync = dir_fsync,
	.ftruncate = dir_ftruncate,
	.fchmod = dir_fchmod,
	.fchown = dir_fchown,
	.futimens = dir_futimens,
	.opendir = dir_opendir,
	.readdir = dir_readdir,
	.lstat = dir_lstat,
	.stat = dir_stat,
	.truncate = dir_truncate,
	.mkdir = dir_mkdir,
	.mknod = dir_mknod,
	.unlink = dir_unlink,
	.rmdir = dir_rmdir,
	.symlink = dir_symlink,
	.readlink = dir_readlink,
	.rename = dir_rename,
	.link = dir_link,
	.chmod = dir_chmod,
	.chown = dir_chown,
	.utimens = dir_utimens,
	.statfs = dir_statfs,
	.access = dir_access,
	.setxattr = dir_setxattr,
	.getxattr = dir_getxattr,
	.listxattr = dir_listxattr,
	.removexattr = dir_removexattr,
};
