/*
 * Writer caches (lib/tcache.c): the lock-free first dirtying, its queues,
 * its credit, and their lifetimes across threads and engines. White-box:
 * the tests read the caches through lib/internal.h to show which path a
 * dirtying took. Threads here run one at a time (each is joined, or waits
 * on the other), so every outcome is deterministic.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"
#include "testutil.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define K4 4096u

struct fx {
	us_engine *e;
	struct tb t;
	us_domain *d;
	us_object *o;
};

static void fx_init(struct fx *f, uint64_t memory)
{
	f->e = tu_engine(memory);
	tb_init(&f->t, f->e, true, false);
	ck_assert_int_eq(us_domain_create(f->e, NULL, "d", 0, &f->d), 0);
	ck_assert_int_eq(us_object_create(f->t.backend, f->d, f, &f->o), 0);
}

static void fx_fini(struct fx *f)
{
	f->t.mode = TB_STABLE;
	us_object_flush(f->o, 0, US_UNLIMITED, 0);
	tb_complete_all(&f->t);
	tu_check(f->e);
	ck_assert_int_eq(us_engine_destroy(f->e), 0);
}

/* The undrained entries of the calling thread's cache (0 without one). */
static uint64_t queued(void)
{
	struct us_tcache *tc = us__tls.tc;

	return tc ? atomic_load(&tc->tail) - atomic_load(&tc->head_pub) : 0;
}

/*
 * Dirties [offset, offset + n * len) as n new buffers. With keep, their
 * references are kept there (dropping one takes the lock, which drains);
 * without, each is dropped after its dirtying.
 */
static void dirty_range(us_object *o, uint64_t offset, uint64_t n, uint64_t len, us_buf **keep)
{
	uint64_t i, p;
	us_buf *b;

	if (keep) { /* all got first: a get takes the lock */
		for (i = 0; i < n; i++)
			tu_assert(us_buf_get(o, offset + i * len, len, US_GET_NODATA, &keep[i]) ==
					  1,
				  "get");
		for (i = 0; i < n; i++)
			tu_assert(us_buf_dirty(keep[i], &p) == 0 && p == 0, "dirty %llu",
				  (unsigned long long)i);
		return;
	}
	for (i = 0; i < n; i++) {
		tu_assert(us_buf_get(o, offset + i * len, len, US_GET_NODATA, &b) == 1, "get");
		tu_assert(us_buf_dirty(b, &p) == 0 && p == 0, "dirty %llu", (unsigned long long)i);
		tu_assert(us_buf_put(b) == 0, "put");
	}
}

static void put_all(us_buf **bufs, uint64_t n)
{
	uint64_t i;

	for (i = 0; i < n; i++)
		tu_assert(us_buf_put(bufs[i]) == 0, "put");
}

/*
 * The first dirtying takes the locked path and brings credit back; the
 * next ones are queued without the lock, and the next lock holder (here
 * the stats call) accounts them: nothing is lost between the two.
 */
START_TEST(test_queued_then_accounted)
{
	struct fx f;
	us_buf *b[64];
	uint64_t p, i, q;

	fx_init(&f, 1u << 30);
	for (i = 0; i < 64; i++)
		ck_assert_int_eq(us_buf_get(f.o, i * K4, K4, US_GET_NODATA, &b[i]), 1);
	/* The first one makes the thread's cache and gets it credit. */
	ck_assert_ptr_nonnull(us__tls.tc); /* never NULL: us__tc_none when none */
	ck_assert(us__tls.tc == &us__tc_none || us__tls.tc->engine_id != f.e->id);
	ck_assert_int_eq(us_buf_dirty(b[0], &p), 0);
	ck_assert_ptr_ne(us__tls.tc, &us__tc_none);
	ck_assert_uint_eq(us__tls.tc->engine_id, f.e->id);
	ck_assert_int_gt(atomic_load(&us__tls.tc->credit), 0);
	for (i = 1; i < 64; i++)
		ck_assert_int_eq(us_buf_dirty(b[i], &p), 0);
	/* Read without the lock: 64 entries wait, the counters do not have
	 * them yet, but the domain's granted bytes cover them. */
	q = queued();
	ck_assert_uint_eq(q, 64);
	ck_assert_uint_eq(f.d->c.dirty, 0);
	ck_assert_uint_ge(f.d->granted, 64 * K4);
	/* A rewrite of a buffer this thread queued stays lock-free. */
	ck_assert_int_eq(us_buf_dirty(b[5], &p), 0);
	ck_assert_uint_eq(queued(), 64);
	/* Any call that takes the lock sees them all. */
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 64 * K4);
	ck_assert_uint_eq(queued(), 0);
	ck_assert_int_eq(us_buf_state(b[63]), US_BUF_DIRTY);
	ck_assert_uint_eq(tu_stats(f.d).dirtied, 64);
	tu_check(f.e);
	for (i = 0; i < 64; i++)
		ck_assert_int_eq(us_buf_put(b[i]), 0);
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 64);
	ck_assert_uint_eq(f.t.flushed_bytes, 64 * K4);
	fx_fini(&f);
}
END_TEST

