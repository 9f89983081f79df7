/*
 * unstable-fuse: where the data lives. One FUSE front end (fs.c) over one
 * of two backends chosen at mount (main.c):
 *
 *   backend_dir.c  a backing directory: the *at() system calls; a flush is
 *                  a pwritev(), a commit an fdatasync().
 *   nfs/           an NFSv3 export (libnfs): a flush is WRITE3 UNSTABLE
 *                  RPCs, a commit is COMMIT3 with the write verifier
 *                  checked; the namespace goes through libnfs's synchronous
 *                  calls. Built only when pkg-config finds libnfs.
 *
 * Paths are relative to the backend's root ("." is the root). Every call
 * returns 0 (or a count) or a negative errno. A backend file (struct
 * ufs_bfile) is an open file or directory; the front end keeps one per open
 * handle and one read-write one per cached inode (reopen_rw). Calls on one
 * backend may come from any thread at once: the backend serialises what it
 * must.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef UFUSE_BACKEND_H
#define UFUSE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include <unstable/unstable.h>

struct ufs;
struct ufs_bfile;

/* readdir's sink: nonzero stops the listing. */
typedef int (*ufs_fill_fn)(void *ctx, const char *name, const struct stat *st);

struct ufs_backend {
	const char *name;
	/* Its flush writes back only the dirty pages of a chunk that has some
	 * (ufs_pages_take()): the writers then keep track of them. */
	bool page_writeback;
	/* The chunks' size without --chunk (0: UFS_CHUNK_DEFAULT). A server
	 * whose write-back costs round trips and a commit each time (NFS)
	 * takes smaller chunks: a max then holds more of scattered small
	 * writes, and each write-back cycle moves more of them. */
	uint64_t chunk_default;
	/* Its flush reads the chunks across its write without data_lock
	 * (ufuse.h): a writer waits for a chunk's write-back to end before it
	 * copies into the pages that write-back took (all of a chunk that
	 * goes whole; fs.c ufs_write(), writeback_wait()), and the flush calls
	 * ufs_writeback_done() once its buffers are completed. Every backend
	 * calls ufs_writeback_ending() when a write of a file reached the
	 * backing file, before it completes the write's buffers (times given
	 * before it wait again); a report that may take the file's data_lock,
	 * so a backend's drain must not be waited for under it. */
	bool unlocked_writeback;
	/* Its namespace calls are system calls on a local filesystem, which
	 * do not wait long: the request loop serves them without handing the
	 * reading of requests to another thread first (loop.c). */
	bool quick_names;
	/* A file unlinked while open lives on until its last close (a local
	 * filesystem). Else (an NFS server removes it at once) an open file
	 * being unlinked is renamed to a hidden name instead, removed at its
	 * last close: the NFS client's "silly rename" (fs.c hidden_make()). */
	bool unlinked_lives;
	/* Other clients change its files (a server): the kernel keeps
	 * attributes only as long as --attr-cache, 0 asking at every stat
	 * (fs.c ufs_init()); else for a second. */
	bool shared;

	/* Opens the backend (target: the directory or the URL) before the
	 * mount; on failure prints a message naming the problem and returns a
	 * negative errno (the daemon exits 2). */
	int (*attach)(struct ufs *fs, const char *target);
	/* After daemonizing, before the first request: threads. */
	int (*start)(struct ufs *fs);
	/* After the engine is shut down: threads stopped, backend closed. */
	void (*detach)(struct ufs *fs);
	/* Extra lines for the stats file ("backend NAME" block); may be NULL. */
	void (*stats)(struct ufs *fs, FILE *f);

	/* The engine's callbacks (us_backend_ops): write a run of an inode's
	 * chunks, commit an inode. us_object_user() is the struct ufs_inode. */
	int (*flush)(void *fs, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason);
	int (*commit)(void *fs, us_object *obj, enum us_reason reason);
	/* Waits until no RPC of the engine's for this inode's file is in
	 * flight (before its object is destroyed); may be NULL. */
	void (*drain)(struct ufs *fs, struct ufs_bfile *f);
	/* With sealed, no commit of the file is sent from then on: the commit
	 * callback answers 0 without sending it, until called again without.
	 * Before the drain that precedes the object's destruction, once its
	 * data is all committed or dropped: a commit callback the engine is
	 * running meanwhile (the object busy) would otherwise send a commit
	 * after the drain, whose reply names the object freed. With f NULL,
	 * the backend sends no commit of its own from then on, for any file
	 * (the engine shuts down: only the engine's commits, one of an object
	 * at a time, are left to answer). May be NULL (a backend whose commit
	 * is synchronous). */
	void (*seal)(struct ufs *fs, struct ufs_bfile *f, bool sealed);

