/*
 * The engine off the seeds' path (docs/guide.md): writers that must never wait
 * with nothing of their own pinned, the commit pipeline's speed near small
 * limits, slow commits that must not end in ENOMEM, and a fast backend
 * beside a slow one. All in virtual time, against servers modelled here:
 * each serves its writes in order at bw, acknowledges them unstable lat
 * after their transfer, and commits one batch at a time (commit_lat each,
 * covering every write acknowledged when it starts; a sync asked while one
 * runs starts one more after it).
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define MS  1000000ull
#define SEC 1000000000ull

#define MAX_WR 8

struct ack {
	us_buf *b;
	us_object *o;
	uint64_t at, len, txn;
};

struct srv {
	us_engine *e;
	us_backend *bk;
	uint64_t bw, lat, commit_lat;
	struct ack *q; /* sent, then acknowledged, then committed */
	size_t sent, acked, done, cap;
	uint64_t busy_until, txn;
	bool committing, asked;
	uint64_t commit_end, commit_txn, commits;
};

/* A writer of total bytes in bs-byte buffers (no payload) through o. */
struct writer {
	struct srv *s;
	us_object *o;
	us_domain *d;
	uint64_t total, bs, off;
	uint64_t wait_until, done_at, last_progress, max_stall, stall_at, enomem;
	uint64_t pinned; /* dirtied and not yet committed, as the server saw */
	bool gated, done;
};

static struct writer *wr_of(struct writer *w, int n, us_object *o)
{
	int i;

	for (i = 0; i < n; i++)
		if (w[i].o == o)
			return &w[i];
	return NULL;
}

static struct writer *g_w; /* the writers of the run, for the servers */
static int g_n;

static int srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		     uint64_t len, enum us_reason reason)
{
	struct srv *s = ctx;
	uint64_t now = us_engine_now(s->e);
	size_t i;

	(void)off;
	(void)len;
	(void)reason;
	for (i = 0; i < n; i++) {
		uint64_t l = us_buf_length(bufs[i]);

		if (s->busy_until < now)
			s->busy_until = now;
		s->busy_until += l * SEC / s->bw;
		if (s->sent == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 4096;
			s->q = realloc(s->q, s->cap * sizeof(*s->q));
			ck_assert_ptr_nonnull(s->q);
		}
		s->q[s->sent++] = (struct ack){ bufs[i], o, s->busy_until + s->lat, l, 0 };
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
	if (s->committing)
		s->asked = true;
	else
		srv_start_commit(s, us_engine_now(s->e));
	return 0;
}

static void srv_init(struct srv *s, us_engine *e, uint64_t bw, uint64_t lat, uint64_t commit_lat)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = srv_flush, .sync = srv_sync };

	memset(s, 0, sizeof(*s));
	s->e = e;
	s->bw = bw;
	s->lat = lat;
	s->commit_lat = commit_lat;
	ck_assert_int_eq(us_backend_create(e, &ops, s, &s->bk), 0);
}

static uint64_t srv_next(const struct srv *s)
{
	uint64_t t = UINT64_MAX;

	if (s->acked < s->sent)
		t = s->q[s->acked].at;
	if (s->committing && s->commit_end < t)
		t = s->commit_end;
	return t;
}

static void srv_run(struct srv *s, uint64_t now)
{
	while (s->acked < s->sent && s->q[s->acked].at <= now) {
		struct ack *a = &s->q[s->acked++];

		a->txn = ++s->txn;
		tu_assert(us_buf_write_done(a->b, US_WRITE_UNSTABLE, a->txn, 0) == 0, "write_done");
		a->b = NULL;
	}
	if (s->committing && s->commit_end <= now) {
		s->committing = false;
		while (s->done < s->acked && s->q[s->done].txn <= s->commit_txn) {
			struct writer *x = wr_of(g_w, g_n, s->q[s->done].o);

			if (x)
				x->pinned -= s->q[s->done].len;
			s->done++;
		}
		if (s->commit_txn)
			tu_assert(us_backend_commit_done(s->bk, s->commit_txn) >= 0, "commit_done");
		if (s->asked) {
			s->asked = false;
			srv_start_commit(s, now);
		}
	}
}

