/*
 * passthrough_ll: the FUSE peer of bench/fuse-vs-kernel. A minimal
 * passthrough of a backing directory written against libfuse3's low-level
 * API: every operation is the backing filesystem's, no cache of its own.
 *
 *   passthrough_ll BACKING_DIR MOUNTPOINT [-f] [-s] [-d] [-o writeback]
 *
 * Without -o writeback (or --writeback) the kernel writes through: every
 * write(2) crosses to the daemon, which pwrites it at once (the raw FUSE
 * ceiling of the machine). With it, the daemon asks for
 * FUSE_CAP_WRITEBACK_CACHE: the kernel caches writes in its page cache,
 * charged to the writer's memory cgroup, and writes them back in requests
 * of up to max_write. max_write is 1 MiB, as for unstable-fuse.
 *
 * Operations: lookup, forget, getattr, setattr, open, create, read,
 * write_buf, flush, fsync, release, unlink, mkdir, rmdir, opendir, readdir,
 * releasedir, fsyncdir, statfs, fallocate. No getxattr: the kernel gets
 * ENOSYS once and stops asking before every write.
 *
 * An inode is an O_PATH descriptor of the backing object, known by its
 * (st_dev, st_ino); its FUSE node id is its address, counted by lookups.
 * Operations on it go through /proc/self/fd/N, so the daemon keeps no
 * paths. Ownership of created objects is the daemon's (root): this is a
 * benchmark peer, not a shared mount.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define PT_MAX_WRITE (1u << 20)

struct pt_inode {
	struct pt_inode *next, *prev; /* the table, under pt.lock */
	int fd;			      /* O_PATH */
	dev_t dev;
	ino_t ino;
	uint64_t nlookup; /* under pt.lock */
};

static struct {
	pthread_mutex_t lock;
	struct pt_inode root; /* head of the table; never forgotten */
	int writeback;
	double timeout;
} pt = {.lock = PTHREAD_MUTEX_INITIALIZER, .timeout = 1.0};

static struct pt_inode *pt_inode(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &pt.root : (struct pt_inode *)(uintptr_t)ino;
}

static int pt_fd(fuse_ino_t ino)
{
	return pt_inode(ino)->fd;
}

static void pt_procpath(char buf[static 64], int fd)
{
	snprintf(buf, 64, "/proc/self/fd/%d", fd);
}

/* Looks NAME up under PARENT; fills E and counts one lookup. */
static int pt_lookup_entry(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	struct pt_inode *in, *found = NULL;
	int fd;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = pt.timeout;
	e->entry_timeout = pt.timeout;
	fd = openat(pt_fd(parent), name, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return err;
	}
	pthread_mutex_lock(&pt.lock);
	for (in = pt.root.next; in != &pt.root; in = in->next) {
		if (in->ino == e->attr.st_ino && in->dev == e->attr.st_dev) {
			found = in;
			break;
		}
	}
	if (found) {
		found->nlookup++;
		close(fd);
	} else {
		found = calloc(1, sizeof(*found));
		if (!found) {
			pthread_mutex_unlock(&pt.lock);
			close(fd);
			return ENOMEM;
		}
		found->fd = fd;
		found->dev = e->attr.st_dev;
		found->ino = e->attr.st_ino;
		found->nlookup = 1;
		found->next = pt.root.next;
		found->prev = &pt.root;
		pt.root.next->prev = found;
		pt.root.next = found;
	}
	pthread_mutex_unlock(&pt.lock);
	e->ino = (fuse_ino_t)(uintptr_t)found;
	return 0;
}

static void pt_unref(fuse_ino_t ino, uint64_t n)
{
	struct pt_inode *in = pt_inode(ino);

	if (in == &pt.root)
		return;
	pthread_mutex_lock(&pt.lock);
	if (in->nlookup > n) {
		in->nlookup -= n;
		in = NULL;
	} else {
		in->prev->next = in->next;
		in->next->prev = in->prev;
	}
	pthread_mutex_unlock(&pt.lock);
	if (in) {
		close(in->fd);
		free(in);
	}
}

