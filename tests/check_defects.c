/*
 * Regression tests for defects found off the seeds' path (docs/guide.md):
 * a put or drop from a flush callback without a reference of its own, the
 * -EDEADLK check with more threads inside callbacks than it had slots, the
 * commit_failed count of us_object_commit(), the longest stall of a writer
 * (max_stall_ns), the text of the stats, and the commit seqs across a
 * us_backend_commit_lost(). Virtual time only. The threaded test runs under
 * ThreadSanitizer in CI, the others under ASan and UBSan.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE 1

#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K4 4096u

/* ------------------------------------------------------------------------ */
/* Defect 2: a callback's put or drop without a reference of its own.        */

enum cb_action {
	CB_PUT,	 /* complete, then us_buf_put() */
	CB_DROP, /* complete, then us_buf_drop() */
};

struct ubk {
	us_backend *bk;
	enum cb_action action;
	int rc_put, rc_drop; /* what the callback got */
	unsigned calls;
};

static int ubk_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason)
{
	struct ubk *u = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	u->calls++;
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0), 0);
		if (u->action == CB_PUT)
			u->rc_put = us_buf_put(bufs[i]);
		else
			u->rc_drop = us_buf_drop(bufs[i]);
	}
	return 0;
}

static void ubk_init(struct ubk *u, us_engine *e, enum cb_action a)
{
	struct us_backend_ops ops = { .size = sizeof(ops) };

	memset(u, 0, sizeof(*u));
	u->action = a;
	u->rc_put = u->rc_drop = 1;
	ops.flush = ubk_flush;
	ops.sync = tu_sync_ok;
	ck_assert_int_eq(us_backend_create(e, &ops, u, &u->bk), 0);
}

/* A dirty buffer of o at offset that the caller holds no reference to. */
static void dirty_unreferenced(us_object *o, uint64_t offset)
{
	us_buf *b;

	ck_assert_int_eq(us_buf_get(o, offset, K4, 0, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
}

static void unref_case(enum cb_action a, bool engine_flush)
{
	us_engine *e = tu_engine(64ull << 20);
	struct us_domain_stats st;
	struct ubk u;
	us_object *o;
	us_buf *b;

	ubk_init(&u, e, a);
	ck_assert_int_eq(us_object_create(u.bk, NULL, NULL, &o), 0);
	dirty_unreferenced(o, 0);
	if (engine_flush) {
		/* The engine's own writeback (expiry) pins it the same way. */
		ck_assert_int_eq(us_engine_poll(e, 31 * 1000000000ull, NULL), 1);
	} else {
		ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	}
	ck_assert_uint_eq(u.calls, 1);
	if (a == CB_PUT)
		ck_assert_int_eq(u.rc_put, -EINVAL);
	else
		ck_assert_int_eq(u.rc_drop, -EINVAL);
	tu_check(e);
	/* Nothing was freed: the buffer is there, clean and evictable. */
	st = tu_stats(us_engine_root(e));
	ck_assert_uint_eq(st.buffers, 1);
	ck_assert_uint_eq(st.clean_bytes, K4);
	ck_assert_uint_eq(st.evictable_bytes, K4);
	ck_assert_int_eq(us_buf_lookup(o, 0, &b), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_drop(b), 0);
	tu_check(e);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_backend_destroy(u.bk), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}

START_TEST(test_cb_put_unreferenced)
{
	unref_case(CB_PUT, false);
}
END_TEST

START_TEST(test_cb_drop_unreferenced)
{
	unref_case(CB_DROP, false);
}
END_TEST

START_TEST(test_cb_put_unreferenced_poll)
{
	unref_case(CB_PUT, true);
}
END_TEST

START_TEST(test_cb_drop_unreferenced_poll)
{
	unref_case(CB_DROP, true);
}
END_TEST

/* With a reference of the caller's own: the put is obeyed, and a drop
 * inside the callback is refused (-EBUSY: the engine still holds the
 * buffer until the callback returns); after it, the drop works. */
static int held_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		      uint64_t length, enum us_reason reason)
{
	struct ubk *u = ctx;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	ck_assert_uint_eq(n, 1);
	u->calls++;
	ck_assert_int_eq(us_buf_write_done(bufs[0], US_WRITE_STABLE, 0, 0), 0);
	u->rc_drop = us_buf_drop(bufs[0]);
	ck_assert_int_eq(us_buf_ref(bufs[0]), 0); /* the caller holds one */
	u->rc_put = us_buf_put(bufs[0]);
	return 0;
}

START_TEST(test_cb_drop_referenced)
{
	us_engine *e = tu_engine(64ull << 20);
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = held_flush,
				      .sync = tu_sync_ok };
	struct ubk u = { .calls = 0 };
	us_object *o;
	us_buf *b;

	ck_assert_int_eq(us_backend_create(e, &ops, &u, &u.bk), 0);
	ck_assert_int_eq(us_object_create(u.bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, K4, 0, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(u.rc_drop, -EBUSY);
	ck_assert_int_eq(u.rc_put, 0);
	tu_check(e);
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).evictable_bytes, 0); /* still ours */
	ck_assert_int_eq(us_buf_drop(b), 0);
	tu_check(e);
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).buffers, 0);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_backend_destroy(u.bk), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Defect 3: -EDEADLK for any number of threads inside callbacks.            */

