/*
 * Unstable data, the commit policy and reclaim without OOM (docs/guide.md),
 * against a simulated server in virtual time: the two seeds in miniature.
 *
 * SPDX-License-Identifier: MIT
 *
 * The server (struct srv) models what the seeds' servers do: a bandwidth
 * and a per-write latency; every write acknowledged as unstable with a
 * transaction number; a commit of everything acknowledged so far every
 * commit_interval, or when the client asks (sync callback), each taking
 * commit_lat; then commit_done(last transaction) to the client. One writer
 * behaves like dd: it dirties its buffers as fast as the engine lets it,
 * pausing when told, waiting at the dirty limit, and retrying a charge
 * that waits for reclaim after the time the engine gives.
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define MS  1000000ull
#define SEC 1000000000ull

struct wr {
	us_buf *b;
	uint64_t at;
	uint32_t ck; /* checksum of the bytes sent (payload buffers) */
};

/* What the server stores, per block of bs bytes (fault tests). */
struct store {
	uint64_t bs;
	size_t n;
	uint32_t *written, *durable;
	uint64_t *txn;
};

struct srv {
	us_engine *e;
	us_backend *bk;
	uint64_t bw, lat, commit_interval, commit_lat;
	struct wr *q;
	size_t head, tail, cap;
	uint64_t busy_until;
	uint64_t txn, committed;
	/* The commit running (until commit_end, covering commit_txn), the
	 * next periodic one, and whether the client asked for another. */
	bool committing, asked;
	uint64_t commit_end, commit_txn, next_periodic;
	uint64_t commits, syncs_asked, written;
	/* Faults, in per mille, from a deterministic generator. */
	uint64_t rng;
	unsigned fail_flush, fail_write, fail_sync_once, lose_writes;
	uint64_t flush_failed, write_failed, sync_failed;
	struct store *st;
};

static unsigned rnd(struct srv *s, unsigned n)
{
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((s->rng >> 33) % n);
}

static uint32_t cksum(const unsigned char *p, uint64_t len)
{
	uint32_t h = 2166136261u;
	uint64_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static int srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		     uint64_t len, enum us_reason reason)
{
	struct srv *s = ctx;
	uint64_t now = us_engine_now(s->e);
	size_t i;

	(void)o;
	(void)off;
	(void)len;
	(void)reason;
	if (s->fail_flush && rnd(s, 1000) < s->fail_flush) {
		s->flush_failed++;
		return -EIO; /* not started: the engine keeps the data dirty */
	}
	for (i = 0; i < n; i++) {
		uint64_t l = us_buf_length(bufs[i]);

		if (s->busy_until < now)
			s->busy_until = now;
		s->busy_until += l * SEC / s->bw;
		if (s->tail == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->q = realloc(s->q, s->cap * sizeof(*s->q));
			ck_assert_ptr_nonnull(s->q);
		}
		s->q[s->tail].b = bufs[i];
		s->q[s->tail].at = s->busy_until + s->lat;
		s->q[s->tail].ck = us_buf_data(bufs[i]) ? cksum(us_buf_data(bufs[i]), l) : 0;
		s->tail++;
	}
	return 0;
}

static void srv_start_commit(struct srv *s, uint64_t now)
{
	s->committing = true;
	s->commit_txn = s->txn;
	s->commit_end = now + s->commit_lat;
	s->commits++;
}

static int srv_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct srv *s = ctx;

	(void)b;
	(void)reason;
	if (s->fail_sync_once) {
		s->fail_sync_once = 0;
		s->sync_failed++;
		return -EIO;
	}
	s->syncs_asked++;
	if (s->committing)
		s->asked = true;
	else
		srv_start_commit(s, us_engine_now(s->e));
	return 0;
}

static void srv_init(struct srv *s, us_engine *e, uint64_t bw, uint64_t lat,
		     uint64_t commit_interval, uint64_t commit_lat)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = srv_flush, .sync = srv_sync };

	memset(s, 0, sizeof(*s));
	s->e = e;
	s->bw = bw;
	s->lat = lat;
	s->commit_interval = commit_interval;
	s->commit_lat = commit_lat;
	s->next_periodic = commit_interval;
	ck_assert_int_eq(us_backend_create(e, &ops, s, &s->bk), 0);
}

static uint64_t srv_next(const struct srv *s)
{
	uint64_t t = s->next_periodic;

	if (s->head < s->tail && s->q[s->head].at < t)
		t = s->q[s->head].at;
	if (s->committing && s->commit_end < t)
		t = s->commit_end;
	return t;
}

