/*
 * unstable-sim --realtime: one scenario in real time, with real threads and
 * real memory.
 *
 * SPDX-License-Identifier: MIT
 *
 * The engine runs in threaded mode (two flusher threads) on CLOCK_MONOTONIC,
 * and every buffer has a payload the engine allocates (jemalloc arenas).
 * Each writer is a thread, started at its start= time, that does what dd
 * does: gets the next block of bs bytes (us_buf_get(), which waits for
 * reclaim when the domain is full), fills it with a pattern derived from
 * --seed, the writer's index and the byte offset, and dirties it with the
 * blocking us_buf_dirty(), whose time counts as the writer's pause. With
 * rate=, copying a block lasts until start + (offset + bs) / rate. Policies
 * as in virtual time (run.c): no-forced-commit turns forced commits off and
 * the writer ignores the throttle; naive has no curve and, when a charge
 * would wait, flushes everything, asks for a commit and waits for reclaim,
 * again at each retry (the wait is its pause).
 *
 * Two backends:
 *
 * - The simulated server (file_path NULL), one thread: flush calls queue
 *   requests on a link of bw bytes per second, each answered lat after its
 *   transfer, acknowledged unstable with a transaction number; it commits
 *   every commit-interval, when journal bytes are uncommitted or when the
 *   engine asks (sync), each commit taking commit-lat, then reports
 *   commit_done. When a request lands the server keeps, per block, a
 *   checksum of the data it received and its transaction; a commit makes
 *   the blocks of its transactions durable.
 *
 * - A file: the flush callback queues the run for a pool of rpcs worker
 *   threads (at most 8), which pwritev() it at the writer's own region of
 *   the file and report it unstable with a sequence number taken after the
 *   write returned. The sync callback asks a committer thread for an
 *   fdatasync(); the sequence numbers it covers are those taken before it
 *   started, and it reports commit_done for them once it returns. The file
 *   is opened twice, once with O_DIRECT when the filesystem allows it (and
 *   every writer's bs is a multiple of 4096): a write whose offset and
 *   length are multiples of 4096 goes through that one, from the payloads
 *   when they are 4096-aligned too, else through an aligned copy (jemalloc
 *   offsets large allocations by a random multiple of 64 bytes within their
 *   first page, its cache_oblivious option, so most payloads are not
 *   page-aligned); any other write goes through the page cache. A write
 *   refused with EINVAL (an alignment the device does not take) is made
 *   again through the page cache, and so are all later ones. The result
 *   says which.
 *
 * After the writers end, a blocking sync of the root domain writes back and
 * commits everything. Then lost_bytes counts, per writer, the bytes of the
 * blocks that are not at the server durably with the pattern (the server's
 * checksums), or that differ from it when the file is read back.
 *
 * Peak resident memory is the process's VmHWM (/proc/self/status), reset
 * at the start of the run through /proc/self/clear_refs when the kernel
 * allows it; it is reported beside the root domain's peak charged bytes.
 */
#define _GNU_SOURCE 1
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <unstable/unstable.h>

#define MS	     1000000ull
#define SEC	     1000000000ull
#define DIO_ALIGN    4096u	/* O_DIRECT alignment assumed for offsets, addresses, lengths */
#define REGION_ALIGN (1u << 20) /* the writers' regions of the file start at MiB boundaries */
#define MAX_WORKERS  8
#define BOUNCE_BYTES (512u << 10) /* a worker's aligned copy buffer (a multiple of DIO_ALIGN) */

/* ------------------------------------------------------------------------ */
/* The data pattern and the checksum                                          */

static uint64_t fmix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A writer's key: every byte it writes follows from it and the offset. */
static uint64_t pattern_key(uint64_t seed, int writer)
{
	return fmix(seed ^ fmix(0x5eed0000ull + (uint64_t)writer));
}

/* The 8 bytes at offset 8 * idx, in memory order. */
static uint64_t pattern_word(uint64_t key, uint64_t idx)
{
	return fmix(key + (idx + 1) * 0x9e3779b97f4a7c15ull);
}

/* Fills p with the writer's bytes [off, off + len). */
static void pattern_fill(uint64_t key, uint64_t off, unsigned char *p, size_t len)
{
	while (len) {
		uint64_t w = pattern_word(key, off >> 3);
		size_t at = (size_t)(off & 7), n = 8 - at < len ? 8 - at : len;

		memcpy(p, (unsigned char *)&w + at, n);
		p += n;
		off += n;
		len -= n;
	}
}

static uint64_t checksum(const unsigned char *p, size_t len)
{
	uint64_t h = 0x243f6a8885a308d3ull ^ len, w;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; len; p++, len--)
		h = (h ^ *p) * 0x100000001b3ull;
	return fmix(h);
}