	/* Files. open: flags as open(2) (O_CREAT, O_EXCL honoured; never
	 * O_TRUNC or O_APPEND). reopen_rw: a read-write file on the same
	 * inode, for the cache. */
	int (*open)(struct ufs *fs, const char *rel, int flags, mode_t mode,
		    struct ufs_bfile **out);
	int (*reopen_rw)(struct ufs *fs, struct ufs_bfile *f, struct ufs_bfile **out);
	void (*close)(struct ufs *fs, struct ufs_bfile *f);
	/* -ESTALE or -ENOENT once the file is gone (unlinked on a server). */
	int (*fstat)(struct ufs *fs, struct ufs_bfile *f, struct stat *st);
	/* Uncached I/O: a short read only at the end of the file. */
	ssize_t (*pread)(struct ufs *fs, struct ufs_bfile *f, void *buf, size_t n, uint64_t off);
	ssize_t (*pwrite)(struct ufs *fs, struct ufs_bfile *f, const void *buf, size_t n,
			  uint64_t off);
	int (*fsync)(struct ufs *fs, struct ufs_bfile *f);
	/* With the inode's data_lock held exclusive (no flush can start). */
	int (*ftruncate)(struct ufs *fs, struct ufs_bfile *f, uint64_t size);
	int (*fchmod)(struct ufs *fs, struct ufs_bfile *f, mode_t mode);
	int (*fchown)(struct ufs *fs, struct ufs_bfile *f, uid_t uid, gid_t gid);
	int (*futimens)(struct ufs *fs, struct ufs_bfile *f, const struct timespec tv[2]);
	/* Optional: a mode ((mode_t)-1: none) and times together, in one
	 * call where that saves a round trip (else fchmod, then futimens). */
	int (*fsetattrs)(struct ufs *fs, struct ufs_bfile *f, mode_t mode,
			 const struct timespec tv[2]);

	/* Directories: readdir from the start when off is 0. */
	int (*opendir)(struct ufs *fs, const char *rel, struct ufs_bfile **out);
	int (*readdir)(struct ufs *fs, struct ufs_bfile *d, uint64_t off, ufs_fill_fn fill,
		       void *ctx);

	/* Names. lstat does not follow a last symlink, stat does; chown,
	 * utimens do not follow. */
	int (*lstat)(struct ufs *fs, const char *rel, struct stat *st);
	int (*stat)(struct ufs *fs, const char *rel, struct stat *st);
	int (*truncate)(struct ufs *fs, const char *rel, uint64_t size);
	int (*mkdir)(struct ufs *fs, const char *rel, mode_t mode);
	int (*mknod)(struct ufs *fs, const char *rel, mode_t mode, dev_t rdev);
	int (*unlink)(struct ufs *fs, const char *rel);
	int (*rmdir)(struct ufs *fs, const char *rel);
	int (*symlink)(struct ufs *fs, const char *target, const char *rel);
	int (*readlink)(struct ufs *fs, const char *rel, char *buf, size_t size);
	int (*rename)(struct ufs *fs, const char *from, const char *to, unsigned flags);
	int (*link)(struct ufs *fs, const char *from, const char *to);
	int (*chmod)(struct ufs *fs, const char *rel, mode_t mode);
	int (*chown)(struct ufs *fs, const char *rel, uid_t uid, gid_t gid);
	int (*utimens)(struct ufs *fs, const char *rel, const struct timespec tv[2]);
	int (*statfs)(struct ufs *fs, const char *rel, struct statvfs *st);
	int (*access)(struct ufs *fs, const char *rel, int mask);
	/* Extended attributes (NULL: -ENOSYS, none). */
	int (*setxattr)(struct ufs *fs, const char *rel, const char *name, const char *value,
			size_t size, int flags);
	int (*getxattr)(struct ufs *fs, const char *rel, const char *name, char *value,
			size_t size);
	int (*listxattr)(struct ufs *fs, const char *rel, char *list, size_t size);
	int (*removexattr)(struct ufs *fs, const char *rel, const char *name);
};

extern const struct ufs_backend ufs_backend_dir;
/* fdatasync() of a backing file of the directory backend: 0 or -errno
 * (--trust-backing: an integrity sync's last step, fs.c inode_sync()). */
int ufs_dir_datasync(struct ufs_bfile *f);
#ifdef UFS_HAVE_NFS
extern const struct ufs_backend ufs_backend_nfs;
#endif

#endif /* UFUSE_BACKEND_H */