#define NCB 48

struct dl {
	us_engine *e;
	us_backend *bk;
	us_object *o[NCB];
	pthread_barrier_t in, checked;
	int rc_balance[NCB], rc_destroy[NCB];
	pthread_t thread[NCB];
	int id[NCB];
};

static struct dl dl;

static int dl_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	int i = *(int *)us_object_user(obj);
	size_t k;

	(void)ctx;
	(void)offset;
	(void)length;
	(void)reason;
	/* Every thread inside its callback at once. */
	pthread_barrier_wait(&dl.in);
	dl.rc_balance[i] = us_object_balance_wait(obj);
	dl.rc_destroy[i] = us_engine_destroy(dl.e);
	pthread_barrier_wait(&dl.checked);
	for (k = 0; k < n; k++)
		ck_assert_int_eq(us_buf_write_done(bufs[k], US_WRITE_STABLE, 0, 0), 0);
	return 0;
}

static void *dl_thread(void *arg)
{
	int i = *(int *)arg;

	ck_assert_int_eq(us_object_flush(dl.o[i], 0, US_UNLIMITED, 0), 1);
	return NULL;
}

START_TEST(test_edeadlk_many_threads)
{
	struct us_engine_options opts;
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = dl_flush, .sync = tu_sync_ok };
	int i;

	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = 1ull << 30;
	opts.flusher_threads = 1;
	ck_assert_int_eq(us_engine_create(&opts, &dl.e), 0);
	ck_assert_int_eq(us_backend_create(dl.e, &ops, NULL, &dl.bk), 0);
	ck_assert_int_eq(pthread_barrier_init(&dl.in, NULL, NCB + 1), 0);
	ck_assert_int_eq(pthread_barrier_init(&dl.checked, NULL, NCB + 1), 0);
	for (i = 0; i < NCB; i++) {
		us_buf *b;

		dl.id[i] = i;
		ck_assert_int_eq(us_object_create(dl.bk, NULL, &dl.id[i], &dl.o[i]), 0);
		ck_assert_int_eq(us_buf_get(dl.o[i], 0, K4, 0, &b), 1);
		ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	for (i = 0; i < NCB; i++)
		ck_assert_int_eq(pthread_create(&dl.thread[i], NULL, dl_thread, &dl.id[i]), 0);
	pthread_barrier_wait(&dl.in);
	/* This thread runs no callback: it is not refused. */
	ck_assert_int_eq(us_object_balance_wait(dl.o[0]), 0);
	pthread_barrier_wait(&dl.checked);
	for (i = 0; i < NCB; i++)
		ck_assert_int_eq(pthread_join(dl.thread[i], NULL), 0);
	for (i = 0; i < NCB; i++) {
		ck_assert_msg(dl.rc_balance[i] == -EDEADLK, "thread %d: balance_wait %d", i,
			      dl.rc_balance[i]);
		ck_assert_msg(dl.rc_destroy[i] == -EDEADLK, "thread %d: engine_destroy %d", i,
			      dl.rc_destroy[i]);
	}
	pthread_barrier_destroy(&dl.in);
	pthread_barrier_destroy(&dl.checked);
	tu_check(dl.e);
	for (i = 0; i < NCB; i++)
		ck_assert_int_eq(us_object_destroy(dl.o[i]), 0);
	ck_assert_int_eq(us_backend_destroy(dl.bk), 0);
	ck_assert_int_eq(us_engine_destroy(dl.e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Defect 4: commit_failed counts a failed commit of us_object_commit().     */

static int fail_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	(void)ctx;
	(void)obj;
	(void)reason;
	return -EIO;
}

static int fail_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	(void)ctx;
	(void)b;
	(void)reason;
	return -EIO;
}

static int unstable_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
			  uint64_t length, enum us_reason reason)
{
	uint64_t *seq = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	for (i = 0; i < n; i++)
		ck_assert_int_eq(us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, ++*seq, 0), 0);
	return 0;
}

