/*
 * Reclaim details: the arena purge after eviction, the backoff of an
 * object whose writes fail, and a charge that waits for room on a backend
 * that other domains' writes fill.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef US_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

/* The arena's resident bytes, from fresh statistics. */
static size_t arena_resident(unsigned ind)
{
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch), resident = 0, rsz = sizeof(resident);
	char name[64];

	ck_assert_int_eq(mallctl("epoch", &epoch, &sz, &epoch, sz), 0);
	snprintf(name, sizeof(name), "stats.arenas.%u.resident", ind);
	ck_assert_int_eq(mallctl(name, &resident, &rsz, NULL, 0), 0);
	return resident;
}
#endif

/*
 * A domain with its own arena fills 16 MiB of payload; lowering its max to
 * 4 MiB evicts 12 MiB, and the arena is purged after the eviction: the
 * arena's resident memory, read from jemalloc's statistics, falls with the
 * charged bytes.
 */
START_TEST(test_purge_after_reclaim)
{
#ifndef US_WITH_JEMALLOC
	fprintf(stderr, "purge: built without jemalloc, nothing to measure\n");
#else
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d;
	us_object *o;
	size_t before, after;
	int i;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d), 0);
	ck_assert(d->has_arena);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	for (i = 0; i < 256; i++) {
		us_buf *b;

		ck_assert_int_eq(us_buf_get(o, (uint64_t)i << 16, 1 << 16, 0, &b), 1);
		memset(us_buf_data(b), 0x5a, 1 << 16); /* touch every page */
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	before = arena_resident(d->arena);
	ck_assert_uint_ge(before, 16u << 20);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 4u << 20), 0);
	ck_assert_uint_eq(tu_stats(d).charged_bytes, 4u << 20);
	ck_assert_uint_eq(tu_stats(d).evictions, 192);
	after = arena_resident(d->arena);
	fprintf(stderr, "purge: arena resident %zu KiB before, %zu KiB after evicting 12 MiB\n",
		before >> 10, after >> 10);
	ck_assert_uint_lt(after, before - (8u << 20));
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
#endif
}
END_TEST

static int fail_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		      uint64_t len, enum us_reason reason)
{
	uint64_t *calls = ctx;

	(void)o;
	(void)bufs;
	(void)n;
	(void)off;
	(void)len;
	(void)reason;
	++*calls;
	return -EIO;
}

/*
 * An object whose flush keeps failing is retried with backoff (100 ms,
 * doubling), not at every poll; its data stays dirty, counted.
 */
START_TEST(test_flush_backoff)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = fail_flush,
				      .sync = tu_sync_ok };
	us_engine *e = tu_engine(1u << 30);
	us_backend *bk;
	us_domain *d;
	us_object *o;
	uint64_t calls = 0, now, next = 0, i;

	ck_assert_int_eq(us_backend_create(e, &ops, &calls, &bk), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_DIRTY_BG_BYTES, 64 << 10), 0);
	ck_assert_int_eq(us_object_create(bk, d, NULL, &o), 0);
	for (i = 0; i < 32; i++) {
		us_buf *b;
		uint64_t p;

		/* Every other page: each flush call carries 32 runs, and one
		 * failed call is one attempt, not 32. */
		ck_assert_int_eq(us_buf_get(o, i << 13, 4096, US_GET_NODATA, &b), 1);
		ck_assert_int_ge(us_buf_dirty(b, &p), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	/* Poll every 10 ms for 3 s: past the background threshold, every poll
	 * would flush; the backoff allows 100, 200, 400, 800, 1600 ms gaps. */
	for (now = 0; now <= 3000000000u; now += 10000000u)
		ck_assert_int_ge(us_engine_poll(e, now, &next), 0);
	fprintf(stderr, "backoff: %llu flush calls in 3 s of polls every 10 ms\n",
		(unsigned long long)calls);
	ck_assert_uint_ge(calls, 4);
	ck_assert_uint_le(calls, 7);
	ck_assert_uint_eq(tu_stats(d).dirty_bytes, 32 * 4096);
	tu_check(e);
	/* The user gives up on the data: drop it (truncate), then destroy. */
	for (i = 0; i < 32; i++) {
		us_buf *b;

		ck_assert_int_eq(us_buf_get(o, i << 13, 4096, US_GET_NOCREATE, &b), 0);
		ck_assert_int_eq(us_buf_drop(b), 0);
	}
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* A backend that fails its first flush call, then writes stable; it
 * records when it was called. */
struct once {
	us_engine *e;
	uint64_t calls, at[8];
};

static int once_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		      uint64_t len, enum us_reason reason)
{
	struct once *x = ctx;
	size_t i;

	(void)o;
	(void)off;
	(void)len;
	(void)reason;
	if (x->calls < 8)
		x->at[x->calls] = us_engine_now(x->e);
	if (x->calls++ == 0)
		return -EIO;
	for (i = 0; i < n; i++)
		if (us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0))
			return -EIO;
	return 0;
}

/*
 * A failed expiry flush keeps its data's age: it is retried after the
 * backoff (100 ms), not a whole dirty_expire later.
 */