/* ------------------------------------------------------------------------ */
/* State                                                                      */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = (time_t)(t / SEC), .tv_nsec = (long)(t % SEC) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The server's view of one block a writer wrote. */
struct block {
	uint64_t sum, txn; /* checksum of what arrived, and its transaction */
	bool durable;
};

struct rt;

struct writer {
	struct rt *rt;
	int id;
	us_object *o;
	uint64_t key, base; /* pattern key; its region of the file */
	uint64_t off, start, done, enomem;
	struct sim_pauses pauses;
	struct block *blk; /* simulated server: per block */
	uint64_t nblocks;
	uint64_t lost; /* file: bytes that differ when read back */
	int err;       /* an unexpected error of the engine, or 0 */
	pthread_t thread;
};

/* A flush call: a run of adjacent buffers of one writer. */
struct req {
	us_buf **bufs;
	size_t n;
	int writer;
	uint64_t off, len, at; /* at: when the simulated server answers */
};

struct rt {
	const struct sim_config *c;
	bool file;
	us_engine *e;
	us_backend *bk;
	struct writer *w; /* c->nwr */
	uint64_t t0;

	pthread_mutex_t lock; /* everything below */
	pthread_cond_t cond;  /* on CLOCK_MONOTONIC: the server, workers, committer */
	bool stop;
	struct req *q; /* FIFO of requests */
	size_t head, tail, cap;
	/* Per domain (c->ndom of each). */
	uint64_t *flushes, *dom_commits;
	bool *touched;		  /* written since the last commit started */
	bool *hit_srv, *hit_file; /* scratch of the server thread, of the committer */
	struct sim_commit cm;	  /* the file: only cm.commits (fdatasyncs) */

	/* The simulated server. */
	uint64_t busy_until;
	struct sim_landq land; /* its thread only */

	/* The file. */
	int fd, dfd;
	bool direct_failed;
	int dio_errno, io_errno;
	uint64_t wseq, direct_bytes, bounce_bytes, bytes, first_io, last_io;
	bool sync_asked;

	pthread_t server, workers[MAX_WORKERS];
	unsigned nworkers;
	bool server_started;
};

