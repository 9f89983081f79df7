/*
 * Allocation failure injection over the whole API, SQLite style: one long
 * scenario that goes through every public function that may allocate
 * (engine, domains, backends, objects, buffers with and without payload,
 * dirtying, flushes, completions, polls, commits, commit_lost, syncs,
 * reclaim, limits, stats text, drops, destruction, shutdown) runs once per
 * N = 1, 2, ... with the Nth allocation made through the allocator hooks
 * failing, until a run makes fewer than N allocations.
 *
 * Each call that sees the failure must return a negative errno (-ENOMEM),
 * call no callback and leave every figure the same (domain and backend
 * stats but for the enomem / max_events event counts, every buffer's state
 * and flags) with us_engine_check() passing; the call is then retried and
 * must succeed. us_engine_poll() and us_sync_done() are the exceptions:
 * they may have done part of their work before the failure, and they
 * defer a commit or a flush whose record they could not allocate to the
 * next call (returning success): for them the state must be consistent.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K4 4096u
#define MS 1000000ull
#define NB 10

struct hooks {
	uint64_t calls, fail_at, live;
	bool fired;
};

static void *h_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	struct hooks *h = ctx;

	(void)kind;
	h->calls++;
	if (h->fail_at && h->calls == h->fail_at) {
		h->fired = true;
		return NULL;
	}
	h->live++;
	return malloc(size ? size : 1);
}

static void h_free(void *ctx, void *p, size_t size, enum us_alloc_kind kind)
{
	struct hooks *h = ctx;

	(void)size;
	(void)kind;
	if (p)
		h->live--;
	free(p);
}

/* The test backend: holds writes, counts callbacks. */
struct bk {
	us_backend *b;
	us_buf *pend[64];
	int npend;
	uint64_t callbacks, seq;
};

static int k_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		   uint64_t length, enum us_reason reason)
{
	struct bk *k = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	k->callbacks++;
	for (i = 0; i < n; i++) {
		tu_assert(k->npend < 64, "too many pending");
		k->pend[k->npend++] = bufs[i];
	}
	return 0;
}

static int k_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	(void)obj;
	(void)reason;
	((struct bk *)ctx)->callbacks++;
	return 0;
}

static int k_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	(void)b;
	(void)reason;
	((struct bk *)ctx)->callbacks++;
	return 0;
}

static void k_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	(void)obj;
	(void)offset;
	(void)length;
	(void)data;
	((struct bk *)ctx)->callbacks++;
}

/* Everything a failed call must leave as it was. */
struct snap {
	struct us_domain_stats d[3];
	struct us_backend_stats b;
	int state[NB];
	unsigned flags[NB];
	uint64_t callbacks;
	int npend;
};

struct sc {
	struct hooks *h;
	us_engine *e;
	us_domain *d[3];
	struct bk k;
	us_object *o[2];
	us_buf *b[NB];
	us_sync *s;
	int failed; /* calls that saw the failure */
	uint64_t fail_at;
};

static void snap(struct sc *c, struct snap *s)
{
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < 3; i++) {
		s->d[i].size = sizeof(s->d[i]);
		if (c->d[i]) {
			ck_assert_int_eq(us_domain_stats(c->d[i], &s->d[i]), 0);
			s->d[i].enomem = s->d[i].max_events = 0;
		}
	}
	s->b.size = sizeof(s->b);
	if (c->k.b)
		ck_assert_int_eq(us_backend_stats(c->k.b, &s->b), 0);
	for (i = 0; i < NB; i++) {
		s->state[i] = c->b[i] ? us_buf_state(c->b[i]) : -1;
		s->flags[i] = c->b[i] ? us_buf_flags(c->b[i]) : 0;
	}
	s->callbacks = c->k.callbacks;
	s->npend = c->k.npend;
}

/*
 * Runs call; when the injected failure hit it: a negative errno, nothing
 * changed (unless partial), then the retry must succeed.
 */
