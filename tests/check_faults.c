/*
 * Faults, many seeds: writers in polled mode on a virtual clock, over two
 * domains and two fault-injecting backends (tests/faultbk.[ch]): flushes
 * refused, transient write errors, short completions, completions out of
 * order, commits failing, the server restarting (commit_lost) at random
 * points, stalls that recover; limits and parameters changed at runtime.
 * After every step: charged <= max for every domain (and every 32 steps
 * us_engine_check()). At the end, with the faults off, a sync of the root,
 * and then every block's durable content on the servers is, byte for byte,
 * the last data written to it.
 *
 * US_FAULT_SEEDS sets the number of seeds (default 2000; the sanitizer
 * builds run 300, see tests/CMakeLists.txt).
 *
 * SPDX-License-Identifier: MIT
 */
#include "faultbk.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS     1024u
#define NBLK   32u
#define NOBJ   2 /* per backend */
#define NSTEPS 300
#define MS     1000000ull

struct world {
	uint64_t rng;
	us_engine *e;
	us_domain *dom[3];
	struct fb *fb[2];
	us_object *obj[2][NOBJ];
	unsigned char expect[2][NOBJ][NBLK][BS];
	uint64_t now;
	uint64_t writes, enomem, eagain, pauses, ebusy;
	uint64_t longest_gate; /* the longest wait at the dirty limit */
};

struct totals {
	uint64_t seeds, writes, enomem, eagain, refused, errors, shorts, unstable, lost, stalls,
		commit_fails, ebusy, longest_gate;
};

static uint64_t rnd(struct world *w)
{
	return fb_rand(&w->rng);
}

static void limits_ok(struct world *w)
{
	int d;

	for (d = 0; d < 3; d++) {
		struct us_domain_stats s = tu_stats(w->dom[d]);
		uint64_t max;

		us_domain_get_limit(w->dom[d], US_LIMIT_MAX, &max);
		tu_assert(s.charged_bytes <= max, "domain %d: charged %llu above max %llu", d,
			  (unsigned long long)s.charged_bytes, (unsigned long long)max);
	}
}

/* Moves the clock by dt: completions due, then the engine's work. */
static void tick(struct world *w, uint64_t dt)
{
	int k;
	uint64_t next;

	w->now += dt;
	for (k = 0; k < 2; k++)
		fb_deliver(w->fb[k], w->now);
	tu_assert(us_engine_poll(w->e, w->now, &next) >= 0, "poll");
	limits_ok(w);
}

/* The time to the next thing that happens, at least 1 ms, at most 100 ms. */
static uint64_t gap(struct world *w)
{
	uint64_t t = UINT64_MAX, n;
	int k;

	for (k = 0; k < 2; k++) {
		n = fb_next(w->fb[k]);
		if (n < t)
			t = n;
	}
	if (t <= w->now + MS)
		return MS;
	t -= w->now;
	return t < 100 * MS ? t : 100 * MS;
}

static void write_block(struct world *w)
{
	int k = (int)(rnd(w) % 2), o = (int)(rnd(w) % NOBJ), tries;
	uint64_t blk = rnd(w) % NBLK, pause = 0, retry = 0, since;
	us_buf *b = NULL;
	int rc;
	unsigned char *data;
	size_t i;

	for (tries = 0;; tries++) {
		rc = us_buf_get(w->obj[k][o], blk * BS, BS, 0, &b);
		if (rc >= 0)
			break;
		if (rc == -ENOMEM) {
			w->enomem++; /* counted; the write does not happen */
			return;
		}
		tu_assert(rc == -EAGAIN, "us_buf_get: %d", rc);
		w->eagain++;
		tu_assert(tries < 100000, "a charge waited forever");
		rc = us_object_reclaim(w->obj[k][o], BS, &retry);
		tu_assert(rc == 0 || rc == -EAGAIN || rc == -ENOMEM, "reclaim: %d", rc);
		tick(w, retry > w->now && retry - w->now < 100 * MS ? retry - w->now : gap(w));
	}
	data = us_buf_data(b);
	tu_assert(data != NULL, "no payload");
	for (i = 0; i < BS; i++)
		data[i] = (unsigned char)(rnd(w) >> 24);
	memcpy(w->expect[k][o][blk], data, BS);
	rc = us_buf_dirty(b, &pause);
	tu_assert(rc == 0 || rc == US_DIRTY_OVER_LIMIT, "us_buf_dirty: %d", rc);
	tu_assert(us_buf_put(b) == 0, "put");
	w->writes++;
	if (pause) {
		w->pauses++;
		tick(w, pause);
	}
	since = w->now;
	for (tries = 0; us_object_balance(w->obj[k][o], &pause) == -EAGAIN; tries++) {
		tu_assert(w->now - since < 1000 * 1000 * MS,
			  "a writer waited forever at the dirty limit");
		tick(w, pause ? pause : gap(w));
	}
	if (w->now - since > w->longest_gate)
		w->longest_gate = w->now - since;
}