/*
 * Runs the writers side by side until each has written its bytes (or got
 * ENOMEM), as a host would: poll at the engine's deadline and after
 * anything happened. Asserts that no writer is ever held at the gate with
 * nothing of its own pinned. Returns the time the last one finished.
 */
static uint64_t run_writers(struct srv **srvs, int ns, struct writer *w, int n)
{
	us_engine *e = srvs[0]->e;
	uint64_t now = us_engine_now(e), next_poll = 0;
	int left = n, i;

	g_w = w;
	g_n = n;
	for (i = 0; i < n; i++)
		w[i].last_progress = now;
	while (left) {
		uint64_t t = UINT64_MAX;
		bool acted = false;

		for (i = 0; i < ns; i++)
			srv_run(srvs[i], now);
		tu_assert(us_engine_poll(e, now, &next_poll) >= 0, "poll");
		for (i = 0; i < n; i++) {
			struct writer *x = &w[i];
			uint64_t pause = 0;
			us_buf *b;
			int rc;

			if (x->done)
				continue;
			if (now < x->wait_until) {
				t = x->wait_until < t ? x->wait_until : t;
				continue;
			}
			acted = true;
			if (x->gated) {
				rc = us_object_balance(x->o, &pause);
				if (rc == -EAGAIN) {
					tu_assert(x->pinned > 0,
						  "writer %d held at the gate with nothing pinned",
						  i);
					x->wait_until = now + pause;
					continue;
				}
				tu_assert(rc == 0, "balance %d", rc);
				x->gated = false;
			}
			rc = us_buf_get(x->o, x->off, x->bs, US_GET_NODATA | US_GET_NOWAIT, &b);
			if (rc == -EAGAIN) {
				rc = us_object_reclaim(x->o, x->bs, &pause);
				tu_assert(rc == -EAGAIN || rc == 0 || rc == -ENOMEM, "reclaim %d",
					  rc);
				if (rc != -ENOMEM) {
					x->wait_until = now + (pause ? pause : MS);
					continue;
				}
			}
			if (rc == -ENOMEM) {
				x->enomem++;
				x->done = true;
				x->done_at = now;
				left--;
				continue;
			}
			tu_assert(rc == 1, "get %d", rc);
			rc = us_buf_dirty(b, &pause);
			tu_assert(rc >= 0, "dirty %d", rc);
			tu_assert(us_buf_put(b) == 0, "put");
			x->pinned += x->bs;
			if (now - x->last_progress > x->max_stall) {
				x->max_stall = now - x->last_progress;
				x->stall_at = x->last_progress;
			}
			x->last_progress = now;
			x->off += x->bs;
			if (x->off >= x->total) {
				x->done = true;
				x->done_at = now;
				left--;
			}
			x->gated = rc == US_DIRTY_OVER_LIMIT;
			x->wait_until = now + pause;
		}
		if (acted)
			continue;
		for (i = 0; i < ns; i++)
			if (srv_next(srvs[i]) < t)
				t = srv_next(srvs[i]);
		if (next_poll > now && next_poll < t)
			t = next_poll;
		tu_assert(t != UINT64_MAX && t > now, "stuck at %llu", (unsigned long long)now);
		now = t;
	}
	return now;
}

/* Lets the servers finish: nothing pinned is left, nothing was lost. */
static void drain(struct srv **srvs, int ns)
{
	us_engine *e = srvs[0]->e;
	uint64_t now = us_engine_now(e), next = 0;
	struct us_domain_stats st;
	int i, k;

	for (k = 0; k < 1000000; k++) {
		uint64_t t = UINT64_MAX;

		st = tu_stats(us_engine_root(e));
		if (!st.dirty_bytes && !st.writeback_bytes && !st.unstable_bytes)
			break;
		for (i = 0; i < ns; i++)
			srv_run(srvs[i], now);
		us_engine_poll(e, now, &next);
		for (i = 0; i < ns; i++)
			if (srv_next(srvs[i]) < t)
				t = srv_next(srvs[i]);
		if (next > now && next < t)
			t = next;
		now = t > now && t != UINT64_MAX ? t : now + MS;
	}
	st = tu_stats(us_engine_root(e));
	ck_assert_uint_eq(st.dirty_bytes + st.writeback_bytes + st.unstable_bytes, 0);
	for (i = 0; i < ns; i++)
		ck_assert_uint_eq(srvs[i]->done, srvs[i]->sent); /* every write committed */
	ck_assert_uint_eq(st.write_lost + st.commit_lost, 0);
}