#define TRY(c, partial, call)                                                                      \
	({                                                                                         \
		struct snap b4_, af_;                                                              \
		int rc_;                                                                           \
		if ((c)->e)                                                                        \
			snap((c), &b4_);                                                           \
		(c)->h->fired = false;                                                             \
		rc_ = (call);                                                                      \
		if ((c)->h->fired) {                                                               \
			/* Partial work may defer what it could not start. */                      \
			tu_assert(rc_ == -ENOMEM || ((partial) && rc_ >= 0),                       \
				  "%s: allocation %" PRIu64 " failed: rc %d", #call, (c)->fail_at, \
				  rc_);                                                            \
			if ((c)->e) {                                                              \
				tu_check((c)->e);                                                  \
				snap((c), &af_);                                                   \
				tu_assert((partial) || memcmp(&b4_, &af_, sizeof(b4_)) == 0,       \
					  "%s: state changed by a failed call", #call);            \
			}                                                                          \
			(c)->failed++;                                                             \
			(c)->h->fired = false;                                                     \
			if (rc_ < 0) {                                                             \
				rc_ = (call);                                                      \
				tu_assert(!(c)->h->fired, "failed twice");                         \
			}                                                                          \
		}                                                                                  \
		tu_assert(rc_ >= 0, "%s: %d (allocation %" PRIu64 " failing)", #call, rc_,         \
			  (c)->fail_at);                                                           \
		rc_;                                                                               \
	})

/* A call whose outcome the scenario accepts whatever it is (reclaim): a
 * failed allocation must leave a consistent engine. */
#define LOOSE(c, call)                         \
	({                                     \
		int rl_;                       \
		(c)->h->fired = false;         \
		rl_ = (call);                  \
		if ((c)->h->fired) {           \
			tu_check((c)->e);      \
			(c)->failed++;         \
			(c)->h->fired = false; \
		}                              \
		rl_;                           \
	})

static void complete_all(struct sc *c, enum us_write_result r)
{
	while (c->k.npend) {
		us_buf *b = c->k.pend[--c->k.npend];

		TRY(c, false,
		    us_buf_write_done(b, r, r == US_WRITE_UNSTABLE ? ++c->k.seq : 0, -EIO));
	}
}

static void tick(struct sc *c, uint64_t dt)
{
	uint64_t next;

	TRY(c, true, us_engine_poll(c->e, us_engine_now(c->e) + dt, &next));
}

static int scenario(struct hooks *h, uint64_t fail_at)
{
	struct us_alloc_hooks hooks = { h_alloc, h_free, h };
	struct us_engine_options o;
	struct us_backend_ops ops = { .size = sizeof(ops) };
	struct sc *c = calloc(1, sizeof(*c));
	uint64_t retry, v, since;
	int i, rc, failed, err;
	char text[4096];
	us_buf *x;

	ck_assert_ptr_nonnull(c);
	memset(h, 0, sizeof(*h));
	h->fail_at = fail_at;
	c->h = h;
	c->fail_at = fail_at;
	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = 24 * K4;
	o.alloc = &hooks;
	TRY(c, false, us_engine_create(&o, &c->e));
	c->d[0] = us_engine_root(c->e);
	TRY(c, false, us_domain_create(c->e, NULL, "a", US_DOMAIN_ARENA, &c->d[1]));
	TRY(c, false, us_domain_create(c->e, c->d[1], "a1", 0, &c->d[2]));
	TRY(c, false, us_domain_set_limit(c->d[1], US_LIMIT_MAX, 16 * K4));
	TRY(c, false, us_domain_set_limit(c->d[1], US_LIMIT_DIRTY_RATIO, 90));
	TRY(c, false, us_domain_set_limit(c->d[2], US_LIMIT_HIGH, 12 * K4));
	ops.flush = k_flush;
	ops.commit = k_commit;
	ops.sync = k_sync;
	ops.evict = k_evict;
	TRY(c, false, us_backend_create(c->e, &ops, &c->k, &c->k.b));
	TRY(c, false, us_backend_set_max_inflight(c->k.b, 4 * K4));
	TRY(c, false, us_object_create(c->k.b, c->d[2], NULL, &c->o[0]));
	TRY(c, false, us_object_create(c->k.b, c->d[1], NULL, &c->o[1]));

	/* Buffers, with and without payload; dirty them. */
	for (i = 0; i < 8; i++) {
		rc = TRY(c, false,
			 us_buf_get(c->o[i % 2], K4 * (uint64_t)i, K4, i % 3 ? 0 : US_GET_NODATA,
				    &c->b[i]));
		ck_assert_int_eq(rc, 1);
		TRY(c, false, us_buf_dirty(c->b[i], NULL));
	}
	TRY(c, false, us_buf_lookup(c->o[0], 10, &x));
	TRY(c, false, us_buf_put(x));
	TRY(c, false, us_buf_next(c->o[1], 0, &x));
	TRY(c, false, us_buf_put(x));
	TRY(c, false, us_domain_stat_text(c->d[1], text, sizeof(text)));

	/* Writeback: an explicit flush, completions of every kind, a poll. */
	TRY(c, false, us_object_flush(c->o[0], 0, US_UNLIMITED, K4));
	for (i = 0; c->k.npend; i++) {
		us_buf *b = c->k.pend[--c->k.npend];
		enum us_write_result r = (enum us_write_result)(i % 3);

		TRY(c, false,
		    us_buf_write_done(b, r, r == US_WRITE_UNSTABLE ? ++c->k.seq : 0, -EIO));
	}
	tick(c, 40000 * MS); /* past dirty_expire: everything dirty goes */
	complete_all(c, US_WRITE_UNSTABLE);
	TRY(c, false, us_object_commit(c->o[0]));
	TRY(c, false, us_object_commit_done(c->o[0], 2));
	TRY(c, false, us_backend_commit_lost(c->k.b));
	tick(c, 40000 * MS);
	complete_all(c, US_WRITE_UNSTABLE);
	TRY(c, false, us_backend_commit_done(c->k.b, c->k.seq));

	/* The throttle gate, params. */
	TRY(c, false, us_object_balance(c->o[0], &v));
	TRY(c, false, us_engine_set_param(c->e, US_PARAM_RECLAIM_RETRIES, 2));

	/* Reclaim: a domain full of dirty data, a charge that must wait. */
	for (i = 0; i < 8; i++)
		TRY(c, false, us_buf_dirty(c->b[i], NULL));
	rc = LOOSE(c, us_buf_get(c->o[1], 64 * K4, 12 * K4, 0, &c->b[8]));
	ck_assert(rc == -EAGAIN || rc == -ENOMEM || rc == 1);
	if (rc == 1)
		TRY(c, false, us_buf_put(c->b[8]));
	c->b[8] = NULL;
	rc = LOOSE(c, us_object_reclaim(c->o[0], 12 * K4, &retry));
	ck_assert(rc == -EAGAIN || rc == -ENOMEM || rc == 0);
	complete_all(c, US_WRITE_STABLE);
	tick(c, 200 * MS);
	complete_all(c, US_WRITE_STABLE);

	/* Syncs: an object's and a domain's, stepped to the end. */
	TRY(c, false, us_buf_dirty(c->b[0], NULL));
	TRY(c, false, us_buf_dirty(c->b[1], NULL));
	TRY(c, true, us_object_sync_start(c->o[0], NULL, NULL, &c->s));
	for (i = 0; i < 100; i++) {
		complete_all(c, i % 2 ? US_WRITE_UNSTABLE : US_WRITE_STABLE);
		TRY(c, false, us_backend_commit_done(c->k.b, c->k.seq ? c->k.seq : 1));
		if (TRY(c, true, us_sync_done(c->s)) == 1)
			break;
		tick(c, 100 * MS);
	}
	ck_assert_int_lt(i, 100);
	TRY(c, false, us_sync_free(c->s));
	c->s = NULL;
	since = 0;
	TRY(c, false, us_object_check_error(c->o[0], &since, &err));
	TRY(c, true, us_domain_sync_start(c->d[1], NULL, NULL, &c->s));
	for (i = 0; i < 100; i++) {
		complete_all(c, US_WRITE_STABLE);
		TRY(c, false, us_backend_commit_done(c->k.b, c->k.seq ? c->k.seq : 1));
		if (TRY(c, true, us_sync_done(c->s)) == 1)
			break;
		tick(c, 100 * MS);
	}
	ck_assert_int_lt(i, 100);
	TRY(c, false, us_sync_free(c->s));
	c->s = NULL;

	/* Limits that evict, drops, releases. */
	for (i = 2; i < 8; i++) {
		TRY(c, false, us_buf_put(c->b[i]));
		c->b[i] = NULL;
	}
	TRY(c, false, us_domain_set_limit(c->d[1], US_LIMIT_MAX, 4 * K4));
	TRY(c, false, us_domain_purge(c->d[1]));
	TRY(c, false, us_buf_drop(c->b[0]));
	c->b[0] = NULL;
	TRY(c, false, us_buf_put(c->b[1]));
	c->b[1] = NULL;

	/* Destruction, and a shutdown with data still dirty. */
	TRY(c, false, us_object_destroy(c->o[1]));
	c->o[1] = NULL;
	rc = TRY(c, false, us_buf_get(c->o[0], 0, K4, 0, &c->b[0]));
	TRY(c, false, us_buf_dirty(c->b[0], NULL));
	TRY(c, false, us_buf_put(c->b[0]));
	c->b[0] = NULL;
	for (i = 0; i < 100; i++) {
		struct snap b4;

		snap(c, &b4);
		h->fired = false;
		rc = us_engine_shutdown(c->e);
		if (h->fired) {
			/* A step that could not start its work defers it. */
			tu_assert(rc == -ENOMEM || rc == -EBUSY,
				  "shutdown with a failed allocation: %d", rc);
			c->failed++;
			tu_check(c->e);
			continue;
		}
		if (rc == 0)
			break;
		tu_assert(rc == -EBUSY, "shutdown: %d", rc);
		complete_all(c, US_WRITE_STABLE);
		TRY(c, false, us_backend_commit_done(c->k.b, c->k.seq ? c->k.seq : 1));
	}
	ck_assert_int_eq(rc, 0);
	tu_assert(h->live == 0, "%" PRIu64 " allocations never freed", h->live);
	failed = c->failed;
	free(c);
	return failed;
}

START_TEST(test_every_allocation_fails_once)
{
	struct hooks *h = calloc(1, sizeof(*h));
	uint64_t n, total;

	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(scenario(h, 0), 0);
	total = h->calls;
	for (n = 1; n <= total + 1; n++) {
		int failed = scenario(h, n);

		if (n <= total)
			tu_assert(failed == 1,
				  "allocation %" PRIu64 " of %" PRIu64 ": %d calls failed", n,
				  total, failed);
		else
			ck_assert_int_eq(failed, 0);
	}
	printf("allocation failure injection: %" PRIu64 " allocations in the scenario, each "
	       "failed once and survived: -ENOMEM with the state intact and a retry that "
	       "succeeds, or work deferred (poll, sync, shutdown)\n",
	       total);
	free(h);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("oom");
	TCase *tc = tcase_create("inject");

	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_every_allocation_fails_once);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