static void commit_failed_case(bool with_commit)
{
	us_engine *e = tu_engine(64ull << 20);
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = unstable_flush };
	struct us_backend_stats bs = { .size = sizeof(bs) };
	uint64_t seq = 0;
	us_backend *bk;
	us_object *o;
	us_buf *b;

	if (with_commit)
		ops.commit = fail_commit;
	else
		ops.sync = fail_sync;
	ck_assert_int_eq(us_backend_create(e, &ops, &seq, &bk), 0);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, K4, 0, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_object_commit(o), -EIO);
	ck_assert_int_eq(us_backend_stats(bk, &bs), 0);
	ck_assert_uint_eq(with_commit ? bs.commit_calls : bs.sync_calls, 1);
	ck_assert_uint_eq(bs.commit_failed, 1);
	/* Nothing lost: still unstable, and a commit reported cleans it. */
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_object_commit_done(o, seq), 1);
	ck_assert_int_eq(us_buf_drop(b), 0);
	tu_check(e);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_backend_destroy(bk), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}

START_TEST(test_commit_failed_commit)
{
	commit_failed_case(true);
}
END_TEST

START_TEST(test_commit_failed_sync)
{
	commit_failed_case(false);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* max_stall_ns: the longest time a writer made no progress, in one piece.   */

#define MS  1000000ull
#define SEC 1000000000ull

/*
 * A writer at its domain's dirty limit held at the gate for hold_ns: the
 * backend keeps everything in WRITEBACK until then. The writer follows the
 * non-blocking protocol (pauses, then us_object_balance() until 0), in
 * pieces of at most max_pause; its stall is the whole wait. Returns the
 * time from the dirtying that met the limit to the gate letting it go.
 */
static uint64_t gate_hold(us_engine *e, struct tb *tp, us_object *o, uint64_t hold_ns,
			  bool end_with_charge)
{
	struct tb *const t = tp;
	uint64_t off = 0, p, t0 = 0, released;
	us_buf *b;
	int rc, pieces = 0;

	for (;;) {
		ck_assert_int_eq(us_buf_get(o, off, 64 * 1024, US_GET_NODATA, &b), 1);
		rc = us_buf_dirty(b, &p);
		ck_assert_int_ge(rc, 0);
		ck_assert_int_eq(us_buf_put(b), 0);
		off += 64 * 1024;
		if (rc == US_DIRTY_OVER_LIMIT)
			break;
		ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
		ck_assert_int_eq(us_engine_poll(e, 0, NULL) >= 0, 1);
	}
	t0 = us_engine_now(e);
	/* Held: the backend takes the data and completes nothing. */
	while (us_engine_now(e) - t0 < hold_ns) {
		ck_assert_uint_gt(p, 0);
		ck_assert_uint_le(p, 200 * MS);
		ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
		ck_assert_int_ge(us_engine_poll(e, 0, NULL), 0);
		rc = us_object_balance(o, &p);
		ck_assert_int_eq(rc, -EAGAIN);
		pieces++;
	}
	ck_assert_int_gt(pieces, 4); /* many pieces, one stall */
	/* The backend completes: the gate opens. */
	tb_complete_all(t);
	ck_assert_int_ge(us_engine_poll(e, 0, NULL), 0);
	while (t->npending || us_object_balance(o, &p) == -EAGAIN) {
		tb_complete_all(t);
		ck_assert_int_eq(us_engine_clock_advance(e, p), 0);
		ck_assert_int_ge(us_engine_poll(e, 0, NULL), 0);
	}
	released = us_engine_now(e) - t0;
	/* Progress: the next charge, or the next dirtying. */
	if (end_with_charge) {
		ck_assert_int_eq(us_buf_get(o, off, 64 * 1024, US_GET_NODATA, &b), 1);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	tb_complete_all(t);
	while (us_object_flush(o, 0, US_UNLIMITED, 0) > 0 || t->npending)
		tb_complete_all(t);
	tu_check(e);
	return released;
}

/* Everything clean: frees it all and checks that nothing is left. */
static void teardown(us_engine *e, us_backend *bk, us_object *o, us_domain *d)
{
	tu_check(e);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_backend_destroy(bk), 0);
	if (d)
		ck_assert_int_eq(us_domain_destroy(d), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}

/* A domain with a 2 MiB background and a 4 MiB dirty threshold, and an
 * object in it on a backend that holds its writes. */
static void gate_setup(us_engine *e, struct tb *t, us_domain **d, us_object **o)
{
	ck_assert_int_eq(us_domain_create(e, NULL, "w", 0, d), 0);
	ck_assert_int_eq(us_domain_set_limit(*d, US_LIMIT_DIRTY_BG_BYTES, 2u << 20), 0);
	ck_assert_int_eq(us_domain_set_limit(*d, US_LIMIT_DIRTY_BYTES, 4u << 20), 0);
	tb_init(t, e, false, true);
	ck_assert_int_eq(us_object_create(t->backend, *d, NULL, o), 0);
}

START_TEST(test_stall_gate_one_second)
{
	us_engine *e = tu_engine(1ull << 30);
	struct us_domain_stats st;
	struct tb t;
	us_domain *d;
	us_object *o;
	uint64_t held;

	gate_setup(e, &t, &d, &o);
	held = gate_hold(e, &t, o, SEC, true);
	st = tu_stats(d);
	/* The pieces are short; the stall is the whole second. */
	ck_assert_uint_le(st.max_pause_ns, 200 * MS);
	ck_assert_msg(st.max_stall_ns >= held - 10 * MS && st.max_stall_ns <= held,
		      "max_stall %llu ns, held %llu ns", (unsigned long long)st.max_stall_ns,
		      (unsigned long long)held);
	ck_assert_uint_ge(st.max_stall_ns, SEC);
	/* Recorded in the ancestors too. */
	ck_assert_uint_eq(tu_stats(us_engine_root(e)).max_stall_ns, st.max_stall_ns);
	teardown(e, t.backend, o, d);
}
END_TEST

/* The stall is recorded as it grows: before the writer's next progress,
 * and for a writer that never comes back. */
START_TEST(test_stall_recorded_while_it_lasts)
{
	us_engine *e = tu_engine(1ull << 30);
	struct tb t;
	us_domain *d;
	us_object *o;
	uint64_t held;

	gate_setup(e, &t, &d, &o);
	held = gate_hold(e, &t, o, 3 * SEC, false);
	ck_assert_uint_ge(tu_stats(d).max_stall_ns, held - 10 * MS);
	ck_assert_uint_le(tu_stats(d).max_stall_ns, held);
	teardown(e, t.backend, o, d);
}
END_TEST

/* A charge that waits for reclaim and ends in -ENOMEM: the wait is a
 * stall, recorded. The domain is full of data in writeback that never
 * completes (a server that does not answer). */
START_TEST(test_stall_enomem_recorded)
{
	us_engine *e = tu_engine(1ull << 30);
	struct us_domain_stats st;
	struct tb t;
	uint64_t off = 0, retry, t0, waited = 0, retries;
	us_domain *d;
	us_object *o;
	us_buf *b;
	int rc;

	ck_assert_int_eq(us_domain_create(e, NULL, "small", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 1u << 20), 0);
	tb_init(&t, e, false, true);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	/* Fill the domain with data in writeback that never completes. */
	while ((rc = us_buf_get(o, off, 64 * 1024, US_GET_NODATA | US_GET_NOWAIT, &b)) == 1) {
		uint64_t p;

		ck_assert_int_ge(us_buf_dirty(b, &p), 0);
		ck_assert_int_eq(us_buf_put(b), 0);
		off += 64 * 1024;
	}
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_eq(us_engine_get_param(e, US_PARAM_RECLAIM_RETRIES, &retries), 0);
	t0 = us_engine_now(e);
	/* The writer retries as told until the engine gives up. */
	for (;;) {
		rc = us_object_reclaim(o, 64 * 1024, &retry);
		if (rc != -EAGAIN)
			break;
		ck_assert_uint_gt(retry, 0);
		ck_assert_int_eq(us_engine_clock_advance(e, retry), 0);
		waited += retry;
		ck_assert_int_ge(us_engine_poll(e, 0, NULL), 0);
		if (waited >= 120 * SEC)
			break;
	}
	/*
	 * Writes are in flight, so the engine waits for them: -ENOMEM comes
	 * only when US_PARAM_RECLAIM_TIMEOUT_NS (60 s) passed without any
	 * progress. The wait that ends in it is one stall, from the first
	 * wait to the answer.
	 */
	st = tu_stats(d);
	ck_assert_int_eq(rc, -ENOMEM);
	ck_assert_uint_ge(st.enomem, 1);
	ck_assert_uint_ge(us_engine_now(e) - t0, 60 * SEC);
	ck_assert_uint_lt(us_engine_now(e) - t0, 61 * SEC);
	ck_assert_msg(st.max_stall_ns + 10 * MS >= us_engine_now(e) - t0 &&
			      st.max_stall_ns <= us_engine_now(e) - t0,
		      "%d: max_stall %llu, waited %llu", rc, (unsigned long long)st.max_stall_ns,
		      (unsigned long long)(us_engine_now(e) - t0));
	ck_assert_uint_ge(st.max_stall_ns, SEC);
	(void)retries;
	tb_complete_all(&t);
	while (us_object_flush(o, 0, US_UNLIMITED, 0) > 0 || t.npending)
		tb_complete_all(&t);
	teardown(e, t.backend, o, d);
}
END_TEST

#define BS (256u << 10)

/*
 * A writer at steady state through a 64 MiB domain for 10 s, in 256 KiB
 * buffers, obeying its pauses, the gate and reclaim, on a simulated server
 * (tsim). Returns its domain's stats.
 */

static struct us_domain_stats steady(uint64_t writer_rate, uint64_t backend_bw, uint64_t max)
{
	us_engine *e = tu_engine(1ull << 30);
	struct us_domain_stats st;
	struct tsim s;
	uint64_t now = 0, ready = 0, next_poll = 0, off = 0, end = 10 * SEC;
	us_domain *d;
	us_object *o;

	ck_assert_int_eq(us_domain_create(e, NULL, "w", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, max), 0);
	tsim_init(&s, e, backend_bw, MS);
	ck_assert_int_eq(us_object_create(s.backend, d, NULL, &o), 0);
	while (now < end) {
		uint64_t t = ready, c = tsim_next(&s), p = 0;

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
				continue;
			}
			rc = us_buf_get(o, off, BS, US_GET_NODATA | US_GET_NOWAIT, &b);
			if (rc == -EAGAIN) {
				ck_assert_int_eq(us_object_reclaim(o, BS, &p), -EAGAIN);
				ready = now + p;
				continue;
			}
			ck_assert_int_ge(rc, 0);
			rc = us_buf_dirty(b, &p);
			ck_assert_int_ge(rc, 0);
			ck_assert_int_eq(us_buf_put(b), 0);
			off += BS;
			ready = now + p + BS * SEC / writer_rate;
		}
	}
	st = tu_stats(d);
	while (us_object_flush(o, 0, US_UNLIMITED, 0) > 0 || tsim_next(&s) != UINT64_MAX)
		tsim_deliver(&s, UINT64_MAX - 1);
	teardown(e, s.backend, o, d);
	tsim_fini(&s);
	return st;
}