/* Two threads taking turns. */
struct steps {
	pthread_mutex_t m;
	pthread_cond_t c;
	int step;
};

static void steps_init(struct steps *s)
{
	pthread_mutex_init(&s->m, NULL);
	pthread_cond_init(&s->c, NULL);
	s->step = 0;
}

static void steps_fini(struct steps *s)
{
	pthread_cond_destroy(&s->c);
	pthread_mutex_destroy(&s->m);
}

static void wait_step(struct steps *s, int step)
{
	pthread_mutex_lock(&s->m);
	while (s->step < step)
		pthread_cond_wait(&s->c, &s->m);
	pthread_mutex_unlock(&s->m);
}

static void set_step(struct steps *s, int step)
{
	pthread_mutex_lock(&s->m);
	s->step = step;
	pthread_cond_broadcast(&s->c);
	pthread_mutex_unlock(&s->m);
}

struct other {
	struct steps st;
	us_object *o;
	us_buf *b, *w;
	uint64_t queued_after;
	int rc;
};

/* Another thread: a cache and credit first, then (step 2) dirty b. */
static void *other_dirty(void *arg)
{
	struct other *x = arg;
	uint64_t p;

	if (us_buf_get(x->o, 2 * K4, K4, US_GET_NODATA, &x->w) != 1 || us_buf_dirty(x->w, &p) != 0)
		x->rc = -1;
	set_step(&x->st, 1);
	wait_step(&x->st, 2);
	if (!x->rc)
		x->rc = us_buf_dirty(x->b, &p);
	x->queued_after = queued();
	return NULL; /* its exit drains its queue */
}

/* Two threads queue the same buffer before any drain: it is accounted once
 * and the second entry only uses up its credit. */
START_TEST(test_two_writers_one_buffer)
{
	struct fx f;
	struct other x = { .rc = 0 };
	pthread_t th;
	us_buf *w, *b;
	uint64_t p;

	fx_init(&f, 1u << 30);
	steps_init(&x.st);
	x.o = f.o;
	ck_assert_int_eq(pthread_create(&th, NULL, other_dirty, &x), 0);
	wait_step(&x.st, 1);
	/* This thread gets a cache and credit (w), then queues b. */
	ck_assert_int_eq(us_buf_get(f.o, 0, K4, US_GET_NODATA, &w), 1);
	ck_assert_int_eq(us_buf_get(f.o, K4, K4, US_GET_NODATA, &b), 1);
	ck_assert_int_eq(us_buf_dirty(w, &p), 0);
	ck_assert_int_eq(us_buf_dirty(b, &p), 0);
	ck_assert_uint_eq(queued(), 2);
	/* The other one queues b too, without a lock in between. */
	x.b = b;
	set_step(&x.st, 2);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(x.rc, 0);
	ck_assert_uint_eq(x.queued_after, 1);
	/* Its exit drained both queues: b once, and the other thread's
	 * unspent credit went back. */
	ck_assert_uint_eq(queued(), 0);
	ck_assert_uint_eq(f.d->c.dirty, 3 * K4);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(f.d).dirtied, 3);
	tu_check(f.e);
	ck_assert_int_eq(us_buf_put(x.w), 0);
	ck_assert_int_eq(us_buf_put(w), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	steps_fini(&x.st);
	fx_fini(&f);
}
END_TEST

