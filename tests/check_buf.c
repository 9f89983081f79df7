/*
 * Buffers and every transition of the state machine (BUFFER STATES in
 * include/unstable/unstable.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define K4 4096u

struct fx {
	us_engine *e;
	struct tb t;
	us_object *o;
	us_domain *root;
};

static void fx_init(struct fx *f, bool with_commit, bool with_sync)
{
	f->e = tu_engine(1u << 30);
	f->root = us_engine_root(f->e);
	tb_init(&f->t, f->e, with_commit, with_sync);
	ck_assert_int_eq(us_object_create(f->t.backend, NULL, f, &f->o), 0);
}

/* Completes, commits and releases everything, then destroys the engine. */
static void fx_fini(struct fx *f)
{
	tb_complete_all(&f->t);
	us_backend_commit_done(f->t.backend, UINT64_MAX);
	tu_check(f->e);
	ck_assert_int_eq(us_engine_destroy(f->e), 0);
}

/* A new buffer at offset, with one reference held. */
static us_buf *get(struct fx *f, uint64_t offset, uint64_t length)
{
	us_buf *b;

	ck_assert_int_eq(us_buf_get(f->o, offset, length, 0, &b), 1);
	return b;
}

static us_buf *dirty(struct fx *f, uint64_t offset, uint64_t length)
{
	us_buf *b = get(f, offset, length);

	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	return b;
}