static void srv_fini(struct srv *s)
{
	free(s->q);
}

static double rate_of(const struct writer *x, uint64_t start)
{
	return (double)x->off * SEC / (double)(x->done_at - start);
}

/* ------------------------------------------------------------------------ */
/* 1. Nothing of its own pinned: never held at the gate.                     */

/*
 * An empty domain beside a sibling whose clean, evictable data fills the
 * root: its thresholds come from what reclaim could free, so the gate is
 * open, and a writer of 16 MiB goes through without ENOMEM.
 */
START_TEST(test_empty_beside_clean)
{
	us_engine *e = tu_engine(64 * MIB);
	struct us_domain_limits l = { .size = sizeof(l) };
	struct srv s, *sv = &s;
	us_domain *a, *b;
	us_object *oa, *ob;
	struct writer w;
	uint64_t i, pause = 1;
	us_buf *x;

	srv_init(&s, e, 100 * MIB, MS, 10 * MS);
	ck_assert_int_eq(us_domain_create(e, NULL, "a", 0, &a), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "b", 0, &b), 0);
	ck_assert_int_eq(us_object_create(s.bk, a, NULL, &oa), 0);
	ck_assert_int_eq(us_object_create(s.bk, b, NULL, &ob), 0);
	for (i = 0; i < 64; i++) {
		ck_assert_int_eq(us_buf_get(oa, i * MIB, MIB, US_GET_NODATA, &x), 1);
		ck_assert_int_eq(us_buf_put(x), 0);
	}
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).evictable_bytes, 64 * MIB);
	ck_assert_int_eq(us_domain_effective_limits(b, &l), 0);
	ck_assert_uint_gt(l.dirty_thresh_bytes, 0);
	ck_assert_int_eq(us_object_balance(ob, &pause), 0);
	ck_assert_uint_eq(pause, 0);

	memset(&w, 0, sizeof(w));
	w.s = &s;
	w.o = ob;
	w.d = b;
	w.total = 16 * MIB;
	w.bs = 256 * KIB;
	run_writers(&sv, 1, &w, 1);
	ck_assert_uint_eq(w.enomem, 0);
	ck_assert_uint_eq(w.off, 16 * MIB);
	ck_assert_uint_le(w.max_stall, 200 * MS);
	drain(&sv, 1);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	srv_fini(&s);
}
END_TEST

/*
 * A dirty ratio of 0 is write-through: every dirtying is over the limit and
 * starts writeback, the writer waits for its own data only, and with
 * nothing pinned the gate is open.
 */
START_TEST(test_dirty_ratio_zero)
{
	us_engine *e = tu_engine(64 * MIB);
	struct srv s, *sv = &s;
	us_domain *d;
	us_object *o;
	struct writer w;
	uint64_t pause;
	us_buf *x;

	srv_init(&s, e, 100 * MIB, MS, 10 * MS);
	ck_assert_int_eq(us_domain_create(e, NULL, "wt", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_RATIO, 0), 0);
	ck_assert_int_eq(us_object_create(s.bk, d, NULL, &o), 0);
	ck_assert_int_eq(us_object_balance(o, &pause), 0); /* nothing pinned */
	ck_assert_int_eq(us_buf_get(o, 0, 64 * KIB, US_GET_NODATA, &x), 1);
	ck_assert_int_eq(us_buf_dirty(x, &pause), US_DIRTY_OVER_LIMIT);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_object_balance(o, &pause), -EAGAIN);	/* its own data */
	ck_assert_int_eq(us_engine_poll(e, us_engine_now(e), NULL), 1); /* written back */
	ck_assert_uint_eq(tu_stats(d).writeback_bytes, 64 * KIB);
	drain(&sv, 1);
	ck_assert_int_eq(us_object_balance(o, &pause), 0);

	memset(&w, 0, sizeof(w));
	w.s = &s;
	w.o = o;
	w.d = d;
	w.off = 64 * KIB;
	w.total = 4 * MIB;
	w.bs = 64 * KIB;
	run_writers(&sv, 1, &w, 1);
	ck_assert_uint_eq(w.enomem, 0);
	ck_assert_uint_eq(w.off, 4 * MIB);
	/* Never more than one buffer pinned at a time. */
	ck_assert_uint_le(tu_stats(d).peak_pinned_bytes, 64 * KIB);
	drain(&sv, 1);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	srv_fini(&s);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 6. The commit pipeline near small limits.                                 */