struct exiter {
	us_object *o;
	us_buf *bufs[100];
	uint64_t n;
	uint64_t queued_at_exit;
	int64_t credit_at_exit;
};

static void *dirty_and_exit(void *arg)
{
	struct exiter *x = arg;

	dirty_range(x->o, 0, x->n, K4, x->bufs);
	x->queued_at_exit = queued();
	x->credit_at_exit = atomic_load(&us__tls.tc->credit);
	return NULL;
}

/* A thread that exits with entries queued and credit unspent: its exit
 * drains the one and gives the other back. */
START_TEST(test_thread_exit_drains)
{
	struct fx f;
	struct exiter x = { 0 };
	pthread_t th;

	fx_init(&f, 1u << 30);
	x.o = f.o;
	x.n = 100;
	ck_assert_int_eq(pthread_create(&th, NULL, dirty_and_exit, &x), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(x.queued_at_exit, 100);
	ck_assert_int_gt(x.credit_at_exit, 0);
	/* Read without taking the lock: the exit did the work. */
	ck_assert_uint_eq(f.d->c.dirty, 100 * K4);
	ck_assert_uint_eq(f.d->granted, 0);
	ck_assert_uint_eq(us_engine_root(f.e)->granted, 0);
	ck_assert(us_list_empty(&f.e->tcaches));
	tu_check(f.e);
	put_all(x.bufs, x.n);
	fx_fini(&f);
}
END_TEST

struct survivor {
	struct steps st;
	us_object *o;
	int rc;
};

/* Dirties in one engine, outlives it, then works in a new one. */
static void *survive(void *arg)
{
	struct survivor *s = arg;
	struct tb t;
	us_engine *e2;
	us_object *o2;
	char msg[256];

	dirty_range(s->o, 0, 10, K4, NULL);
	set_step(&s->st, 1);
	wait_step(&s->st, 2); /* the first engine is gone */
	e2 = tu_engine(1u << 30);
	tb_init(&t, e2, true, false);
	if (us_object_create(t.backend, NULL, NULL, &o2)) {
		s->rc = -1;
		return NULL;
	}
	dirty_range(o2, 0, 10, K4, NULL);
	s->rc = us_engine_check(e2, msg, sizeof(msg));
	t.mode = TB_STABLE;
	us_object_flush(o2, 0, US_UNLIMITED, 0);
	if (!s->rc)
		s->rc = us_engine_destroy(e2);
	return NULL;
}

/* An engine destroyed while a thread that dirtied in it lives on: the
 * thread's cache for it is left dead, and freed by the thread later. */
START_TEST(test_engine_gone_first)
{
	struct fx f;
	struct survivor s = { .rc = 0 };
	pthread_t th;

	steps_init(&s.st);
	fx_init(&f, 1u << 30);
	s.o = f.o;
	ck_assert_int_eq(pthread_create(&th, NULL, survive, &s), 0);
	wait_step(&s.st, 1);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 10 * K4);
	fx_fini(&f);
	set_step(&s.st, 2);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(s.rc, 0);
	steps_fini(&s.st);
}
END_TEST

/* One thread, two engines in turn: each keeps its own cache and credit. */
START_TEST(test_two_engines_one_thread)
{
	struct fx a, b;
	int i;

	fx_init(&a, 1u << 30);
	fx_init(&b, 1u << 30);
	for (i = 0; i < 8; i++) {
		dirty_range(a.o, (uint64_t)i * 16 * K4, 16, K4, NULL);
		dirty_range(b.o, (uint64_t)i * 16 * K4, 16, K4, NULL);
	}
	ck_assert_uint_eq(tu_stats(a.d).dirty_bytes, 128 * K4);
	ck_assert_uint_eq(tu_stats(b.d).dirty_bytes, 128 * K4);
	ck_assert_uint_eq(tu_stats(a.d).dirtied, 128);
	tu_check(a.e);
	tu_check(b.e);
	fx_fini(&a);
	/* After a is gone, b goes on, and a third engine comes and goes. */
	dirty_range(b.o, 128 * K4, 16, K4, NULL);
	ck_assert_uint_eq(tu_stats(b.d).dirty_bytes, 144 * K4);
	fx_init(&a, 1u << 30);
	dirty_range(a.o, 0, 16, K4, NULL);
	ck_assert_uint_eq(tu_stats(a.d).dirty_bytes, 16 * K4);
	fx_fini(&a);
	fx_fini(&b);
}
END_TEST