START_TEST(test_get_lookup_next)
{
	struct fx f;
	us_buf *a, *b, *c, *x;
	unsigned char *p;
	size_t i;

	fx_init(&f, true, false);
	a = get(&f, 0, K4);
	c = get(&f, 2 * K4, K4);
	b = get(&f, K4, K4);
	/* The payload is engine-owned, zeroed and writable. */
	p = us_buf_data(b);
	ck_assert_ptr_nonnull(p);
	for (i = 0; i < K4; i++)
		ck_assert_uint_eq(p[i], 0);
	memset(p, 0xab, K4);
	/* Getting it again finds the same buffer. */
	ck_assert_int_eq(us_buf_get(f.o, K4, K4, 0, &x), 0);
	ck_assert_ptr_eq(x, b);
	ck_assert_int_eq(us_buf_put(x), 0);
	/* Overlaps are refused. */
	ck_assert_int_eq(us_buf_get(f.o, K4 + 1, K4, 0, &x), -EEXIST);
	ck_assert_int_eq(us_buf_get(f.o, K4, 2 * K4, 0, &x), -EEXIST);
	ck_assert_int_eq(us_buf_get(f.o, K4 - 1, 2, 0, &x), -EEXIST);
	ck_assert_int_eq(us_buf_get(f.o, K4, 1, 0, &x), -EEXIST);
	/* Lookup by any offset inside, iteration in offset order. */
	ck_assert_int_eq(us_buf_lookup(f.o, K4 + 100, &x), 0);
	ck_assert_ptr_eq(x, b);
	ck_assert_uint_eq(((unsigned char *)us_buf_data(x))[100], 0xab);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_buf_lookup(f.o, 3 * K4, &x), -ENOENT);
	ck_assert_int_eq(us_buf_next(f.o, 1, &x), 0);
	ck_assert_ptr_eq(x, b);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_buf_next(f.o, 0, &x), 0);
	ck_assert_ptr_eq(x, a);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_buf_next(f.o, 2 * K4 + 1, &x), -ENOENT);
	/* NOCREATE and NODATA. */
	ck_assert_int_eq(us_buf_get(f.o, 8 * K4, K4, US_GET_NOCREATE, &x), -ENOENT);
	ck_assert_int_eq(us_buf_get(f.o, 8 * K4, K4, US_GET_NODATA, &x), 1);
	ck_assert_ptr_null(us_buf_data(x));
	ck_assert_uint_eq(us_buf_offset(x), 8 * K4);
	ck_assert_uint_eq(us_buf_length(x), K4);
	ck_assert_ptr_eq(us_buf_object(x), f.o);
	ck_assert_int_eq(us_buf_state(x), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_uint_eq(tu_stats(f.root).charged_bytes, 4 * K4);
	ck_assert_uint_eq(tu_stats(f.root).evictable_bytes, K4);
	ck_assert_int_eq(us_buf_put(a), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_buf_put(c), 0);
	ck_assert_uint_eq(tu_stats(f.root).evictable_bytes, 4 * K4);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_dirty_flush_stable)
{
	struct fx f;
	struct us_domain_stats s;
	us_buf *b;

	fx_init(&f, true, false);
	b = get(&f, 0, K4);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_put(b), 0);
	s = tu_stats(f.root);
	ck_assert_uint_eq(s.dirty_bytes, K4);
	ck_assert_uint_eq(s.evictable_bytes, 0);
	ck_assert_uint_eq(s.dirtied, 1);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_WRITEBACK);
	ck_assert_uint_eq(f.t.nruns, 1);
	ck_assert_uint_eq(tu_stats(f.root).writeback_bytes, K4);
	/* Nothing more to flush while it is in writeback. */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 0);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_STABLE, 0, 0), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	s = tu_stats(f.root);
	ck_assert_uint_eq(s.clean_bytes, K4);
	ck_assert_uint_eq(s.evictable_bytes, K4);
	ck_assert_uint_eq(s.written_stable, 1);
	ck_assert_uint_eq(s.writeback_started, 1);
	/* A second completion is refused. */
	ck_assert_int_eq(us_buf_write_done(b, US_WRITE_STABLE, 0, 0), -EALREADY);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_flush_runs)
{
	struct fx f;
	us_buf *c;

	fx_init(&f, true, false);
	dirty(&f, 0, K4);
	dirty(&f, K4, K4);
	dirty(&f, 2 * K4, K4);
	c = get(&f, 3 * K4, K4); /* clean: breaks the run */
	dirty(&f, 4 * K4, K4);
	dirty(&f, 5 * K4, 2 * K4);
	dirty(&f, 8 * K4, K4); /* a gap before it: a run of its own */
	/* A range flush takes only the buffers wholly inside it. */
	ck_assert_int_eq(us_object_flush(f.o, K4, 2 * K4, 0), 2);
	ck_assert_uint_eq(f.t.nruns, 1);
	ck_assert_uint_eq(f.t.runs[0].offset, K4);
	ck_assert_uint_eq(f.t.runs[0].length, 2 * K4);
	ck_assert_uint_eq(f.t.runs[0].n, 2);
	tb_complete_all(&f.t);
	ck_assert_int_eq(us_buf_dirty(c, NULL), 0);
	ck_assert_int_eq(us_buf_put(c), 0);
	/* Runs of adjacent buffers, ascending, capped at 8 KiB, never split. */
	f.t.nruns = 0;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 2 * K4), 5);
	ck_assert_uint_eq(f.t.nruns, 4);
	ck_assert_uint_eq(f.t.runs[0].offset, 0);
	ck_assert_uint_eq(f.t.runs[0].length, K4);
	ck_assert_uint_eq(f.t.runs[1].offset, 3 * K4);
	ck_assert_uint_eq(f.t.runs[1].length, 2 * K4);
	ck_assert_uint_eq(f.t.runs[1].n, 2);
	ck_assert_uint_eq(f.t.runs[2].offset, 5 * K4);
	ck_assert_uint_eq(f.t.runs[2].length, 2 * K4);
	ck_assert_uint_eq(f.t.runs[3].offset, 8 * K4);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_unstable_commit)
{
	struct fx f;
	us_buf *a, *b;
	struct us_backend_stats bs = { .size = sizeof(bs) };

	fx_init(&f, true, false);
	a = dirty(&f, 0, K4);
	b = dirty(&f, K4, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2);
	ck_assert_int_eq(us_buf_write_done(a, US_WRITE_UNSTABLE, 5, 0), 0);
	ck_assert_int_eq(us_buf_write_done(b, US_WRITE_UNSTABLE, 3, 0), 0);
	f.t.npending = 0;
	ck_assert_int_eq(us_buf_state(a), US_BUF_UNSTABLE);
	ck_assert_uint_eq(us_buf_commit_seq(a), 5);
	ck_assert_uint_eq(tu_stats(f.root).unstable_bytes, 2 * K4);
	ck_assert_uint_eq(tu_stats(f.root).evictable_bytes, 0);
	tu_check(f.e);
	/* The engine asks; the backend answers later. */
	ck_assert_int_eq(us_object_commit(f.o), 0);
	ck_assert_uint_eq(f.t.commits, 1);
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 4), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_state(a), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 5), 1);
	ck_assert_int_eq(us_buf_state(a), US_BUF_CLEAN);
	ck_assert_uint_eq(us_buf_commit_seq(a), 0);
	ck_assert_uint_eq(tu_stats(f.root).committed, 2);
	ck_assert_uint_eq(tu_stats(f.root).unstable_bytes, 0);
	ck_assert_int_eq(us_backend_stats(f.t.backend, &bs), 0);
	ck_assert_uint_eq(bs.last_committed_seq, 5);
	ck_assert_uint_eq(bs.commit_done, 2);
	ck_assert_uint_eq(bs.commit_calls, 1);
	/* Nothing unstable: no commit call at all. */
	ck_assert_int_eq(us_object_commit(f.o), 0);
	ck_assert_uint_eq(f.t.commits, 1);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_commit_without_commit_callback_syncs)
{
	struct fx f;

	fx_init(&f, false, true);
	dirty(&f, 0, K4);
	f.t.mode = TB_UNSTABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_object_commit(f.o), 0);
	ck_assert_uint_eq(f.t.syncs, 1);
	ck_assert_uint_eq(f.t.commits, 0);
	fx_fini(&f);
}
END_TEST