/* Queues a flush call (the lock held). */
static int enqueue(struct rt *s, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		   uint64_t len)
{
	struct req *r, *q = sim_fifo_room(s->q, sizeof(*s->q), &s->head, &s->tail, &s->cap, 256);

	if (!q)
		return -ENOMEM;
	s->q = q;
	r = &s->q[s->tail];
	r->bufs = malloc(n * sizeof(*r->bufs));
	if (!r->bufs)
		return -ENOMEM;
	memcpy(r->bufs, bufs, n * sizeof(*bufs));
	r->n = n;
	r->writer = (int)(intptr_t)us_object_user(o);
	r->off = off;
	r->len = len;
	r->at = 0;
	s->flushes[s->c->wr[r->writer].domain]++;
	s->tail++;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The simulated server                                                       */

static int srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		     uint64_t len, enum us_reason reason)
{
	struct rt *s = ctx;
	uint64_t now = now_ns();
	int rc;

	(void)reason;
	pthread_mutex_lock(&s->lock);
	rc = enqueue(s, o, bufs, n, off, len);
	if (rc == 0) {
		/* The link carries one request at a time at bw; the answer
		 * comes lat after the transfer. */
		if (s->busy_until < now)
			s->busy_until = now;
		s->busy_until += (uint64_t)((double)len * SEC / (double)s->c->backend.bw);
		s->q[s->tail - 1].at = s->busy_until + s->c->backend.lat_ns;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int srv_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct rt *s = ctx;

	(void)b;
	(void)reason;
	pthread_mutex_lock(&s->lock);
	sim_commit_ask(&s->cm, now_ns());
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* A request lands (the server thread, without the lock): the server keeps
 * a checksum of each block's data, then acknowledges it unstable. */
static void srv_land(struct rt *s, struct req *r, uint64_t txn)
{
	struct writer *w = &s->w[r->writer];
	uint64_t bs = s->c->wr[r->writer].bs;
	size_t i;

	for (i = 0; i < r->n; i++) {
		us_buf *b = r->bufs[i];
		uint64_t k = us_buf_offset(b) / bs;

		if (k < w->nblocks) {
			w->blk[k].sum = checksum(us_buf_data(b), (size_t)us_buf_length(b));
			w->blk[k].txn = txn;
			w->blk[k].durable = false;
			sim_landq_push(&s->land, r->writer, k, txn); /* the server thread */
		}
		us_buf_write_done(b, US_WRITE_UNSTABLE, txn, 0);
	}
	free(r->bufs);
}

/* A commit covering transactions up to txn ends (the server thread). */
static void srv_commit_end(struct rt *s, uint64_t txn, bool *hit)
{
	const struct sim_landed *l;

	while ((l = sim_landq_pop(&s->land, txn))) {
		struct block *b = &s->w[l->writer].blk[l->k];

		if (b->txn == l->txn) {
			b->durable = true;
			hit[s->c->wr[l->writer].domain] = true;
		}
	}
}

static void *srv_main(void *arg)
{
	struct rt *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		uint64_t now = now_ns(), t;
		struct timespec ts;

		if (s->head < s->tail && s->q[s->head].at <= now) {
			struct req r = s->q[s->head++];
			uint64_t txn = ++s->cm.txn;

			pthread_mutex_unlock(&s->lock);
			srv_land(s, &r, txn);
			pthread_mutex_lock(&s->lock);
			sim_commit_acked(&s->cm, r.len, now);
			continue;
		}
		if (sim_commit_due(&s->cm, now)) {
			uint64_t txn = s->cm.covers;
			bool *hit = s->hit_srv;
			int d;

			memset(hit, 0, (size_t)s->c->ndom * sizeof(*hit));
			pthread_mutex_unlock(&s->lock);
			srv_commit_end(s, txn, hit);
			if (txn)
				us_backend_commit_done(s->bk, txn);
			pthread_mutex_lock(&s->lock);
			for (d = 0; d < s->c->ndom; d++)
				s->dom_commits[d] += hit[d];
			sim_commit_end(&s->cm);
			sim_commit_again(&s->cm, now_ns());
			continue;
		}
		if (sim_commit_periodic(&s->cm, now))
			continue;
		t = sim_commit_next(&s->cm);
		if (s->head < s->tail && s->q[s->head].at < t)
			t = s->q[s->head].at;
		ts.tv_sec = (time_t)(t / SEC);
		ts.tv_nsec = (long)(t % SEC);
		pthread_cond_timedwait(&s->cond, &s->lock, &ts);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The file                                                                   */

static int file_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		      uint64_t len, enum us_reason reason)
{
	struct rt *s = ctx;
	int rc;

	(void)reason;
	pthread_mutex_lock(&s->lock);
	rc = enqueue(s, o, bufs, n, off, len);
	if (rc == 0)
		pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int file_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct rt *s = ctx;

	(void)b;
	(void)reason;
	pthread_mutex_lock(&s->lock);
	s->sync_asked = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* pwritev() of all of iov[0..n) at off, through short writes. */
static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t got = pwritev(fd, iov, n, (off_t)off);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -EIO;
		off += (uint64_t)got;
		while (n > 0 && (size_t)got >= iov->iov_len) {
			got -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + got;
			iov->iov_len -= (size_t)got;
		}
	}
	return 0;
}

/* How a request was written. */
enum io_path {
	IO_BUFFERED = 0, /* through the page cache */
	IO_DIRECT = 1,	 /* O_DIRECT from the payloads themselves */
	IO_BOUNCE = 2,	 /* O_DIRECT from an aligned copy: payloads not aligned */
};

/* A worker's aligned copy buffer, made on first use. */
struct bounce {
	void *p;
};

/* Writes one request (a worker, without the lock). Returns 0 or -errno;
 * *path tells how. */
static int file_write(struct rt *s, struct req *r, struct bounce *bb, enum io_path *path)
{
	struct iovec iov[64];
	uint64_t off = s->w[r->writer].base + r->off;
	uintptr_t addr = 0, lens = 0;
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	*path = s->dfd >= 0 && !s->direct_failed ? IO_DIRECT : IO_BUFFERED;
	pthread_mutex_unlock(&s->lock);
	for (i = 0; i < r->n; i++) {
		addr |= (uintptr_t)us_buf_data(r->bufs[i]);
		lens |= (uintptr_t)us_buf_length(r->bufs[i]);
	}
	if ((off | r->len) % DIO_ALIGN)
		*path = IO_BUFFERED;
	else if (*path == IO_DIRECT && (addr | lens) % DIO_ALIGN)
		*path = IO_BOUNCE;
	if (*path == IO_BOUNCE && !bb->p) {
		if (posix_memalign(&bb->p, DIO_ALIGN, BOUNCE_BYTES))
			*path = IO_BUFFERED;
	}
	if (*path == IO_BOUNCE) {
		/* The run, through the copy buffer a piece at a time. */
		uint64_t done = 0;

		for (i = 0; i < r->n && rc == 0; i++) {
			const char *p = us_buf_data(r->bufs[i]);
			uint64_t left = us_buf_length(r->bufs[i]);

			while (left && rc == 0) {
				size_t n = left < BOUNCE_BYTES ? (size_t)left : BOUNCE_BYTES;

				memcpy(bb->p, p, n);
				iov[0].iov_base = bb->p;
				iov[0].iov_len = n;
				rc = pwritev_all(s->dfd, iov, 1, off + done);
				p += n;
				left -= n;
				done += n;
			}
		}
	} else {
		for (i = 0; i < r->n && rc == 0;) {
			uint64_t at = off + (us_buf_offset(r->bufs[i]) - r->off);
			int n = 0;

			for (; i < r->n && n < 64; i++, n++) {
				iov[n].iov_base = us_buf_data(r->bufs[i]);
				iov[n].iov_len = (size_t)us_buf_length(r->bufs[i]);
			}
			rc = pwritev_all(*path == IO_DIRECT ? s->dfd : s->fd, iov, n, at);
		}
	}
	if (rc == -EINVAL && *path != IO_BUFFERED) {
		/* Accepted at open, refused at the write: buffered from now on,
		 * this request again from its start. */
		pthread_mutex_lock(&s->lock);
		s->direct_failed = true;
		s->dio_errno = EINVAL;
		pthread_mutex_unlock(&s->lock);
		return file_write(s, r, bb, path);
	}
	return rc;
}

static void *file_worker(void *arg)
{
	struct rt *s = arg;
	struct bounce bb = { NULL };

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct req r;
		uint64_t t, seq;
		enum io_path path;
		size_t i;
		int rc;

		while (!s->stop && s->head == s->tail)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->head == s->tail)
			break;
		r = s->q[s->head++];
		t = now_ns();
		if (!s->first_io)
			s->first_io = t;
		pthread_mutex_unlock(&s->lock);
		rc = file_write(s, &r, &bb, &path);
		pthread_mutex_lock(&s->lock);
		/* Taken after the write returned: an fdatasync started later
		 * covers it. */
		seq = ++s->wseq;
		s->last_io = now_ns();
		if (rc == 0) {
			s->bytes += r.len;
			s->direct_bytes += path != IO_BUFFERED ? r.len : 0;
			s->bounce_bytes += path == IO_BOUNCE ? r.len : 0;
			s->touched[s->c->wr[r.writer].domain] = true;
		} else if (!s->io_errno) {
			s->io_errno = -rc;
		}
		pthread_mutex_unlock(&s->lock);
		/* A failed write is declared lost: it is counted in lost_bytes
		 * and reported to the final sync, rather than retried forever. */
		for (i = 0; i < r.n; i++)
			us_buf_write_done(r.bufs[i], rc ? US_WRITE_LOST : US_WRITE_UNSTABLE, seq,
					  rc);
		free(r.bufs);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	free(bb.p);
	return NULL;
}