static void change_something(struct world *w)
{
	int d = 1 + (int)(rnd(w) % 2), rc;
	uint64_t v;

	switch (rnd(w) % 4) {
	case 0:
		v = (uint64_t)(8 + rnd(w) % 56) * BS;
		rc = us_domain_set_limit(w->dom[d], US_LIMIT_MAX, v);
		tu_assert(rc == 0 || rc == -EBUSY, "set max: %d", rc);
		w->ebusy += rc == -EBUSY;
		break;
	case 1:
		rc = us_domain_set_limit(w->dom[d], US_LIMIT_DIRTY_RATIO, 10 + rnd(w) % 91);
		tu_assert(rc == 0, "set dirty ratio: %d", rc);
		break;
	case 2:
		rc = us_engine_set_param(w->e, US_PARAM_FORCE_COMMIT, rnd(w) % 4 != 0);
		tu_assert(rc == 0, "set param: %d", rc);
		break;
	default:
		rc = us_backend_set_max_inflight(fb_backend(w->fb[rnd(w) % 2]),
						 (uint64_t)(1 + rnd(w) % 16) * BS);
		tu_assert(rc == 0, "set inflight: %d", rc);
		break;
	}
}

static void run_seed(uint64_t seed, struct totals *t)
{
	struct world *w = calloc(1, sizeof(*w));
	us_sync *s = NULL;
	int k, o, step;
	uint64_t blk;
	struct fb_stats st;

	ck_assert_ptr_nonnull(w);
	w->rng = seed * 0x2545f4914f6cdd1dull + 7;
	w->e = tu_engine(48 * BS);
	w->dom[0] = us_engine_root(w->e);
	ck_assert_int_eq(us_domain_create(w->e, NULL, "a", 0, &w->dom[1]), 0);
	ck_assert_int_eq(us_domain_create(w->e, NULL, "b", 0, &w->dom[2]), 0);
	ck_assert_int_eq(us_domain_set_limit(w->dom[1], US_LIMIT_MAX, 32 * BS), 0);
	ck_assert_int_eq(us_domain_set_limit(w->dom[2], US_LIMIT_MAX, 24 * BS), 0);
	ck_assert_int_eq(us_engine_set_param(w->e, US_PARAM_RECLAIM_WAIT_NS, 10 * MS), 0);
	/* Most seeds let pinned data fill the domains, so that charges must
	 * wait for reclaim and limits cannot always be lowered. */
	for (k = 0; k < 3 && rnd(w) % 4; k++) {
		ck_assert_int_eq(
			us_domain_set_limit(w->dom[k], US_LIMIT_DIRTY_RATIO, 60 + rnd(w) % 41), 0);
		ck_assert_int_eq(
			us_domain_set_limit(w->dom[k], US_LIMIT_DIRTY_BG_RATIO, 30 + rnd(w) % 30),
			0);
	}
	ck_assert_int_eq(us_engine_set_param(w->e, US_PARAM_MAX_PAUSE_NS, 20 * MS), 0);
	for (k = 0; k < 2; k++) {
		struct fb_config c = {
			.seed = seed * 2 + (uint64_t)k,
			.refuse_pm = (unsigned)(rnd(w) % 100),
			.error_pm = (unsigned)(rnd(w) % 100),
			.short_pm = (unsigned)(rnd(w) % 300),
			.unstable_pm = (unsigned)(rnd(w) % 1000),
			.commit_fail_pm = (unsigned)(rnd(w) % 200),
			.lost_pm = (unsigned)(rnd(w) % 20),
			.stall_pm = (unsigned)(rnd(w) % 10),
			.lat_ns = 1 * MS,
			.jitter_ns = (1 + rnd(w) % 50) * MS,
			.commit_lat_ns = (1 + rnd(w) % 20) * MS,
			.stall_ns = (1 + rnd(w) % 3000) * MS,
			.nobj = NOBJ,
			.bs = BS,
			.nblocks = NBLK,
			.keep_bytes = true,
			.with_commit = k == 0,
		};

		w->fb[k] = fb_create(w->e, &c);
		ck_assert_ptr_nonnull(w->fb[k]);
		for (o = 0; o < NOBJ; o++)
			ck_assert_int_eq(
				us_object_create(fb_backend(w->fb[k]), w->dom[1 + (o + k) % 2],
						 (void *)(uintptr_t)(o + 1), &w->obj[k][o]),
				0);
	}
	for (step = 0; step < NSTEPS; step++) {
		if (rnd(w) % 16 == 0)
			change_something(w);
		write_block(w);
		if (rnd(w) % 4 == 0)
			tick(w, (rnd(w) % 20) * MS);
		if (step % 32 == 0)
			tu_check(w->e);
	}

	/* The faults stop; everything must become durable. */
	for (k = 0; k < 2; k++)
		fb_calm(w->fb[k]);
	tu_check(w->e);
	ck_assert_int_eq(us_domain_sync_start(w->dom[0], NULL, NULL, &s), 0);
	for (step = 0; us_sync_done(s) != 1; step++) {
		tu_assert(step < 200000, "seed %llu: the final sync never ends",
			  (unsigned long long)seed);
		tick(w, gap(w));
	}
	ck_assert_int_eq(us_sync_free(s), 0);
	{
		struct us_domain_stats r = tu_stats(w->dom[0]);

		tu_assert(r.dirty_bytes + r.writeback_bytes + r.unstable_bytes == 0,
			  "seed %llu: pinned data left after the sync", (unsigned long long)seed);
	}
	for (k = 0; k < 2; k++)
		for (o = 0; o < NOBJ; o++)
			for (blk = 0; blk < NBLK; blk++) {
				const unsigned char *d = fb_durable_bytes(w->fb[k], (size_t)o, blk);
				static const unsigned char zero[BS];
				bool never = fb_durable_hash(w->fb[k], (size_t)o, blk) == 0;

				tu_assert(
					memcmp(never ? zero : d, w->expect[k][o][blk], BS) == 0,
					"seed %llu: backend %d object %d block %llu: durable data "
					"differs from the last write",
					(unsigned long long)seed, k, o, (unsigned long long)blk);
			}
	tu_check(w->e);
	ck_assert_int_eq(us_engine_destroy(w->e), 0);
	for (k = 0; k < 2; k++) {
		fb_stats(w->fb[k], &st);
		t->refused += st.refused;
		t->errors += st.errors;
		t->shorts += st.shorts;
		t->unstable += st.unstable;
		t->lost += st.lost;
		t->stalls += st.stalls;
		t->commit_fails += st.commit_fails;
		fb_destroy(w->fb[k]);
	}
	t->seeds++;
	t->writes += w->writes;
	t->enomem += w->enomem;
	t->eagain += w->eagain;
	t->ebusy += w->ebusy;
	if (w->longest_gate > t->longest_gate)
		t->longest_gate = w->longest_gate;
	free(w);
}