START_TEST(test_failed_flush_keeps_age)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = once_flush,
				      .sync = tu_sync_ok };
	us_engine *e = tu_engine(1u << 30);
	struct once x = { .e = e };
	us_backend *bk;
	us_object *o;
	us_buf *b;
	uint64_t p, now, next = 0;

	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_DIRTY_EXPIRE_NS, 1000000000u), 0);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_WRITEBACK_INTERVAL_NS, 100000000u), 0);
	ck_assert_int_eq(us_backend_create(e, &ops, &x, &bk), 0);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, 4096, US_GET_NODATA, &b), 1);
	ck_assert_int_ge(us_buf_dirty(b, &p), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	for (now = 0; now <= 2500000000u && x.calls < 2; now += 10000000u)
		ck_assert_int_ge(us_engine_poll(e, now, &next), 0);
	ck_assert_uint_eq(x.calls, 2);
	fprintf(stderr, "failed expiry flush at %.2f s, retried at %.2f s\n", x.at[0] / 1e9,
		x.at[1] / 1e9);
	ck_assert_uint_ge(x.at[0], 1000000000u);
	ck_assert_uint_le(x.at[1], x.at[0] + 300000000u);
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).dirty_bytes, 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* After commit_lost the restarted server may number its writes from 1
 * again: a write acknowledged with a low seq is unstable, not clean. */
START_TEST(test_commit_lost_renumbers)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_object *o;
	us_buf *b;
	uint64_t p;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, 4096, US_GET_NODATA, &b), 1);
	ck_assert_int_ge(us_buf_dirty(b, &p), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&t, 0, US_WRITE_UNSTABLE, 5, 0), 0);
	ck_assert_int_eq(us_backend_commit_done(t.backend, 5), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_ge(us_buf_dirty(b, &p), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&t, 0, US_WRITE_UNSTABLE, 6, 0), 0);
	ck_assert_int_eq(us_backend_commit_lost(t.backend), 1); /* restart */
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&t, 0, US_WRITE_UNSTABLE, 1, 0), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_backend_commit_done(t.backend, 1), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_put(b), 0);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * A domain whose dirty data waits for room on a backend whose in-flight cap
 * another domain's write fills (a slow link shared by several domains): its
 * charge waits in reclaim for as long as that write is in flight, since its
 * completion is what lets the domain's data go, instead of counting the
 * waits as stalls and failing with ENOMEM after US_PARAM_RECLAIM_RETRIES
 * (as it did, found by check_threads_sweep); once the write completes, the
 * domain's data is written back and the charge succeeds.
 */
START_TEST(test_reclaim_waits_for_room)
{
	us_engine *e = tu_engine(1ull << 30);
	struct tb t; /* TB_HOLD: writes stay in flight until completed */
	us_domain *big, *small;
	us_object *ob, *os;
	us_buf *b;
	uint64_t pause, next;
	int k, rc;

	tb_init(&t, e, false, true);
	ck_assert_int_eq(us_backend_set_max_inflight(t.backend, 1u << 20), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "big", 0, &big), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "small", 0, &small), 0);
	ck_assert_int_eq(us_domain_set_limit(small, US_LIMIT_MAX, 1u << 20), 0);
	ck_assert_int_eq(us_object_create(t.backend, big, NULL, &ob), 0);
	ck_assert_int_eq(us_object_create(t.backend, small, NULL, &os), 0);
	/* The other domain's write fills the cap, and stays in flight. */
	ck_assert_int_eq(us_buf_get(ob, 0, 1u << 20, US_GET_NODATA, &b), 1);
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_object_flush(ob, 0, US_UNLIMITED, 0), 1);
	ck_assert_uint_eq(t.npending, 1);
	/* The small domain at its max, all of it dirty. */
	ck_assert_int_eq(us_buf_get(os, 0, 1u << 20, US_GET_NODATA, &b), 1);
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_buf_get(os, 1u << 20, 64u << 10, US_GET_NODATA | US_GET_NOWAIT, &b),
			 -EAGAIN);
	/* Twice the retries' worth of waits: the charge keeps waiting, and
	 * none of the small domain's data could be sent. */
	for (k = 0; k < 32; k++) {
		pause = 0;
		rc = us_object_reclaim(os, 64u << 10, &pause);
		ck_assert_msg(rc == -EAGAIN, "wait %d: reclaim %d", k, rc);
		ck_assert_int_eq(us_engine_clock_advance(e, pause ? pause : 100000000), 0);
		ck_assert_int_ge(us_engine_poll(e, 0, &next), 0);
		ck_assert_uint_eq(t.npending, 1);
	}
	ck_assert_uint_eq(tu_stats(small).enomem, 0);
	/* The write completes: the small domain's data goes, then the charge
	 * fits. */
	tb_complete_all(&t);
	for (k = 0; k < 100; k++) {
		ck_assert_int_ge(us_engine_poll(e, 0, &next), 0);
		tb_complete_all(&t);
		rc = us_buf_get(os, 1u << 20, 64u << 10, US_GET_NODATA | US_GET_NOWAIT, &b);
		if (rc != -EAGAIN)
			break;
		pause = 0;
		rc = us_object_reclaim(os, 64u << 10, &pause);
		ck_assert_msg(rc == -EAGAIN || rc == 0, "reclaim %d", rc);
		ck_assert_int_eq(us_engine_clock_advance(e, pause ? pause : 100000000), 0);
	}
	ck_assert_int_eq(rc, 1);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_uint_eq(tu_stats(small).enomem, 0);
	ck_assert_uint_le(tu_stats(small).peak_charged_bytes, 1u << 20);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("reclaim");
	TCase *tc = tcase_create("reclaim");

	tcase_add_test(tc, test_purge_after_reclaim);
	tcase_add_test(tc, test_flush_backoff);
	tcase_add_test(tc, test_failed_flush_keeps_age);
	tcase_add_test(tc, test_commit_lost_renumbers);
	tcase_add_test(tc, test_reclaim_waits_for_room);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
