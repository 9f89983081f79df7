/*
 * unstable-fuse: the request loop. One thread at a time reads requests from
 * the kernel (the reader) and, for a read, a small write, or (with the
 * directory backend) a lookup or a create, serves it itself and reads the
 * next; it hands the reading over to another thread before anything that
 * may wait (ufs_loop_yield(): a lock held by another thread, the engine's
 * reclaim or pause, the backend's I/O, a file being closed) and before
 * every other request.
 *
 * Why not libfuse's multi-threaded loop: there every idle thread waits in
 * read() on the device, and the kernel hands each request to the one that
 * has waited longest, so that consecutive requests of one writer run on
 * different threads, each woken on whatever processor it last ran on. A
 * writer of 4 KiB blocks at random offsets (fio randwrite, one at a time)
 * then went at 78 MB/s with the cache's data path costing nothing
 * measurable, and at 155 MB/s with libfuse's single-threaded loop (-s). A
 * single thread cannot serve other requests while one waits, though: a
 * throttled writer would stop every reader of the mount. This loop keeps
 * the single thread's path for what does not wait, and the threads for
 * what does.
 *
 * A thread that yielded finishes its request, then waits to read again.
 * Threads are made when a yield finds none waiting, up to the maximum, and
 * live until the loop ends.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include "ufuse.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The opcodes and layout of the kernel's requests (linux/fuse.h). */
enum {
	UFS_FUSE_LOOKUP = 1,
	UFS_FUSE_FORGET = 2,
	UFS_FUSE_GETATTR = 3,
	UFS_FUSE_READLINK = 5,
	UFS_FUSE_SYMLINK = 6,
	UFS_FUSE_MKNOD = 8,
	UFS_FUSE_MKDIR = 9,
	UFS_FUSE_LINK = 13,
	UFS_FUSE_OPEN = 14,
	UFS_FUSE_READ = 15,
	UFS_FUSE_WRITE = 16,
	UFS_FUSE_STATFS = 17,
	UFS_FUSE_GETXATTR = 22,
	UFS_FUSE_LISTXATTR = 23,
	UFS_FUSE_OPENDIR = 27,
	UFS_FUSE_READDIR = 28,
	UFS_FUSE_RELEASEDIR = 29,
	UFS_FUSE_ACCESS = 34,
	UFS_FUSE_CREATE = 35,
	UFS_FUSE_BATCH_FORGET = 42,
	UFS_FUSE_READDIRPLUS = 44,
};
#define UFS_IN_HEADER 40 /* struct fuse_in_header */
/* A write larger than this is handed over before it is served: copying it
 * takes longer than waking another thread, and writers then copy at once. */
#define UFS_LOOP_INLINE_WRITE ((uint32_t)64 << 10)

struct ufs_loop {
	struct fuse_session *se;
	pthread_mutex_t lock;	   /* the last rank (ufuse.h "LOCKS"): a leaf */
	pthread_cond_t cond;	   /* the reading is free; the loop ended */
	pthread_cond_t done_cond; /* a thread ended */
	bool reading;		   /* some thread is the reader */
	pthread_t reader;	   /* which, while reading */
	bool done;
	int err;
	unsigned idle; /* threads waiting to read */
	unsigned threads, max_threads;
	pthread_t *made;   /* every thread made, joined at the end */
	unsigned n_made;
	bool quick_names; /* the backend's namespace calls do not wait long */
};

static struct ufs_loop *the_loop;
static _Thread_local bool is_reader;

static void *worker(void *arg);

/* Under lock: one more thread, with every signal blocked (they go to the
 * main thread). Threads are joined, not detached: a thread that served a
 * request holds libfuse's per-thread context, which its exit frees only
 * while fuse_destroy() has not deleted the key yet (a detached thread
 * still exiting then leaked it). */