START_TEST(test_commit_before_write_completion)
{
	struct fx f;
	us_object *o2;
	us_buf *a, *b, *c, *d;

	fx_init(&f, true, false);
	ck_assert_int_eq(us_object_create(f.t.backend, NULL, NULL, &o2), 0);
	a = dirty(&f, 0, K4);
	b = dirty(&f, K4, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2);
	/* The backend reports commit 10 before the writes are acknowledged. */
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 10), 0);
	ck_assert_int_eq(us_buf_write_done(a, US_WRITE_UNSTABLE, 7, 0), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_write_done(b, US_WRITE_UNSTABLE, 11, 0), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	f.t.npending = 0;
	ck_assert_uint_eq(tu_stats(f.root).committed, 1);
	/* An older commit report does not move the mark back. */
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 3), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	/* Per object (NFS COMMIT style): only that object's buffers. */
	ck_assert_int_eq(us_buf_get(o2, 0, K4, 0, &c), 1);
	ck_assert_int_eq(us_buf_dirty(c, NULL), 0);
	ck_assert_int_eq(us_buf_put(c), 0);
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 12, 0), 0);
	ck_assert_int_eq(us_object_commit_done(o2, 20), 1);
	ck_assert_int_eq(us_buf_state(c), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	/* o2's own mark sends its later acknowledgement straight to CLEAN. */
	ck_assert_int_eq(us_buf_get(o2, K4, K4, 0, &d), 1);
	ck_assert_int_eq(us_buf_dirty(d, NULL), 0);
	ck_assert_int_eq(us_buf_put(d), 0);
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 15, 0), 0);
	ck_assert_int_eq(us_buf_state(d), US_BUF_CLEAN);
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 11), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_redirty_during_writeback)
{
	struct fx f;
	us_buf *b;
	int result;

	for (result = US_WRITE_STABLE; result <= US_WRITE_LOST; result++) {
		fx_init(&f, true, false);
		b = dirty(&f, 0, K4);
		ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
		ck_assert_int_eq(us_buf_lookup(f.o, 0, &b), 0);
		ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
		ck_assert_int_eq(us_buf_state(b), US_BUF_WRITEBACK);
		ck_assert_uint_eq(us_buf_flags(b) & US_BUF_REDIRTIED, US_BUF_REDIRTIED);
		ck_assert_uint_eq(tu_stats(f.root).redirtied, 1);
		/* At most one write in flight: the redirtied buffer is not handed over. */
		ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 0);
		ck_assert_uint_eq(f.t.npending, 1);
		/* Whatever the first write's result, the newer data is DIRTY. */
		ck_assert_int_eq(tb_complete(&f.t, 0, (enum us_write_result)result, 9, -EIO), 0);
		ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
		ck_assert_uint_eq(us_buf_flags(b) & US_BUF_REDIRTIED, 0);
		ck_assert_uint_eq(us_buf_commit_seq(b), 0);
		/* A commit covering the old write's seq leaves it dirty. */
		ck_assert_int_eq(us_backend_commit_done(f.t.backend, 9), 0);
		ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
		ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
		ck_assert_int_eq(us_buf_put(b), 0);
		tu_check(f.e);
		fx_fini(&f);
	}
}
END_TEST