/* Lowering a limit takes the credit back: the next dirtying is locked. */
START_TEST(test_limit_change_revokes)
{
	struct fx f;
	us_buf *keep[4];
	uint64_t before;

	fx_init(&f, 1u << 30);
	dirty_range(f.o, 0, 4, K4, keep);
	ck_assert_uint_eq(queued(), 4);
	ck_assert_int_gt(atomic_load(&us__tls.tc->credit), 0);
	ck_assert_int_eq(us_domain_set_limit(f.d, US_LIMIT_DIRTY_BYTES, 64 * K4), 0);
	before = atomic_load(&us__tls.tc->tail);
	dirty_range(f.o, 4 * K4, 1, K4, NULL);
	/* Locked: nothing queued, and the stale credit went back first. */
	ck_assert_uint_eq(atomic_load(&us__tls.tc->tail), before);
	put_all(keep, 4);
	tu_check(f.e);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 5 * K4);
	fx_fini(&f);
}
END_TEST

/*
 * A locked dirtying of a large buffer takes the domain past its background
 * threshold while this thread still holds credit: that credit is taken
 * back, so the small dirtyings that follow are throttled, not lock-free.
 * bg = 100, dirty = 200 units: freerun 150.
 */
START_TEST(test_crossing_revokes)
{
	struct fx f;
	uint64_t p, before;
	us_buf *b;

	fx_init(&f, 1u << 30);
	ck_assert_int_eq(us_engine_set_param(f.e, US_PARAM_MIN_PAUSE_NS, 0), 0);
	ck_assert_int_eq(us_domain_set_limit(f.d, US_LIMIT_DIRTY_BG_BYTES, 100 * K4), 0);
	ck_assert_int_eq(us_domain_set_limit(f.d, US_LIMIT_DIRTY_BYTES, 200 * K4), 0);
	dirty_range(f.o, 0, 2, K4, NULL);
	ck_assert_int_gt(atomic_load(&us__tls.tc->credit), 0);
	/* 160 units in one buffer: more than the credit, so locked. */
	ck_assert_int_eq(us_buf_get(f.o, 2 * K4, 160 * K4, US_GET_NODATA, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, &p), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	before = atomic_load(&us__tls.tc->tail);
	ck_assert_int_eq(us_buf_get(f.o, 162 * K4, K4, US_GET_NODATA, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, &p), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_uint_eq(atomic_load(&us__tls.tc->tail), before);
	ck_assert_uint_gt(p, 0); /* past freerun: paused */
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

/* More tiny dirtyings than one queue may hold: the bound sends a writer to
 * the locked path, which drains, and the segments are reused. */
START_TEST(test_queue_bound)
{
	struct fx f;
	uint64_t n = US_TC_MAX_QUEUED + 3000;

	fx_init(&f, 1u << 30);
	dirty_range(f.o, 0, n, 16, NULL);
	ck_assert_uint_le(queued(), US_TC_MAX_QUEUED);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, n * 16);
	ck_assert_uint_eq(tu_stats(f.d).dirtied, n);
	tu_check(f.e);
	fx_fini(&f);
	ck_assert_uint_eq(f.t.flushed_bytes, n * 16);
}
END_TEST

/* Destroying a domain lets go of the credit the thread held in it. */
START_TEST(test_domain_destroy_forgets)
{
	struct fx f;
	us_domain *d2;
	us_object *o2;

	fx_init(&f, 1u << 30);
	ck_assert_int_eq(us_domain_create(f.e, NULL, "d2", 0, &d2), 0);
	ck_assert_int_eq(us_object_create(f.t.backend, d2, NULL, &o2), 0);
	dirty_range(o2, 0, 4, K4, NULL);
	ck_assert_ptr_eq(atomic_load(&us__tls.tc->dom), d2);
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 4);
	ck_assert_int_eq(us_object_destroy(o2), 0);
	ck_assert_int_eq(us_domain_destroy(d2), 0);
	ck_assert_ptr_null(atomic_load(&us__tls.tc->dom));
	ck_assert_uint_eq(us_engine_root(f.e)->granted, 0);
	tu_check(f.e);
	dirty_range(f.o, 0, 4, K4, NULL);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 4 * K4);
	fx_fini(&f);
}
END_TEST

