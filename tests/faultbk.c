/*
 * The fault-injecting test backend: see faultbk.h.
 *
 * SPDX-License-Identifier: MIT
 */
#include "faultbk.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IT_WRITE, IT_COMMIT };

struct item {
	int kind;
	uint64_t at;
	/* IT_WRITE */
	us_buf *b;
	size_t obj;
	uint64_t block;
	unsigned epoch;
	uint64_t hash;
	unsigned char *bytes;
	/* IT_COMMIT: obj == SIZE_MAX for a backend-wide sync */
	us_object *o;
};

/* Acknowledged UNSTABLE: the server's cache, durable once committed. */
struct cached {
	size_t obj;
	uint64_t block, seq, hash;
	unsigned char *bytes;
};

struct fb {
	us_engine *e;
	us_backend *b;
	struct fb_config c;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t rng;
	struct item *q;
	size_t nq, capq;
	struct cached *cache;
	size_t ncache, capcache;
	uint64_t txn, committed;
	unsigned epoch;
	bool calm, stop;
	uint64_t stall_until;
	unsigned stall_left;
	uint64_t *dhash;       /* nobj * nblocks */
	unsigned char *dbytes; /* nobj * nblocks * bs, keep_bytes */
	pthread_t *threads;
	struct fb_stats st;
};

uint64_t fb_hash(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h | 1; /* never 0: 0 means never written */
}

uint64_t fb_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rnd(struct fb *f)
{
	return fb_rand(&f->rng);
}

static bool chance(struct fb *f, unsigned pm)
{
	return !f->calm && pm && rnd(f) % 1000 < pm;
}

static void die(const char *what)
{
	fprintf(stderr, "faultbk: %s\n", what);
	abort();
}

static void push(struct fb *f, struct item it)
{
	if (f->nq == f->capq) {
		f->capq = f->capq ? 2 * f->capq : 256;
		f->q = realloc(f->q, f->capq * sizeof(*f->q));
		if (!f->q)
			die("out of memory");
	}
	f->q[f->nq++] = it;
	pthread_cond_broadcast(&f->cond);
}

static void make_durable(struct fb *f, size_t obj, uint64_t block, uint64_t hash,
			 const unsigned char *bytes)
{
	size_t k = obj * f->c.nblocks + block;

	f->dhash[k] = hash;
	if (f->dbytes && bytes)
		memcpy(f->dbytes + k * f->c.bs, bytes, f->c.bs);
	f->st.durable_bytes += f->c.bs;
}

/* A newer write of a block supersedes what the cache held for it. */
static void supersede(struct fb *f, size_t obj, uint64_t block)
{
	size_t i;

	for (i = 0; i < f->ncache;) {
		if (f->cache[i].obj == obj && f->cache[i].block == block) {
			free(f->cache[i].bytes);
			f->cache[i] = f->cache[--f->ncache];
		} else {
			i++;
		}
	}
}

static void commit_cache(struct fb *f, size_t obj, uint64_t seq)
{
	size_t i;

	for (i = 0; i < f->ncache;) {
		struct cached *c = &f->cache[i];

		if (c->seq <= seq && (obj == SIZE_MAX || c->obj == obj)) {
			make_durable(f, c->obj, c->block, c->hash, c->bytes);
			free(c->bytes);
			*c = f->cache[--f->ncache];
		} else {
			i++;
		}
	}
}

/* Delivers a write; f->lock held. */
static void deliver_write(struct fb *f, struct item *it)
{
	int rc;

	if (chance(f, f->c.error_pm)) {
		f->st.errors++;
		rc = us_buf_write_done(it->b, US_WRITE_ERROR, 0, -EIO);
	} else if (chance(f, f->c.unstable_pm)) {
		uint64_t seq = ++f->txn;

		f->st.unstable++;
		rc = us_buf_write_done(it->b, US_WRITE_UNSTABLE, seq, 0);
		if (it->epoch == f->epoch) {
			supersede(f, it->obj, it->block);
			if (f->ncache == f->capcache) {
				f->capcache = f->capcache ? 2 * f->capcache : 256;
				f->cache = realloc(f->cache, f->capcache * sizeof(*f->cache));
				if (!f->cache)
					die("out of memory");
			}
			f->cache[f->ncache++] =
				(struct cached){ it->obj, it->block, seq, it->hash, it->bytes };
			it->bytes = NULL;
		}
	} else {
		f->st.stable++;
		supersede(f, it->obj, it->block);
		make_durable(f, it->obj, it->block, it->hash, it->bytes);
		rc = us_buf_write_done(it->b, US_WRITE_STABLE, 0, 0);
	}
	if (rc != 0)
		die("us_buf_write_done failed");
	free(it->bytes);
}