/* The error reported to a sync caller with cursor *since, or 0. */
static int check_error(us_object *o, uint64_t *since)
{
	int err = 0, rc = us_object_check_error(o, since, &err);

	ck_assert_int_ge(rc, 0);
	ck_assert_int_eq(rc == 1, err != 0);
	return rc == 1 ? err : 0;
}

START_TEST(test_transient_error_keeps_data)
{
	struct fx f;
	us_buf *b;
	uint64_t since;

	fx_init(&f, true, false);
	since = us_object_errseq(f.o);
	b = dirty(&f, 0, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_ERROR, 0, -ENOSPC), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_uint_eq(us_buf_flags(b) & US_BUF_ERROR, US_BUF_ERROR);
	ck_assert_uint_eq(tu_stats(f.root).write_errors, 1);
	ck_assert_uint_eq(tu_stats(f.root).dirty_bytes, K4);
	/* A transient error is not reported to sync callers: the data is kept. */
	ck_assert_int_eq(check_error(f.o, &since), 0);
	/* The retry succeeds and clears the flag. */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_STABLE, 0, 0), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_uint_eq(us_buf_flags(b) & US_BUF_ERROR, 0);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_lost_error_reported_once_per_caller)
{
	struct fx f;
	us_buf *b;
	uint64_t s1, s2, s3;

	fx_init(&f, true, false);
	s1 = us_object_errseq(f.o);
	s2 = us_object_errseq(f.o);
	b = dirty(&f, 0, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_LOST, 0, -EIO), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_uint_eq(tu_stats(f.root).write_lost, 1);
	/* Each caller sampled before the error sees it once. */
	ck_assert_int_eq(check_error(f.o, &s1), -EIO);
	ck_assert_int_eq(check_error(f.o, &s1), 0);
	ck_assert_int_eq(check_error(f.o, &s2), -EIO);
	ck_assert_int_eq(check_error(f.o, &s2), 0);
	/* A caller sampled after it does not. */
	s3 = us_object_errseq(f.o);
	ck_assert_int_eq(check_error(f.o, &s3), 0);
	/* The default error is -EIO. */
	ck_assert_int_eq(us_buf_get(f.o, 0, K4, 0, &b), 0);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_LOST, 0, 0), 0);
	ck_assert_int_eq(check_error(f.o, &s1), -EIO);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_commit_lost)
{
	struct fx f;
	us_object *o2;
	us_buf *a, *b, *c;
	struct us_backend_stats bs = { .size = sizeof(bs) };

	fx_init(&f, true, false);
	ck_assert_int_eq(us_object_create(f.t.backend, NULL, NULL, &o2), 0);
	a = dirty(&f, 0, K4);
	b = dirty(&f, K4, K4);
	ck_assert_int_eq(us_buf_get(o2, 0, K4, 0, &c), 1);
	ck_assert_int_eq(us_buf_dirty(c, NULL), 0);
	ck_assert_int_eq(us_buf_put(c), 0);
	f.t.mode = TB_UNSTABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2);
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 1);
	ck_assert_uint_eq(tu_stats(f.root).unstable_bytes, 3 * K4);
	/* The server restarted: everything unstable is written again. */
	ck_assert_int_eq(us_backend_commit_lost(f.t.backend), 3);
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_state(c), US_BUF_DIRTY);
	ck_assert_uint_eq(tu_stats(f.root).unstable_bytes, 0);
	ck_assert_uint_eq(tu_stats(f.root).dirty_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(f.root).commit_lost, 3);
	ck_assert_int_eq(us_backend_stats(f.t.backend, &bs), 0);
	ck_assert_uint_eq(bs.dirty_bytes, 3 * K4);
	ck_assert_uint_eq(bs.unstable_bytes, 0);
	ck_assert_uint_eq(bs.commit_lost, 1);
	/* A commit report for the lost seqs changes nothing now. */
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 3), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	tu_check(f.e);
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2);
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 1);
	fx_fini(&f);
}
END_TEST