/*
 * One writer, max from 2x to 100x bw x commit latency: data is pinned from
 * its dirtying until its commit, one to two commit latencies, so the bound
 * is min(bw, max / (2 commit_lat)); the writer reaches 0.9 of it.
 */
static double pipeline_run(uint64_t bw, uint64_t clat, uint64_t lat, uint64_t max, double *bound)
{
	us_engine *e = tu_engine(64 * GIB);
	struct srv s, *sv = &s;
	struct writer w;
	us_domain *d;
	uint64_t total = 2 * max, start;
	double r;

	/* Long enough to measure a steady state: 2 s of the bound at least. */
	*bound = (double)max * SEC / (2.0 * (double)clat);
	if (*bound > (double)bw)
		*bound = (double)bw;
	if (total < (uint64_t)(2 * *bound))
		total = (uint64_t)(2 * *bound);
	srv_init(&s, e, bw, lat, clat);
	ck_assert_int_eq(us_domain_create(e, NULL, "dd", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, max), 0);
	memset(&w, 0, sizeof(w));
	ck_assert_int_eq(us_object_create(s.bk, d, NULL, &w.o), 0);
	w.s = &s;
	w.d = d;
	w.total = total;
	w.bs = max / 64 > MIB ? MIB : max / 64;
	start = us_engine_now(e);
	run_writers(&sv, 1, &w, 1);
	ck_assert_uint_eq(w.enomem, 0);
	ck_assert_uint_le(tu_stats(d).peak_charged_bytes, max);
	r = rate_of(&w, start);
	/* No stall but for one commit's wait, at worst two; the engine's
	 * own figure agrees. */
	ck_assert_uint_le(w.max_stall, 200 * MS + 2 * clat);
	ck_assert_uint_le(tu_stats(d).max_stall_ns, 200 * MS + 2 * clat);
	drain(&sv, 1);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	srv_fini(&s);
	return r;
}