static void deliver_commit(struct fb *f, struct item *it)
{
	if (it->epoch != f->epoch)
		return; /* the server restarted meanwhile: never completes */
	f->committed = f->txn;
	commit_cache(f, it->obj, f->txn);
	f->st.commit_done++;
	if (f->txn == 0)
		return;
	if (it->obj == SIZE_MAX)
		us_backend_commit_done(f->b, f->txn);
	else
		us_object_commit_done(it->o, f->txn);
}

static void server_restart(struct fb *f)
{
	size_t i;

	f->st.lost++;
	for (i = 0; i < f->ncache; i++)
		free(f->cache[i].bytes);
	f->ncache = 0;
	f->epoch++;
	if (us_backend_commit_lost(f->b) < 0)
		die("us_backend_commit_lost failed");
}

/* Takes item i out of the queue and delivers it; f->lock held. */
static void deliver(struct fb *f, size_t i)
{
	struct item it = f->q[i];

	f->q[i] = f->q[--f->nq];
	if (it.kind == IT_WRITE)
		deliver_write(f, &it);
	else
		deliver_commit(f, &it);
	if (chance(f, f->c.lost_pm))
		server_restart(f);
}

static int fb_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct fb *f = ctx;
	size_t id = (size_t)(uintptr_t)us_object_user(obj) - 1, i, now_n = 0;
	uint64_t now = us_engine_now(f->e);

	(void)offset;
	(void)reason;
	if (id >= f->c.nobj)
		die("object id out of range");
	pthread_mutex_lock(&f->lock);
	f->st.flushes++;
	if (chance(f, f->c.refuse_pm)) {
		f->st.refused++;
		pthread_mutex_unlock(&f->lock);
		return -EIO;
	}
	f->st.flushed_bytes += length;
	if (chance(f, f->c.short_pm)) {
		f->st.shorts++;
		now_n = 1 + (size_t)(rnd(f) % n);
	}
	for (i = 0; i < n; i++) {
		struct item it = { .kind = IT_WRITE, .b = bufs[i], .obj = id, .epoch = f->epoch };
		unsigned char *tmp;

		if (us_buf_length(bufs[i]) != f->c.bs || us_buf_offset(bufs[i]) % f->c.bs)
			die("buffer not one aligned block");
		it.block = us_buf_offset(bufs[i]) / f->c.bs;
		if (it.block >= f->c.nblocks)
			die("block out of range");
		tmp = malloc(f->c.bs);
		if (!tmp)
			die("out of memory");
		if (f->c.snapshot)
			f->c.snapshot(f->c.snapshot_ctx, bufs[i], tmp);
		else if (us_buf_data(bufs[i]))
			memcpy(tmp, us_buf_data(bufs[i]), f->c.bs);
		else
			memset(tmp, 0, f->c.bs);
		it.hash = fb_hash(tmp, f->c.bs);
		if (f->c.keep_bytes) {
			it.bytes = tmp;
		} else {
			free(tmp);
		}
		it.at = now + f->c.lat_ns + (f->c.jitter_ns ? rnd(f) % f->c.jitter_ns : 0);
		if (i < now_n)
			deliver_write(f, &it); /* inside the callback */
		else
			push(f, it);
	}
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int schedule_commit(struct fb *f, size_t obj, us_object *o)
{
	struct item it = { .kind = IT_COMMIT, .obj = obj };

	pthread_mutex_lock(&f->lock);
	it.epoch = f->epoch;
	f->st.commits++;
	if (chance(f, f->c.commit_fail_pm)) {
		f->st.commit_fails++;
		pthread_mutex_unlock(&f->lock);
		return -EIO;
	}
	it.at = us_engine_now(f->e) + f->c.commit_lat_ns;
	it.o = o;
	push(f, it);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static int fb_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct fb *f = ctx;

	(void)reason;
	return schedule_commit(f, (size_t)(uintptr_t)us_object_user(obj) - 1, obj);
}

static int fb_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	(void)b;
	(void)reason;
	return schedule_commit(ctx, SIZE_MAX, NULL);
}