/* Everything the server does up to now. */
static void srv_run(struct srv *s, uint64_t now)
{
	while (s->head < s->tail && s->q[s->head].at <= now) {
		struct wr *w = &s->q[s->head++];
		us_buf *b = w->b;

		if (s->lose_writes) {
			tu_assert(us_buf_write_done(b, US_WRITE_LOST, 0, -EIO) == 0, "write_done");
			continue;
		}
		if (s->fail_write && rnd(s, 1000) < s->fail_write) {
			s->write_failed++;
			tu_assert(us_buf_write_done(b, US_WRITE_ERROR, 0, -EIO) == 0, "write_done");
			continue;
		}
		s->written += us_buf_length(b);
		++s->txn;
		if (s->st) {
			size_t k = (size_t)(us_buf_offset(b) / s->st->bs);

			s->st->written[k] = w->ck;
			s->st->txn[k] = s->txn;
		}
		tu_assert(us_buf_write_done(b, US_WRITE_UNSTABLE, s->txn, 0) == 0, "write_done");
	}
	if (s->committing && s->commit_end <= now) {
		s->committing = false;
		if (s->commit_txn > s->committed) {
			s->committed = s->commit_txn;
			if (s->st) {
				size_t k;

				for (k = 0; k < s->st->n; k++)
					if (s->st->txn[k] && s->st->txn[k] <= s->commit_txn)
						s->st->durable[k] = s->st->written[k];
			}
			tu_assert(us_backend_commit_done(s->bk, s->commit_txn) >= 0, "commit_done");
		}
		if (s->asked) {
			s->asked = false;
			srv_start_commit(s, now);
		}
	}
	if (now >= s->next_periodic) {
		if (!s->committing)
			srv_start_commit(s, now);
		s->next_periodic += s->commit_interval;
	}
}

struct run {
	uint64_t bytes, seconds_ns, enomem, peak_charged, max;
	uint64_t commits_asked, syncs, max_pause;
	double ratio;
};

/* One dd-like writer: bytes in bs-byte buffers through o; with region, it
 * writes [0, region) over and over, with payloads filled by pattern(). */
struct writer {
	us_object *o;
	us_domain *d;
	uint64_t total, bs, off, region;
	uint64_t wait_until, done_at, max_pause, enomem;
	bool gated, throttled, done;
};

static int pattern(uint64_t pass, uint64_t off)
{
	return (int)((pass * 131 + off / 4096 * 7 + 1) & 0xff);
}

/*
 * Runs the writers side by side in virtual time until each has written its
 * bytes or failed, asserting after every step that no domain on their
 * chains is above its max. Returns the time the last one finished.
 */
static uint64_t run_writers(struct srv *s, struct writer *w, int n)
{
	us_engine *e = s->e;
	uint64_t now = 0, next_poll = 0;
	int left = n, i;

	while (left) {
		uint64_t t = UINT64_MAX;
		bool acted = false;

		/* The host polls at the engine's deadline and after anything
		 * happened: completions, commits, its own dirtying. */
		srv_run(s, now);
		tu_assert(us_engine_poll(e, now, &next_poll) >= 0, "poll");
		for (i = 0; i < n; i++) {
			struct writer *x = &w[i];
			uint64_t pause = 0;
			us_buf *b;
			int rc;

			if (x->done)
				continue;
			if (now < x->wait_until) {
				if (x->wait_until < t)
					t = x->wait_until;
				continue;
			}
			acted = true;
			if (x->gated) {
				rc = us_object_balance(x->o, &pause);
				if (rc == -EAGAIN) {
					x->wait_until = now + pause;
					continue;
				}
				tu_assert(rc == 0, "balance %d", rc);
				x->gated = false;
			}
			rc = us_buf_get(x->o, x->region ? x->off % x->region : x->off, x->bs,
					(x->region ? 0 : US_GET_NODATA) | US_GET_NOWAIT, &b);
			if (rc == -EAGAIN) {
				rc = us_object_reclaim(x->o, x->bs, &pause);
				tu_assert(rc == -EAGAIN || rc == 0 || rc == -ENOMEM, "reclaim %d",
					  rc);
				x->wait_until = now + (pause ? pause : MS);
				continue;
			}
			if (rc == -ENOMEM) {
				x->enomem++;
				x->done = true;
				x->done_at = now;
				left--;
				continue;
			}
			tu_assert(rc == 1 || (rc == 0 && x->region), "get %d", rc);
			if (x->region)
				memset(us_buf_data(b),
				       pattern(x->off / x->region, x->off % x->region),
				       (size_t)x->bs);
			rc = us_buf_dirty(b, &pause);
			tu_assert(rc >= 0, "dirty %d", rc);
			tu_assert(us_buf_put(b) == 0, "put");
			x->off += x->bs;
			if (x->off >= x->total) {
				x->done = true;
				x->done_at = now;
				left--;
			}
			if (pause > x->max_pause)
				x->max_pause = pause;
			if (x->throttled) {
				x->gated = rc == US_DIRTY_OVER_LIMIT;
				x->wait_until = now + pause;
			}
		}
		for (i = 0; i < n; i++) {
			us_domain *a;

			for (a = w[i].d; a; a = us_domain_parent(a)) {
				struct us_domain_stats st = tu_stats(a);
				uint64_t max;

				us_domain_get_limit(a, US_LIMIT_MAX, &max);
				tu_assert(st.charged_bytes <= max,
					  "%s: charged %llu above max %llu", us_domain_name(a),
					  (unsigned long long)st.charged_bytes,
					  (unsigned long long)max);
			}
		}
		if (acted)
			continue; /* more may be possible at this same instant */
		if (srv_next(s) < t)
			t = srv_next(s);
		if (next_poll > now && next_poll < t)
			t = next_poll;
		tu_assert(t != UINT64_MAX && t > now, "stuck at %llu", (unsigned long long)now);
		now = t;
	}
	return now;
}

