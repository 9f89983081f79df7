/*
 * The engine's own writeback: triggers, order, coalescing, the in-flight
 * cap, isolation between domains and between backends. Virtual time only.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define K4  4096u
#define MS  1000000ull
#define SEC 1000000000ull

static us_domain *mk(us_engine *e, const char *name, uint64_t bg, uint64_t dirty)
{
	us_domain *d;

	ck_assert_int_eq(us_domain_create(e, NULL, name, 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BYTES, dirty), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BG_BYTES, bg), 0);
	return d;
}

static void dirty_at(us_object *o, uint64_t offset, uint64_t length)
{
	us_buf *b;

	ck_assert_int_ge(us_buf_get(o, offset, length, US_GET_NODATA, &b), 0);
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
}

static int poll_at(us_engine *e, uint64_t t)
{
	uint64_t next;
	int rc = us_engine_poll(e, t, &next);

	ck_assert_int_ge(rc, 0);
	ck_assert_uint_gt(next, us_engine_now(e));
	return rc;
}

/* Writes everything back and completes it, so the engine can go. */
static void drain(us_engine *e, struct tb *t, struct tsim *s, us_object **objs, size_t n)
{
	size_t i;

	if (t)
		t->mode = TB_STABLE;
	for (i = 0; i < n; i++) {
		if (t)
			tb_complete_all(t);
		if (s)
			tsim_deliver(s, UINT64_MAX - 1);
		ck_assert_int_ge(us_object_flush(objs[i], 0, US_UNLIMITED, 0), 0);
		if (s)
			tsim_deliver(s, UINT64_MAX - 1);
	}
	if (t)
		tb_complete_all(t);
	tu_check(e);
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).dirty_bytes +
				  tu_stats(us_engine_root(e)).writeback_bytes,
			  0);
}

