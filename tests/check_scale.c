/*
 * Many domains: the structures that keep the engine's
 * cost per buffer independent of the number of domains decide what the
 * scans they replace decided. Virtual time only.
 *
 *  - eviction takes the globally least recently used evictable buffer of
 *    the subtree at its limit, across 1,000 domains under a shared parent,
 *    buffers written back for reclaim first (I8);
 *  - a subtree's own max evicts from that subtree only;
 *  - a domain sync writes and commits the data dirtied before its start,
 *    and leaves alone what was dirtied after it and what is outside;
 *  - expiry writes back the expired objects only.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEN 64u

struct ev_rec {
	us_object *o;
	uint64_t off;
};

struct ev_log {
	struct ev_rec *v;
	size_t n, cap;
};

static void log_evict(struct tb *t, us_object *o, uint64_t off, uint64_t len)
{
	struct ev_log *l = t->user;

	(void)len;
	ck_assert_uint_lt(l->n, l->cap);
	l->v[l->n++] = (struct ev_rec){ o, off };
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void get_put(us_object *o, uint64_t off)
{
	us_buf *b;

	ck_assert_int_ge(us_buf_get(o, off, LEN, 0, &b), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
}

/*
 * 1,000 domains under a parent at its max, 4 buffers each, made in a
 * random order of domains; every 7th is looked up again (it becomes the
 * youngest), and 10 are written back for reclaim (they go first, the last
 * cleaned first). 4,000 new buffers in one more domain then evict all of
 * them, one each, in exactly that order.
 */