/* One writer of total bytes through o (domain d), and its figures. */
static void dd(struct srv *s, us_object *o, us_domain *d, uint64_t total, uint64_t bs,
	       bool throttled, struct run *r)
{
	struct writer w = { .o = o, .d = d, .total = total, .bs = bs, .throttled = throttled };
	struct us_backend_stats bst = { .size = sizeof(bst) };

	memset(r, 0, sizeof(*r));
	ck_assert_int_eq(us_domain_get_limit(d, US_LIMIT_MAX, &r->max), 0);
	run_writers(s, &w, 1);
	r->bytes = w.off;
	r->enomem = w.enomem;
	r->max_pause = w.max_pause;
	r->seconds_ns = w.done_at;
	r->peak_charged = tu_stats(d).peak_charged_bytes;
	r->ratio = w.done_at ? (double)w.off / ((double)w.done_at / SEC) / (double)s->bw : 0;
	ck_assert_int_eq(us_backend_stats(s->bk, &bst), 0);
	r->commits_asked = bst.commit_calls + bst.sync_calls;
	r->syncs = bst.commits_per_gib;
}

/* Lets the server and the engine finish everything, then checks nothing
 * pinned is left. */
static void drain_all(struct srv *s, us_domain *d)
{
	uint64_t now = us_engine_now(s->e), next = 0;
	int i;

	for (i = 0; i < 100000 && (tu_stats(d).dirty_bytes || tu_stats(d).writeback_bytes ||
				   tu_stats(d).unstable_bytes);
	     i++) {
		uint64_t t;

		srv_run(s, now);
		us_engine_poll(s->e, now, &next);
		t = srv_next(s);
		if (next > now && next < t)
			t = next;
		now = t > now ? t : now + MS;
	}
	ck_assert_uint_eq(tu_stats(d).dirty_bytes + tu_stats(d).writeback_bytes +
				  tu_stats(d).unstable_bytes,
			  0);
}

/* An engine, a server and one domain of the given max with its object. */
struct world {
	us_engine *e;
	struct srv s;
	us_domain *d;
	us_object *o;
};

static void world_init(struct world *w, uint64_t max, uint64_t bw)
{
	w->e = tu_engine(64ull << 30);
	srv_init(&w->s, w->e, bw, MS, 5 * SEC, 20 * MS);
	ck_assert_int_eq(us_domain_create(w->e, NULL, "dd", 0, &w->d), 0);
	ck_assert_int_eq(us_domain_set_limit(w->d, US_LIMIT_MAX, max), 0);
	ck_assert_int_eq(us_object_create(w->s.bk, w->d, NULL, &w->o), 0);
}

static void world_fini(struct world *w)
{
	drain_all(&w->s, w->d);
	tu_check(w->e);
	ck_assert_int_eq(us_engine_destroy(w->e), 0);
	free(w->s.q);
}