/* One object's commit refused (an NFS file removed on the server, a failed
 * fdatasync()): only its unstable buffers are written again, and its write
 * in flight across the loss; the others, the epoch and the committed seqs
 * stay. */
START_TEST(test_object_commit_lost)
{
	struct fx f;
	us_object *o2;
	us_buf *a, *b, *c, *x, *y;
	struct us_backend_stats bs = { .size = sizeof(bs) };
	uint64_t s1 = us_object_errseq(NULL);
	int err = 0;

	fx_init(&f, true, false);
	ck_assert_int_eq(us_object_create(f.t.backend, NULL, NULL, &o2), 0);
	a = dirty(&f, 0, K4);
	b = dirty(&f, K4, K4);
	ck_assert_int_eq(us_buf_get(o2, 0, K4, 0, &c), 1);
	ck_assert_int_eq(us_buf_dirty(c, NULL), 0);
	ck_assert_int_eq(us_buf_put(c), 0);
	f.t.mode = TB_UNSTABLE;
	ck_assert_int_eq(us_object_flush(o2, 0, US_UNLIMITED, 0), 1);	 /* seq 1 */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2); /* 2, 3 */
	s1 = us_object_errseq(f.o);
	ck_assert_int_eq(us_object_commit(f.o), 0);
	ck_assert_int_eq(f.t.commits, 1);
	/* A third write of f.o in flight across the loss. */
	x = dirty(&f, 2 * K4, K4);
	f.t.mode = TB_HOLD;
	ck_assert_int_eq(us_object_flush(f.o, 2 * K4, K4, 0), 1);
	ck_assert_int_eq(us_object_commit_lost(f.o), 2);
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_state(c), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_buf_state(x), US_BUF_WRITEBACK);
	/* Acknowledged UNSTABLE after it: its data may be what the commit
	 * lost, so it is written again, whatever its seq. */
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 10, 0), 0);
	ck_assert_int_eq(us_buf_state(x), US_BUF_DIRTY);
	ck_assert_int_eq(us_object_commit_done(f.o, 10), 0);
	ck_assert_int_eq(us_buf_state(x), US_BUF_DIRTY);
	/* o2's writes are not concerned: one issued now is kept. */
	ck_assert_int_eq(us_buf_get(o2, K4, K4, 0, &y), 1);
	ck_assert_int_eq(us_buf_dirty(y, NULL), 0);
	ck_assert_int_eq(us_buf_put(y), 0);
	ck_assert_int_eq(us_object_flush(o2, K4, K4, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 11, 0), 0);
	ck_assert_int_eq(us_buf_state(y), US_BUF_UNSTABLE);
	ck_assert_uint_eq(tu_stats(f.root).unstable_bytes, 2 * K4);
	ck_assert_uint_eq(tu_stats(f.root).dirty_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(f.root).commit_lost, 3);
	ck_assert_int_eq(us_backend_stats(f.t.backend, &bs), 0);
	ck_assert_uint_eq(bs.commit_lost, 0);
	ck_assert_uint_eq(us_backend_epoch(f.t.backend), 0);
	tu_check(f.e);
	/* Nothing of f.o's is left unstable; o2's commit still counts. */
	ck_assert_int_eq(us_object_commit_lost(f.o), 0);
	ck_assert_int_eq(us_object_commit_done_epoch(o2, 0, 11), 2);
	ck_assert_int_eq(us_buf_state(c), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_state(y), US_BUF_CLEAN);
	/* Written again and refused: the error goes to f.o's errseq. */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 3);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_LOST, 0, -ESTALE), 0);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_LOST, 0, -ESTALE), 0);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_LOST, 0, -ESTALE), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_state(x), US_BUF_CLEAN);
	ck_assert_int_eq(us_object_check_error(f.o, &s1, &err), 1);
	ck_assert_int_eq(err, -ESTALE);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_dirty_unstable_buffer)
{
	struct fx f;
	us_buf *b;

	fx_init(&f, true, false);
	b = dirty(&f, 0, K4);
	f.t.mode = TB_UNSTABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_buf_state(b), US_BUF_UNSTABLE);
	ck_assert_int_eq(us_buf_ref(b), -EINVAL); /* no reference held */
	ck_assert_int_eq(us_buf_get(f.o, 0, K4, 0, &b), 0);
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	/* The old write's commit does not clean the newer data. */
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 1), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_int_eq(us_buf_put(b), 0);
	tu_check(f.e);
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	fx_fini(&f);
}
END_TEST

