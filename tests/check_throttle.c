/*
 * Smooth dirty throttling (docs/guide.md): the pause curve, its bounds, the
 * hard stop at the dirty limit, the strictest ancestor, and the closed loop
 * against a backend of fixed bandwidth. Virtual time only: rates measured in
 * virtual time are deterministic.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K4  4096u
#define K64 65536u
#define MS  1000000ull
#define SEC 1000000000ull

static us_domain *mk(us_engine *e, us_domain *parent, const char *name, uint64_t bg, uint64_t dirty)
{
	us_domain *d;

	ck_assert_int_eq(us_domain_create(e, parent, name, 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BYTES, dirty), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BG_BYTES, bg), 0);
	return d;
}

static uint64_t pinned(us_domain *d)
{
	struct us_domain_stats s = tu_stats(d);

	return s.dirty_bytes + s.writeback_bytes + s.unstable_bytes;
}

/* Dirties a new buffer; returns us_buf_dirty()'s result, the pause in *p. */
static int dirty_new(us_object *o, uint64_t offset, uint64_t length, uint64_t *p)
{
	us_buf *b;
	int rc;

	ck_assert_int_ge(us_buf_get(o, offset, length, US_GET_NODATA, &b), 0);
	rc = us_buf_dirty(b, p);
	ck_assert_int_ge(rc, 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	return rc;
}

/*
 * Nothing is written back: pinned only grows. bg = 100, dirty = 200 units:
 * freerun 150, setpoint 175. Every pause is returned (min_pause 0).
 */
START_TEST(test_pause_curve)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, NULL, "d", 100 * K4, 200 * K4);
	us_object *o;
	struct tb t;
	uint64_t i, p, prev = 0, max_pause;
	int rc;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MIN_PAUSE_NS, 0), 0);
	ck_assert_int_eq(us_engine_get_param(e, US_PARAM_MAX_PAUSE_NS, &max_pause), 0);
	ck_assert_uint_eq(max_pause, 200 * MS);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	for (i = 0; i < 200; i++) {
		uint64_t before = pinned(d);

		ck_assert_int_eq(us_object_balance(o, &p), 0);
		ck_assert_uint_eq(p, 0);
		rc = dirty_new(o, i * K4, K4, &p);
		if (before + K4 <= 150 * K4) {
			/* Below freerun: never paused. */
			ck_assert_int_eq(rc, 0);
			ck_assert_uint_eq(p, 0);
		} else if (before + K4 < 200 * K4) {
			/* Between freerun and the limit: paused, growing with pinned. */
			ck_assert_int_eq(rc, 0);
			ck_assert_uint_gt(p, 0);
			ck_assert_uint_ge(p, prev);
			ck_assert_uint_le(p, max_pause);
			prev = p;
			/* The writer takes its pause (its pace is owed). */
			ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
		} else {
			/* At the limit: stop, and the gate stays shut. */
			ck_assert_int_eq(rc, US_DIRTY_OVER_LIMIT);
			ck_assert_uint_gt(p, 0);
			ck_assert_uint_le(p, max_pause);
		}
	}
	ck_assert_uint_eq(pinned(d), 200 * K4);
	ck_assert_int_eq(us_object_balance(o, &p), -EAGAIN);
	ck_assert_uint_gt(p, 0);
	ck_assert_uint_le(p, max_pause);
	ck_assert_uint_gt(tu_stats(d).over_limit, 0);
	/* At the setpoint the pause is the full-rate pause: 4 KiB at 100 MiB/s. */
	ck_assert_uint_eq(us_object_bandwidth(o), 100u << 20);
	/* Rewriting dirty data pins nothing new and is not paused, even here. */
	{
		us_buf *b;

		ck_assert_int_eq(us_buf_lookup(o, 0, &b), 0);
		p = 1;
		ck_assert_int_eq(us_buf_dirty(b, &p), 0);
		ck_assert_uint_eq(p, 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 200);
	ck_assert_int_eq(us_object_balance(o, &p), 0);
	ck_assert_uint_eq(p, 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* The pause at the setpoint is bytes / bandwidth, at freerun half of it. */
START_TEST(test_pause_values)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, NULL, "d", 1000 * K4, 2000 * K4);
	us_object *o;
	struct tb t;
	uint64_t p, full = (uint64_t)K4 * SEC / (100u << 20);

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MIN_PAUSE_NS, 0), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	/* Fill to the setpoint (1750 units) minus one buffer, without pauses. */
	ck_assert_int_eq(dirty_new(o, 0, 1749 * K4, &p), 0);
	ck_assert_int_eq(us_engine_clock_advance(e, p), 0); /* its pause, taken */
	dirty_new(o, 1749 * K4, K4, &p);		    /* pinned = setpoint: pos_ratio 1 */
	ck_assert_uint_le(p > full ? p - full : full - p, full / 100 + 1);
	ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MAX_PAUSE_NS, full / 2), 0);
	dirty_new(o, 1750 * K4, K4, &p); /* capped by max_pause */
	ck_assert_uint_eq(p, full / 2);
	t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 3);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* Short pauses accumulate per object until min_pause. */