/*
 * The commit pipeline's room: a 64 MiB domain writing to a server of 1 GiB/s
 * whose commits take 50 ms. Data stays unstable one to two commit latencies,
 * so the default dirty threshold (20 %, 12.8 MiB) would hold the writer to
 * about 12.8 MiB per 75 ms. From a ratio, the threshold rises with the
 * measured pipeline, up to 31/32 of max; set in bytes, it stays as set, and
 * the same writer is slower.
 */
START_TEST(test_pipeline_room)
{
	uint64_t rate[2];
	int pass;

	for (pass = 0; pass < 2; pass++) {
		struct world w;
		struct run r;
		struct us_domain_limits st = { .size = sizeof(st) };

		w.e = tu_engine(64ull << 30);
		srv_init(&w.s, w.e, 1024 * MIB, MS, 5 * SEC, 50 * MS);
		ck_assert_int_eq(us_domain_create(w.e, NULL, "dd", 0, &w.d), 0);
		ck_assert_int_eq(us_domain_set_limit(w.d, US_LIMIT_MAX, 64 * MIB), 0);
		if (pass == 1)
			ck_assert_int_eq(
				us_domain_set_limit(w.d, US_LIMIT_DIRTY_BYTES, 64 * MIB / 5), 0);
		ck_assert_int_eq(us_object_create(w.s.bk, w.d, NULL, &w.o), 0);
		dd(&w.s, w.o, w.d, 256 * MIB, 256 * KIB, true, &r);
		ck_assert_uint_eq(r.enomem, 0);
		ck_assert_uint_le(r.peak_charged, 64 * MIB);
		ck_assert_int_eq(us_domain_effective_limits(w.d, &st), 0);
		if (pass == 0) {
			ck_assert_uint_gt(st.dirty_thresh_bytes, 64 * MIB / 5);
			ck_assert_uint_le(st.dirty_thresh_bytes, 64 * MIB - 64 * MIB / 32);
		} else {
			ck_assert_uint_eq(st.dirty_thresh_bytes, 64 * MIB / 5);
		}
		rate[pass] = r.bytes * SEC / r.seconds_ns;
		printf("pipeline room, dirty threshold %s: %llu MiB/s, threshold at the end %.1f "
		       "MiB\n",
		       pass ? "12.8 MiB in bytes" : "20 % (raised)",
		       (unsigned long long)(rate[pass] / MIB), (double)st.dirty_thresh_bytes / MIB);
		world_fini(&w);
	}
	ck_assert_uint_gt(rate[0], rate[1] + rate[1] / 2);
}
END_TEST

/*
 * Four domains of 32 MiB under a parent of 64 MiB (less than the sum),
 * each with a writer of 64 MiB: the parent's max holds at every step, and
 * every writer finishes.
 */
START_TEST(test_siblings_under_parent)
{
	struct world w;
	struct writer wr[4];
	us_domain *p;
	char name[8];
	uint64_t end;
	int i;

	w.e = tu_engine(64ull << 30);
	srv_init(&w.s, w.e, 100 * MIB, MS, 5 * SEC, 20 * MS);
	ck_assert_int_eq(us_domain_create(w.e, NULL, "p", 0, &p), 0);
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_MAX, 64 * MIB), 0);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		ck_assert_int_eq(us_domain_create(w.e, p, name, 0, &wr[i].d), 0);
		ck_assert_int_eq(us_domain_set_limit(wr[i].d, US_LIMIT_MAX, 32 * MIB), 0);
		ck_assert_int_eq(us_object_create(w.s.bk, wr[i].d, NULL, &wr[i].o), 0);
		wr[i].total = 64 * MIB;
		wr[i].bs = 256 * KIB;
		wr[i].throttled = true;
	}
	end = run_writers(&w.s, wr, 4);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_eq(wr[i].enomem, 0);
		ck_assert_uint_eq(wr[i].off, 64 * MIB);
	}
	ck_assert_uint_le(tu_stats(p).peak_charged_bytes, 64 * MIB);
	fprintf(stderr,
		"siblings: 4 x 64 MiB through 4 x 32 MiB under 64 MiB in %.2f s (%.1f %% of the "
		"backend), writers done at %.2f %.2f %.2f %.2f s\n",
		(double)end / SEC, 100.0 * (256.0 * MIB) / ((double)end / SEC) / (100.0 * MIB),
		(double)wr[0].done_at / SEC, (double)wr[1].done_at / SEC,
		(double)wr[2].done_at / SEC, (double)wr[3].done_at / SEC);
	w.d = p;
	world_fini(&w);
}
END_TEST

