/*
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int tb_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct tb *t = ctx;
	size_t i;

	if (t->mode == TB_FAIL)
		return -EIO;
	t->flushes++;
	t->flushed_bytes += length;
	if (t->nruns < TB_MAX_RUNS)
		t->runs[t->nruns++] =
			(struct tb_run){ obj, offset, length, n, reason, us_engine_now(t->engine) };
	for (i = 0; i < n; i++) {
		switch (t->mode) {
		case TB_STABLE:
			ck_assert_int_eq(us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0), 0);
			break;
		case TB_UNSTABLE:
			ck_assert_int_eq(
				us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, t->next_seq++, 0), 0);
			break;
		default:
			ck_assert_uint_lt(t->npending, TB_MAX_PENDING);
			t->pending[t->npending++] = bufs[i];
			break;
		}
	}
	return 0;
}

static int tb_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct tb *t = ctx;

	(void)obj;
	(void)reason;
	t->commits++;
	return 0;
}

static int tb_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct tb *t = ctx;

	(void)b;
	(void)reason;
	t->syncs++;
	return 0;
}

static void tb_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	struct tb *t = ctx;

	(void)data;
	t->evictions++;
	t->evicted_bytes += length;
	if (t->on_evict)
		t->on_evict(t, obj, offset, length);
}

void tb_init(struct tb *t, us_engine *e, bool with_commit, bool with_sync)
{
	struct us_backend_ops ops = { .size = sizeof(ops) };

	memset(t, 0, sizeof(*t));
	t->engine = e;
	t->next_seq = 1;
	ops.flush = tb_flush;
	ops.commit = with_commit ? tb_commit : NULL;
	ops.sync = with_sync ? tb_sync : NULL;
	ops.evict = tb_evict;
	ck_assert_int_eq(us_backend_create(e, &ops, t, &t->backend), 0);
}

int tb_complete(struct tb *t, size_t i, enum us_write_result r, uint64_t seq, int err)
{
	us_buf *b;

	ck_assert_uint_lt(i, t->npending);
	b = t->pending[i];
	t->pending[i] = t->pending[--t->npending];
	return us_buf_write_done(b, r, seq, err);
}

void tb_complete_all(struct tb *t)
{
	while (t->npending)
		ck_assert_int_eq(tb_complete(t, 0, US_WRITE_STABLE, 0, 0), 0);
}

static void lane_push(struct tsim_lane *l, us_buf *b, uint64_t at)
{
	if (l->tail == l->cap) {
		size_t live = l->tail - l->head;

		if (l->head >= live && l->head) {
			memmove(l->q, l->q + l->head, live * sizeof(*l->q));
		} else {
			l->cap = l->cap ? 2 * l->cap : 1024;
			l->q = realloc(l->q, l->cap * sizeof(*l->q));
			ck_assert_ptr_nonnull(l->q);
			memmove(l->q, l->q + l->head, live * sizeof(*l->q));
		}
		l->head = 0;
		l->tail = live;
	}
	l->q[l->tail++] = (struct tsim_done){ b, at };
}

static int tsim_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		      uint64_t length, enum us_reason reason)
{
	struct tsim *s = ctx;
	uint64_t now = us_engine_now(s->engine), start, wb;
	struct tsim_lane *l = &s->lane[0];
	struct us_backend_stats st = { .size = sizeof(st) };
	size_t i;

	(void)offset;
	for (i = 0; i < 4; i++)
		if (s->slow[i] == obj)
			l = &s->lane[1];
	s->flushes++;
	s->reasons[reason]++;
	ck_assert_int_eq(us_backend_stats(s->backend, &st), 0);
	wb = st.writeback_bytes;
	if (wb > s->max_writeback)
		s->max_writeback = wb;
	start = l->busy_until_ns > now ? l->busy_until_ns : now;
	for (i = 0; i < n; i++) {
		start += us_buf_length(bufs[i]) * 1000000000ull / l->bw;
		lane_push(l, bufs[i], start + l->lat_ns);
	}
	l->busy_until_ns = start;
	(void)length;
	return 0;
}

int tu_sync_ok(void *ctx, us_backend *b, enum us_reason reason)
{
	(void)ctx;
	(void)b;
	(void)reason;
	return 0;
}

void tsim_init(struct tsim *s, us_engine *e, uint64_t bw, uint64_t lat_ns)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = tsim_flush,
				      .sync = tu_sync_ok };

	memset(s, 0, sizeof(*s));
	s->engine = e;
	s->lane[0].bw = s->lane[1].bw = bw;
	s->lane[0].lat_ns = s->lane[1].lat_ns = lat_ns;
	ck_assert_int_eq(us_backend_create(e, &ops, s, &s->backend), 0);
}

void tsim_fini(struct tsim *s)
{
	free(s->lane[0].q);
	free(s->lane[1].q);
}

uint64_t tsim_next(const struct tsim *s)
{
	uint64_t t = UINT64_MAX;
	int i;

	for (i = 0; i < 2; i++) {
		const struct tsim_lane *l = &s->lane[i];

		if (l->head < l->tail && l->q[l->head].at_ns < t)
			t = l->q[l->head].at_ns;
	}
	return t;
}

void tsim_deliver(struct tsim *s, uint64_t now_ns)
{
	int i;

	for (i = 0; i < 2; i++) {
		struct tsim_lane *l = &s->lane[i];

		while (l->head < l->tail && l->q[l->head].at_ns <= now_ns) {
			us_buf *b = l->q[l->head++].b;

			s->completed_bytes += us_buf_length(b);
			tu_assert(us_buf_write_done(b, US_WRITE_STABLE, 0, 0) == 0, "write_done");
		}
	}
}

us_engine *tu_engine(uint64_t memory_bytes)
{
	struct us_engine_options o;
	us_engine *e;

	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = memory_bytes;
	ck_assert_int_eq(us_engine_create(&o, &e), 0);
	return e;
}

struct us_domain_stats tu_stats(us_domain *d)
{
	struct us_domain_stats s = { .size = sizeof(s) };
	int rc = us_domain_stats(d, &s);

	tu_assert(rc == 0, "us_domain_stats: %d", rc);
	return s;
}

int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
