/*
 * Fairness of the engine's writeback between many equal domains: N
 * domains, one writer each, all writing twice their max at once to one
 * backend whose in-flight cap holds only a few runs. Every domain
 * must get the same share of the backend (Jain's index of the writers'
 * throughput >= 0.99) and the backend must stay busy (>= 0.95 of its
 * bandwidth), for N = 64, 1,000 and 10,000 -- far more contexts than runs
 * fit in the cap. Virtual time; the writers obey every pause and the gate.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K64 (64ull << 10)
#define MIB (1ull << 20)
#define MS  1000000ull
#define SEC 1000000000ull

#define RUN	 (256ull << 10)	 /* max_flush_bytes */
#define RUNS	 8		 /* the in-flight cap, in runs */
#define BW	 (1ull << 30)	 /* the backend's link, bytes per second */
#define LAT	 (200 * 1000ull) /* per request, after its transfer */
#define DOM_MAX	 MIB		 /* each domain's max; it writes twice that */
#define BUF_SIZE K64

struct writer {
	us_object *o;
	uint64_t off, ready, done_ns;
	bool gated;
};

/* A binary min-heap of writer indices by ready time: a step costs
 * O(log n), so that 10,000 writers cost what they do. */
struct heap {
	uint32_t *v;
	size_t n;
	struct writer *w;
};

static bool before(const struct heap *h, size_t a, size_t b)
{
	return h->w[h->v[a]].ready < h->w[h->v[b]].ready;
}

static void swap(struct heap *h, size_t a, size_t b)
{
	uint32_t t = h->v[a];

	h->v[a] = h->v[b];
	h->v[b] = t;
}

static void heap_push(struct heap *h, uint32_t i)
{
	size_t k = h->n++;

	h->v[k] = i;
	while (k && before(h, k, (k - 1) / 2)) {
		swap(h, k, (k - 1) / 2);
		k = (k - 1) / 2;
	}
}

static uint32_t heap_pop(struct heap *h)
{
	uint32_t top = h->v[0];
	size_t k = 0;

	h->v[0] = h->v[--h->n];
	for (;;) {
		size_t l = 2 * k + 1, r = l + 1, m = k;

		if (l < h->n && before(h, l, m))
			m = l;
		if (r < h->n && before(h, r, m))
			m = r;
		if (m == k)
			break;
		swap(h, k, m);
		k = m;
	}
	return top;
}

struct outcome {
	double jain, util;
	uint64_t end_ns;
};

/* One writer's step at now: the gate, or one buffer dirtied. Returns
 * whether it is done. */
static bool step(struct writer *w, uint64_t now, uint64_t bytes)
{
	uint64_t pause = 0;
	us_buf *b;
	int rc;

	if (w->gated) {
		rc = us_object_balance(w->o, &pause);
		if (rc == -EAGAIN) {
			w->ready = now + (pause ? pause : MS);
			return false;
		}
		tu_assert(rc == 0, "balance: %d", rc);
		w->gated = false;
	}
	rc = us_buf_get(w->o, w->off, BUF_SIZE, US_GET_NODATA | US_GET_NOWAIT, &b);
	if (rc == -EAGAIN) {
		/* Memory: what reclaim can do, then again. */
		rc = us_object_reclaim(w->o, BUF_SIZE, &pause);
		tu_assert(rc == 0 || rc == -EAGAIN, "reclaim: %d", rc);
		w->ready = now + (pause ? pause : MS);
		return false;
	}
	tu_assert(rc >= 0, "get: %d", rc);
	rc = us_buf_dirty(b, &pause);
	tu_assert(rc >= 0, "dirty: %d", rc);
	tu_assert(us_buf_put(b) == 0, "put");
	w->gated = rc == US_DIRTY_OVER_LIMIT;
	w->off += BUF_SIZE;
	w->ready = now + pause;
	if (w->off < bytes)
		return false;
	w->done_ns = now;
	return true;
}