START_TEST(test_drop)
{
	struct fx f;
	us_buf *a, *b, *c, *x;
	struct us_domain_stats s;

	fx_init(&f, true, false);
	a = get(&f, 0, K4);
	ck_assert_int_eq(us_buf_dirty(a, NULL), 0);
	ck_assert_int_eq(us_buf_drop(a), 0); /* dirty data dropped on purpose */
	s = tu_stats(f.root);
	ck_assert_uint_eq(s.charged_bytes, 0);
	ck_assert_uint_eq(s.drops, 1);
	ck_assert_uint_eq(s.dropped_bytes, K4);
	ck_assert_int_eq(us_buf_lookup(f.o, 0, &x), -ENOENT);
	/* Not while in writeback, nor with other references. */
	b = dirty(&f, K4, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_buf_ref(b), -EINVAL);
	ck_assert_int_eq(us_buf_lookup(f.o, K4, &b), 0);
	ck_assert_int_eq(us_buf_drop(b), -EBUSY);
	ck_assert_int_eq(us_buf_put(b), 0);
	c = get(&f, 2 * K4, K4);
	ck_assert_int_eq(us_buf_ref(c), 0);
	ck_assert_int_eq(us_buf_drop(c), -EBUSY);
	ck_assert_int_eq(us_buf_put(c), 0);
	ck_assert_int_eq(us_buf_drop(c), 0);
	/* An unstable buffer can be dropped; its commit then finds nothing. */
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 4, 0), 0);
	ck_assert_int_eq(us_buf_lookup(f.o, K4, &b), 0);
	ck_assert_int_eq(us_buf_drop(b), 0);
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 4), 0);
	ck_assert_uint_eq(tu_stats(f.root).charged_bytes, 0);
	ck_assert_uint_eq(tu_stats(f.root).buffers, 0);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

START_TEST(test_flush_callback_failure)
{
	struct fx f;
	us_buf *b;
	struct us_backend_stats bs = { .size = sizeof(bs) };

	fx_init(&f, true, false);
	b = dirty(&f, 0, K4);
	dirty(&f, K4, K4);
	f.t.mode = TB_FAIL;
	/* Refused: nothing was taken, so nothing is counted. */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 0);
	/* Not started: back to DIRTY, nothing lost. */
	ck_assert_int_eq(us_buf_state(b), US_BUF_DIRTY);
	ck_assert_uint_eq(tu_stats(f.root).dirty_bytes, 2 * K4);
	ck_assert_int_eq(us_backend_stats(f.t.backend, &bs), 0);
	ck_assert_uint_eq(bs.flush_failed, 1);
	ck_assert_uint_eq(bs.writeback_bytes, 0);
	tu_check(f.e);
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 2);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	fx_fini(&f);
}
END_TEST

START_TEST(test_object_destroy)
{
	struct fx f;
	us_buf *b;

	fx_init(&f, true, false);
	b = get(&f, 0, K4);
	ck_assert_int_eq(us_object_destroy(f.o), -EBUSY); /* referenced */
	ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_object_destroy(f.o), -EBUSY); /* dirty */
	f.t.mode = TB_STABLE;
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	get(&f, K4, K4);
	ck_assert_int_eq(us_buf_lookup(f.o, K4, &b), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	ck_assert_int_eq(us_backend_destroy(f.t.backend), -EBUSY);
	ck_assert_int_eq(us_object_destroy(f.o), 0);
	ck_assert_uint_eq(f.t.evictions, 2);
	ck_assert_uint_eq(tu_stats(f.root).charged_bytes, 0);
	ck_assert_int_eq(us_backend_destroy(f.t.backend), 0);
	tu_check(f.e);
	ck_assert_int_eq(us_engine_destroy(f.e), 0);
}
END_TEST

