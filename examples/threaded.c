/* threaded.c: the engine in threaded mode, with flusher threads and blocking writers.
 * SPDX-License-Identifier: MIT
 * Two flusher threads write back and commit. Four writers, two per domain, copy a file each
 * with the blocking calls: us_buf_get() waits for reclaim when the domain is full, us_buf_dirty()
 * sleeps through the throttle's pause and waits at the dirty limit, us_object_sync() until the
 * file is durable. The "server" thread takes the runs flush sends it, replies UNSTABLE and
 * commits when asked. At the end, the durable copies and each domain's peak are checked. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unstable/unstable.h>

#define BUF		 (64u << 10) /* one buffer: 64 KiB */
#define SIZE		 (8u << 20)  /* each file: 8 MiB */
#define MAX		 (2u << 20)  /* each domain's max: 2 MiB, never crossed */
#define FILES		 4
#define PATTERN(id, off) ((unsigned char)((off)*13 + (off) / BUF + (id))) /* byte at off */

static struct file {
	int err;
	us_object *o;
	uint64_t blk_seq[SIZE / BUF];	      /* seq of the last write of each block */
	unsigned char recv[SIZE], disk[SIZE]; /* received (unstable), durable */
} files[FILES];				      /* the id of a file is its index */

static struct server {
	pthread_mutex_t lock; /* ours: under it, only the engine's accessors are called */
	pthread_cond_t cond;
	us_backend *be;
	us_buf *queue[FILES * SIZE /
		      BUF]; /* replies to send (a buffer is in flight once at most) */
	size_t n;
	uint64_t seq, committed;
	int commit_asked;
} srv = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* flush (on a flusher thread, or a writer's in reclaim or sync): send the run. */
static int on_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		    uint64_t len, enum us_reason why)
{
	struct file *f = us_object_user(o);

	pthread_mutex_lock(&srv.lock);
	for (size_t i = 0; i < n; i++) {
		memcpy(f->recv + us_buf_offset(bufs[i]), us_buf_data(bufs[i]), BUF);
		f->blk_seq[us_buf_offset(bufs[i]) / BUF] = ++srv.seq;
		srv.queue[srv.n++] = bufs[i];
	}
	pthread_cond_signal(&srv.cond);
	pthread_mutex_unlock(&srv.lock);
	return 0;
}

static int on_commit(void *ctx, us_object *o, enum us_reason why)
{
	pthread_mutex_lock(&srv.lock);
	srv.commit_asked = 1;
	pthread_cond_signal(&srv.cond);
	pthread_mutex_unlock(&srv.lock);
	return 0;
}

/* The server: replies to each write with its seq; once they are all sent, commits. */
static void *server(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&srv.lock);
		while (!srv.n && !srv.commit_asked)
			pthread_cond_wait(&srv.cond, &srv.lock);
		us_buf *b = srv.n ? srv.queue[--srv.n] : NULL;
		struct file *f = b ? us_object_user(us_buf_object(b)) : NULL;
		uint64_t seq = b ? f->blk_seq[us_buf_offset(b) / BUF] : srv.seq;
		int commit = !b && srv.commit_asked && seq; /* everything received so far */
		for (int k = 0; commit && k < FILES; k++)
			for (size_t i = 0; i < SIZE; i += BUF)
				if (files[k].blk_seq[i / BUF] > srv.committed)
					memcpy(files[k].disk + i, files[k].recv + i, BUF);
		srv.committed = commit ? seq : srv.committed;
		srv.commit_asked &= b != NULL; /* asked with nothing unstable: nothing to do */
		pthread_mutex_unlock(&srv.lock);
		if (b)
			us_buf_write_done(b, US_WRITE_UNSTABLE, seq, 0);
		else if (commit)
			us_backend_commit_done(srv.be, seq);
	}
	return NULL; /* not reached: the server lives as long as the process */
}

/* A writer: copies its file, then waits until it is durable. */
static void *writer(void *arg)
{
	struct file *f = arg;
	uint64_t since = us_object_errseq(f->o); /* its cursor for writeback errors */
	us_buf *b;

	for (uint64_t off = 0; off < SIZE && f->err >= 0; off += BUF) {
		f->err = us_buf_get(f->o, off, BUF, 0, &b); /* 1: created; may wait for reclaim */
		if (f->err < 0)
			return NULL;
		for (uint64_t i = 0; i < BUF; i++)
			((unsigned char *)us_buf_data(b))[i] = PATTERN(f - files, off + i);
		f->err = us_buf_dirty(b, NULL); /* sleeps through its pause, waits at the limit */
		us_buf_put(b);
	}
	f->err = f->err < 0 ? f->err : us_object_sync(f->o, &since);
	return NULL;
}

int main(void)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = on_flush, .commit = on_commit };
	struct us_engine_options opts;
	struct us_domain_stats st = { .size = sizeof(st) };
	pthread_t srv_thread, thr[FILES];
	us_engine *e;
	us_domain *d[2];
	int bad = 0;

	us_engine_options_init(&opts);
	opts.flusher_threads = 2; /* threaded mode */
	if (us_engine_create(&opts, &e) || us_backend_create(e, &ops, NULL, &srv.be) ||
	    us_domain_create(e, NULL, "a", 0, &d[0]) || us_domain_create(e, NULL, "b", 0, &d[1]) ||
	    us_domain_set_limit(d[0], US_LIMIT_MAX, MAX) ||
	    us_domain_set_limit(d[1], US_LIMIT_MAX, MAX))
		return fprintf(stderr, "threaded: setup failed\n"), 1;
	pthread_create(&srv_thread, NULL, server, NULL);
	for (int i = 0; i < FILES; i++) {
		if (us_object_create(srv.be, d[i % 2], &files[i], &files[i].o))
			return fprintf(stderr, "threaded: us_object_create failed\n"), 1;
		pthread_create(&thr[i], NULL, writer, &files[i]);
	}
	for (int i = 0; i < FILES; i++) {
		pthread_join(thr[i], NULL);
		for (uint64_t off = 0; off < SIZE; off++) /* every byte on the disk, intact? */
			files[i].err |= files[i].disk[off] != PATTERN(i, off);
		bad |= files[i].err != 0;
	}
	for (int i = 0; i < 2; i++) {
		us_domain_stats(d[i], &st);
		printf("threaded: %s: 2 files of 8 MiB %s; peak charged %llu of %u KiB\n",
		       us_domain_name(d[i]), bad ? "NOT DURABLE" : "durable, intact",
		       (unsigned long long)st.peak_charged_bytes >> 10, MAX >> 10);
		bad |= st.peak_charged_bytes > MAX || st.peak_charged_bytes == 0;
	}
	for (int i = 0; i < FILES && !bad; i++) /* all durable: the objects, then the engine go */
		bad |= us_object_destroy(files[i].o) != 0;
	bad |= bad || us_backend_destroy(srv.be) || us_engine_destroy(e);
	return bad ? 1 : 0;
}