/* Backend (400 MiB/s) faster than the writer (200 MiB/s): its pauses, if
 * any, are short and its stalls too: none longer than max_pause (200 ms). */
START_TEST(test_stall_steady_state)
{
	struct us_domain_stats st = steady(200u << 20, 400u << 20, 64u << 20);

	ck_assert_uint_gt(st.dirtied, 10 * 200 * 4 * 9 / 10); /* kept its pace */
	ck_assert_msg(st.max_stall_ns <= 200 * MS, "max_stall %llu ns",
		      (unsigned long long)st.max_stall_ns);
	ck_assert_uint_le(st.max_pause_ns, 200 * MS);
}
END_TEST

/* Throttled at steady state (writer 4x faster than the backend): pauses of
 * up to max_pause, and no longer stall. */
START_TEST(test_stall_throttled_steady_state)
{
	struct us_domain_stats st = steady(1600u << 20, 400u << 20, 64u << 20);

	fprintf(stderr, "throttled writer: max_pause %.1f ms, max_stall %.1f ms, %llu dirtied\n",
		(double)st.max_pause_ns / 1e6, (double)st.max_stall_ns / 1e6,
		(unsigned long long)st.dirtied);
	ck_assert_msg(st.max_stall_ns <= 200 * MS, "max_stall %llu ns",
		      (unsigned long long)st.max_stall_ns);
}
END_TEST