static struct outcome run_equal_domains(unsigned n)
{
	us_engine *e = tu_engine(1ull << 44);
	struct writer *w = calloc(n, sizeof(*w));
	struct heap h = { calloc(n, sizeof(uint32_t)), 0, w };
	uint64_t bytes = 2 * DOM_MAX, now = 0, next_poll = 0, delivered = 0;
	double sum = 0, sq = 0;
	const uint64_t cap = RUNS * RUN;
	struct outcome out = { 0 };
	struct tsim s;
	unsigned i, left = n;

	ck_assert_ptr_nonnull(w);
	ck_assert_ptr_nonnull(h.v);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MAX_FLUSH_BYTES, RUN), 0);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_INIT_BW, BW), 0);
	tsim_init(&s, e, BW, LAT);
	ck_assert_int_eq(us_backend_set_max_inflight(s.backend, RUNS * RUN), 0);
	for (i = 0; i < n; i++) {
		char name[32];
		us_domain *d;

		snprintf(name, sizeof(name), "d%u", i);
		ck_assert_int_eq(us_domain_create(e, NULL, name, 0, &d), 0);
		ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, DOM_MAX), 0);
		ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BYTES, DOM_MAX / 2), 0);
		ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BG_BYTES, DOM_MAX / 4), 0);
		ck_assert_int_eq(us_object_create(s.backend, d, NULL, &w[i].o), 0);
		heap_push(&h, i);
	}

	while (left) {
		struct us_backend_stats bs = { .size = sizeof(bs) };
		uint64_t t = h.n ? w[h.v[0]].ready : UINT64_MAX, c = tsim_next(&s);
		bool dirtied = false;

		if (c < t)
			t = c;
		if (next_poll < t)
			t = next_poll;
		if (t > now)
			now = t;
		tsim_deliver(&s, now);
		/* The host polls at the engine's deadline, and after
		 * completions or dirtying when the backend has room for a run
		 * (its flusher would have been woken). */
		ck_assert_int_eq(us_backend_stats(s.backend, &bs), 0);
		if (now >= next_poll ||
		    (s.completed_bytes != delivered && bs.writeback_bytes + RUN <= cap)) {
			delivered = s.completed_bytes;
			tu_assert(us_engine_poll(e, now, &next_poll) >= 0, "poll");
		}
		while (h.n && w[h.v[0]].ready <= now) {
			uint32_t k = heap_pop(&h);

			dirtied = true;
			if (step(&w[k], now, bytes))
				left--;
			else
				heap_push(&h, k);
		}
		ck_assert_int_eq(us_backend_stats(s.backend, &bs), 0);
		if (dirtied && bs.writeback_bytes + RUN <= cap)
			tu_assert(us_engine_poll(e, now, &next_poll) >= 0, "poll");
		tu_assert(s.max_writeback <= cap, "cap passed: %llu",
			  (unsigned long long)s.max_writeback);
	}

	for (i = 0; i < n; i++) {
		double x = (double)bytes / ((double)w[i].done_ns / SEC);

		tu_assert(w[i].done_ns > 0, "writer %u done at 0", i);
		sum += x;
		sq += x * x;
		if (w[i].done_ns > out.end_ns)
			out.end_ns = w[i].done_ns;
	}
	out.jain = sum * sum / ((double)n * sq);
	/* The backend's work until the last writer was done, against what
	 * its link could carry meanwhile. */
	out.util = (double)s.completed_bytes / ((double)BW * (double)out.end_ns / SEC);

	/* Everything written, nothing lost: the engine can go. */
	for (i = 0; i < n; i++) {
		ck_assert_int_ge(us_object_flush(w[i].o, 0, US_UNLIMITED, 0), 0);
		tsim_deliver(&s, UINT64_MAX - 1);
	}
	tu_check(e);
	/* Each object goes with its own buffers (the engine's destroy would
	 * look for the oldest of all domains per buffer). */
	for (i = 0; i < n; i++)
		ck_assert_int_eq(us_object_destroy(w[i].o), 0);
	tsim_fini(&s);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	free(h.v);
	free(w);
	return out;
}

