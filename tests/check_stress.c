/*
 * Threaded stress: 16 writer threads over 4 domains and 2 fault-injecting
 * backends (tests/faultbk.[ch]) whose completions come from 2 completer
 * threads each, in random order; 2 flusher threads in the engine; a tuner
 * thread changes limits and parameters at runtime. Writers use the
 * blocking forms; time is the engine's virtual clock (blocked writers
 * advance it). Each writer owns its blocks; at the end, with the faults
 * off, a sync of the root, and every block's durable content on the
 * servers is byte for byte its writer's last write. charged <= max is
 * checked by every writer after each write. Run under ThreadSanitizer and
 * ASan+UBSan in CI.
 *
 * US_STRESS_WRITES sets the writes per writer (default 2000).
 *
 * SPDX-License-Identifier: MIT
 */
#include "faultbk.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS	 2048u
#define NWRITERS 16
#define NDOM	 4
#define NOBJ	 8  /* 2 per domain; object o on backend o % 2, id o / 2 there */
#define NBLK	 32 /* per object; writer w owns half of object w / 2 */

struct sobj {
	us_object *o;
	pthread_mutex_t lock; /* the payloads: writers vs the flush snapshot */
	unsigned char expect[NBLK][BS];
};

static us_engine *engine;
static us_domain *doms[NDOM + 1];
static struct fb *fbs[2];
static struct sobj objs[NOBJ];
static atomic_bool stop_tuner;
static atomic_uint_fast64_t total_writes, total_enomem, over_max;
/* Bumped before and after each change of a max by the tuner: odd while one
 * is under way. */
static atomic_uint_fast64_t max_changes;

static void snapshot(void *ctx, us_buf *b, void *dst)
{
	uintptr_t k = (uintptr_t)ctx;
	size_t id = (size_t)(uintptr_t)us_object_user(us_buf_object(b)) - 1;
	struct sobj *so = &objs[id * 2 + k];

	pthread_mutex_lock(&so->lock);
	memcpy(dst, us_buf_data(b), BS);
	pthread_mutex_unlock(&so->lock);
}

static void limits_ok(void)
{
	int d;

	for (d = 0; d <= NDOM; d++) {
		struct us_domain_stats s = { .size = sizeof(s) };
		uint64_t before, after;

		uint64_t seq = atomic_load(&max_changes);

		/* Charged is compared with the max in force when it was read:
		 * a sample taken while the tuner changed a max (one change or
		 * several, up and down) says nothing, and is skipped. */
		us_domain_get_limit(doms[d], US_LIMIT_MAX, &before);
		us_domain_stats(doms[d], &s);
		us_domain_get_limit(doms[d], US_LIMIT_MAX, &after);
		if (seq % 2 == 0 && atomic_load(&max_changes) == seq && before == after &&
		    s.charged_bytes > after)
			atomic_fetch_add(&over_max, 1);
	}
}

static void *writer(void *arg)
{
	int w = (int)(uintptr_t)arg, i, rc;
	struct sobj *so = &objs[w / 2];
	uint64_t rng = 0x1234567ull * (uint64_t)(w + 1), nwrites = 2000;
	const char *env = getenv("US_STRESS_WRITES");

	if (env)
		nwrites = strtoull(env, NULL, 10);
	for (i = 0; i < (int)nwrites; i++) {
		uint64_t blk = (uint64_t)(w % 2) * (NBLK / 2) + fb_rand(&rng) % (NBLK / 2);
		unsigned char *data;
		us_buf *b;
		size_t j;

		rc = us_buf_get(so->o, blk * BS, BS, 0, &b);
		if (rc == -ENOMEM) {
			atomic_fetch_add(&total_enomem, 1);
			continue;
		}
		tu_assert(rc >= 0, "us_buf_get: %d", rc);
		data = us_buf_data(b);
		pthread_mutex_lock(&so->lock);
		for (j = 0; j < BS; j += 8) {
			uint64_t v = fb_rand(&rng);

			memcpy(data + j, &v, 8);
		}
		memcpy(so->expect[blk], data, BS);
		pthread_mutex_unlock(&so->lock);
		rc = us_buf_dirty(b, NULL);
		tu_assert(rc == 0 || rc == US_DIRTY_OVER_LIMIT, "us_buf_dirty: %d", rc);
		tu_assert(us_buf_put(b) == 0, "put");
		rc = us_object_balance_wait(so->o);
		tu_assert(rc == 0 || rc == -ENOMEM, "balance_wait: %d", rc);
		atomic_fetch_add(&total_writes, 1);
		limits_ok();
	}
	return NULL;
}

static void *tuner(void *arg)
{
	uint64_t rng = 99;

	(void)arg;
	while (!atomic_load(&stop_tuner)) {
		int d = 1 + (int)(fb_rand(&rng) % NDOM), rc;

		switch (fb_rand(&rng) % 4) {
		case 0:
			atomic_fetch_add(&max_changes, 1);
			rc = us_domain_set_limit(doms[d], US_LIMIT_MAX,
						 (uint64_t)(24 + fb_rand(&rng) % 40) * BS);
			atomic_fetch_add(&max_changes, 1);
			tu_assert(rc == 0 || rc == -EBUSY, "set max: %d", rc);
			break;
		case 1:
			rc = us_domain_set_limit(doms[d], US_LIMIT_DIRTY_RATIO,
						 20 + fb_rand(&rng) % 70);
			tu_assert(rc == 0, "set dirty ratio: %d", rc);
			break;
		case 2:
			rc = us_engine_set_param(engine, US_PARAM_FORCE_COMMIT,
						 fb_rand(&rng) % 4 != 0);
			tu_assert(rc == 0, "set param: %d", rc);
			break;
		default:
			rc = us_backend_set_max_inflight(fb_backend(fbs[fb_rand(&rng) % 2]),
							 (uint64_t)(2 + fb_rand(&rng) % 32) * BS);
			tu_assert(rc == 0, "set inflight: %d", rc);
			break;
		}
		sched_yield();
	}
	return NULL;
}