/* The committer: one fdatasync at a time, each covering the writes that
 * had returned when it started; asks that come meanwhile make one more. */
static void *file_committer(void *arg)
{
	struct rt *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		bool *hit = s->hit_file;
		size_t nd = (size_t)s->c->ndom * sizeof(*hit);
		uint64_t seq;
		int d, rc;

		if (!s->sync_asked) {
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		s->sync_asked = false;
		seq = s->wseq;
		memcpy(hit, s->touched, nd);
		memset(s->touched, 0, nd);
		s->cm.commits++;
		pthread_mutex_unlock(&s->lock);
		rc = fdatasync(s->fd) ? errno : 0;
		if (rc == 0 && seq)
			us_backend_commit_done(s->bk, seq);
		pthread_mutex_lock(&s->lock);
		if (rc == 0) {
			for (d = 0; d < s->c->ndom; d++)
				s->dom_commits[d] += hit[d];
		} else {
			/* Nothing is reported durable: ask again. */
			if (!s->io_errno)
				s->io_errno = rc;
			s->sync_asked = true;
			memcpy(s->touched, hit, nd);
			pthread_mutex_unlock(&s->lock);
			sleep_until(now_ns() + 100 * MS);
			pthread_mutex_lock(&s->lock);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static int file_open(struct rt *s, const char *path, char *err, size_t len)
{
	bool fits = true;
	int i;

	s->fd = open(path, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
	if (s->fd < 0) {
		snprintf(err, len, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	for (i = 0; i < s->c->nwr; i++)
		fits = fits && s->c->wr[i].bs % DIO_ALIGN == 0;
	s->dfd = -1;
	if (fits) {
		s->dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (s->dfd < 0)
			s->dio_errno = errno;
	}
	return 0;
}

/* Reads the file back: the bytes of the blocks that differ from the
 * pattern, per writer. */
static int file_verify(struct rt *s, char *err, size_t len)
{
	const struct sim_config *c = s->c;
	uint64_t maxbs = 0;
	unsigned char *got, *want;
	int i, rc = 0;

	for (i = 0; i < c->nwr; i++)
		if (c->wr[i].bs > maxbs)
			maxbs = c->wr[i].bs;
	got = malloc((size_t)maxbs);
	want = malloc((size_t)maxbs);
	if (!got || !want) {
		snprintf(err, len, "no memory to read the file back");
		rc = -1;
	}
	for (i = 0; i < c->nwr && rc == 0; i++) {
		struct writer *w = &s->w[i];
		uint64_t off, bs = c->wr[i].bs;

		for (off = 0; off < w->off; off += bs) {
			size_t n = (size_t)(w->off - off < bs ? w->off - off : bs), have = 0;

			while (have < n) {
				ssize_t k = pread(s->fd, got + have, n - have,
						  (off_t)(w->base + off + have));

				if (k < 0 && errno == EINTR)
					continue;
				if (k <= 0)
					break;
				have += (size_t)k;
			}
			pattern_fill(w->key, off, want, n);
			if (have < n || memcmp(got, want, n))
				w->lost += n;
		}
	}
	free(got);
	free(want);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Writers                                                                    */

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct rt *s = w->rt;
	const struct sim_writer *cw = &s->c->wr[w->id];
	enum sim_policy pol = s->c->policy;

	sleep_until(s->t0 + cw->start_ns);
	w->start = now_ns();
	while (w->off < cw->bytes) {
		uint64_t bs = cw->bytes - w->off < cw->bs ? cw->bytes - w->off : cw->bs, t, pause;
		us_buf *b;
		int rc;

		if (pol == SIM_POLICY_NAIVE) {
			/* When full: flush everything, ask for a commit, wait for
			 * reclaim; again at each retry, as in virtual time. */
			t = now_ns();
			while ((rc = us_buf_get(w->o, w->off, bs, US_GET_NOWAIT, &b)) == -EAGAIN) {
				us_object_flush(w->o, 0, US_UNLIMITED, 0);
				us_object_commit(w->o);
				pause = 0;
				if (us_object_reclaim(w->o, bs, &pause) == -ENOMEM) {
					rc = -ENOMEM;
					break;
				}
				sleep_until(now_ns() + (pause ? pause : MS));
			}
			if (now_ns() - t > MS)
				sim_pauses_record(&w->pauses, now_ns() - t);
		} else {
			rc = us_buf_get(w->o, w->off, bs, 0, &b);
		}
		if (rc < 0) {
			if (rc == -ENOMEM)
				w->enomem++;
			else
				w->err = rc;
			break;
		}
		pattern_fill(w->key, w->off, us_buf_data(b), (size_t)bs);
		/* With rate=, copying the block takes until it is due. */
		if (cw->rate)
			sleep_until(w->start +
				    (uint64_t)((double)(w->off + bs) * SEC / (double)cw->rate));
		if (pol == SIM_POLICY_UNSTABLE) {
			t = now_ns();
			rc = us_buf_dirty(b, NULL); /* the blocking form: pauses here */
			sim_pauses_record(&w->pauses, now_ns() - t);
		} else {
			rc = us_buf_dirty(b, &pause); /* not throttled */
		}
		us_buf_put(b);
		if (rc < 0) {
			w->err = rc;
			break;
		}
		w->off += bs;
	}
	w->done = now_ns();
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                    */

/* VmHWM of /proc/self/status, in bytes; 0 when unknown. */
static uint64_t peak_rss(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* Resets VmHWM to the current RSS (Linux 4.0 and later), when allowed. */
static void reset_peak_rss(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");

	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

int sim_realtime_check(const struct sim_config *c, char *err, size_t len)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0, hold = 0;
	int i;

	if (c->nbk || c->nstripe) {
		snprintf(err, len,
			 "--realtime runs one backend: named backends and --stripe are "
			 "for virtual time only");
		return -1;
	}
	for (i = 0; i < c->nwr; i++) {
		uint64_t h = c->wr[i].bytes;
		int d;

		for (d = c->wr[i].domain; d >= 0; d = c->dom[d].parent)
			if (c->dom[d].max < h)
				h = c->dom[d].max;
		hold += h;
	}
	if (c->memory < hold)
		hold = c->memory;
	if (phys && hold > phys / 2) {
		snprintf(err, len,
			 "--realtime: this run may hold %.1f GiB of payload in memory, more than "
			 "half of this machine's %.1f GiB; give domains a max, or --memory",
			 (double)hold / (1 << 30), (double)phys / (1 << 30));
		return -1;
	}
	return 0;
}

#define FAIL(...) (snprintf(err, len, __VA_ARGS__), rc = -1)

/* Frees the run's state and its arrays (those allocated so far). */
static void rt_free(struct rt *s)
{
	if (!s)
		return;
	free(s->w);
	free(s->flushes);
	free(s->dom_commits);
	free(s->touched);
	free(s->hit_srv);
	free(s->hit_file);
	free(s);
}

/* The run's state with its arrays per writer and per domain (nd of them),
 * or NULL without memory. */
static struct rt *rt_alloc(const struct sim_config *c, size_t nd)
{
	struct rt *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->w = calloc(c->nwr ? (size_t)c->nwr : 1, sizeof(*s->w));
	s->flushes = calloc(nd, sizeof(*s->flushes));
	s->dom_commits = calloc(nd, sizeof(*s->dom_commits));
	s->touched = calloc(nd, sizeof(*s->touched));
	s->hit_srv = calloc(nd, sizeof(*s->hit_srv));
	s->hit_file = calloc(nd, sizeof(*s->hit_file));
	if (!s->w || !s->flushes || !s->dom_commits || !s->touched || !s->hit_srv || !s->hit_file) {
		rt_free(s);
		return NULL;
	}
	return s;
}

/* The lock and the condition (on the monotonic clock, as the threads'
 * deadlines are), then the run's start: the peak RSS is reset and the
 * commit interval counts from now. */
static void rt_start(struct rt *s, const struct sim_config *c, const char *file_path)
{
	pthread_condattr_t ca;

	s->c = c;
	s->file = file_path != NULL;
	s->fd = s->dfd = -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&s->lock, NULL);
	reset_peak_rss(); /* when refused, VmHWM covers the process's life */
	s->t0 = now_ns();
	sim_commit_init(&s->cm, &c->backend, s->t0 + c->backend.commit_interval);
}

/* The file if any, the engine in real time with its backend (the file or
 * the simulated server) and the config's domains. */
static int rt_engine_create(struct rt *s, us_domain **dom, const char *file_path, char *err,
			    size_t len)
{
	const struct sim_config *c = s->c;
	struct us_backend_ops ops = { .size = sizeof(ops) };
	struct us_engine_options opts;
	int rc = 0;

	if (s->file && file_open(s, file_path, err, len))
		return -1;
	ops.flush = s->file ? file_flush : srv_flush;
	ops.sync = s->file ? file_sync : srv_sync;
	us_engine_options_init(&opts);
	opts.memory_bytes = c->memory;
	opts.flusher_threads = 2;
	if (us_engine_create(&opts, &s->e))
		return FAIL("cannot create the engine");
	if (us_engine_set_param(s->e, US_PARAM_FORCE_COMMIT, c->policy == SIM_POLICY_UNSTABLE) ||
	    us_engine_set_param(s->e, US_PARAM_MAX_FLUSH_BYTES, c->backend.rpc) ||
	    us_backend_create(s->e, &ops, s, &s->bk) ||
	    us_backend_set_max_inflight(s->bk, c->backend.rpcs * c->backend.rpc))
		return FAIL("cannot set up the backend");
	if (sim_domains_create(s->e, c, dom, err, len))
		return -1;
	return rc;
}

/* Each writer's object, its pattern key and its region of the file (each
 * region aligned); with the simulated server, its blocks' records too. */
static int rt_writers_create(struct rt *s, us_domain **dom, char *err, size_t len)
{
	const struct sim_config *c = s->c;
	int i, rc = 0;

	for (i = 0; i < c->nwr; i++) {
		struct writer *w = &s->w[i];

		w->rt = s;
		w->id = i;
		w->key = pattern_key(c->seed, i);
		if (i)
			w->base = (s->w[i - 1].base + c->wr[i - 1].bytes + REGION_ALIGN - 1) /
				  REGION_ALIGN * REGION_ALIGN;
		if (!s->file) {
			w->nblocks = (c->wr[i].bytes + c->wr[i].bs - 1) / c->wr[i].bs;
			w->blk = calloc(w->nblocks, sizeof(*w->blk));
		}
		if ((!s->file && !w->blk) ||
		    us_object_create(s->bk, dom[c->wr[i].domain], (void *)(intptr_t)i, &w->o))
			return FAIL("cannot create writer %d", i);
	}
	return rc;
}

/* The backend's threads: the file's workers (one per request in flight, at
 * most MAX_WORKERS) and its committer, or the simulated server's. */
static int rt_server_start(struct rt *s, char *err, size_t len)
{
	const struct sim_config *c = s->c;
	int i, rc = 0;

	if (s->file) {
		s->nworkers =
			c->backend.rpcs < MAX_WORKERS ? (unsigned)c->backend.rpcs : MAX_WORKERS;
		for (i = 0; i < (int)s->nworkers; i++)
			if (pthread_create(&s->workers[i], NULL, file_worker, s)) {
				s->nworkers = (unsigned)i;
				return FAIL("cannot start the file's workers");
			}
		if (pthread_create(&s->server, NULL, file_committer, s))
			return FAIL("cannot start the committer");
	} else if (pthread_create(&s->server, NULL, srv_main, s)) {
		return FAIL("cannot start the server");
	}
	s->server_started = true;
	return rc;
}

/* The writers' threads, started together and joined: the writers' end is
 * the last one's, and a writer's unexpected error fails the run. */
static int rt_writers_run(struct rt *s, struct sim_result *r, char *err, size_t len)
{
	const struct sim_config *c = s->c;
	uint64_t end = 0;
	int i, started, rc = 0;

	for (started = 0; started < c->nwr; started++)
		if (pthread_create(&s->w[started].thread, NULL, writer_main, &s->w[started])) {
			FAIL("cannot start writer %d", started);
			break;
		}
	for (i = 0; i < started; i++) {
		pthread_join(s->w[i].thread, NULL);
		if (s->w[i].done > end)
			end = s->w[i].done;
		if (s->w[i].err && rc == 0)
			FAIL("writer %d: %s", i, us_strerror(s->w[i].err));
	}
	r->end_ns = end > s->t0 ? end - s->t0 : 0;
	return rc;
}

/* The final sync: everything written must reach the server, durably. An
 * error means writes were lost: counted in the results. rc is the run's so
 * far; data left behind fails a run that had not failed yet. */
static int rt_final_sync(struct rt *s, struct sim_result *r, int rc, char *err, size_t len)
{
	struct us_domain_stats st = { .size = sizeof(st) };

	us_domain_sync(us_engine_root(s->e));
	us_domain_stats(us_engine_root(s->e), &st);
	r->peak_rss = peak_rss();
	r->peak_charged = st.peak_charged_bytes;
	if (st.dirty_bytes + st.writeback_bytes + st.unstable_bytes && rc == 0)
		FAIL("the final sync left data behind");
	return rc;
}

/* The backend's threads are told to stop, and joined. */
static void rt_server_stop(struct rt *s)
{
	int i;

	if (s->server_started || s->nworkers) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		for (i = 0; i < (int)s->nworkers; i++)
			pthread_join(s->workers[i], NULL);
		if (s->server_started)
			pthread_join(s->server, NULL);
	}
}

/* With the simulated server: the bytes of writer w's blocks (of bs) that
 * are not durable there, or durable with another checksum than the pattern's. */
static uint64_t rt_srv_lost(const struct writer *w, uint64_t bs)
{
	unsigned char *want = malloc((size_t)bs);
	uint64_t k, lost = 0;

	for (k = 0; k * bs < w->off; k++) {
		size_t n = (size_t)(w->off - k * bs < bs ? w->off - k * bs : bs);
		bool ok = want && w->blk[k].txn && w->blk[k].durable;

		if (ok) {
			pattern_fill(w->key, k * bs, want, n);
			ok = checksum(want, n) == w->blk[k].sum;
		}
		if (!ok)
			lost += n;
	}
	free(want);
	return lost;
}

/* Each writer's figures: its bytes, time and pauses, the bytes it lost, and
 * its throughput against its ceiling. */
static void rt_writer_results(struct rt *s, struct sim_result *r)
{
	const struct sim_config *c = s->c;
	int i;

	for (i = 0; i < c->nwr; i++) {
		struct sim_writer_result *wr = &r->wr[i];
		struct writer *w = &s->w[i];

		wr->bytes = w->off;
		wr->done_ns = w->done - w->start;
		wr->enomem = w->enomem;
		wr->max_pause_ns = w->pauses.max;
		wr->p99_pause_ns = sim_pauses_p99(&w->pauses);
		wr->pauses = w->pauses.n;
		if (s->file)
			wr->lost_bytes = w->lost; /* file_verify() */
		else
			wr->lost_bytes += rt_srv_lost(w, c->wr[i].bs);
		wr->throughput = wr->done_ns ? (double)wr->bytes / ((double)wr->done_ns / SEC) : 0;
		/* The writer's ceiling: its own rate, and the backend's, which
		 * for a file is what it took while it was busy. */
		wr->ceiling = c->wr[i].rate ? c->wr[i].rate : UINT64_MAX;
		if (!s->file && c->backend.bw < wr->ceiling)
			wr->ceiling = c->backend.bw;
		if (s->file && s->last_io > s->first_io) {
			uint64_t fbw = (uint64_t)((double)s->bytes /
						  ((double)(s->last_io - s->first_io) / SEC));

			if (fbw < wr->ceiling)
				wr->ceiling = fbw;
		}
		if (wr->ceiling == UINT64_MAX)
			wr->ceiling = 0;
		wr->ratio = wr->ceiling ? wr->throughput / (double)wr->ceiling : 0;
	}
}

/* The file's figures: its bytes, those written with O_DIRECT, and a note on
 * how it was written (O_DIRECT or not, and why) and on an I/O error. */
static void rt_file_results(struct rt *s, struct sim_result *r)
{
	r->file_bytes = s->bytes;
	r->direct_bytes = s->direct_bytes;
	if (s->dfd < 0 && s->dio_errno)
		snprintf(r->io_note, sizeof(r->io_note),
			 "O_DIRECT refused by the filesystem (%s): buffered writes",
			 strerror(s->dio_errno));
	else if (s->dfd < 0)
		snprintf(r->io_note, sizeof(r->io_note),
			 "no O_DIRECT: a writer's bs is not a multiple of %u: "
			 "buffered writes",
			 DIO_ALIGN);
	else if (s->direct_failed)
		snprintf(r->io_note, sizeof(r->io_note),
			 "O_DIRECT refused at a write (%s): buffered from then on, "
			 "O_DIRECT for %llu of %llu bytes",
			 strerror(s->dio_errno), (unsigned long long)s->direct_bytes,
			 (unsigned long long)s->bytes);
	else if (s->direct_bytes == s->bytes && !s->bounce_bytes)
		snprintf(r->io_note, sizeof(r->io_note), "O_DIRECT for every write");
	else
		snprintf(r->io_note, sizeof(r->io_note),
			 "O_DIRECT for %llu of %llu bytes, %llu of them through an "
			 "aligned copy (payloads not 4096-aligned)",
			 (unsigned long long)s->direct_bytes, (unsigned long long)s->bytes,
			 (unsigned long long)s->bounce_bytes);
	if (s->io_errno) {
		size_t n = strlen(r->io_note);

		snprintf(r->io_note + n, sizeof(r->io_note) - n, "; I/O error: %s",
			 strerror(s->io_errno));
	}
}

/* Everything the run set up goes, whether it finished or not, and its wall
 * time is taken; rc is the run's so far, and becomes -1 if the engine
 * still held data at the end. */
static int rt_fini(struct rt *s, struct sim_result *r, int rc, char *err, size_t len)
{
	const struct sim_config *c = s->c;
	int i;

	/* Everything is clean: the engine frees its payloads. When the sync
	 * could not finish, the engine's memory goes with the process. */
	if (s->e && us_engine_destroy(s->e) != 0 && rc == 0)
		FAIL("the final sync left data behind");
	for (i = 0; i < c->nwr; i++) {
		sim_pauses_free(&s->w[i].pauses);
		free(s->w[i].blk);
	}
	while (s->head < s->tail)
		free(s->q[s->head++].bufs);
	free(s->q);
	sim_landq_free(&s->land);
	if (s->dfd >= 0)
		close(s->dfd);
	if (s->fd >= 0)
		close(s->fd);
	r->wall_seconds = (double)(now_ns() - s->t0) / 1e9;
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	rt_free(s);
	return rc;
}

int sim_run_realtime(const struct sim_config *c, const char *file_path, struct sim_result *r,
		     char *err, size_t len)
{
	size_t nd = c->ndom ? (size_t)c->ndom : 1;
	struct rt *s;
	us_domain **dom;
	int i, rc;

	if (sim_result_alloc(r, c, err, len) || sim_realtime_check(c, err, len))
		return -1;
	s = rt_alloc(c, nd);
	dom = calloc(nd, sizeof(*dom));
	if (!s || !dom) {
		rt_free(s);
		free(dom);
		snprintf(err, len, "out of memory");
		return -1;
	}
	rt_start(s, c, file_path);
	rc = rt_engine_create(s, dom, file_path, err, len);
	if (!rc)
		rc = rt_writers_create(s, dom, err, len);
	if (!rc)
		rc = rt_server_start(s, err, len);
	if (!rc) {
		rc = rt_writers_run(s, r, err, len);
		rc = rt_final_sync(s, r, rc, err, len);
	}
	rt_server_stop(s);
	if (rc == 0 && s->file && file_verify(s, err, len))
		rc = -1;
	if (rc == 0) {
		rt_writer_results(s, r);
		sim_result_fill(r, c, dom, &s->bk, 1, s->dom_commits, s->flushes, s->cm.commits);
		for (i = 0; i < c->ndom; i++)
			r->dom[i].over_max = r->dom[i].peak_charged > c->dom[i].max;
		if (s->file)
			rt_file_results(s, r);
	}
	rc = rt_fini(s, r, rc, err, len);
	free(dom);
	return rc;
}