START_TEST(test_background_threshold)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", 100 * K4, 200 * K4);
	us_object *o;
	struct tb t;
	uint64_t i;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	/* Up to the threshold: nothing is written, however often we poll. */
	for (i = 0; i < 100; i++) {
		dirty_at(o, i * K4, K4);
		ck_assert_int_eq(poll_at(e, (i + 1) * MS), 0);
	}
	ck_assert_uint_eq(t.flushes, 0);
	/* One byte over: background writeback of the domain's dirty data. */
	dirty_at(o, 100 * K4, K4);
	ck_assert_int_eq(poll_at(e, 200 * MS), 101);
	ck_assert_uint_gt(t.nruns, 0);
	ck_assert_int_eq(t.runs[0].reason, US_REASON_BACKGROUND);
	/* Runs are coalesced, ascending, at most max_flush_bytes. */
	ck_assert_uint_eq(t.runs[0].offset, 0);
	ck_assert_uint_eq(t.runs[0].length, 101 * K4);
	ck_assert_uint_eq(tu_stats(d).bg_flushed, 101);
	ck_assert_uint_eq(tu_stats(d).writeback_bytes, 101 * K4);
	/* Writeback is still pinned: writing more does not flush twice. */
	ck_assert_int_eq(poll_at(e, 201 * MS), 0);
	drain(e, &t, NULL, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_expiry)
{
	us_engine *e = tu_engine(1u << 30);
	us_object *o, *p;
	struct tb t;
	uint64_t s;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &p), 0);
	/* o dirtied at 1 s, p at 12 s: expiry after 30 s, checked every 5 s. */
	ck_assert_int_eq(us_engine_clock_advance(e, 1 * SEC), 0);
	dirty_at(o, 0, K4);
	ck_assert_int_eq(us_engine_clock_advance(e, 11 * SEC), 0);
	dirty_at(p, 0, K4);
	for (s = 12; s <= 35; s++) {
		int n = poll_at(e, s * SEC);

		/* Checked at 35 s: o expired at 31 s; p not before 42 s. */
		ck_assert_int_eq(n, s == 35 ? 1 : 0);
	}
	ck_assert_uint_eq(t.nruns, 1);
	ck_assert_ptr_eq(t.runs[0].obj, o);
	ck_assert_int_eq(t.runs[0].reason, US_REASON_EXPIRY);
	ck_assert_uint_eq(t.runs[0].when_ns, 35 * SEC);
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).expired_flushed, 1);
	for (s = 36; s <= 45; s++)
		ck_assert_int_eq(poll_at(e, s * SEC), s == 45 ? 1 : 0);
	ck_assert_ptr_eq(t.runs[1].obj, p);
	/* The interval and the age are parameters. */
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_DIRTY_EXPIRE_NS, 2 * SEC), 0);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_WRITEBACK_INTERVAL_NS, SEC), 0);
	dirty_at(o, K4, K4);
	ck_assert_int_eq(poll_at(e, 46 * SEC), 0);
	ck_assert_int_eq(poll_at(e, 47 * SEC), 1); /* 2 s old at 47 s */
	drain(e, &t, NULL, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_order_and_runs)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", K4, 1000 * K4);
	us_object *a, *b;
	struct tb t;
	int i;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_MAX_FLUSH_BYTES, 3 * K4), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &a), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &b), 0);
	/* b is dirtied first, then a, each out of offset order, with a gap. */
	dirty_at(b, 8 * K4, K4);
	ck_assert_int_eq(us_engine_clock_advance(e, MS), 0);
	for (i = 4; i >= 0; i--)
		dirty_at(a, (uint64_t)i * K4, K4);
	dirty_at(a, 9 * K4, K4);
	dirty_at(b, 0, K4);
	ck_assert_int_eq(poll_at(e, 2 * MS), 8);
	/* Oldest object first; within it ascending offset, runs of <= 3 buffers. */
	ck_assert_uint_eq(t.nruns, 5);
	ck_assert_ptr_eq(t.runs[0].obj, b);
	ck_assert_uint_eq(t.runs[0].offset, 0);
	ck_assert_ptr_eq(t.runs[1].obj, b);
	ck_assert_uint_eq(t.runs[1].offset, 8 * K4);
	ck_assert_ptr_eq(t.runs[2].obj, a);
	ck_assert_uint_eq(t.runs[2].offset, 0);
	ck_assert_uint_eq(t.runs[2].length, 3 * K4);
	ck_assert_uint_eq(t.runs[3].offset, 3 * K4);
	ck_assert_uint_eq(t.runs[3].length, 2 * K4);
	ck_assert_uint_eq(t.runs[4].offset, 9 * K4);
	drain(e, &t, NULL, (us_object *[]){ a, b }, 2);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_inflight_cap_and_one_write_per_buffer)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", K4, 4000 * K4);
	us_object *o;
	struct tb t;
	struct us_backend_stats bs = { .size = sizeof(bs) };
	uint64_t i, written = 0;
	us_buf *b;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_backend_set_max_inflight(t.backend, 16 * K4), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	for (i = 0; i < 100; i++)
		dirty_at(o, i * K4, K4);
	/* Each poll fills the cap; each completion makes room for one more. */
	for (i = 0; i < 400 && written < 100; i++) {
		written += (uint64_t)poll_at(e, (i + 1) * MS);
		ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
		ck_assert_uint_le(bs.writeback_bytes, 16 * K4);
		ck_assert_uint_eq(bs.writeback_bytes, t.npending * K4);
		if (i == 0)
			ck_assert_uint_eq(t.npending, 16);
		/*
		 * Redirty one buffer in flight, free a slot and poll again: the
		 * redirtied buffer must not be handed out a second time while
		 * its first write is in flight.
		 */
		if (t.npending >= 2) {
			us_buf *r = t.pending[0];
			size_t k, seen = 0;

			ck_assert_int_eq(us_buf_lookup(o, us_buf_offset(r), &b), 0);
			ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
			ck_assert_int_eq(us_buf_put(b), 0);
			ck_assert_int_eq(tb_complete(&t, t.npending - 1, US_WRITE_STABLE, 0, 0), 0);
			written += (uint64_t)poll_at(e, (i + 1) * MS + 1);
			for (k = 0; k < t.npending; k++)
				seen += t.pending[k] == r;
			ck_assert_uint_eq(seen, 1);
			ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
			ck_assert_uint_le(bs.writeback_bytes, 16 * K4);
			/* Its write completes: DIRTY again, it goes around once more. */
			for (k = 0; t.pending[k] != r; k++)
				;
			ck_assert_int_eq(tb_complete(&t, k, US_WRITE_STABLE, 0, 0), 0);
			ck_assert_int_eq(us_buf_state(r), US_BUF_DIRTY);
			written--;
		}
		if (t.npending)
			ck_assert_int_eq(tb_complete(&t, t.npending - 1, US_WRITE_STABLE, 0, 0), 0);
		tu_check(e);
	}
	drain(e, &t, NULL, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * Two domains on one backend: A's completions trickle (lane 1 at 64 KiB/s),
 * with a tiny dirty limit (_i == 0) or a large one that would let it fill
 * the backend's whole in-flight cap (_i == 1) were it not for the fair
 * share. B's writeback must flow at the backend's speed regardless, and its
 * data must not wait behind A's queue.
 */
START_TEST(test_isolation_between_domains)
{
	uint64_t a_limit = _i == 0 ? 8 * K4 : 1024 * K4;
	us_engine *e = tu_engine(1ull << 32);
	us_domain *a = mk(e, "a", 4 * K4, a_limit), *b = mk(e, "b", 64 * K4, 4096 * K4);
	us_object *oa, *ob;
	struct tsim s;
	uint64_t t = 0, off_a = 0, off_b = 0, b_written = 0, end = 10 * SEC;

	tsim_init(&s, e, 8u << 20, MS);
	ck_assert_int_eq(us_backend_set_max_inflight(s.backend, 256 * K4), 0);
	s.lane[1].bw = 64 << 10;
	ck_assert_int_eq(us_object_create(s.backend, a, NULL, &oa), 0);
	ck_assert_int_eq(us_object_create(s.backend, b, NULL, &ob), 0);
	s.slow[0] = oa;
	/* Each millisecond, both writers dirty what they are allowed to. */
	for (t = MS; t <= end; t += MS) {
		uint64_t pause;

		tsim_deliver(&s, t);
		poll_at(e, t);
		while (us_object_balance(oa, &pause) == 0 && off_a * K4 < (t / MS) * 8 * K4)
			dirty_at(oa, (off_a++) * K4, K4);
		while (us_object_balance(ob, &pause) == 0 && off_b * K4 < (t / MS) * 8 * K4) {
			dirty_at(ob, (off_b++) * K4, K4);
			b_written += K4;
		}
		poll_at(e, t);
		ck_assert_uint_le(s.max_writeback, 256 * K4);
	}
	/* B wrote at ~8 MiB/s (32 KiB per ms asked for, backend 8 MiB/s). */
	ck_assert_uint_ge(b_written, 7ull * (8u << 20) * (end / SEC) / 8);
	/* A was throttled (paced, or stopped at its limit), not B. */
	ck_assert_uint_gt(tu_stats(a).over_limit + tu_stats(a).paused, 0);
	ck_assert_uint_le(tu_stats(a).dirty_bytes + tu_stats(a).writeback_bytes, a_limit + K4);
	ck_assert_uint_le(off_a * K4, (64u << 10) * (end / SEC) + a_limit + K4);
	/* A never held more than its share of the cap in flight. */
	ck_assert_uint_le(tu_stats(a).writeback_bytes, 128 * K4);
	drain(e, NULL, &s, (us_object *[]){ oa, ob }, 2);
	tsim_fini(&s);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* A backend that never completes does not stop another backend's writeback. */
START_TEST(test_stalled_backend_does_not_starve_another)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", 8 * K4, 512 * K4);
	us_object *o1, *o2;
	struct tb stall;
	struct tsim s;
	uint64_t t, i = 0, j = 0;

	tb_init(&stall, e, true, false); /* holds everything, forever */
	tsim_init(&s, e, 4u << 20, MS);
	ck_assert_int_eq(us_backend_set_max_inflight(stall.backend, 16 * K4), 0);
	ck_assert_int_eq(us_object_create(stall.backend, d, NULL, &o1), 0);
	ck_assert_int_eq(us_object_create(s.backend, d, NULL, &o2), 0);
	for (t = MS; t <= SEC; t += MS) {
		tsim_deliver(&s, t);
		if (i < 64)
			dirty_at(o1, (i++) * K4, K4);
		dirty_at(o2, (j++) * K4, K4);
		poll_at(e, t);
	}
	/* The stalled backend holds its cap, no more; the other one flows. */
	ck_assert_uint_eq(stall.npending, 16);
	ck_assert_uint_ge(s.completed_bytes, (j - 16) * K4);
	drain(e, &stall, &s, (us_object *[]){ o1, o2 }, 2);
	tsim_fini(&s);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* Flushing never stops while a domain is over its thresholds, unstable or not. */
START_TEST(test_flushing_continues_over_threshold)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", 8 * K4, 16 * K4);
	us_object *o;
	struct tb t;
	uint64_t i;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	/* Over the dirty threshold with nothing unstable (the Lustre livelock). */
	for (i = 0; i < 20; i++)
		dirty_at(o, i * K4, K4);
	ck_assert_uint_eq(tu_stats(d).unstable_bytes, 0);
	for (i = 0; i < 5; i++) {
		int n = poll_at(e, (i + 1) * MS);

		ck_assert_int_eq(n, i == 0 ? 20 : 0);
		ck_assert_int_eq(t.runs[0].reason, US_REASON_THROTTLE);
		tb_complete_all(&t);
	}
	/* Again, now that the domain holds no unstable data at all: all of the
	 * dirty data is written, and then it is all unstable. */
	t.mode = TB_UNSTABLE;
	for (i = 20; i < 40; i++)
		dirty_at(o, i * K4, K4);
	ck_assert_int_eq(poll_at(e, 10 * MS), 20);
	ck_assert_uint_eq(tu_stats(d).unstable_bytes, 20 * K4);
	ck_assert_uint_eq(tu_stats(d).dirty_bytes, 0);
	us_backend_commit_done(t.backend, UINT64_MAX);
	drain(e, &t, NULL, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * The Lustre livelock the other way round: with the domain far over its
 * thresholds because of unstable data nobody commits, new dirty data is
 * still written at every poll.
 */
START_TEST(test_flushing_continues_with_unstable)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", 8 * K4, 16 * K4);
	us_object *o;
	struct tb t;
	uint64_t i, j, off = 0;

	tb_init(&t, e, true, false);
	t.mode = TB_UNSTABLE; /* acknowledged at once, never committed */
	ck_assert_int_eq(us_backend_set_max_inflight(t.backend, 4 * K4), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	for (j = 0; j < 8; j++) /* to the background threshold, not past it */
		dirty_at(o, (off++) * K4, K4);
	ck_assert_int_eq(poll_at(e, MS), 0);
	for (i = 0; i < 8; i++) {
		size_t runs = t.nruns;

		for (j = 0; j < 4; j++)
			dirty_at(o, (off++) * K4, K4);
		/* Everything dirty goes, the first time the 8 old buffers too. */
		ck_assert_int_eq(poll_at(e, (i + 2) * MS), i == 0 ? 12 : 4);
		ck_assert_uint_gt(t.nruns, runs);
		ck_assert(t.runs[t.nruns - 1].reason == US_REASON_BACKGROUND ||
			  t.runs[t.nruns - 1].reason == US_REASON_THROTTLE);
		ck_assert_uint_eq(tu_stats(d).dirty_bytes, 0);
		ck_assert_uint_eq(tu_stats(d).unstable_bytes, off * K4);
	}
	us_backend_commit_done(t.backend, UINT64_MAX);
	drain(e, &t, NULL, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * A filled the backend's whole in-flight cap while it was alone, and its
 * writes are stuck; B starts later: B still gets its share at once.
 */
START_TEST(test_isolation_late_start)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *a = mk(e, "a", K4, 1000 * K4), *b = mk(e, "b", K4, 1000 * K4);
	us_object *oa, *ob;
	struct tb t;
	struct us_backend_stats bs = { .size = sizeof(bs) };
	uint64_t i;

	tb_init(&t, e, true, false); /* holds every write */
	ck_assert_int_eq(us_backend_set_max_inflight(t.backend, 16 * K4), 0);
	ck_assert_int_eq(us_object_create(t.backend, a, NULL, &oa), 0);
	ck_assert_int_eq(us_object_create(t.backend, b, NULL, &ob), 0);
	for (i = 0; i < 64; i++)
		dirty_at(oa, i * K4, K4);
	ck_assert_int_eq(poll_at(e, MS), 16);
	for (i = 0; i < 16; i++)
		dirty_at(ob, i * K4, K4);
	/* Two contexts now: B's share is half the cap, A has it all. */
	ck_assert_int_eq(poll_at(e, 2 * MS), 8);
	ck_assert_uint_eq(tu_stats(b).writeback_bytes, 8 * K4);
	ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
	ck_assert_uint_eq(bs.writeback_bytes, 24 * K4);
	/* As A's writes complete, A does not get back above its share. */
	for (i = 0; i < 16; i++) {
		size_t k;

		for (k = 0; k < t.npending && us_buf_object(t.pending[k]) != oa; k++)
			;
		if (k < t.npending)
			ck_assert_int_eq(tb_complete(&t, k, US_WRITE_STABLE, 0, 0), 0);
		poll_at(e, (3 + i) * MS);
		ck_assert_uint_le(tu_stats(a).writeback_bytes, 16 * K4 - (i + 1) * K4 > 8 * K4 ?
								       16 * K4 - (i + 1) * K4 :
								       8 * K4);
	}
	drain(e, &t, NULL, (us_object *[]){ oa, ob }, 2);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * One domain on two backends: the first stalls with the domain's whole
 * dirty limit in flight; the domain's writer to the second backend keeps
 * going on its context's floor, and the dirty limit is passed by no more
 * than half of it.
 */
START_TEST(test_context_floor_between_backends)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *d = mk(e, "d", 8 * K4, 16 * K4);
	us_object *os, *of;
	struct tb stall;
	struct tsim s;
	uint64_t t, i, off = 0, pause;

	tb_init(&stall, e, true, false);
	tsim_init(&s, e, 4u << 20, MS);
	ck_assert_int_eq(us_object_create(stall.backend, d, NULL, &os), 0);
	ck_assert_int_eq(us_object_create(s.backend, d, NULL, &of), 0);
	for (i = 0; i < 16; i++)
		dirty_at(os, i * K4, K4);
	poll_at(e, MS);
	ck_assert_uint_eq(stall.npending, 16);
	ck_assert_int_eq(us_object_balance(os, &pause), -EAGAIN);
	for (t = 2 * MS; t <= 2 * SEC; t += MS) {
		tsim_deliver(&s, t);
		poll_at(e, t);
		for (i = 0; i < 8 && us_object_balance(of, &pause) == 0; i++)
			dirty_at(of, (off++) * K4, K4);
		poll_at(e, t);
		ck_assert_uint_le(tu_stats(d).dirty_bytes + tu_stats(d).writeback_bytes,
				  16 * K4 + 16 * K4 / 2 + K4);
	}
	/* The stalled context's writers stay stopped; the other wrote on. */
	ck_assert_int_eq(us_object_balance(os, &pause), -EAGAIN);
	ck_assert_uint_ge(off * K4, 1u << 20);
	drain(e, &stall, &s, (us_object *[]){ os, of }, 2);
	tsim_fini(&s);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* Blocking calls from inside a callback refuse instead of waiting. */
static int deadlk_dirty = 1, deadlk_wait = 1;

static int deadlk_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
			uint64_t length, enum us_reason reason)
{
	size_t i;

	(void)ctx;
	(void)offset;
	(void)length;
	(void)reason;
	deadlk_dirty = us_buf_dirty(bufs[0], NULL);
	deadlk_wait = us_object_balance_wait(obj);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0), 0);
	return 0;
}

START_TEST(test_blocking_inside_callback)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = deadlk_flush,
				      .sync = tu_sync_ok };
	struct us_engine_options opts;
	us_engine *e;
	us_backend *bk;
	us_object *o;
	us_buf *b;

	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.flusher_threads = 1;
	ck_assert_int_eq(us_engine_create(&opts, &e), 0);
	ck_assert_int_eq(us_backend_create(e, &ops, NULL, &bk), 0);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, K4, 0, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0); /* blocking form, below freerun */
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(deadlk_dirty, -EDEADLK);
	ck_assert_int_eq(deadlk_wait, -EDEADLK);
	/* Outside the callback the same calls work. */
	ck_assert_int_eq(us_object_balance_wait(o), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("writeback");
	TCase *tc = tcase_create("policy");

	tcase_add_test(tc, test_background_threshold);
	tcase_add_test(tc, test_expiry);
	tcase_add_test(tc, test_order_and_runs);
	tcase_add_test(tc, test_inflight_cap_and_one_write_per_buffer);
	tcase_add_loop_test(tc, test_isolation_between_domains, 0, 2);
	tcase_add_test(tc, test_stalled_backend_does_not_starve_another);
	tcase_add_test(tc, test_flushing_continues_over_threshold);
	tcase_add_test(tc, test_flushing_continues_with_unstable);
	tcase_add_test(tc, test_isolation_late_start);
	tcase_add_test(tc, test_context_floor_between_backends);
	tcase_add_test(tc, test_blocking_inside_callback);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
