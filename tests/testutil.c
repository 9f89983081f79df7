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

	(void)reason;
	if (t->mode == TB_FAIL)
		return -EIO;
	t->flushes++;
	t->flushed_bytes += length;
	if (t->nruns < TB_MAX_RUNS)
		t->runs[t->nruns++] = (struct tb_run){ obj, offset, length, n };
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