/*
 * A sibling's clean charges eat the root's headroom, which shrinks this
 * domain's thresholds (ratios of its effective limit): the credit granted
 * before is taken back at that charge, and the next dirtying is locked.
 */
START_TEST(test_sibling_charge_revokes)
{
	struct fx f;
	us_domain *b;
	us_object *ob;
	us_buf *x, *held[61];
	uint64_t before, p, i;

	fx_init(&f, 64u << 20);
	ck_assert_int_eq(us_domain_create(f.e, NULL, "b", 0, &b), 0);
	ck_assert_int_eq(us_object_create(f.t.backend, b, NULL, &ob), 0);
	dirty_range(f.o, 0, 4, 64 << 10, NULL);
	ck_assert_int_gt(atomic_load(&us__tls.tc->credit), 64 << 10);
	/* b fills the root with clean data it holds references to (not
	 * evictable, so not dirtyable either), to 2.75 MiB of headroom: a's
	 * background threshold falls to 10 % of 3 MiB, too close to its
	 * pinned bytes for any new grant. */
	for (i = 0; i < 61; i++)
		ck_assert_int_eq(us_buf_get(ob, i << 20, 1u << 20, US_GET_NODATA, &held[i]), 1);
	before = atomic_load(&us__tls.tc->tail);
	ck_assert_int_eq(us_buf_get(f.o, 4 << 16, 64 << 10, US_GET_NODATA, &x), 1);
	ck_assert_int_ge(us_buf_dirty(x, &p), 0);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_uint_eq(atomic_load(&us__tls.tc->tail), before); /* locked */
	tu_check(f.e);
	for (i = 0; i < 61; i++)
		ck_assert_int_eq(us_buf_put(held[i]), 0);
	fx_fini(&f);
}
END_TEST

static void *hook_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	(void)kind;
	++*(uint64_t *)ctx;
	return calloc(1, size);
}

static void hook_free(void *ctx, void *p, size_t size, enum us_alloc_kind kind)
{
	(void)ctx;
	(void)size;
	(void)kind;
	free(p);
}

/* With allocator hooks, all of the engine's memory is theirs: no writer
 * cache (which would outlive the engine, from the C allocator) is made,
 * and every first dirtying takes the lock. */
START_TEST(test_hooks_no_cache)
{
	struct us_alloc_hooks h = { hook_alloc, hook_free, NULL };
	struct us_engine_options opts;
	uint64_t allocs = 0;
	us_engine *e;
	struct tb t;
	us_object *o;

	h.ctx = &allocs;
	us_engine_options_init(&opts);
	opts.memory_bytes = 1u << 30;
	opts.clock = US_CLOCK_VIRTUAL;
	opts.alloc = &h;
	ck_assert_int_eq(us_engine_create(&opts, &e), 0);
	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &o), 0);
	dirty_range(o, 0, 32, K4, NULL);
	ck_assert(!us__tls.tc || us__tls.tc->engine_id != e->id);
	ck_assert(us_list_empty(&e->tcaches));
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).dirty_bytes, 32 * K4);
	ck_assert_uint_gt(allocs, 32);
	t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 32);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* Whether this process may use the expedited private barrier: what the
 * library registers for (registering again is harmless). */