START_TEST(test_pipeline_sweep)
{
	static const struct {
		uint64_t bw, clat, lat;
		double from; /* the target holds from this multiple on */
	} bk[] = { { GIB, 20 * MS, MS, 2 },
		   { 4 * GIB, 50 * MS, MS, 2 },
		   /* Small limits against fast servers: a 1 ms commit
		    * with a 2 MiB max at 1 GiB/s (0.75 of the bound before
		    * the pause floor), 4 GiB/s (0.84 before the pipelines
		    * were resized as the first commits' latency grew). */
		   { GIB, MS, 50000, 2 },
		   { GIB, 2 * MS, 100000, 2 },
		   { GIB, 5 * MS, 250000, 2 },
		   { 4 * GIB, MS, 50000, 2 },
		   { 4 * GIB, 5 * MS, 250000, 2 },
		   { 100 * MIB, SEC, MS, 2 },
		   { 10 * MIB, 10 * SEC, MS, 2 } };
	static const double mult[] = { 1, 1.5, 2, 2.25, 2.5, 3, 5, 10, 30, 100 };
	double bad = 0, worst = 1;
	size_t i, j;

	for (i = 0; i < sizeof(bk) / sizeof(bk[0]); i++) {
		for (j = 0; j < sizeof(mult) / sizeof(mult[0]); j++) {
			uint64_t max =
				(uint64_t)(mult[j] * (double)bk[i].bw * ((double)bk[i].clat / SEC));
			double bound,
				r = pipeline_run(bk[i].bw, bk[i].clat, bk[i].lat, max, &bound);

			printf("pipeline: %llu MiB/s, commit %llu ms, max %.1fx bw x lat (%llu MiB): "
			       "%.0f MiB/s, %.3f of the bound\n",
			       (unsigned long long)(bk[i].bw / MIB),
			       (unsigned long long)(bk[i].clat / MS), mult[j],
			       (unsigned long long)(max / MIB), r / MIB, r / bound);
			if (r < 0.9 * bound && mult[j] >= bk[i].from && !bad)
				bad = mult[j];
			worst = r / bound < worst ? r / bound : worst;
		}
	}
	ck_assert_msg(bad == 0, "%.1fx: below its target (worst %.3f of the bound)", bad, worst);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 7. Slow commits: waited for, not ENOMEM.                                  */

START_TEST(test_slow_commits)
{
	static const uint64_t clat[] = { 2 * SEC, 10 * SEC };
	static const int nw[] = { 2, 8 };
	size_t i, j;

	for (i = 0; i < 2; i++) {
		for (j = 0; j < 2; j++) {
			us_engine *e = tu_engine(64 * GIB);
			struct srv s, *sv = &s;
			struct writer w[MAX_WR];
			us_domain *d;
			uint64_t end, stall = 0;
			int k;

			srv_init(&s, e, 100 * MIB, MS, clat[i]);
			ck_assert_int_eq(us_domain_create(e, NULL, "small", 0, &d), 0);
			ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, MIB), 0);
			memset(w, 0, sizeof(w));
			for (k = 0; k < nw[j]; k++) {
				ck_assert_int_eq(us_object_create(s.bk, d, NULL, &w[k].o), 0);
				w[k].s = &s;
				w[k].d = d;
				w[k].total = 2 * MIB;
				w[k].bs = 64 * KIB;
			}
			end = run_writers(&sv, 1, w, nw[j]);
			for (k = 0; k < nw[j]; k++) {
				ck_assert_uint_eq(w[k].enomem, 0);
				ck_assert_uint_eq(w[k].off, 2 * MIB);
				stall = w[k].max_stall > stall ? w[k].max_stall : stall;
			}
			ck_assert_uint_eq(tu_stats(d).enomem, 0);
			ck_assert_uint_le(tu_stats(d).peak_charged_bytes, MIB);
			/* Each waits its turn: a writer at the gate is there
			 * when a commit frees its batch (it lost every batch to
			 * the writers whose pauses ended with the commit: 3 and
			 * 6 commits' stalls at 10 s). A buffer dirtied now is
			 * committed by the next commit but one. A writer held
			 * by the order behind another comes back when that one
			 * is due, and one at the gate for a commit past its
			 * expected end looks again every min pause (10 ms; a
			 * finer grain would cost every waiter a poll per grain
			 * while a server queues commits): that grain on top of
			 * the bound, not a commit more. */
			ck_assert_uint_le(stall, (nw[j] == 2 ? 2 : 4) * clat[i] + 10 * MS);
			printf("slow commits of %llu s, %d writers in 1 MiB: done in %.1f s, "
			       "longest stall %.1f s, no ENOMEM\n",
			       (unsigned long long)(clat[i] / SEC), nw[j], (double)end / SEC,
			       (double)stall / SEC);
			drain(&sv, 1);
			tu_check(e);
			ck_assert_int_eq(us_engine_destroy(e), 0);
			srv_fini(&s);
		}
	}
}
END_TEST

/*
 * The time budget: a server that never answers. With writes in flight the
 * charge waits, but not past US_PARAM_RECLAIM_TIMEOUT_NS without progress.
 */