/* The stats of a first-release caller: its struct ends before max_stall_ns
 * and is filled that far; a size in between is refused. */
START_TEST(test_stats_old_size)
{
	us_engine *e = tu_engine(1ull << 30);
	struct us_domain_stats st;

	memset(&st, 0xab, sizeof(st));
	st.size = offsetof(struct us_domain_stats, max_stall_ns);
	ck_assert_int_eq(us_domain_stats(us_engine_root(e), &st), 0);
	ck_assert_uint_eq(st.max_stall_ns, 0xababababababababull); /* untouched */
	ck_assert_uint_eq(st.charged_bytes, 0);
	st.size = offsetof(struct us_domain_stats, max_stall_ns) + 1;
	ck_assert_int_eq(us_domain_stats(us_engine_root(e), &st), -EINVAL);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* us_domain_stat_text() prints every field of us_domain_stats.              */

/* The value of key in text, or -1 when absent. */
static long long text_value(const char *text, const char *key)
{
	size_t n = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, key, n) == 0 && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

START_TEST(test_stat_text_every_field)
{
	us_engine *e = tu_engine(1ull << 30);
	struct us_domain_stats st;
	char text[4096];
	us_domain *d;
	int len, nlines = 0;
	const char *p;
	/* Each field of struct us_domain_stats (in order) and its key. */
	static const struct {
		const char *key;
		size_t off;
	} f[] = {
#define F(key, field) { key, offsetof(struct us_domain_stats, field) }
		F("charged", charged_bytes),
		F("clean", clean_bytes),
		F("dirty", dirty_bytes),
		F("writeback", writeback_bytes),
		F("unstable", unstable_bytes),
		F("evictable", evictable_bytes),
		F("peak_charged", peak_charged_bytes),
		F("peak_pinned", peak_pinned_bytes),
		F("buffers", buffers),
		F("charges", charges),
		F("uncharges", uncharges),
		F("evictions", evictions),
		F("evicted_bytes", evicted_bytes),
		F("drops", drops),
		F("dropped_bytes", dropped_bytes),
		F("enomem", enomem),
		F("max_events", max_events),
		F("high_events", high_events),
		F("dirtied", dirtied),
		F("redirtied", redirtied),
		F("writeback_started", writeback_started),
		F("written_stable", written_stable),
		F("written_unstable", written_unstable),
		F("write_errors", write_errors),
		F("write_lost", write_lost),
		F("committed", committed),
		F("commit_lost", commit_lost),
		F("paused", paused),
		F("pause_ns", pause_ns),
		F("max_pause_ns", max_pause_ns),
		F("over_limit", over_limit),
		F("bg_flushed", bg_flushed),
		F("expired_flushed", expired_flushed),
		F("reclaims", reclaims),
		F("high_delay_ns", high_delay_ns),
		F("max_stall_ns", max_stall_ns),
#undef F
	};
	size_t i;

	/* Every uint64_t of the struct after size is listed above. */
	ck_assert_uint_eq(
		sizeof(f) / sizeof(f[0]),
		(sizeof(struct us_domain_stats) - offsetof(struct us_domain_stats, charged_bytes)) /
			sizeof(uint64_t));
	struct tb t;
	us_object *o;

	/* Some activity, so that values differ from one another. */
	gate_setup(e, &t, &d, &o);
	(void)gate_hold(e, &t, o, SEC / 2, true);
	st = tu_stats(d);
	len = us_domain_stat_text(d, text, sizeof(text));
	ck_assert_int_gt(len, 0);
	ck_assert_int_lt(len, (int)sizeof(text));
	ck_assert_int_eq(us_domain_stat_text(d, NULL, 0), len);
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)&st + f[i].off, sizeof(v));
		ck_assert_msg(text_value(text, f[i].key) == (long long)v,
			      "key %s: %lld in the text, %llu in the stats", f[i].key,
			      text_value(text, f[i].key), (unsigned long long)v);
	}
	for (p = text; *p; p++)
		nlines += *p == '\n';
	/* The fields and the four effective limits. */
	ck_assert_int_eq(nlines, (int)(sizeof(f) / sizeof(f[0])) + 4);
	ck_assert_int_ge(text_value(text, "max"), 0);
	ck_assert_int_ge(text_value(text, "dirty_thresh"), 0);
	/* Truncated like snprintf. */
	ck_assert_int_eq(us_domain_stat_text(d, text, 10), len);
	ck_assert_uint_eq(strlen(text), 9);
	teardown(e, t.backend, o, d);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Header gaps: commit seqs across a commit_lost, what a sync covers.        */