START_TEST(test_fault_seeds)
{
	const char *env = getenv("US_FAULT_SEEDS");
	uint64_t n = env ? strtoull(env, NULL, 10) : 2000, seed;
	struct totals t = { 0 };

	for (seed = 1; seed <= n; seed++)
		run_seed(seed, &t);
	printf("fault seeds: %llu seeds, %llu writes verified byte for byte; injected: %llu "
	       "refused flushes, %llu write errors, %llu short completions, %llu unstable acks, "
	       "%llu failed commits, %llu server restarts, %llu stalls; writers saw %llu EAGAIN, "
	       "%llu ENOMEM; %llu limit changes refused (EBUSY); longest wait at the dirty "
	       "limit %.1f s\n",
	       (unsigned long long)t.seeds, (unsigned long long)t.writes,
	       (unsigned long long)t.refused, (unsigned long long)t.errors,
	       (unsigned long long)t.shorts, (unsigned long long)t.unstable,
	       (unsigned long long)t.commit_fails, (unsigned long long)t.lost,
	       (unsigned long long)t.stalls, (unsigned long long)t.eagain,
	       (unsigned long long)t.enomem, (unsigned long long)t.ebusy,
	       (double)t.longest_gate / (1000 * MS));
	ck_assert_uint_eq(t.seeds, n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("seeds");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_fault_seeds);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
