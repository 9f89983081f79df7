/*
 * The lock order witness (lib/witness.c), built with US_WITNESS: a thread
 * that takes the library's locks out of rank order is stopped at once, the
 * message naming both locks; the library's own paths, with flusher threads
 * kicked from under the engine lock and writers making their caches, keep
 * the order and leave no lock counted as held.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"
#include "testutil.h"
#include "expect_abort.h"

#include <stdlib.h>

#define K64 65536u

/* The reversed pair k, in a child (expect_abort.h). The engines are made
 * there: a fork runs jemalloc's handlers, which lock every arena (past the
 * thread sanitizer's 64 locks held at once with two engines'). */
static void reverse(int k)
{
	us_engine *e = tu_engine(1u << 30), *e2 = tu_engine(1u << 30);

	switch (k) {
	case 0: /* a flusher wake-up's lock, then the engine's */
		us__witness_take(US_LOCK_THREADS);
		us__lock(e);
		break;
	case 1: /* the engine's, then a writer cache's process-wide one */
		us__lock(e);
		us__tcache_get(e2);
		break;
	case 2: /* the engine's twice (the mutex would deadlock) */
		us__lock(e);
		us__lock(e2);
		break;
	}
}

START_TEST(test_reversed_pair_aborts)
{
	static const char *const taking[] = { "taking the engine lock (rank 2)",
					      "taking the writer caches lock (rank 1)",
					      "taking the engine lock (rank 2)" };
	static const char *const holding[] = { "holding the flusher wake-ups lock (rank 3)",
					       "holding the engine lock (rank 2)",
					       "holding the engine lock (rank 2)" };
	char msg[512];

	ck_assert_msg(expect_abort(reverse, _i, taking[_i], holding[_i], msg, sizeof(msg)),
		      "case %d: not stopped as expected; it said '%s'", _i, msg);
}
END_TEST

/* A backend safe to call from several threads: writes acknowledged at
 * once as unstable, each commit answered at once (us_object_commit_done()
 * from inside the callback, under no lock of the test's). */
static _Atomic uint64_t next_seq = 1;

static int mt_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	size_t i;

	(void)ctx, (void)obj, (void)offset, (void)length, (void)reason;
	for (i = 0; i < n; i++)
		us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, atomic_fetch_add(&next_seq, 1), 0);
	return 0;
}

static int mt_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	(void)ctx, (void)reason;
	us_object_commit_done(obj, atomic_load(&next_seq) - 1);
	return 0;
}

struct writer {
	us_object *o;
	uint64_t base;
	unsigned held_after;
};

/* Dirties 16 MiB in 64 KiB buffers, each call checked to leave no lock
 * counted. */
static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t off;

	w->held_after = 0;
	for (off = 0; off < (16u << 20); off += K64) {
		us_buf *b;
		uint64_t pause;

		if (us_buf_get(w->o, w->base + off, K64, US_GET_NODATA, &b) < 0)
			continue;
		us_buf_dirty(b, &pause);
		us_buf_put(b);
		w->held_after |= us__witness_held();
	}
	return NULL;
}

/* Two writers and two flushers in a 4 MiB domain: reclaim, write-back,
 * commits, kicks from completions under the engine lock, thread caches
 * made and freed. A violation anywhere aborts the process. */
START_TEST(test_library_keeps_order)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = mt_flush, .commit = mt_commit };
	struct us_engine_options opts;
	us_backend *bk;
	struct writer w[2];
	pthread_t th[2];
	us_domain *d;
	us_engine *e;
	int i;

	us_engine_options_init(&opts);
	opts.memory_bytes = 64u << 20;
	opts.flusher_threads = 2;
	ck_assert_int_eq(us_engine_create(&opts, &e), 0);
	ck_assert_int_eq(us_backend_create(e, &ops, NULL, &bk), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 4u << 20), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(us_object_create(bk, d, NULL, &w[i].o), 0);
		w[i].base = (uint64_t)i << 30;
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_uint_eq(w[i].held_after, 0);
	}
	ck_assert_int_eq(us_domain_sync(d), 0);
	ck_assert_uint_eq(us__witness_held(), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	ck_assert_uint_eq(us__witness_held(), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("witness");
	TCase *tc = tcase_create("witness");

	tcase_add_loop_test(tc, test_reversed_pair_aborts, 0, 3);
	tcase_add_test(tc, test_library_keeps_order);
	tcase_set_timeout(tc, 120);
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
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