/* Completes pending buffer b of t (TB_HOLD) with r and seq. */
static void complete_buf(struct tb *t, us_buf *b, enum us_write_result r, uint64_t seq)
{
	size_t i;

	for (i = 0; i < t->npending; i++)
		if (t->pending[i] == b) {
			ck_assert_int_eq(tb_complete(t, i, r, seq, 0), 0);
			return;
		}
	ck_abort_msg("buffer not pending");
}

START_TEST(test_commit_seq_restart_and_stale)
{
	us_engine *e = tu_engine(64ull << 20);
	struct us_backend_stats bs = { .size = sizeof(bs) };
	struct tb t;
	us_object *o;
	us_buf *a, *b;
	uint64_t ep;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &o), 0);
	ck_assert_uint_eq(us_backend_epoch(t.backend), 0);
	ck_assert_uint_eq(us_backend_epoch(NULL), 0);
	ep = us_backend_epoch(t.backend);
	/* The old server acknowledges a with seq 100, then restarts. */
	ck_assert_int_eq(us_buf_get(o, 0, K4, 0, &a), 1);
	ck_assert_int_eq(us_buf_dirty(a, NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	complete_buf(&t, a, US_WRITE_UNSTABLE, 100);
	ck_assert_int_eq(us_backend_commit_done(t.backend, 50), 0); /* covers nothing */
	ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
	ck_assert_uint_eq(bs.last_committed_seq, 50);
	ck_assert_int_eq(us_backend_commit_lost(t.backend), 1);
	ck_assert_uint_eq(us_backend_epoch(t.backend), ep + 1);
	ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
	ck_assert_uint_eq(bs.last_committed_seq, 0); /* forgotten: seqs restart */
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	/* The new server numbers from 1: a and a new b acknowledged 1 and 2. */
	ck_assert_int_eq(us_buf_get(o, K4, K4, 0, &b), 1);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 2);
	complete_buf(&t, a, US_WRITE_UNSTABLE, 1);
	complete_buf(&t, b, US_WRITE_UNSTABLE, 2);
	ck_assert_int_eq(us_buf_state(a), US_BUF_UNSTABLE);
	/* A late commit report of the old server, with its epoch: refused,
	 * nothing cleaned (it would have covered both). */
	ck_assert_int_eq(us_backend_commit_done_epoch(t.backend, ep, 100), -ESTALE);
	ck_assert_int_eq(us_object_commit_done_epoch(o, ep, 100), -ESTALE);
	ck_assert_int_eq(us_backend_commit_done_epoch(t.backend, ep + 2, 100), -EINVAL);
	ck_assert_int_eq(us_object_commit_done_epoch(o, ep + 2, 100), -EINVAL);
	ck_assert_int_eq(us_backend_commit_done_epoch(NULL, ep, 100), -EINVAL);
	ck_assert_int_eq(us_object_commit_done_epoch(NULL, ep, 100), -EINVAL);
	ck_assert_int_eq(us_backend_commit_done_epoch(t.backend, ep + 1, 0), -EINVAL);
	ck_assert_int_eq(us_buf_state(a), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_backend_stats(t.backend, &bs), 0);
	ck_assert_uint_eq(bs.last_committed_seq, 0);
	tu_check(e);
	/* The new server's reports, with the new epoch, are taken. */
	ck_assert_int_eq(us_object_commit_done_epoch(o, ep + 1, 1), 1);
	ck_assert_int_eq(us_buf_state(a), US_BUF_CLEAN);
	ck_assert_int_eq(us_backend_commit_done_epoch(t.backend, ep + 1, 2), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_str_ne(us_strerror(-ESTALE), "unknown error");
	ck_assert_int_eq(us_buf_put(a), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	teardown(e, t.backend, o, NULL);
}
END_TEST

/*
 * A sync started at t: a buffer rewritten after t while its older write
 * was in flight holds it until the newer write is durable too (the older
 * write alone does not end it); a buffer clean at t and dirtied after does
 * not hold it at all.
 */
START_TEST(test_sync_covers)
{
	us_engine *e = tu_engine(64ull << 20);
	struct tb t;
	us_object *o;
	us_buf *a, *b;
	us_sync *y;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_object_create(t.backend, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, K4, 0, &a), 1);
	ck_assert_int_eq(us_buf_get(o, K4, K4, 0, &b), 1); /* CLEAN at t */
	ck_assert_int_eq(us_buf_dirty(a, NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, K4, 0), 1);	      /* a's older write */
	ck_assert_int_eq(us_object_sync_start(o, NULL, NULL, &y), 0); /* t */
	ck_assert_int_eq(us_sync_done(y), 0);
	ck_assert_int_eq(us_buf_dirty(a, NULL), 0); /* rewritten after t */
	ck_assert_int_eq(us_buf_flags(a) & US_BUF_REDIRTIED, US_BUF_REDIRTIED);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0); /* dirtied after t */
	complete_buf(&t, a, US_WRITE_STABLE, 0);    /* the older write */
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	ck_assert_int_eq(us_sync_done(y), 0);		     /* not covered by it alone */
	ck_assert_int_eq(us_buf_state(a), US_BUF_WRITEBACK); /* the newer one */
	ck_assert_int_eq(us_buf_state(b), US_BUF_WRITEBACK);
	complete_buf(&t, a, US_WRITE_STABLE, 0);
	/* b's write, started by the sync, still in flight: not waited for. */
	ck_assert_int_eq(us_buf_state(b), US_BUF_WRITEBACK);
	ck_assert_int_eq(us_sync_done(y), 1);
	ck_assert_int_eq(us_sync_free(y), 0);
	tb_complete_all(&t);
	ck_assert_int_eq(us_buf_put(a), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	teardown(e, t.backend, o, NULL);
}
END_TEST

/* ------------------------------------------------------------------------ */

static Suite *suite(void)
{
	Suite *s = suite_create("defects");
	TCase *tc = tcase_create("defects");

	tcase_set_timeout(tc, 120);

	tcase_add_test(tc, test_cb_put_unreferenced);
	tcase_add_test(tc, test_cb_drop_unreferenced);
	tcase_add_test(tc, test_cb_put_unreferenced_poll);
	tcase_add_test(tc, test_cb_drop_unreferenced_poll);
	tcase_add_test(tc, test_cb_drop_referenced);
	tcase_add_test(tc, test_edeadlk_many_threads);
	tcase_add_test(tc, test_commit_failed_commit);
	tcase_add_test(tc, test_commit_failed_sync);
	tcase_add_test(tc, test_stall_gate_one_second);
	tcase_add_test(tc, test_stall_recorded_while_it_lasts);
	tcase_add_test(tc, test_stall_enomem_recorded);
	tcase_add_test(tc, test_stall_steady_state);
	tcase_add_test(tc, test_stall_throttled_steady_state);
	tcase_add_test(tc, test_stats_old_size);
	tcase_add_test(tc, test_stat_text_every_field);
	tcase_add_test(tc, test_commit_seq_restart_and_stale);
	tcase_add_test(tc, test_sync_covers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