START_TEST(test_min_pause_accumulates)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, NULL, "d", 1000 * K4, 2000 * K4);
	us_object *o;
	struct tb t;
	uint64_t i, p, total = 0, nonzero = 0;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	dirty_new(o, 0, 1600 * K4, &p);
	ck_assert_int_eq(us_engine_clock_advance(e, p), 0); /* its pause, taken */
	struct us_domain_stats s0 = tu_stats(d);

	for (i = 0; i < 300; i++) {
		dirty_new(o, (1600 + i) * K4, K4, &p);
		if (p) {
			ck_assert_uint_ge(p, 10 * MS);
			ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
			nonzero++;
		}
		total += p;
	}
	/* 300 pauses of ~40 us each came back as a few of >= 10 ms. */
	ck_assert_uint_gt(nonzero, 0);
	ck_assert_uint_lt(nonzero, 10);
	ck_assert_uint_eq(tu_stats(d).paused - s0.paused, nonzero);
	ck_assert_uint_eq(tu_stats(d).pause_ns - s0.pause_ns, total);
	t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 301);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* A writer is held by the strictest of its domain and its ancestors. */
START_TEST(test_strictest_ancestor)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *p = mk(e, NULL, "p", 20 * K4, 40 * K4);
	us_domain *c = mk(e, p, "c", 1000 * K4, 2000 * K4);
	us_domain *s = mk(e, p, "s", 1000 * K4, 2000 * K4);
	us_object *oc, *os;
	struct tb t;
	uint64_t i, pz;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, c, NULL, &oc), 0);
	ck_assert_int_eq(us_object_create(t.backend, s, NULL, &os), 0);
	/* The sibling pins 35 units of the parent's 40. */
	for (i = 0; i < 35; i++)
		dirty_new(os, i * K4, K4, &pz);
	/* c is far below its own thresholds but stops at the parent's limit. */
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(dirty_new(oc, i * K4, K4, &pz), 0);
	ck_assert_int_eq(dirty_new(oc, 4 * K4, K4, &pz), US_DIRTY_OVER_LIMIT);
	ck_assert_int_eq(us_object_balance(oc, &pz), -EAGAIN);
	ck_assert_uint_eq(pinned(p), 40 * K4);
	t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(os, 0, US_UNLIMITED, 0), 35);
	ck_assert_int_eq(us_object_balance(oc, &pz), 0);
	ck_assert_int_eq(us_object_flush(oc, 0, US_UNLIMITED, 0), 5);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

struct loop_result {
	double rate;	     /* writer bytes per second over the second half */
	double mean_pinned;  /* over the second half */
	double spread;	     /* standard deviation of pinned, second half */
	uint64_t max_pinned; /* whole run */
	uint64_t max_pause;  /* whole run */
	uint64_t bw;	     /* final estimate */
};

/*
 * One writer of 64 KiB buffers against a backend of bw bytes per second
 * with 1 ms latency, for secs seconds of virtual time. The writer obeys
 * the gate and every pause; the host polls at every deadline and after
 * every completion.
 */
static struct loop_result closed_loop(uint64_t bw, uint64_t secs, uint64_t bg, uint64_t dirty)
{
	us_engine *e = tu_engine(1ull << 40);
	us_domain *d = mk(e, NULL, "w", bg, dirty);
	struct loop_result r = { 0 };
	us_object *o;
	struct tsim s;
	uint64_t now = 0, ready = 0, next_poll = 0, off = 0, end = secs * SEC, half = end / 2;
	uint64_t written_half = 0, samples = 0;
	double sum = 0, sum2 = 0;