START_TEST(test_equal_domains)
{
	static const unsigned ns[] = { 64, 1000, 10000 };
	struct outcome o = run_equal_domains(ns[_i]);

	printf("fairness: %u domains: Jain %.4f, backend utilisation %.4f, %.2f s virtual\n",
	       ns[_i], o.jain, o.util, (double)o.end_ns / SEC);
	fflush(stdout);
	ck_assert_msg(o.jain >= 0.99, "%u domains: Jain %.4f", ns[_i], o.jain);
	ck_assert_msg(o.util >= 0.95, "%u domains: utilisation %.4f", ns[_i], o.util);
}
END_TEST

/*
 * The turns themselves: 100 contexts with data past their background
 * threshold, a cap of 5 runs of 4 buffers, every write held until the test
 * completes it. A context's turn is a quarter of a run here (the cap shared
 * by 100 is less): one buffer. Each poll fills the cap with one buffer from
 * each of the next 20 contexts in turn; after 5 polls every context got
 * exactly one turn, and the cap was never passed.
 */
START_TEST(test_turns)
{
	enum { N = 100, BUFS = 8, RUN_BUFS = 4, CAP_RUNS = 5, TURN = CAP_RUNS * RUN_BUFS };
	us_engine *e = tu_engine(1ull << 40);
	us_domain *d[N];
	us_object *o[N];
	struct tb t;
	unsigned i, k, round;

	tb_init(&t, e, true, false); /* holds every write */
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MAX_FLUSH_BYTES, RUN_BUFS * K64), 0);
	ck_assert_int_eq(us_backend_set_max_inflight(t.backend, CAP_RUNS * RUN_BUFS * K64), 0);
	for (i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%u", i);
		ck_assert_int_eq(us_domain_create(e, NULL, name, 0, &d[i]), 0);
		ck_assert_int_eq(us_domain_set_limit(d[i], US_LIMIT_DIRTY_BYTES, 64 * K64), 0);
		ck_assert_int_eq(us_domain_set_limit(d[i], US_LIMIT_DIRTY_BG_BYTES, K64), 0);
		ck_assert_int_eq(us_object_create(t.backend, d[i], NULL, &o[i]), 0);
		for (k = 0; k < BUFS; k++) {
			us_buf *b;

			ck_assert_int_ge(us_buf_get(o[i], k * K64, K64, US_GET_NODATA, &b), 0);
			ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
			ck_assert_int_eq(us_buf_put(b), 0);
		}
	}
	for (round = 0; round < N / TURN; round++) {
		struct us_backend_stats bs = { .size = sizeof(bs) };
		uint64_t next;

		ck_assert_int_eq(us_engine_poll(e, (round + 1) * MS, &next), CAP_RUNS * RUN_BUFS);
		ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
		ck_assert_uint_eq(bs.writeback_bytes, CAP_RUNS * RUN_BUFS * K64);
		/* The next contexts in turn, one buffer each. */
		for (i = 0; i < N; i++)
			ck_assert_uint_eq(tu_stats(d[i]).dirty_bytes,
					  (i < (round + 1) * TURN ? BUFS - 1 : BUFS) * K64);
		tb_complete_all(&t);
		tu_check(e);
	}
	for (i = 0; i < N; i++)
		ck_assert_int_ge(us_object_flush(o[i], 0, US_UNLIMITED, 0), 0);
	tb_complete_all(&t);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fairness");
	TCase *turns = tcase_create("turns"), *tc = tcase_create("equal-domains");

	tcase_add_test(turns, test_turns);
	suite_add_tcase(s, turns);
	tcase_add_loop_test(tc, test_equal_domains, 0, 3);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