/* Moves virtual time to the next event, delivering and polling. */
static uint64_t advance(struct srv *s, uint64_t now)
{
	uint64_t next = 0, t;

	srv_run(s, now);
	tu_assert(us_engine_poll(s->e, now, &next) >= 0, "poll");
	t = srv_next(s);
	if (next > now && next < t)
		t = next;
	return t > now ? t : now + MS;
}

/* Drives until the sync is done; returns the time it took. */
static uint64_t drive_sync(struct srv *s, us_sync *y)
{
	uint64_t start = us_engine_now(s->e), now = start;
	int i;

	for (i = 0; i < 1000000 && us_sync_done(y) == 0; i++) {
		now = advance(s, now);
		tu_check(s->e); /* the sync's counts too */
	}
	ck_assert_int_eq(us_sync_done(y), 1);
	/* Done at the last poll, the engine's clock (now is the next event). */
	return us_engine_now(s->e) - start;
}

/* Dirties n new bs-byte buffers of o from offset off, without payload. */
static void dirty_new(us_object *o, uint64_t off, uint64_t n, uint64_t bs)
{
	uint64_t i, p;
	us_buf *b;

	for (i = 0; i < n; i++) {
		tu_assert(us_buf_get(o, off + i * bs, bs, US_GET_NODATA, &b) == 1, "get");
		tu_assert(us_buf_dirty(b, &p) >= 0, "dirty");
		tu_assert(us_buf_put(b) == 0, "put");
	}
}

static void count_cb(void *ctx, us_sync *y)
{
	(void)y;
	++*(int *)ctx;
}

/*
 * Integrity sync of an object, below every threshold (nothing would write
 * it back otherwise): the data dirtied before the start is written, its
 * commit asked for and done; data dirtied after the start does not hold
 * the sync back; the callback runs once.
 */