static bool barrier_usable(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* Engine lock held by another thread: what a flusher there would owe. */
static void *due_elsewhere(void *arg)
{
	us_engine *e = arg;
	uint64_t *due = malloc(sizeof(*due));

	if (due) {
		us__lock_nodrain(e);
		*due = us__rewrite_barrier_due(e);
		us__unlock(e);
	}
	return due;
}

static uint64_t due_from_other_thread(us_engine *e)
{
	pthread_t th;
	uint64_t *due, v;

	ck_assert_int_eq(pthread_create(&th, NULL, due_elsewhere, e), 0);
	ck_assert_int_eq(pthread_join(th, (void **)&due), 0);
	ck_assert_ptr_nonnull(due);
	v = *due;
	free(due);
	return v;
}

/*
 * A rewrite of a DIRTY buffer skips the fence when the process could
 * register the barrier: the thread's cache says so and its engine counts
 * it. A flush from this thread, the only writer, owes no barrier; one from
 * another thread owes one for the collections so far, and a barrier done
 * covers them for every flusher. A rewrite during writeback still takes
 * the locked path (REDIRTIED).
 */
START_TEST(test_rewrite_without_fence)
{
	bool usable = barrier_usable();
	struct fx f;
	us_buf *b[4];
	uint64_t p, moves;

	fx_init(&f, 1u << 30);
	dirty_range(f.o, 0, 4, K4, b);
	ck_assert_ptr_eq(atomic_load(&us__tls.tc->nofence), usable ? f.e : NULL);
	ck_assert_uint_eq(f.e->nofence_caches, usable);
	ck_assert_uint_eq(tu_stats(f.d).dirty_bytes, 4 * K4); /* drained */
	ck_assert_int_eq(us_buf_dirty(b[0], &p), 0);
	ck_assert_uint_eq(p, 0);
	ck_assert_uint_eq(queued(), 0);
	ck_assert_int_eq(us_buf_state(b[0]), US_BUF_DIRTY);

	f.t.mode = TB_HOLD;
	ck_assert_int_eq(us_object_flush(f.o, 0, 2 * K4, 0), 2);
	us__lock_nodrain(f.e);
	moves = f.e->wb_moves;
	ck_assert_uint_eq(us__rewrite_barrier_due(f.e), 0); /* our own rewrites */
	us__unlock(f.e);
	ck_assert_uint_gt(moves, 0);
	ck_assert_uint_eq(due_from_other_thread(f.e), usable ? moves : 0);
	if (usable) {
		ck_assert(us__rewrite_barrier(f.e, moves));
		ck_assert_uint_eq(atomic_load(&f.e->wb_fenced), moves);
		ck_assert_uint_eq(due_from_other_thread(f.e), 0);
	}

	ck_assert_int_eq(us_buf_dirty(b[0], &p), 0);
	ck_assert_uint_eq(us_buf_flags(b[0]) & US_BUF_REDIRTIED, US_BUF_REDIRTIED);
	tb_complete_all(&f.t);
	ck_assert_int_eq(us_buf_state(b[0]), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_state(b[1]), US_BUF_CLEAN);
	put_all(b, 4);
	fx_fini(&f);
}
END_TEST

/*
 * A thread whose fast slot holds its cache for another engine rewrites
 * with the fence: the flushers of the buffer's engine may not count it.
 * A cache whose engine is gone no longer names it (another engine could
 * come at its address).
 */
START_TEST(test_rewrite_other_engine)
{
	struct fx a, b;
	us_buf *ba, *bb;
	struct us_tcache *tca;
	uint64_t p;

	fx_init(&a, 1u << 30);
	fx_init(&b, 1u << 30);
	dirty_range(a.o, 0, 1, K4, &ba);
	tca = us__tls.tc;
	dirty_range(b.o, 0, 1, K4, &bb);
	ck_assert_uint_eq(us__tls.id, b.e->id);
	ck_assert_int_eq(us_buf_state(ba), US_BUF_DIRTY);
	ck_assert_ptr_ne(atomic_load(&us__tls.tc->nofence), a.e);
	ck_assert_int_eq(us_buf_dirty(ba, &p), 0);
	ck_assert_uint_eq(p, 0);
	ck_assert_uint_eq(us__tls.id, b.e->id); /* the slot stays b's */
	ck_assert_int_eq(us_buf_state(ba), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_dirty(bb, &p), 0);
	ck_assert_int_eq(us_buf_state(bb), US_BUF_DIRTY);
	put_all(&ba, 1);
	put_all(&bb, 1);
	fx_fini(&a);
	ck_assert(atomic_load(&tca->dead));
	ck_assert_ptr_null(atomic_load(&tca->nofence));
	fx_fini(&b);
}
END_TEST

/*
 * The barrier refused by a seccomp filter, in a child process (which
 * registers on its own): with the registration refused (_i == 0) writers
 * keep their fence and flushers owe nothing; with only the barrier refused
 * (_i == 1) the first flush that needs it turns the fence back on and
 * writes its batch again. The child reports 0, 77 when it cannot set up
 * the case, or the step that failed.
 */
struct rf {
	us_object *o;
	uint64_t flushes;
	int rc;
};

static int rf_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct rf *r = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	r->flushes++;
	for (i = 0; i < n; i++)
		if (us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0))
			return -EIO;
	return 0;
}