static void *completer(void *arg)
{
	struct fb *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		if (!f->nq) {
			pthread_cond_wait(&f->cond, &f->lock);
			continue;
		}
		if (f->stall_left) {
			f->stall_left--;
			pthread_mutex_unlock(&f->lock);
			sched_yield();
			pthread_mutex_lock(&f->lock);
			continue;
		}
		deliver(f, (size_t)(rnd(f) % f->nq));
		if (chance(f, f->c.stall_pm)) {
			f->st.stalls++;
			f->stall_left = f->c.stall_picks;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

struct fb *fb_create(us_engine *e, const struct fb_config *c)
{
	struct us_backend_ops ops = { .size = sizeof(ops) };
	struct fb *f = calloc(1, sizeof(*f));
	unsigned i;

	if (!f)
		return NULL;
	f->e = e;
	f->c = *c;
	f->rng = c->seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->dhash = calloc(c->nobj * c->nblocks, sizeof(*f->dhash));
	if (c->keep_bytes)
		f->dbytes = calloc(c->nobj * c->nblocks, c->bs);
	if (!f->dhash || (c->keep_bytes && !f->dbytes))
		die("out of memory");
	ops.flush = fb_flush;
	ops.commit = c->with_commit ? fb_commit : NULL;
	ops.sync = fb_sync;
	if (us_backend_create(e, &ops, f, &f->b) != 0)
		die("us_backend_create failed");
	if (c->threads) {
		f->threads = calloc(c->threads, sizeof(*f->threads));
		for (i = 0; i < c->threads; i++)
			if (pthread_create(&f->threads[i], NULL, completer, f) != 0)
				die("pthread_create failed");
	}
	return f;
}

us_backend *fb_backend(struct fb *f)
{
	return f->b;
}

size_t fb_deliver(struct fb *f, uint64_t now_ns)
{
	size_t i, n = 0;

	pthread_mutex_lock(&f->lock);
	if (now_ns < f->stall_until) {
		pthread_mutex_unlock(&f->lock);
		return 0;
	}
	for (i = 0; i < f->nq;) {
		if (f->q[i].at <= now_ns) {
			/* Take a random due one: out of order within a step too. */
			size_t j = i + (size_t)(rnd(f) % (f->nq - i));

			if (f->q[j].at > now_ns)
				j = i;
			deliver(f, j);
			n++;
			if (chance(f, f->c.stall_pm)) {
				f->st.stalls++;
				f->stall_until = now_ns + f->c.stall_ns;
				break;
			}
			i = 0;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&f->lock);
	return n;
}

uint64_t fb_next(struct fb *f)
{
	uint64_t t = UINT64_MAX;
	size_t i;

	pthread_mutex_lock(&f->lock);
	for (i = 0; i < f->nq; i++)
		if (f->q[i].at < t)
			t = f->q[i].at;
	if (t != UINT64_MAX && t < f->stall_until)
		t = f->stall_until;
	pthread_mutex_unlock(&f->lock);
	return t;
}

size_t fb_queued(struct fb *f)
{
	size_t n;

	pthread_mutex_lock(&f->lock);
	n = f->nq;
	pthread_mutex_unlock(&f->lock);
	return n;
}

void fb_calm(struct fb *f)
{
	pthread_mutex_lock(&f->lock);
	f->calm = true;
	f->stall_until = 0;
	f->stall_left = 0;
	pthread_mutex_unlock(&f->lock);
}

uint64_t fb_durable_hash(struct fb *f, size_t obj, uint64_t block)
{
	uint64_t h;

	pthread_mutex_lock(&f->lock);
	h = f->dhash[obj * f->c.nblocks + block];
	pthread_mutex_unlock(&f->lock);
	return h;
}

const unsigned char *fb_durable_bytes(struct fb *f, size_t obj, uint64_t block)
{
	return f->dbytes ? f->dbytes + (obj * f->c.nblocks + block) * f->c.bs : NULL;
}

void fb_stats(struct fb *f, struct fb_stats *st)
{
	pthread_mutex_lock(&f->lock);
	*st = f->st;
	pthread_mutex_unlock(&f->lock);
}

void fb_destroy(struct fb *f)
{
	size_t i;

	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	for (i = 0; f->threads && i < f->c.threads; i++)
		pthread_join(f->threads[i], NULL);
	for (i = 0; i < f->nq; i++)
		free(f->q[i].bytes);
	for (i = 0; i < f->ncache; i++)
		free(f->cache[i].bytes);
	free(f->q);
	free(f->cache);
	free(f->dhash);
	free(f->dbytes);
	free(f->threads);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