START_TEST(test_evict_global_order)
{
	enum { ND = 1000, PER = 4, NB = ND * PER, NRECL = 10 };
	us_engine *e = tu_engine(1ull << 30);
	struct ev_log log = { calloc(2 * NB, sizeof(struct ev_rec)), 0, 2 * NB };
	struct ev_rec *expect = calloc(NB, sizeof(*expect)), *order = calloc(NB, sizeof(*order));
	us_domain *p, *x, **d = calloc(ND, sizeof(*d));
	us_object **o = calloc(ND, sizeof(*o)), *xo;
	unsigned *filled = calloc(ND, sizeof(*filled));
	uint64_t seed = 88172645463325252ull;
	size_t n = 0, ne = 0, i, j;
	struct tb t;

	ck_assert(log.v && expect && order && d && o && filled);
	tb_init(&t, e, true, false);
	t.mode = TB_STABLE;
	t.user = &log;
	t.on_evict = log_evict;
	ck_assert_int_eq(us_domain_create(e, NULL, "p", 0, &p), 0);
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_MAX, (uint64_t)NB * LEN), 0);
	for (i = 0; i < ND; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "d%zu", i);
		ck_assert_int_eq(us_domain_create(e, p, nm, 0, &d[i]), 0);
		ck_assert_int_eq(us_object_create(t.backend, d[i], NULL, &o[i]), 0);
	}
	ck_assert_int_eq(us_domain_create(e, p, "x", 0, &x), 0);
	ck_assert_int_eq(us_object_create(t.backend, x, NULL, &xo), 0);

	/* The fill, in LRU order. */
	while (n < NB) {
		size_t k = rng_next(&seed) % ND;

		if (filled[k] == PER)
			continue;
		get_put(o[k], filled[k] * LEN);
		order[n++] = (struct ev_rec){ o[k], filled[k]++ * LEN };
	}
	tu_check(e);
	/* Every 7th touched again, in order: each becomes the youngest. */
	for (i = 0; i < NB; i += 7) {
		us_buf *b;

		ck_assert_int_eq(us_buf_lookup(order[i].o, order[i].off, &b), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	/* 10 written back for reclaim (the flag the reclaim path sets). */
	for (i = 1; i <= NRECL; i++) {
		size_t k = i * 97 % NB;
		us_buf *b;

		if (k % 7 == 0)
			k++;
		ck_assert_int_eq(us_buf_lookup(order[k].o, order[k].off, &b), 0);
		ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
		us__lock(e);
		b->flags |= US_BUF_RECLAIM;
		us__unlock(e);
		ck_assert_int_eq(us_object_flush(order[k].o, order[k].off, LEN, 0), 1);
		ck_assert_int_eq(us_buf_put(b), 0);
		expect[NRECL - i] = order[k]; /* the last cleaned goes first */
		order[k].o = NULL;
	}
	tu_check(e);
	ne = NRECL;
	for (i = 0; i < NB; i++)
		if (order[i].o && i % 7)
			expect[ne++] = order[i];
	for (i = 0; i < NB; i += 7)
		if (order[i].o)
			expect[ne++] = order[i];
	ck_assert_uint_eq(ne, NB);

	for (i = 0; i < NB; i++) {
		get_put(xo, i * LEN);
		if (i % 500 == 0)
			tu_check(e);
	}
	ck_assert_uint_eq(log.n, NB);
	for (j = 0; j < NB; j++)
		tu_assert(log.v[j].o == expect[j].o && log.v[j].off == expect[j].off,
			  "eviction %zu: object %p offset %llu, expected %p offset %llu", j,
			  (void *)log.v[j].o, (unsigned long long)log.v[j].off, (void *)expect[j].o,
			  (unsigned long long)expect[j].off);
	tu_check(e);
	/* Emptied domains go: the parent's eviction tree forgets them. */
	for (i = 0; i < ND; i++) {
		ck_assert_int_eq(us_object_destroy(o[i]), 0);
		ck_assert_int_eq(us_domain_destroy(d[i]), 0);
	}
	tu_check(e);
	ck_assert_int_eq(us_object_destroy(xo), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	free(log.v);
	free(expect);
	free(order);
	free(d);
	free(o);
	free(filled);
}
END_TEST

/*
 * Nested limits: c1 (max 10 buffers) holds g1 and g2, c2 beside it has the
 * oldest buffers of all. A charge in g2 with c1 full evicts c1's oldest (in
 * g1), not c2's; a charge in c2 with the root full evicts the oldest of the
 * whole engine (c2's own). Across 1,000 more empty domains under c1.
 */
START_TEST(test_evict_subtree_limits)
{
	us_engine *e = tu_engine(24 * LEN);
	struct ev_log log = { calloc(64, sizeof(struct ev_rec)), 0, 64 };
	us_domain *c1, *c2, *g1, *g2, *extra;
	us_object *o1, *o2, *oc2;
	struct tb t;
	int i;

	tb_init(&t, e, true, false);
	t.user = &log;
	t.on_evict = log_evict;
	ck_assert_int_eq(us_domain_create(e, NULL, "c1", 0, &c1), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "c2", 0, &c2), 0);
	ck_assert_int_eq(us_domain_create(e, c1, "g1", 0, &g1), 0);
	ck_assert_int_eq(us_domain_create(e, c1, "g2", 0, &g2), 0);
	for (i = 0; i < 1000; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "e%d", i);
		ck_assert_int_eq(us_domain_create(e, i % 2 ? g1 : c1, nm, 0, &extra), 0);
	}
	ck_assert_int_eq(us_domain_set_limit(c1, US_LIMIT_MAX, 10 * LEN), 0);
	ck_assert_int_eq(us_object_create(t.backend, g1, NULL, &o1), 0);
	ck_assert_int_eq(us_object_create(t.backend, g2, NULL, &o2), 0);
	ck_assert_int_eq(us_object_create(t.backend, c2, NULL, &oc2), 0);

	for (i = 0; i < 6; i++) /* the oldest: c2's */
		get_put(oc2, (uint64_t)i * LEN);
	for (i = 0; i < 10; i++) /* g1, g2, g1, ...: c1 full */
		get_put(i % 2 ? o2 : o1, (uint64_t)(i / 2) * LEN);
	tu_check(e);

	/* c1 at its max: its oldest goes, g1's first. */
	get_put(o2, 100 * LEN);
	ck_assert_uint_eq(log.n, 1);
	ck_assert_ptr_eq(log.v[0].o, o1);
	ck_assert_uint_eq(log.v[0].off, 0);
	get_put(o1, 100 * LEN);
	ck_assert_uint_eq(log.n, 2);
	ck_assert_ptr_eq(log.v[1].o, o2);
	ck_assert_uint_eq(log.v[1].off, 0);
	tu_check(e);

	/* The root: 6 + 10 charged of 24. 8 more in c2 fill it; then each
	 * new one evicts the engine's oldest, c2's first buffers. */
	for (i = 0; i < 8; i++)
		get_put(oc2, (uint64_t)(10 + i) * LEN);
	ck_assert_uint_eq(log.n, 2);
	for (i = 0; i < 6; i++) {
		get_put(oc2, (uint64_t)(20 + i) * LEN);
		ck_assert_uint_eq(log.n, 3 + (size_t)i);
		ck_assert_ptr_eq(log.v[2 + i].o, oc2);
		ck_assert_uint_eq(log.v[2 + i].off, (uint64_t)i * LEN);
	}
	/* Then c1's, oldest first: g1's second buffer. */
	get_put(oc2, 30 * LEN);
	ck_assert_ptr_eq(log.v[8].o, o1);
	ck_assert_uint_eq(log.v[8].off, LEN);
	tu_check(e);
	t.on_evict = NULL;
	ck_assert_int_eq(us_engine_destroy(e), 0);
	free(log.v);
}
END_TEST