	tsim_init(&s, e, bw, MS);
	ck_assert_int_eq(us_object_create(s.backend, d, NULL, &o), 0);
	while (now < end) {
		uint64_t t = ready, c = tsim_next(&s), p;

		if (c < t)
			t = c;
		if (next_poll < t)
			t = next_poll;
		if (t < now)
			t = now;
		now = t;
		tsim_deliver(&s, now);
		ck_assert_int_ge(us_engine_poll(e, now, &next_poll), 0);
		if (now >= ready) {
			us_buf *b;
			int rc = us_object_balance(o, &p);

			if (rc == -EAGAIN) {
				ready = now + p;
			} else {
				ck_assert_int_eq(rc, 0);
				ck_assert_int_ge(us_buf_get(o, off, K64, US_GET_NODATA, &b), 0);
				rc = us_buf_dirty(b, &p);
				ck_assert_int_ge(rc, 0);
				ck_assert_int_eq(us_buf_put(b), 0);
				/* Evict what is clean so memory does not matter here. */
				ck_assert_int_eq(us_buf_lookup(o, off, &b), 0);
				ck_assert_int_eq(us_buf_put(b), 0);
				off += K64;
				if (now >= half)
					written_half += K64;
				if (p > r.max_pause)
					r.max_pause = p;
				ready = now + p;
				ck_assert_int_ge(us_engine_poll(e, now, &next_poll), 0);
			}
		}
		if (pinned(d) > r.max_pinned)
			r.max_pinned = pinned(d);
		if (now >= half) {
			double x = (double)pinned(d);

			sum += x;
			sum2 += x * x;
			samples++;
		}
	}
	r.rate = (double)written_half / ((double)(end - half) / 1e9);
	r.mean_pinned = sum / (double)samples;
	r.spread = sqrt(sum2 / (double)samples - r.mean_pinned * r.mean_pinned);
	r.bw = us_object_bandwidth(o);
	/* Finish: write everything back. */
	while (us_object_flush(o, 0, US_UNLIMITED, 0) > 0 || tsim_next(&s) != UINT64_MAX)
		tsim_deliver(&s, UINT64_MAX - 1);
	tu_check(e);
	tsim_fini(&s);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	return r;
}

START_TEST(test_closed_loop_converges)
{
	static const uint64_t bws[] = { 8u << 20, 64u << 20, 400u << 20 };
	uint64_t bw = bws[_i];
	uint64_t bg = 16u << 20, dirty = 32u << 20;
	double freerun = (double)(bg + dirty) / 2, setpoint = (freerun + (double)dirty) / 2;
	struct loop_result r = closed_loop(bw, 60, bg, dirty);

	printf("bw %.0f MiB/s: writer %.2f MiB/s (%.1f %%), pinned mean %.2f MiB (setpoint %.2f), "
	       "spread %.3f MiB, max %.2f MiB, max pause %.1f ms, bw estimate %.2f MiB/s\n",
	       (double)bw / 1048576, r.rate / 1048576, 100 * r.rate / (double)bw,
	       r.mean_pinned / 1048576, setpoint / 1048576, r.spread / 1048576,
	       (double)r.max_pinned / 1048576, (double)r.max_pause / 1e6, (double)r.bw / 1048576);
	/* The writer runs at the backend's speed. */
	ck_assert_msg(r.rate >= 0.95 * (double)bw && r.rate <= 1.05 * (double)bw, "rate %.0f",
		      r.rate);
	/* pinned settles at the setpoint, within 5 %... */
	ck_assert_msg(r.mean_pinned > 0.95 * setpoint && r.mean_pinned < 1.05 * setpoint,
		      "mean %.0f, setpoint %.0f", r.mean_pinned, setpoint);
	/* ...without stop-and-go: its spread is a small part of the control range. */
	ck_assert_msg(r.spread < 0.25 * ((double)dirty - freerun), "spread %.0f", r.spread);
	/* Never past the limit by more than one buffer; no pause over 200 ms. */
	ck_assert_uint_le(r.max_pinned, dirty + K64);
	ck_assert_uint_le(r.max_pause, 200 * MS);
	/* The estimate found the backend. */
	ck_assert_msg((double)r.bw > 0.9 * (double)bw && (double)r.bw < 1.1 * (double)bw, "bw %llu",
		      (unsigned long long)r.bw);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("throttle");
	TCase *tc = tcase_create("law");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_pause_curve);
	tcase_add_test(tc, test_pause_values);
	tcase_add_test(tc, test_min_pause_accumulates);
	tcase_add_test(tc, test_strictest_ancestor);
	tcase_add_loop_test(tc, test_closed_loop_converges, 0, 3);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