START_TEST(test_object_sync)
{
	struct world w;
	struct us_domain_stats st;
	us_object *o2;
	us_sync *y;
	int calls = 0;
	uint64_t took, i;

	world_init(&w, 64 * MIB, 100 * MIB);
	ck_assert_int_eq(us_object_create(w.s.bk, w.d, NULL, &o2), 0);
	dirty_new(w.o, 0, 16, 64 * KIB);
	dirty_new(o2, 0, 4, 64 * KIB); /* another object: not part of it */
	ck_assert_int_eq(us_object_sync_start(w.o, count_cb, &calls, &y), 0);
	ck_assert_int_eq(us_sync_done(y), 0);
	dirty_new(w.o, 16 * 64 * KIB, 1, 64 * KIB); /* after the start */
	took = drive_sync(&w.s, y);
	ck_assert_int_eq(calls, 1);
	st = tu_stats(w.d);
	/* o's 16 buffers durable; o2's untouched; the late one did not hold
	 * the sync back, whatever its state. */
	for (i = 0; i < 16; i++) {
		us_buf *b;

		ck_assert_int_eq(us_buf_lookup(w.o, i * 64 * KIB, &b), 0);
		ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	ck_assert_uint_ge(st.dirty_bytes, 4 * 64 * KIB);
	ck_assert_uint_ge(w.s.syncs_asked, 1);
	fprintf(stderr, "object sync: 1 MiB written and committed in %.1f ms\n", (double)took / MS);
	ck_assert_int_eq(us_sync_free(y), 0);
	ck_assert_int_eq(calls, 1);
	/* A domain sync takes the rest. */
	ck_assert_int_eq(us_domain_sync_start(w.d, NULL, NULL, &y), 0);
	drive_sync(&w.s, y);
	ck_assert_int_eq(us_sync_free(y), 0);
	st = tu_stats(w.d);
	ck_assert_uint_eq(st.dirty_bytes + st.unstable_bytes + st.writeback_bytes, 0);
	world_fini(&w);
}
END_TEST

static void free_cb(void *ctx, us_sync *y)
{
	++*(int *)ctx;
	ck_assert_int_eq(us_sync_free(y), 0);
}

/* A completion callback may free its sync; it is never called from the
 * start, even when there is nothing to do. */
START_TEST(test_sync_cb_frees)
{
	struct world w;
	uint64_t now = 0;
	us_sync *y;
	int calls = 0, i;

	world_init(&w, 64 * MIB, 100 * MIB);
	ck_assert_int_eq(us_object_sync_start(w.o, free_cb, &calls, &y), 0);
	ck_assert_int_eq(calls, 0); /* done already, told later */
	now = advance(&w.s, now);
	ck_assert_int_eq(calls, 1);
	dirty_new(w.o, 0, 4, 64 * KIB);
	ck_assert_int_eq(us_object_sync_start(w.o, free_cb, &calls, &y), 0);
	for (i = 0; i < 10000 && calls < 2; i++)
		now = advance(&w.s, now);
	ck_assert_int_eq(calls, 2);
	ck_assert_uint_eq(tu_stats(w.d).unstable_bytes + tu_stats(w.d).dirty_bytes, 0);
	world_fini(&w);
}
END_TEST

/*
 * Expiry commits under a steady stream of writes: one per commit interval,
 * not one per poll once the interval has passed (the object's unstable
 * list never empties). Data expires after 100 ms; commits every 1 s; the
 * server never commits on its own; 10 s of writes.
 */
START_TEST(test_expiry_commits_paced)
{
	struct world w;
	uint64_t now = 0, t, next = 0, k = 0;

	w.e = tu_engine(64ull << 30);
	srv_init(&w.s, w.e, 100 * MIB, MS, 1000 * SEC, 50 * MS);
	ck_assert_int_eq(us_domain_create(w.e, NULL, "dd", 0, &w.d), 0);
	ck_assert_int_eq(us_object_create(w.s.bk, w.d, NULL, &w.o), 0);
	ck_assert_int_eq(us_engine_set_param(w.e, US_PARAM_DIRTY_EXPIRE_NS, 100 * MS), 0);
	ck_assert_int_eq(us_engine_set_param(w.e, US_PARAM_WRITEBACK_INTERVAL_NS, 100 * MS), 0);
	ck_assert_int_eq(us_engine_set_param(w.e, US_PARAM_COMMIT_INTERVAL_NS, SEC), 0);
	for (t = 0; t < 10 * SEC; t += 10 * MS) {
		dirty_new(w.o, (k++) * 4096, 1, 4096);
		while (now < t + 10 * MS) {
			srv_run(&w.s, now);
			tu_assert(us_engine_poll(w.e, now, &next) >= 0, "poll");
			now = srv_next(&w.s) < t + 10 * MS ? srv_next(&w.s) : t + 10 * MS;
		}
	}
	fprintf(stderr, "expiry commits: %llu in 10 s with a 1 s interval\n",
		(unsigned long long)w.s.syncs_asked);
	ck_assert_uint_ge(w.s.syncs_asked, 8);
	ck_assert_uint_le(w.s.syncs_asked, 12);
	world_fini(&w);
}
END_TEST

/* errseq: a write declared lost cleans its buffer (the sync completes) and
 * each sync caller, with its own cursor, sees the error once. */
START_TEST(test_errseq_two_callers)
{
	struct world w;
	uint64_t a, b;
	us_sync *y;
	int err = 0;

	world_init(&w, 64 * MIB, 100 * MIB);
	a = b = us_object_errseq(w.o);
	dirty_new(w.o, 0, 4, 64 * KIB);
	w.s.lose_writes = 1;
	ck_assert_int_eq(us_object_sync_start(w.o, NULL, NULL, &y), 0);
	drive_sync(&w.s, y);
	ck_assert_int_eq(us_sync_free(y), 0);
	ck_assert_int_eq(us_object_check_error(w.o, &a, &err), 1);
	ck_assert_int_eq(err, -EIO);
	ck_assert_int_eq(us_object_check_error(w.o, &a, &err), 0);
	ck_assert_int_eq(us_object_check_error(w.o, &b, &err), 1);
	ck_assert_int_eq(err, -EIO);
	ck_assert_int_eq(us_object_check_error(w.o, &b, &err), 0);
	ck_assert_uint_eq(tu_stats(w.d).write_lost, 4);
	ck_assert_uint_eq(tu_stats(w.d).dirty_bytes, 0);
	world_fini(&w);
}
END_TEST

/*
 * Faults: 10 % of flush calls refused, 5 % of writes failing, the first
 * sync failing, and the server restarting (commit_lost) in the middle of
 * a run that rewrites a 4 MiB region three times through an 8 MiB domain.
 * After a shutdown that writes back and commits everything, the bytes the
 * server holds durably equal the last bytes written, block for block.
 */
START_TEST(test_faults_byte_for_byte)
{
	struct world w;
	struct writer wr;
	struct store st;
	uint64_t now, k;
	int rc, i;

	world_init(&w, 8 * MIB, 100 * MIB);
	memset(&st, 0, sizeof(st));
	st.bs = 64 * KIB;
	st.n = 64;
	st.written = calloc(st.n, sizeof(*st.written));
	st.durable = calloc(st.n, sizeof(*st.durable));
	st.txn = calloc(st.n, sizeof(*st.txn));
	ck_assert(st.written && st.durable && st.txn);
	w.s.st = &st;
	w.s.rng = 42;
	w.s.fail_flush = 100;
	w.s.fail_write = 50;
	w.s.fail_sync_once = 1;
	memset(&wr, 0, sizeof(wr));
	wr.o = w.o;
	wr.d = w.d;
	wr.bs = 64 * KIB;
	wr.region = 4 * MIB;
	wr.throttled = true;
	/* Pass 1, a restart, passes 2 and 3. */
	wr.total = 4 * MIB;
	now = run_writers(&w.s, &wr, 1);
	ck_assert_uint_eq(wr.enomem, 0);
	for (i = 0; i < 20; i++)
		now = advance(&w.s, now);
	for (k = 0; k < st.n; k++)
		st.written[k] = st.durable[k];
	ck_assert_int_ge(us_backend_commit_lost(w.s.bk), 0);
	wr.total = 12 * MIB;
	wr.done = false;
	run_writers(&w.s, &wr, 1);
	ck_assert_uint_eq(wr.enomem, 0);
	ck_assert_uint_eq(wr.off, 12 * MIB);
	/* Shutdown: polled, so call it until it is done. */
	now = us_engine_now(w.e);
	for (i = 0; i < 1000000 && (rc = us_engine_shutdown(w.e)) == -EBUSY; i++)
		now = advance(&w.s, now);
	ck_assert_int_eq(rc, 0);
	fprintf(stderr,
		"faults: %llu flush calls refused, %llu writes failed, %llu sync failed, one "
		"restart; all 64 blocks durable as last written\n",
		(unsigned long long)w.s.flush_failed, (unsigned long long)w.s.write_failed,
		(unsigned long long)w.s.sync_failed);
	ck_assert_uint_gt(w.s.flush_failed, 0);
	ck_assert_uint_gt(w.s.write_failed, 0);
	ck_assert_uint_eq(w.s.sync_failed, 1);
	for (k = 0; k < st.n; k++) {
		unsigned char expect[64 * 1024];

		memset(expect, pattern(2, k * st.bs), sizeof(expect));
		tu_assert(st.durable[k] == cksum(expect, sizeof(expect)), "block %llu",
			  (unsigned long long)k);
	}
	free(st.written);
	free(st.durable);
	free(st.txn);
	free(w.s.q);
}
END_TEST

static void report(const char *what, const struct run *r)
{
	fprintf(stderr,
		"%s: %llu MiB in %.2f s, %.1f %% of the backend, peak charged %llu of %llu "
		"KiB, ENOMEM %llu, commits asked %llu (%llu per GiB), max pause %.1f ms\n",
		what, (unsigned long long)(r->bytes / MIB), (double)r->seconds_ns / SEC,
		100 * r->ratio, (unsigned long long)(r->peak_charged / KIB),
		(unsigned long long)(r->max / KIB), (unsigned long long)r->enomem,
		(unsigned long long)r->commits_asked, (unsigned long long)r->syncs,
		(double)r->max_pause / MS);
}

/*
 * Seed 1 (Lustre, table 2) in miniature: one dd of 2x, 1x and 0.5x a 64 MiB
 * domain's max through a server of 100 MiB/s that commits every 5 s or when
 * asked. No ENOMEM, charged <= max throughout, >= 90 % of the bandwidth.
 */
START_TEST(test_seed1_dd)
{
	static const unsigned times2[] = { 4, 2, 1 }; /* 2x, 1x, 0.5x */
	struct world w;
	struct run r;
	char what[64];
	int i;

	for (i = 0; i < 3; i++) {
		world_init(&w, 64 * MIB, 100 * MIB);
		dd(&w.s, w.o, w.d, 64 * MIB * times2[i] / 2, 256 * KIB, true, &r);
		snprintf(what, sizeof(what), "seed 1, %.1fx max", times2[i] / 2.0);
		report(what, &r);
		ck_assert_uint_eq(r.enomem, 0);
		ck_assert_uint_eq(r.bytes, 64 * MIB * times2[i] / 2);
		ck_assert_uint_le(r.peak_charged, 64 * MIB);
		ck_assert(r.ratio >= 0.90);
		/* No commit storm: the engine asks once unstable reaches half
		 * the background threshold (6.4 MiB), so a commit covers 3.2
		 * MiB or more: at most 320 per GiB. */
		ck_assert_uint_le(r.syncs, 320);
		world_fini(&w);
	}
}
END_TEST

/*
 * The unpatched Lustre client in miniature: the same 2x run by a writer
 * that nothing throttles (the kernel did not count its unstable pages as
 * dirty), so unstable data fills max and every charge needs reclaim. With
 * forced commits, reclaim asks the server to commit and the run completes;
 * without them, the server's own commit every 5 s comes too late (16 waits
 * of 100 ms without progress) and the charge fails with ENOMEM, counted,
 * with charged still within max.
 */
START_TEST(test_seed1_unpatched)
{
	struct world w;
	struct run r;
	int forced;

	for (forced = 1; forced >= 0; forced--) {
		world_init(&w, 64 * MIB, 100 * MIB);
		ck_assert_int_eq(us_engine_set_param(w.e, US_PARAM_FORCE_COMMIT, (uint64_t)forced),
				 0);
		ck_assert_int_eq(us_domain_set_limit(w.d, US_LIMIT_DIRTY_RATIO, 100), 0);
		ck_assert_int_eq(us_domain_set_limit(w.d, US_LIMIT_DIRTY_BG_RATIO, 99), 0);
		dd(&w.s, w.o, w.d, 128 * MIB, 256 * KIB, false, &r);
		report(forced ? "no dirty limit, forced commits" :
				"no dirty limit, no forced commit",
		       &r);
		ck_assert_uint_le(r.peak_charged, 64 * MIB);
		if (forced) {
			ck_assert_uint_eq(r.enomem, 0);
			ck_assert_uint_eq(r.bytes, 128 * MIB);
			ck_assert_uint_gt(r.commits_asked, 0);
		} else {
			ck_assert_uint_eq(r.enomem, 1);
			ck_assert_uint_lt(r.bytes, 128 * MIB);
			ck_assert_uint_eq(tu_stats(w.d).enomem, 1);
		}
		world_fini(&w);
	}
	/* Forced commits off, but the writer throttled on its pinned bytes
	 * (unstable included), with default thresholds: no ENOMEM, but it
	 * stalls at the dirty limit until the server's own commit every 5 s.
	 * Counting unstable data is what saves it; forcing commits is what
	 * keeps it fast (the first test: over 100 %). */
	world_init(&w, 64 * MIB, 100 * MIB);
	ck_assert_int_eq(us_engine_set_param(w.e, US_PARAM_FORCE_COMMIT, 0), 0);
	dd(&w.s, w.o, w.d, 128 * MIB, 256 * KIB, true, &r);
	report("no forced commit, throttled writer", &r);
	ck_assert_uint_eq(r.enomem, 0);
	ck_assert_uint_eq(r.bytes, 128 * MIB);
	ck_assert_uint_le(r.peak_charged, 64 * MIB);
	ck_assert(r.ratio < 0.5);
	world_fini(&w);
}
END_TEST

/*
 * Seed 2 (Linux memcg) in miniature: 1 GiB through a 5 MiB domain to a
 * backend of 20 MiB/s: no ENOMEM; the writer is throttled on writeback.
 */
START_TEST(test_seed2_small_limit)
{
	struct world w;
	struct run r;

	world_init(&w, 5 * MIB, 20 * MIB);
	dd(&w.s, w.o, w.d, 1ull << 30, 64 * KIB, true, &r);
	report("seed 2, 1 GiB through 5 MiB", &r);
	ck_assert_uint_eq(r.enomem, 0);
	ck_assert_uint_eq(r.bytes, 1ull << 30);
	ck_assert_uint_le(r.peak_charged, 5 * MIB);
	/* A commit per 256 KiB or more, with a dirty limit of 1 MiB. */
	ck_assert_uint_le(r.syncs, 4096);
	/* Throttled on writeback: paused, or held at the dirty limit. */
	ck_assert_uint_gt(tu_stats(w.d).paused + tu_stats(w.d).over_limit, 0);
	ck_assert(r.ratio >= 0.80);
	world_fini(&w);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("commit");
	TCase *tc = tcase_create("seeds");

	tcase_add_test(tc, test_seed1_dd);
	tcase_add_test(tc, test_pipeline_room);
	tcase_add_test(tc, test_seed1_unpatched);
	tcase_add_test(tc, test_seed2_small_limit);
	tcase_add_test(tc, test_siblings_under_parent);
	tcase_add_test(tc, test_object_sync);
	tcase_add_test(tc, test_errseq_two_callers);
	tcase_add_test(tc, test_faults_byte_for_byte);
	tcase_add_test(tc, test_sync_cb_frees);
	tcase_add_test(tc, test_expiry_commits_paced);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