START_TEST(test_stress)
{
	struct us_engine_options o;
	pthread_t wt[NWRITERS], tt;
	int i, k, d;
	uint64_t blk, mismatched = 0;
	struct fb_stats st[2];

	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = 160 * BS;
	o.flusher_threads = 2;
	ck_assert_int_eq(us_engine_create(&o, &engine), 0);
	doms[0] = us_engine_root(engine);
	for (d = 1; d <= NDOM; d++) {
		char name[8];

		snprintf(name, sizeof(name), "d%d", d);
		ck_assert_int_eq(us_domain_create(engine, NULL, name, 0, &doms[d]), 0);
		ck_assert_int_eq(us_domain_set_limit(doms[d], US_LIMIT_MAX, 48 * BS), 0);
	}
	ck_assert_int_eq(us_engine_set_param(engine, US_PARAM_RECLAIM_WAIT_NS, 10000000), 0);
	ck_assert_int_eq(us_engine_set_param(engine, US_PARAM_RECLAIM_RETRIES, 64), 0);
	for (k = 0; k < 2; k++) {
		struct fb_config c = {
			.seed = (uint64_t)k + 1,
			.refuse_pm = 20,
			.error_pm = 20,
			.short_pm = 100,
			.unstable_pm = 600,
			.commit_fail_pm = 50,
			.lost_pm = 2,
			.stall_pm = 2,
			.stall_picks = 200,
			.threads = 2,
			.nobj = NOBJ / 2,
			.bs = BS,
			.nblocks = NBLK,
			.keep_bytes = true,
			.with_commit = k == 0,
			.snapshot = snapshot,
			.snapshot_ctx = (void *)(uintptr_t)k,
		};

		fbs[k] = fb_create(engine, &c);
		ck_assert_ptr_nonnull(fbs[k]);
	}
	for (i = 0; i < NOBJ; i++) {
		pthread_mutex_init(&objs[i].lock, NULL);
		memset(objs[i].expect, 0, sizeof(objs[i].expect));
		ck_assert_int_eq(us_object_create(fb_backend(fbs[i % 2]), doms[1 + i / 2],
						  (void *)(uintptr_t)(i / 2 + 1), &objs[i].o),
				 0);
	}
	atomic_store(&stop_tuner, false);
	ck_assert_int_eq(pthread_create(&tt, NULL, tuner, NULL), 0);
	for (i = 0; i < NWRITERS; i++)
		ck_assert_int_eq(pthread_create(&wt[i], NULL, writer, (void *)(uintptr_t)i), 0);
	for (i = 0; i < NWRITERS; i++)
		pthread_join(wt[i], NULL);
	atomic_store(&stop_tuner, true);
	pthread_join(tt, NULL);

	for (k = 0; k < 2; k++)
		fb_calm(fbs[k]);
	ck_assert_int_eq(us_domain_sync(doms[0]), 0);
	{
		struct us_domain_stats r = tu_stats(doms[0]);

		ck_assert_uint_eq(r.dirty_bytes + r.writeback_bytes + r.unstable_bytes, 0);
	}
	for (i = 0; i < NOBJ; i++)
		for (blk = 0; blk < NBLK; blk++) {
			static const unsigned char zero[BS];
			struct fb *f = fbs[i % 2];
			bool never = fb_durable_hash(f, (size_t)i / 2, blk) == 0;
			const unsigned char *dd =
				never ? zero : fb_durable_bytes(f, (size_t)i / 2, blk);

			mismatched += memcmp(dd, objs[i].expect[blk], BS) != 0;
		}
	for (k = 0; k < 2; k++)
		fb_stats(fbs[k], &st[k]);
	printf("stress: %d writers, %llu writes, %llu ENOMEM; injected %llu refused flushes, "
	       "%llu write errors, %llu short completions, %llu failed commits, %llu server "
	       "restarts, %llu stalls; %llu blocks differ, %llu reads above max\n",
	       NWRITERS, (unsigned long long)atomic_load(&total_writes),
	       (unsigned long long)atomic_load(&total_enomem),
	       (unsigned long long)(st[0].refused + st[1].refused),
	       (unsigned long long)(st[0].errors + st[1].errors),
	       (unsigned long long)(st[0].shorts + st[1].shorts),
	       (unsigned long long)(st[0].commit_fails + st[1].commit_fails),
	       (unsigned long long)(st[0].lost + st[1].lost),
	       (unsigned long long)(st[0].stalls + st[1].stalls), (unsigned long long)mismatched,
	       (unsigned long long)atomic_load(&over_max));
	ck_assert_uint_eq(mismatched, 0);
	ck_assert_uint_eq(atomic_load(&over_max), 0);
	ck_assert_int_eq(us_engine_shutdown(engine), 0);
	for (k = 0; k < 2; k++)
		fb_destroy(fbs[k]);
	for (i = 0; i < NOBJ; i++)
		pthread_mutex_destroy(&objs[i].lock);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("threads");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_stress);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