static int state_of(us_object *o, uint64_t off)
{
	us_buf *b;
	int s;

	ck_assert_int_eq(us_buf_lookup(o, off, &b), 0);
	s = us_buf_state(b);
	ck_assert_int_eq(us_buf_put(b), 0);
	return s;
}

/*
 * A sync of a subtree of 1,000 domains: the 500 dirtied before its start
 * are written and committed; the 500 dirtied after it stay DIRTY through
 * all its steps (polls), and so does a domain outside it.
 */
START_TEST(test_sync_covers_before_start)
{
	enum { ND = 1000 };
	us_engine *e = tu_engine(1ull << 30);
	us_domain *s, *out, *d;
	us_object **o = calloc(ND, sizeof(*o)), *oo;
	us_sync *y;
	struct tb t;
	uint64_t now = 0;
	int i, done = 0, k;
	us_buf *b;

	tb_init(&t, e, true, true);
	t.mode = TB_UNSTABLE;
	ck_assert_int_eq(us_domain_create(e, NULL, "s", 0, &s), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "out", 0, &out), 0);
	ck_assert_int_eq(us_object_create(t.backend, out, NULL, &oo), 0);
	for (i = 0; i < ND; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, s, nm, 0, &d), 0);
		ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o[i]), 0);
	}
	/* Before: the even domains, and the one outside. */
	for (i = 0; i < ND; i += 2) {
		ck_assert_int_ge(us_buf_get(o[i], 0, LEN, 0, &b), 0);
		ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	ck_assert_int_ge(us_buf_get(oo, 0, LEN, 0, &b), 0);
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);

	ck_assert_int_eq(us_domain_sync_start(s, NULL, NULL, &y), 0);
	tu_check(e);
	/* After: the odd domains. */
	for (i = 1; i < ND; i += 2) {
		ck_assert_int_ge(us_buf_get(o[i], 0, LEN, 0, &b), 0);
		ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	tu_check(e);
	for (k = 0; k < 100 && !(done = us_sync_done(y)); k++) {
		now += 10 * US_MSEC;
		ck_assert_int_ge(us_engine_poll(e, now, NULL), 0);
		if (t.syncs || t.commits)
			us_backend_commit_done(t.backend, t.next_seq - 1);
		tu_check(e);
	}
	ck_assert_int_eq(done, 1);
	for (i = 0; i < ND; i++)
		tu_assert(state_of(o[i], 0) == (i % 2 ? US_BUF_DIRTY : US_BUF_CLEAN),
			  "domain %d: state %d", i, state_of(o[i], 0));
	ck_assert_int_eq(state_of(oo, 0), US_BUF_DIRTY);
	ck_assert_uint_eq(t.flushed_bytes, (ND / 2) * LEN);
	ck_assert_int_eq(us_sync_free(y), 0);
	tu_check(e);
	/* The rest, written and committed by hand. */
	for (i = 1; i < ND; i += 2)
		ck_assert_int_eq(us_object_flush(o[i], 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_object_flush(oo, 0, US_UNLIMITED, 0), 1);
	us_backend_commit_done(t.backend, t.next_seq - 1);
	tu_check(e);
	free(o);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * Expiry across 1,000 domains: dirtied at 0 s (the even ones) and at 20 s
 * (the odd ones), dirty_expire 30 s: by 36 s the even ones are written
 * back (reason EXPIRY), the odd ones not; by 56 s those too.
 */
START_TEST(test_expiry_only_expired)
{
	enum { ND = 1000 };
	us_engine *e = tu_engine(1ull << 30);
	us_object **o = calloc(ND, sizeof(*o));
	uint64_t now = 0;
	struct tb t;
	us_domain *d;
	us_buf *b;
	size_t r;
	int i;

	tb_init(&t, e, true, false);
	t.mode = TB_HOLD;
	for (i = 0; i < ND; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, NULL, nm, 0, &d), 0);
		ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o[i]), 0);
	}
	for (; now <= 60 * US_SEC; now += US_SEC) {
		if (now == 0 || now == 20 * US_SEC)
			for (i = now ? 1 : 0; i < ND; i += 2) {
				ck_assert_int_ge(us_buf_get(o[i], 0, LEN, 0, &b), 0);
				ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
				ck_assert_int_eq(us_buf_put(b), 0);
			}
		ck_assert_int_ge(us_engine_poll(e, now, NULL), 0);
		if (now == 36 * US_SEC) {
			for (i = 0; i < ND; i++)
				tu_assert(state_of(o[i], 0) ==
						  (i % 2 ? US_BUF_DIRTY : US_BUF_WRITEBACK),
					  "domain %d at 36 s: state %d", i, state_of(o[i], 0));
			tu_check(e);
		}
	}
	for (i = 0; i < ND; i++)
		ck_assert_int_eq(state_of(o[i], 0), US_BUF_WRITEBACK);
	for (r = 0; r < t.nruns; r++)
		ck_assert_int_eq(t.runs[r].reason, US_REASON_EXPIRY);
	tb_complete_all(&t);
	tu_check(e);
	free(o);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * A charge that gave up leaves its domain marked as reclaiming; among 1,000
 * domains, the mark goes at the first poll 4 reclaim_waits (400 ms) after
 * the attempt, not before, though the tree is not walked at every poll.
 */