static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_write = PT_MAX_WRITE;
	if (pt.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = pt_lookup_entry(parent, name, &e);

	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pt_unref(ino, nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		pt_unref(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (fstatat(pt_fd(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, pt.timeout);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	char path[64];
	int fd = pt_fd(ino), rc = 0;

	pt_procpath(path, fd);
	if (to_set & FUSE_SET_ATTR_MODE)
		rc = fi ? fchmod((int)fi->fh, attr->st_mode) : chmod(path, attr->st_mode);
	if (!rc && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		rc = fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		rc = fi ? ftruncate((int)fi->fh, attr->st_size) : truncate(path, attr->st_size);
	if (!rc && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};

		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		rc = fi ? futimens((int)fi->fh, tv) : utimensat(AT_FDCWD, path, tv, 0);
	}
	if (rc < 0)
		fuse_reply_err(req, errno);
	else
		pt_getattr(req, ino, fi);
}

/* The open flags the daemon uses. With the writeback cache the kernel may
 * read to fill a page of a write-only file, and it positions appends. */
static int pt_flags(int flags)
{
	flags &= ~O_NOFOLLOW;
	if (pt.writeback) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	int fd;

	pt_procpath(path, pt_fd(ino));
	fd = open(path, pt_flags(fi->flags & ~O_CREAT));
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_open(req, fi) == -ENOENT)
		close(fd); /* interrupted: no release will come */
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd, err;

	fd = openat(pt_fd(parent), name, pt_flags(fi->flags | O_CREAT), mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = pt_lookup_entry(parent, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		close(fd);
		pt_unref(e.ino, 1);
	}
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t n;

	(void)ino;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int fd = dup((int)fi->fh);

	(void)ino;
	/* Closing a duplicate reports what close() would (NFS backings). */
	fuse_reply_err(req, fd < 0 ? errno : close(fd) < 0 ? errno : 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = (int)fi->fh;

	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? errno : 0);
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) < 0 ? errno : 0);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_fd(parent), name, 0) < 0 ? errno : 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_fd(parent), name, AT_REMOVEDIR) < 0 ? errno : 0);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	int err;

	if (mkdirat(pt_fd(parent), name, mode) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = pt_lookup_entry(parent, name, &e);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

struct pt_dir {
	DIR *dir;
	struct dirent *next; /* read but not yet returned */
	off_t off;	     /* the offset of next */
};

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dir *d = calloc(1, sizeof(*d));
	int fd;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = openat(pt_fd(ino), ".", O_RDONLY | O_DIRECTORY);
	if (fd < 0 || !(d->dir = fdopendir(fd))) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		closedir(d->dir);
		free(d);
	}
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size), *p = buf;
	size_t room = size;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != d->off) {
		seekdir(d->dir, off);
		d->next = NULL;
		d->off = off;
	}
	for (;;) {
		struct stat st = {0};
		size_t len;

		if (!d->next) {
			errno = 0;
			d->next = readdir(d->dir);
			if (!d->next) {
				if (errno && p == buf) {
					free(buf);
					fuse_reply_err(req, errno);
					return;
				}
				break;
			}
		}
		st.st_ino = d->next->d_ino;
		st.st_mode = (mode_t)d->next->d_type << 12;
		len = fuse_add_direntry(req, p, room, d->next->d_name, &st, d->next->d_off);
		if (len > room)
			break;
		p += len;
		room -= len;
		d->off = d->next->d_off;
		d->next = NULL;
	}
	fuse_reply_buf(req, buf, (size_t)(p - buf));
	free(buf);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;

	(void)ino;
	closedir(d->dir);
	free(d);
	fuse_reply_err(req, 0);
}

static void pt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dir);

	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? errno : 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(pt_fd(ino), &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.open = pt_open,
	.create = pt_create,
	.read = pt_read,
	.write_buf = pt_write_buf,
	.flush = pt_flush,
	.fsync = pt_fsync,
	.release = pt_release,
	.fallocate = pt_fallocate,
	.unlink = pt_unlink,
	.mkdir = pt_mkdir,
	.rmdir = pt_rmdir,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.fsyncdir = pt_fsyncdir,
	.statfs = pt_statfs,
};

struct pt_opts {
	char *backing;
	int writeback;
};

static const struct fuse_opt pt_optspec[] = {
	{"writeback", offsetof(struct pt_opts, writeback), 1},
	{"--writeback", offsetof(struct pt_opts, writeback), 1},
	FUSE_OPT_END,
};

/* The first non-option is the backing directory; the second, the
 * mountpoint, is left to fuse_parse_cmdline. */
static int pt_optproc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct pt_opts *o = data;

	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && !o->backing) {
		o->backing = strdup(arg);
		return 0;
	}
	return 1;
}

static void pt_usage(const char *prog)
{
	printf("usage: %s BACKING_DIR MOUNTPOINT [-f] [-s] [-d] [-o writeback]\n\n"
	       "  -o writeback, --writeback   the kernel's FUSE writeback cache\n"
	       "                              (FUSE_CAP_WRITEBACK_CACHE)\n"
	       "  -f   foreground   -s   one thread   -d   debug\n",
	       prog);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	struct pt_opts po = {0};
	struct fuse_session *se;
	struct fuse_loop_config *lc;
	int rc = 1;

	if (fuse_opt_parse(&args, &po, pt_optspec, pt_optproc) < 0)
		return 1;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		return 1;
	if (opts.show_help) {
		pt_usage(argv[0]);
		fuse_lowlevel_help();
		return 0;
	}
	if (opts.show_version) {
		printf("passthrough_ll (libfuse %s)\n", fuse_pkgversion());
		return 0;
	}
	if (!po.backing || !opts.mountpoint) {
		pt_usage(argv[0]);
		return 1;
	}
	pt.writeback = po.writeback;
	pt.root.next = pt.root.prev = &pt.root;
	pt.root.nlookup = 2;
	pt.root.fd = open(po.backing, O_PATH | O_DIRECTORY);
	if (pt.root.fd < 0) {
		perror(po.backing);
		return 1;
	}
	/* The kernel applies the caller's umask. */
	umask(0);

	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	fuse_daemonize(opts.foreground);
	if (opts.singlethread) {
		rc = fuse_session_loop(se);
	} else {
		lc = fuse_loop_cfg_create();
		if (!lc) {
			rc = -ENOMEM;
		} else {
			fuse_loop_cfg_set_clone_fd(lc, opts.clone_fd);
			fuse_loop_cfg_set_idle_threads(lc, opts.max_idle_threads);
			if (opts.max_threads > 0 && opts.max_threads <= 100000)
				fuse_loop_cfg_set_max_threads(lc, opts.max_threads);
			rc = fuse_session_loop_mt(se, lc);
			fuse_loop_cfg_destroy(lc);
		}
	}
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	free(opts.mountpoint);
	free(po.backing);
	fuse_opt_free_args(&args);
	close(pt.root.fd);
	return rc ? 1 : 0;
}