START_TEST(test_reclaim_timeout)
{
	us_engine *e = tu_engine(GIB);
	uint64_t v, off = 0, retry, t0;
	struct tb t;
	us_domain *d;
	us_object *o;
	us_buf *b;
	int rc;

	ck_assert_int_eq(us_engine_get_param(e, US_PARAM_RECLAIM_TIMEOUT_NS, &v), 0);
	ck_assert_uint_eq(v, 60 * SEC);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_RECLAIM_TIMEOUT_NS, 0), -EINVAL);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_RECLAIM_TIMEOUT_NS, 5 * SEC), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, MIB), 0);
	tb_init(&t, e, false, true); /* TB_HOLD: writes never complete */
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	while ((rc = us_buf_get(o, off, 64 * KIB, US_GET_NODATA | US_GET_NOWAIT, &b)) == 1) {
		ck_assert_int_ge(us_buf_dirty(b, &v), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
		off += 64 * KIB;
	}
	ck_assert_int_eq(rc, -EAGAIN);
	t0 = us_engine_now(e);
	while ((rc = us_object_reclaim(o, 64 * KIB, &retry)) == -EAGAIN) {
		ck_assert_uint_lt(us_engine_now(e) - t0, 10 * SEC);
		ck_assert_int_eq(us_engine_clock_advance(e, retry), 0);
		ck_assert_int_ge(us_engine_poll(e, 0, NULL), 0);
	}
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_uint_ge(us_engine_now(e) - t0, 5 * SEC);
	ck_assert_uint_lt(us_engine_now(e) - t0, 5 * SEC + 200 * MS);
	ck_assert_uint_gt(tu_stats(d).writeback_bytes, 0); /* nothing lost */
	tb_complete_all(&t);
	while (us_object_flush(o, 0, US_UNLIMITED, 0) > 0 || t.npending)
		tb_complete_all(&t);
	tu_check(e);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* 8. A fast backend beside a slow one.                                      */

/*
 * A writer of 1 GiB to a 1 GiB/s backend (20 ms commits) beside one to a
 * 10 MiB/s backend (100 ms latency and commits) that writes all along:
 * alone, in the same domain, and in two domains under a shared parent. The
 * fast writer keeps 0.9 of its solo rate; the slow one is never held for
 * long.
 */
enum layout { SOLO, SAME_DOMAIN, SHARED_PARENT };

static void fast_slow(enum layout lay, double *fast, uint64_t *slow_stall)
{
	us_engine *e = tu_engine(64 * GIB);
	struct srv f, s, *sv[2] = { &f, &s };
	struct writer w[2];
	us_domain *p, *a, *b;
	uint64_t start;

	srv_init(&f, e, GIB, MS, 20 * MS);
	srv_init(&s, e, 10 * MIB, 100 * MS, 100 * MS);
	ck_assert_int_eq(us_domain_create(e, NULL, "p", 0, &p), 0);
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_MAX, 256 * MIB), 0);
	if (lay == SHARED_PARENT) {
		ck_assert_int_eq(us_domain_create(e, p, "a", 0, &a), 0);
		ck_assert_int_eq(us_domain_create(e, p, "b", 0, &b), 0);
	} else {
		a = b = p;
	}
	memset(w, 0, sizeof(w));
	ck_assert_int_eq(us_object_create(f.bk, a, NULL, &w[0].o), 0);
	ck_assert_int_eq(us_object_create(s.bk, b, NULL, &w[1].o), 0);
	w[0].s = &f;
	w[0].d = a;
	w[0].total = GIB;
	w[0].bs = MIB;
	w[1].s = &s;
	w[1].d = b;
	w[1].total = 64 * MIB;
	w[1].bs = 256 * KIB;
	start = us_engine_now(e);
	/* The slow writer runs longer than the fast one: both are measured
	 * while side by side. */
	run_writers(sv, 2, w, lay == SOLO ? 1 : 2);
	ck_assert_uint_eq(w[0].enomem + w[1].enomem, 0);
	ck_assert_uint_le(tu_stats(p).peak_charged_bytes, 256 * MIB);
	*fast = rate_of(&w[0], start);
	*slow_stall = w[1].max_stall;
	ck_assert(lay == SOLO || w[1].done_at > w[0].done_at);
	drain(sv, 2);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	srv_fini(&f);
	srv_fini(&s);
}

START_TEST(test_fast_beside_slow)
{
	double solo, same, shared;
	uint64_t st_same, st_shared, unused;

	fast_slow(SOLO, &solo, &unused);
	fast_slow(SAME_DOMAIN, &same, &st_same);
	fast_slow(SHARED_PARENT, &shared, &st_shared);
	printf("fast beside slow: solo %.0f MiB/s; same domain %.3f of it (slow writer's "
	       "longest stall %.2f s); shared parent %.3f (%.2f s)\n",
	       solo / MIB, same / solo, (double)st_same / SEC, shared / solo,
	       (double)st_shared / SEC);
	ck_assert(same >= 0.9 * solo);
	ck_assert(shared >= 0.9 * solo);
	/* Before shares: 0.08-0.88 of solo, the slow writer held for seconds. */
	ck_assert_uint_lt(st_same, SEC);
	ck_assert_uint_lt(st_shared, SEC);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("liveness");
	TCase *tc = tcase_create("issue12");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_empty_beside_clean);
	tcase_add_test(tc, test_dirty_ratio_zero);
	tcase_add_test(tc, test_pipeline_sweep);
	tcase_add_test(tc, test_slow_commits);
	tcase_add_test(tc, test_reclaim_timeout);
	tcase_add_test(tc, test_fast_beside_slow);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