static void *rf_flush_thread(void *arg)
{
	struct rf *r = arg;

	r->rc = us_object_flush(r->o, 0, US_UNLIMITED, 0);
	return NULL;
}

static int refused_child(int which)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
			 which ? MEMBARRIER_CMD_PRIVATE_EXPEDITED :
				 MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
			 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = rf_flush, .sync = tu_sync_ok };
	struct us_engine_options opts;
	struct rf r = { .flushes = 0 };
	us_backend *bk;
	us_engine *e;
	us_buf *b;
	uint64_t p;
	pthread_t th;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return 77;
	us_engine_options_init(&opts);
	opts.memory_bytes = 1u << 30;
	if (us_engine_create(&opts, &e) || us_backend_create(e, &ops, &r, &bk) ||
	    us_object_create(bk, NULL, NULL, &r.o) || us_buf_get(r.o, 0, K4, 0, &b) != 1 ||
	    us_buf_dirty(b, &p) || us_buf_state(b) != US_BUF_DIRTY)
		return 1;
	if (which == 0) {
		if (atomic_load(&us__tls.tc->nofence) || e->nofence_caches)
			return 2;
		if (us_buf_dirty(b, &p) || us_buf_state(b) != US_BUF_DIRTY)
			return 3;
		if (pthread_create(&th, NULL, rf_flush_thread, &r) || pthread_join(th, NULL) ||
		    r.rc != 1 || r.flushes != 1 || us_buf_state(b) != US_BUF_CLEAN)
			return 4;
	} else {
		if (atomic_load(&us__tls.tc->nofence) != e)
			return 77; /* no barrier on this kernel at all */
		/* Flushed from another thread: the barrier is due, refused. */
		if (pthread_create(&th, NULL, rf_flush_thread, &r) || pthread_join(th, NULL) ||
		    r.rc != 1 || r.flushes != 1)
			return 5;
		if (atomic_load(&us__tls.tc->nofence) || e->nofence_caches ||
		    us_buf_state(b) != US_BUF_DIRTY)
			return 6; /* the fence back on, the batch to write again */
		if (pthread_create(&th, NULL, rf_flush_thread, &r) || pthread_join(th, NULL) ||
		    r.rc != 1 || r.flushes != 2 || us_buf_state(b) != US_BUF_CLEAN)
			return 7;
	}
	if (us_buf_put(b) || us_engine_destroy(e))
		return 8;
	return 0;
}

START_TEST(test_barrier_refused)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(refused_child(_i));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		return; /* no seccomp filters, or no barrier, here */
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tcache");
	TCase *tc = tcase_create("tcache");

	tcase_add_test(tc, test_queued_then_accounted);
	tcase_add_test(tc, test_two_writers_one_buffer);
	tcase_add_test(tc, test_thread_exit_drains);
	tcase_add_test(tc, test_engine_gone_first);
	tcase_add_test(tc, test_two_engines_one_thread);
	tcase_add_test(tc, test_limit_change_revokes);
	tcase_add_test(tc, test_crossing_revokes);
	tcase_add_test(tc, test_queue_bound);
	tcase_add_test(tc, test_domain_destroy_forgets);
	tcase_add_test(tc, test_hooks_no_cache);
	tcase_add_test(tc, test_sibling_charge_revokes);
	tcase_add_test(tc, test_rewrite_without_fence);
	tcase_add_test(tc, test_rewrite_other_engine);
	tcase_add_loop_test(tc, test_barrier_refused, 0, 2);
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