START_TEST(test_reclaim_mark_expiry)
{
	us_engine *e = tu_engine(1ull << 30);
	us_domain *d, *x;
	us_object *o;
	uint64_t now = 0, retry, cleared = 0;
	struct tb t;
	us_buf *b;
	int i;

	tb_init(&t, e, true, false);
	t.mode = TB_HOLD;
	for (i = 0; i < 1000; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "x%d", i);
		ck_assert_int_eq(us_domain_create(e, NULL, nm, 0, &x), 0);
	}
	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 4 * LEN), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	for (i = 0; i < 4; i++) {
		ck_assert_int_ge(us_buf_get(o, (uint64_t)i * LEN, LEN, 0, &b), 0);
		ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	ck_assert_int_ge(us_engine_poll(e, 7 * US_MSEC, NULL), 0);
	ck_assert_int_eq(us_engine_clock_advance(e, 3 * US_MSEC), 0);
	/* At 10 ms: the charge cannot fit, the data is being written. */
	ck_assert_int_eq(us_object_reclaim(o, LEN, &retry), -EAGAIN);
	ck_assert(d->reclaiming);
	for (now = 10 * US_MSEC; now <= 800 * US_MSEC; now += 10 * US_MSEC) {
		ck_assert_int_ge(us_engine_poll(e, now, NULL), 0);
		if (!d->reclaiming && !cleared)
			cleared = now;
	}
	ck_assert_uint_eq(cleared, 410 * US_MSEC);
	tb_complete_all(&t);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* The checker sees a broken eviction tree (I8), sampling order (I9) and
 * pipeline sum (I10). */
START_TEST(test_check_new_invariants)
{
	us_engine *e = tu_engine(1ull << 30);
	us_domain *d[3];
	us_object *o[3];
	struct tb t;
	char msg[256];
	uint64_t save;
	int i;

	tb_init(&t, e, true, false);
	for (i = 0; i < 3; i++) {
		char nm[8];

		snprintf(nm, sizeof(nm), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, NULL, nm, 0, &d[i]), 0);
		ck_assert_int_eq(us_object_create(t.backend, d[i], NULL, &o[i]), 0);
		get_put(o[i], 0);
	}
	tu_check(e);

	save = d[1]->lru_min;
	d[1]->lru_min = save + 1000;
	ck_assert_int_eq(us_engine_check(e, msg, sizeof(msg)), -EUCLEAN);
	ck_assert_ptr_ne(strstr(msg, "I8"), NULL);
	d[1]->lru_min = save;
	tu_check(e);

	/* The first on the list stamped later than the next, unmoved. */
	save = o[0]->wb->bw_stamp_ns;
	o[0]->wb->bw_stamp_ns = save + 5;
	ck_assert_int_eq(us_engine_check(e, msg, sizeof(msg)), -EUCLEAN);
	ck_assert_ptr_ne(strstr(msg, "I9"), NULL);
	us__lock(e);
	us__wb_restamped(e, o[0]->wb); /* what a restamp does: fixed */
	us__unlock(e);
	tu_check(e);

	d[2]->pipe_bytes += 1;
	ck_assert_int_eq(us_engine_check(e, msg, sizeof(msg)), -EUCLEAN);
	ck_assert_ptr_ne(strstr(msg, "I10"), NULL);
	d[2]->pipe_bytes -= 1;
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("scale");
	TCase *tc = tcase_create("scale");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_evict_global_order);
	tcase_add_test(tc, test_evict_subtree_limits);
	tcase_add_test(tc, test_sync_covers_before_start);
	tcase_add_test(tc, test_expiry_only_expired);
	tcase_add_test(tc, test_reclaim_mark_expiry);
	tcase_add_test(tc, test_check_new_invariants);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