static void spawn(struct ufs_loop *l)
{
	sigset_t all, old;

	if (l->n_made >= l->max_threads)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&l->made[l->n_made], NULL, worker, l) == 0) {
		l->n_made++;
		l->threads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void ufs_loop_yield(void)
{
	struct ufs_loop *l = the_loop;

	if (!is_reader)
		return;
	is_reader = false;
	ufs_mutex_lock(&l->lock, UFS_RANK_LOOP);
	l->reading = false;
	if (l->idle)
		pthread_cond_signal(&l->cond);
	else if (l->threads < l->max_threads)
		spawn(l);
	/* else the next thread done with its request reads */
	ufs_mutex_unlock(&l->lock, UFS_RANK_LOOP);
}

/*
 * Whether the request in buf is served by the reader itself: a read, a
 * small write; with a backend whose namespace calls are system calls on a
 * local filesystem, the calls that look up or make names and read
 * attributes (not those that may wait for write-back or commits in fs.c:
 * flush, release, fsync, setattr, unlink, rename; fs.c yields where the
 * others may wait for a file being closed).
 */
static bool inline_request(const struct ufs_loop *l, const struct fuse_buf *buf)
{
	uint32_t opcode, size;

	if ((buf->flags & FUSE_BUF_IS_FD) || buf->size < UFS_IN_HEADER)
		return false;
	memcpy(&opcode, (const char *)buf->mem + 4, sizeof(opcode));
	switch (opcode) {
	case UFS_FUSE_READ:
		return true;
	case UFS_FUSE_WRITE:
		if (buf->size < UFS_IN_HEADER + 24)
			return false;
		/* struct fuse_write_in: fh, offset, then size. */
		memcpy(&size, (const char *)buf->mem + UFS_IN_HEADER + 16, sizeof(size));
		return size <= UFS_LOOP_INLINE_WRITE;
	case UFS_FUSE_LOOKUP:
	case UFS_FUSE_FORGET:
	case UFS_FUSE_GETATTR:
	case UFS_FUSE_READLINK:
	case UFS_FUSE_SYMLINK:
	case UFS_FUSE_MKNOD:
	case UFS_FUSE_MKDIR:
	case UFS_FUSE_LINK:
	case UFS_FUSE_OPEN:
	case UFS_FUSE_STATFS:
	case UFS_FUSE_GETXATTR:
	case UFS_FUSE_LISTXATTR:
	case UFS_FUSE_OPENDIR:
	case UFS_FUSE_READDIR:
	case UFS_FUSE_RELEASEDIR:
	case UFS_FUSE_ACCESS:
	case UFS_FUSE_CREATE:
	case UFS_FUSE_BATCH_FORGET:
	case UFS_FUSE_READDIRPLUS:
		return l->quick_names;
	default:
		return false;
	}
}

/* Under lock: the loop is over (err: 0, or why). */
static void end(struct ufs_loop *l, int err)
{
	if (!l->done) {
		l->done = true;
		l->err = err;
	}
	l->reading = false;
	pthread_cond_broadcast(&l->cond);
}

struct worker {
	struct ufs_loop *l;
	struct fuse_buf buf;
};

/* A thread cancelled in read() at the end of the loop. */
static void cancelled(void *arg)
{
	struct worker *w = arg;

	ufs_mutex_lock(&w->l->lock, UFS_RANK_LOOP);
	w->l->threads--;
	pthread_cond_broadcast(&w->l->done_cond);
	ufs_mutex_unlock(&w->l->lock, UFS_RANK_LOOP);
	free(w->buf.mem);
}

static void *worker(void *arg)
{
	struct worker w = { .l = arg, .buf = { .mem = NULL } };
	struct ufs_loop *l = w.l;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	ufs_mutex_lock(&l->lock, UFS_RANK_LOOP);
	for (;;) {
		while (l->reading && !l->done) {
			l->idle++;
			ufs_cond_wait(&l->cond, &l->lock, UFS_RANK_LOOP);
			l->idle--;
		}
		if (l->done)
			break;
		l->reading = true;
		l->reader = pthread_self();
		ufs_mutex_unlock(&l->lock, UFS_RANK_LOOP);
		is_reader = true;
		while (is_reader) {
			int rc;

			/* Only here may the end of the loop cancel the thread
			 * (ufs_loop_run()): it waits for a request. */
			pthread_cleanup_push(cancelled, &w);
			pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
			rc = fuse_session_receive_buf(l->se, &w.buf);
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
			pthread_cleanup_pop(0);
			if (rc == -EINTR || rc == -EAGAIN)
				continue;
			if (rc <= 0 || fuse_session_exited(l->se)) {
				is_reader = false;
				ufs_mutex_lock(&l->lock, UFS_RANK_LOOP);
				end(l, rc < 0 && rc != -ENODEV ? rc : 0);
				goto out;
			}
			if (!inline_request(l, &w.buf))
				ufs_loop_yield();
			fuse_session_process_buf(l->se, &w.buf);
		}
		ufs_mutex_lock(&l->lock, UFS_RANK_LOOP);
	}
out:
	l->threads--;
	pthread_cond_broadcast(&l->done_cond);
	ufs_mutex_unlock(&l->lock, UFS_RANK_LOOP);
	free(w.buf.mem);
	return NULL;
}

int ufs_loop_run(struct fuse_session *se, unsigned max_threads, bool quick_names)
{
	struct ufs_loop l = { .se = se,
			      .max_threads = max_threads ? max_threads : 1,
			      .quick_names = quick_names };
	int err;

	l.made = calloc(l.max_threads, sizeof(*l.made));
	if (!l.made)
		return -ENOMEM;
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.cond, NULL);
	pthread_cond_init(&l.done_cond, NULL);
	the_loop = &l;
	ufs_mutex_lock(&l.lock, UFS_RANK_LOOP);
	spawn(&l);
	/* The main thread takes the signals that end the loop (libfuse's
	 * handlers mark the session exited): it looks every 100 ms. */
	while (!l.done && l.threads) {
		struct timespec until = ufs_deadline(CLOCK_REALTIME, 100000000L);

		ufs_cond_timedwait(&l.done_cond, &l.lock, &until, UFS_RANK_LOOP);
		if (fuse_session_exited(se) && !l.done) {
			bool reading = l.reading;
			pthread_t reader = l.reader;

			end(&l, 0);
			/* The reader waits in read(): cancelled there (it
			 * allows it nowhere else). */
			if (reading)
				pthread_cancel(reader);
		}
	}
	if (!l.done)
		end(&l, -EAGAIN); /* no thread could be made */
	/* Threads finish what they serve (as libfuse's loop waits for its
	 * own), then see the end; a reader in read() is cancelled there. */
	while (l.threads)
		ufs_cond_wait(&l.done_cond, &l.lock, UFS_RANK_LOOP);
	err = l.err;
	ufs_mutex_unlock(&l.lock, UFS_RANK_LOOP);
	for (unsigned i = 0; i < l.n_made; i++)
		pthread_join(l.made[i], NULL);
	free(l.made);
	return err;
}