static uint64_t evicted_order[16];
static size_t nevicted;

static void record_evict(struct tb *t, us_object *o, uint64_t offset, uint64_t length)
{
	(void)t;
	(void)o;
	(void)length;
	if (nevicted < 16)
		evicted_order[nevicted++] = offset;
}

START_TEST(test_evict_lru_order)
{
	struct fx f;
	us_buf *b[4], *x;
	int i;

	fx_init(&f, true, false);
	ck_assert_int_eq(us_domain_set_limit(f.root, US_LIMIT_MAX, 4 * K4), 0);
	f.t.on_evict = record_evict;
	nevicted = 0;
	for (i = 0; i < 4; i++)
		b[i] = get(&f, (uint64_t)i * K4, K4);
	/* Released in the order 2, 0, 3; 1 stays referenced. */
	ck_assert_int_eq(us_buf_put(b[2]), 0);
	ck_assert_int_eq(us_buf_put(b[0]), 0);
	ck_assert_int_eq(us_buf_put(b[3]), 0);
	ck_assert_int_eq(us_buf_get(f.o, 4 * K4, K4, 0, &x), 1);
	ck_assert_uint_eq(nevicted, 1);
	ck_assert_uint_eq(evicted_order[0], 2 * K4);
	ck_assert_int_eq(us_buf_put(x), 0);
	/* A buffer used again moves to the young end. */
	ck_assert_int_eq(us_buf_lookup(f.o, 0, &x), 0);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_buf_get(f.o, 5 * K4, 2 * K4, 0, &x), 1);
	ck_assert_uint_eq(nevicted, 3);
	ck_assert_uint_eq(evicted_order[1], 3 * K4);
	ck_assert_uint_eq(evicted_order[2], 4 * K4);
	ck_assert_uint_eq(tu_stats(f.root).charged_bytes, 4 * K4);
	ck_assert_uint_eq(tu_stats(f.root).evictions, 3);
	ck_assert_int_eq(us_buf_put(x), 0);
	ck_assert_int_eq(us_buf_put(b[1]), 0);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

/* Review finding: a failed flush call must not revert a newer write. */
static us_object *nested_obj;
static int nested_depth;

static int nested_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
			uint64_t length, enum us_reason reason)
{
	struct tb *t = ctx;

	(void)offset;
	(void)length;
	(void)reason;
	ck_assert_uint_eq(n, 1);
	if (nested_depth++ == 0) {
		/* Complete, dirty again, hand it to a newer write, then fail. */
		ck_assert_int_eq(us_buf_write_done(bufs[0], US_WRITE_STABLE, 0, 0), 0);
		ck_assert_int_ge(us_buf_dirty(bufs[0], NULL), 0);
		ck_assert_int_eq(us_object_flush(obj, 0, US_UNLIMITED, 0), 1);
		return -EIO;
	}
	t->pending[t->npending++] = bufs[0]; /* the newer write stays in flight */
	return 0;
}

START_TEST(test_failed_flush_keeps_newer_write)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = nested_flush,
				      .sync = tu_sync_ok };
	struct tb t;
	us_engine *e = tu_engine(1u << 30);
	us_backend *bk;
	us_buf *b;

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(us_backend_create(e, &ops, &t, &bk), 0);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &nested_obj), 0);
	ck_assert_int_eq(us_buf_get(nested_obj, 0, K4, 0, &b), 1);
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	nested_depth = 0;
	ck_assert_int_eq(us_object_flush(nested_obj, 0, US_UNLIMITED, 0), 1);
	/* The newer write is in flight: the buffer stays in WRITEBACK. */
	ck_assert_int_eq(us_buf_state(b), US_BUF_WRITEBACK);
	ck_assert_int_eq(us_object_flush(nested_obj, 0, US_UNLIMITED, 0), 0);
	ck_assert_uint_eq(t.npending, 1);
	ck_assert_int_eq(us_buf_write_done(t.pending[0], US_WRITE_STABLE, 0, 0), 0);
	ck_assert_int_eq(us_buf_state(b), US_BUF_CLEAN);
	ck_assert_int_eq(us_buf_put(b), 0);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* Review finding: an evict callback may not pull the backend away. */
static int destroy_rc = 1;

static void evict_destroys_backend(struct tb *t, us_object *o, uint64_t offset, uint64_t length)
{
	(void)o;
	(void)offset;
	(void)length;
	destroy_rc = us_backend_destroy(t->backend);
}

START_TEST(test_evict_callback_cannot_destroy_backend)
{
	struct fx f;

	fx_init(&f, true, false);
	ck_assert_int_eq(us_buf_put(get(&f, 0, K4)), 0);
	ck_assert_int_eq(us_buf_put(get(&f, K4, K4)), 0);
	f.t.on_evict = evict_destroys_backend;
	ck_assert_int_eq(us_object_destroy(f.o), 0);
	/* The object was still there while its buffers were evicted. */
	ck_assert_int_eq(destroy_rc, -EBUSY);
	ck_assert_uint_eq(f.t.evictions, 2);
	f.t.on_evict = NULL;
	ck_assert_int_eq(us_backend_destroy(f.t.backend), 0);
	ck_assert_int_eq(us_engine_destroy(f.e), 0);
}
END_TEST

/* Review finding: a write acknowledged after commit_lost is written again. */
START_TEST(test_ack_after_commit_lost)
{
	struct fx f;
	us_buf *a;

	fx_init(&f, true, false);
	a = dirty(&f, 0, K4);
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_backend_commit_lost(f.t.backend), 0);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 7, 0), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	ck_assert_uint_eq(tu_stats(f.root).commit_lost, 1);
	ck_assert_int_eq(us_backend_commit_done(f.t.backend, 9), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_DIRTY);
	/* Written again after the loss, it is unstable normally. */
	ck_assert_int_eq(us_object_flush(f.o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(tb_complete(&f.t, 0, US_WRITE_UNSTABLE, 10, 0), 0);
	ck_assert_int_eq(us_buf_state(a), US_BUF_UNSTABLE);
	tu_check(f.e);
	fx_fini(&f);
}
END_TEST

/*
 * Payloads of whole pages are page-aligned (lib/alloc.c), so they cost no
 * hidden page each and can go to O_DIRECT as they are; other sizes need
 * only the C alignment.
 */
START_TEST(test_payload_alignment)
{
	static const uint64_t sizes[] = { 4096, 16384, 65536, 131072, 1 << 20, 100, 20000 };
	struct fx f;
	size_t i;

	fx_init(&f, true, false);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		us_buf *b;
		uintptr_t p;

		ck_assert_int_ge(us_buf_get(f.o, (uint64_t)i << 21, sizes[i], 0, &b), 0);
		p = (uintptr_t)us_buf_data(b);
		ck_assert(p != 0);
#ifdef US_WITH_JEMALLOC
		if (sizes[i] >= 16384 && sizes[i] % 4096 == 0)
			ck_assert_uint_eq(p % 4096, 0);
#endif
		ck_assert_uint_eq(p % _Alignof(max_align_t), 0);
		us_buf_put(b);
	}
	fx_fini(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("transitions");

	tcase_add_test(tc, test_get_lookup_next);
	tcase_add_test(tc, test_dirty_flush_stable);
	tcase_add_test(tc, test_flush_runs);
	tcase_add_test(tc, test_unstable_commit);
	tcase_add_test(tc, test_commit_without_commit_callback_syncs);
	tcase_add_test(tc, test_commit_before_write_completion);
	tcase_add_test(tc, test_redirty_during_writeback);
	tcase_add_test(tc, test_transient_error_keeps_data);
	tcase_add_test(tc, test_lost_error_reported_once_per_caller);
	tcase_add_test(tc, test_commit_lost);
	tcase_add_test(tc, test_object_commit_lost);
	tcase_add_test(tc, test_dirty_unstable_buffer);
	tcase_add_test(tc, test_drop);
	tcase_add_test(tc, test_flush_callback_failure);
	tcase_add_test(tc, test_object_destroy);
	tcase_add_test(tc, test_evict_lru_order);
	tcase_add_test(tc, test_failed_flush_keeps_newer_write);
	tcase_add_test(tc, test_evict_callback_cannot_destroy_backend);
	tcase_add_test(tc, test_ack_after_commit_lost);
	tcase_add_test(tc, test_payload_alignment);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
