/*
 * The engine: version, options, clocks, errors, allocator hooks (with
 * failure injection), independence of two engines, destruction, the stat
 * text and purging.
 *
 * SPDX-License-Identifier: MIT
 *
 * Only the public header is used. Engines run on US_CLOCK_VIRTUAL except in
 * the clock tests; nothing sleeps or measures wall-clock time.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unstable/unstable.h>

/* ------------------------------------------------------------------------ */
/* Counting allocator hooks                                                  */

#define HK_MAX_LIVE 1024

struct hk_live {
	void *p;
	size_t size;
	enum us_alloc_kind kind;
};

struct hk {
	uint64_t nalloc[2], nfree[2];
	uint64_t out_bytes[2], out_count[2]; /* outstanding, per kind */
	uint64_t bad_free; /* unknown pointer, or another size or kind than allocated */
	uint64_t calls;	   /* allocation calls, failed ones included */
	uint64_t fail_at;  /* fail the allocation call with this number (0: none) */
	bool fired;	   /* that failure happened */
	struct hk_live live[HK_MAX_LIVE];
	size_t nlive;
};

static void *hk_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	struct hk *h = ctx;
	void *p;

	h->calls++;
	if (h->fail_at && h->calls == h->fail_at) {
		h->fired = true;
		return NULL;
	}
	if ((kind != US_ALLOC_META && kind != US_ALLOC_PAYLOAD) || h->nlive == HK_MAX_LIVE)
		return NULL;
	p = malloc(size ? size : 1);
	if (!p)
		return NULL;
	memset(p, 0xa5, size); /* poisoned: what the engine zeroes, and what not */
	h->live[h->nlive++] = (struct hk_live){ p, size, kind };
	h->nalloc[kind]++;
	h->out_bytes[kind] += size;
	h->out_count[kind]++;
	return p;
}

static void hk_free(void *ctx, void *p, size_t size, enum us_alloc_kind kind)
{
	struct hk *h = ctx;
	size_t i;

	for (i = 0; i < h->nlive; i++) {
		if (h->live[i].p == p)
			break;
	}
	if (i == h->nlive) {
		h->bad_free++; /* not ours: leave it alone */
		return;
	}
	if (h->live[i].size != size || h->live[i].kind != kind)
		h->bad_free++;
	kind = h->live[i].kind;
	h->nfree[kind]++;
	h->out_bytes[kind] -= h->live[i].size;
	h->out_count[kind]--;
	h->live[i] = h->live[--h->nlive];
	free(p);
}

/* The live allocation of that kind that holds p, or NULL. */
static const struct hk_live *hk_find(const struct hk *h, const void *p, enum us_alloc_kind kind)
{
	size_t i;

	for (i = 0; i < h->nlive; i++) {
		const char *base = h->live[i].p;

		if (h->live[i].kind == kind && (const char *)p >= base &&
		    (const char *)p < base + (h->live[i].size ? h->live[i].size : 1))
			return &h->live[i];
	}
	return NULL;
}

static void hk_assert_clean(const struct hk *h)
{
	ck_assert_uint_eq(h->bad_free, 0);
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_META], 0);
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_PAYLOAD], 0);
	ck_assert_uint_eq(h->out_count[US_ALLOC_META], 0);
	ck_assert_uint_eq(h->out_count[US_ALLOC_PAYLOAD], 0);
	ck_assert_uint_eq(h->nalloc[US_ALLOC_META], h->nfree[US_ALLOC_META]);
	ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], h->nfree[US_ALLOC_PAYLOAD]);
	ck_assert_uint_eq(h->nlive, 0);
}

/* ------------------------------------------------------------------------ */
/* A test backend                                                            */

#define TK_MAX 64

struct tk {
	bool complete_stable; /* complete in the flush callback; else keep pending */
	uint64_t flushes, flushed_bufs, commits, syncs, evictions, evicted_bytes, evicted_nodata;
	us_buf *pending[TK_MAX];
	size_t npending;
	uint64_t evicted_off[TK_MAX];
	size_t nevicted_off;
};

static int tk_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct tk *t = ctx;
	size_t i;

	t->flushes++;
	t->flushed_bufs += n;
	for (i = 0; i < n; i++) {
		if (t->complete_stable) {
			ck_assert_int_eq(us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0), 0);
		} else {
			ck_assert_uint_lt(t->npending, TK_MAX);
			t->pending[t->npending++] = bufs[i];
		}
	}
	return 0;
}

static int tk_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct tk *t = ctx;

	t->commits++;
	return 0;
}

static int tk_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct tk *t = ctx;

	t->syncs++;
	return 0;
}

static void tk_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	struct tk *t = ctx;

	t->evictions++;
	t->evicted_bytes += length;
	if (!data)
		t->evicted_nodata++;
	if (t->nevicted_off < TK_MAX)
		t->evicted_off[t->nevicted_off++] = offset;
}

/* Completes every pending buffer as stable. */
static void tk_complete_all(struct tk *t)
{
	size_t i;

	for (i = 0; i < t->npending; i++)
		ck_assert_int_eq(us_buf_write_done(t->pending[i], US_WRITE_STABLE, 0, 0), 0);
	t->npending = 0;
}

static us_backend *tk_backend(us_engine *e, struct tk *t)
{
	struct us_backend_ops ops;
	us_backend *b = NULL;

	memset(&ops, 0, sizeof(ops));
	ops.size = sizeof(ops);
	ops.flush = tk_flush;
	ops.commit = tk_commit;
	ops.sync = tk_sync;
	ops.evict = tk_evict;
	ck_assert_int_eq(us_backend_create(e, &ops, t, &b), 0);
	return b;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static us_engine *mk_engine(uint64_t memory_bytes, struct hk *h)
{
	struct us_alloc_hooks hooks = { hk_alloc, hk_free, h };
	struct us_engine_options o;
	us_engine *e = NULL;

	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = memory_bytes;
	if (h)
		o.alloc = &hooks; /* copied by us_engine_create() */
	ck_assert_int_eq(us_engine_create(&o, &e), 0);
	ck_assert_ptr_nonnull(e);
	return e;
}

static void engine_ok(us_engine *e)
{
	char msg[512];
	int rc = us_engine_check(e, msg, sizeof(msg));

	ck_assert_msg(rc == 0, "us_engine_check: %d: %s", rc, msg);
}

static struct us_domain_stats dstats(const us_domain *d)
{
	struct us_domain_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	ck_assert_int_eq(us_domain_stats(d, &st), 0);
	return st;
}

static struct us_backend_stats bstats(const us_backend *b)
{
	struct us_backend_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	ck_assert_int_eq(us_backend_stats(b, &st), 0);
	return st;
}

static struct us_domain_limits dlimits(const us_domain *d)
{
	struct us_domain_limits l;

	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	ck_assert_int_eq(us_domain_effective_limits(d, &l), 0);
	return l;
}

static us_buf *get_buf(us_object *o, uint64_t offset, uint64_t length, unsigned flags)
{
	us_buf *b = NULL;

	ck_assert_int_eq(us_buf_get(o, offset, length, flags, &b), 1);
	return b;
}

/* Everything observable about one engine, for before/after comparisons. */
struct eng_snap {
	struct us_domain_stats root, dom;
	struct us_backend_stats bk;
	struct tk cb;
	uint64_t now;
	char text[2048];
};

static void eng_snap(us_engine *e, const us_domain *d, const us_backend *b, const struct tk *t,
		     struct eng_snap *s)
{
	memset(s, 0, sizeof(*s));
	engine_ok(e);
	s->root = dstats(us_engine_root(e));
	s->dom = dstats(d);
	if (b)
		s->bk = bstats(b);
	s->cb = *t;
	s->now = us_engine_now(e);
	ck_assert_int_lt(us_domain_stat_text(us_engine_root(e), s->text, sizeof(s->text)),
			 (int)sizeof(s->text));
}

static void eng_snap_same(const struct eng_snap *a, const struct eng_snap *b)
{
	ck_assert_msg(memcmp(&a->root, &b->root, sizeof(a->root)) == 0, "root stats changed");
	ck_assert_msg(memcmp(&a->dom, &b->dom, sizeof(a->dom)) == 0, "domain stats changed");
	ck_assert_msg(memcmp(&a->bk, &b->bk, sizeof(a->bk)) == 0, "backend stats changed");
	ck_assert_msg(memcmp(&a->cb, &b->cb, sizeof(a->cb)) == 0, "callbacks were called");
	ck_assert_uint_eq(a->now, b->now);
	ck_assert_str_eq(a->text, b->text);
}

/* ------------------------------------------------------------------------ */
/* Version, options, clocks, errors                                          */

START_TEST(test_version)
{
	char expect[64];

	ck_assert_ptr_nonnull(us_version());
	ck_assert_str_eq(us_version(), US_VERSION_STRING);
	snprintf(expect, sizeof(expect), "%d.%d.%d", US_VERSION_MAJOR, US_VERSION_MINOR,
		 US_VERSION_PATCH);
	ck_assert_str_eq(us_version(), expect);
	/* A static string: the same pointer each time. */
	ck_assert_ptr_eq(us_version(), us_version());
}
END_TEST

START_TEST(test_options_init)
{
	struct us_engine_options o;

	memset(&o, 0x5a, sizeof(o));
	us_engine_options_init(&o);
	ck_assert_uint_eq(o.size, sizeof(o));
	ck_assert_int_eq(o.clock, US_CLOCK_MONOTONIC);
	ck_assert_uint_eq(o.max_arenas, 8);
	ck_assert_uint_gt(o.memory_bytes, 0);
	ck_assert_ptr_null(o.alloc);
	ck_assert_ptr_null(o.clock_ctx);
	ck_assert(o.clock_fn == NULL);
}
END_TEST

START_TEST(test_create_null_options)
{
	struct us_engine_options o;
	us_engine *e = NULL;
	us_domain *root;
	uint64_t max = 0;

	us_engine_options_init(&o);
	ck_assert_int_eq(us_engine_create(NULL, &e), 0);
	ck_assert_ptr_nonnull(e);
	root = us_engine_root(e);
	ck_assert_ptr_nonnull(root);
	ck_assert_str_eq(us_domain_name(root), "root");
	ck_assert_ptr_null(us_domain_parent(root));
	/* The defaults: the root's max is the machine's memory, the rest as Linux. */
	ck_assert_int_eq(us_domain_get_limit(root, US_LIMIT_MAX, &max), 0);
	ck_assert_uint_eq(max, o.memory_bytes);
	ck_assert_int_eq(us_domain_get_limit(root, US_LIMIT_HIGH, &max), 0);
	ck_assert_uint_eq(max, US_UNLIMITED);
	ck_assert_int_eq(us_domain_get_limit(root, US_LIMIT_DIRTY_BG_RATIO, &max), 0);
	ck_assert_uint_eq(max, 10);
	ck_assert_int_eq(us_domain_get_limit(root, US_LIMIT_DIRTY_RATIO, &max), 0);
	ck_assert_uint_eq(max, 20);
	/* A monotonic clock: advancing it is refused. */
	ck_assert_int_eq(us_engine_clock_advance(e, 1), -EINVAL);
	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_create_options_applied)
{
	struct us_engine_options o;
	us_engine *e = NULL;
	uint64_t max = 0;
	us_domain *d[12];
	int i;

	us_engine_options_init(&o);
	o.memory_bytes = 12345;
	o.clock = US_CLOCK_VIRTUAL;
	o.max_arenas = 0; /* the default */
	ck_assert_int_eq(us_engine_create(&o, &e), 0);
	ck_assert_int_eq(us_domain_get_limit(us_engine_root(e), US_LIMIT_MAX, &max), 0);
	ck_assert_uint_eq(max, 12345);
	ck_assert_uint_eq(dlimits(us_engine_root(e)).max_bytes, 12345);
	/* More domains asking for arenas than max_arenas: the rest share silently. */
	for (i = 0; i < 12; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, NULL, name, US_DOMAIN_ARENA, &d[i]), 0);
		ck_assert_int_eq(us_domain_purge(d[i]), 0);
	}
	engine_ok(e);
	/* Owners go, and a late one takes a freed arena: the list of the
	 * root's children that own one follows (I11, checked by engine_ok). */
	ck_assert_int_eq(us_domain_destroy(d[1]), 0);
	ck_assert_int_eq(us_domain_destroy(d[3]), 0);
	engine_ok(e);
	ck_assert_int_eq(us_domain_create(e, NULL, "late", US_DOMAIN_ARENA, &d[1]), 0);
	ck_assert_int_eq(us_domain_set_limit(d[1], US_LIMIT_MAX, 4096), 0); /* purges */
	engine_ok(e);
	for (i = 0; i < 12; i++)
		if (i != 3)
			ck_assert_int_eq(us_domain_destroy(d[i]), 0);
	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_virtual_clock)
{
	us_engine *e = mk_engine(1 << 20, NULL);

	ck_assert_uint_eq(us_engine_now(e), 0);
	ck_assert_uint_eq(us_engine_now(e), 0); /* reading does not move it */
	ck_assert_int_eq(us_engine_clock_advance(e, 5), 0);
	ck_assert_uint_eq(us_engine_now(e), 5);
	ck_assert_int_eq(us_engine_clock_advance(e, 0), 0);
	ck_assert_uint_eq(us_engine_now(e), 5);
	ck_assert_int_eq(us_engine_clock_advance(e, 1000000000), 0);
	ck_assert_uint_eq(us_engine_now(e), 1000000005);
	ck_assert_int_eq(us_engine_clock_advance(e, UINT64_MAX - 1000000005), 0);
	ck_assert_uint_eq(us_engine_now(e), UINT64_MAX);
	ck_assert_int_eq(us_engine_clock_advance(e, 1), -EINVAL);
	ck_assert_uint_eq(us_engine_now(e), UINT64_MAX);
	ck_assert_int_eq(us_engine_clock_advance(e, 0), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

struct my_clock {
	uint64_t now_ns, calls;
};

static uint64_t my_clock_fn(void *ctx)
{
	struct my_clock *c = ctx;

	c->calls++;
	return c->now_ns;
}

START_TEST(test_custom_clock)
{
	struct my_clock c = { 777, 0 };
	struct us_engine_options o;
	struct tk t = { .complete_stable = true };
	us_engine *e = NULL;
	us_object *obj;
	us_buf *b;
	uint64_t calls;

	us_engine_options_init(&o);
	o.clock = US_CLOCK_CUSTOM;
	o.clock_fn = my_clock_fn;
	o.clock_ctx = &c;
	o.memory_bytes = 1 << 20;
	ck_assert_int_eq(us_engine_create(&o, &e), 0);
	calls = c.calls;
	ck_assert_uint_eq(us_engine_now(e), 777);
	ck_assert_uint_gt(c.calls, calls);
	c.now_ns = 123456789;
	ck_assert_uint_eq(us_engine_now(e), 123456789);
	ck_assert_int_eq(us_engine_clock_advance(e, 1), -EINVAL);
	ck_assert_uint_eq(us_engine_now(e), 123456789);

	/* The engine reads its time through the user's function. */
	ck_assert_int_eq(us_object_create(tk_backend(e, &t), NULL, NULL, &obj), 0);
	b = get_buf(obj, 0, 4096, 0);
	calls = c.calls;
	ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_uint_gt(c.calls, calls);
	ck_assert_int_eq(us_object_flush(obj, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_buf_put(b), 0);
	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	ck_assert_uint_eq(t.evictions, 1);
}
END_TEST

START_TEST(test_monotonic_clock)
{
	us_engine *e = NULL;
	struct timespec ts;
	uint64_t prev, cur, before, after;
	int i;

	ck_assert_int_eq(us_engine_create(NULL, &e), 0);
	ck_assert_int_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	before = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	prev = us_engine_now(e);
	for (i = 0; i < 10000; i++) {
		cur = us_engine_now(e);
		ck_assert_uint_ge(cur, prev);
		prev = cur;
	}
	ck_assert_int_eq(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	after = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	/* CLOCK_MONOTONIC in nanoseconds: ordered with the system's readings. */
	ck_assert_uint_le(before, prev);
	ck_assert_uint_ge(after, prev);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_strerror)
{
	static const int known[] = { -EINVAL, -ENOMEM,	 -EBUSY,  -EEXIST,
				     -ENOENT, -EALREADY, -EAGAIN, -EIO };
	static const int unknown[] = { -99999, 99999, INT_MIN, INT_MAX, -EPIPE };
	const int nk = (int)(sizeof(known) / sizeof(known[0]));
	const int nu = (int)(sizeof(unknown) / sizeof(unknown[0]));
	const char *u0 = us_strerror(unknown[0]);
	int i, j;

	for (i = 0; i < nk; i++) {
		const char *s = us_strerror(known[i]);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_gt(strlen(s), 0);
		for (j = 0; j < i; j++)
			ck_assert_str_ne(s, us_strerror(known[j]));
		ck_assert_str_ne(s, u0);
	}
	for (i = 0; i < nu; i++) {
		const char *s = us_strerror(unknown[i]);

		ck_assert_ptr_nonnull(s);
		ck_assert_uint_gt(strlen(s), 0);
	}
	ck_assert_ptr_nonnull(us_strerror(0));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Allocator hooks                                                           */

START_TEST(test_hooks_see_every_allocation)
{
	struct hk *h = calloc(1, sizeof(*h));
	struct tk t = { .complete_stable = false };
	us_engine *e;
	us_domain *d, *d2;
	us_backend *bk;
	us_object *o;
	us_buf *b[4];
	uint64_t meta;
	int i;

	ck_assert_ptr_nonnull(h);
	e = mk_engine(1 << 20, h);
	ck_assert_uint_ge(h->nalloc[US_ALLOC_META], 1);
	ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], 0);
	ck_assert_ptr_nonnull(hk_find(h, e, US_ALLOC_META));
	ck_assert_ptr_nonnull(hk_find(h, us_engine_root(e), US_ALLOC_META));

	meta = h->nalloc[US_ALLOC_META];
	ck_assert_int_eq(us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d), 0);
	ck_assert_uint_gt(h->nalloc[US_ALLOC_META], meta);
	ck_assert_ptr_nonnull(hk_find(h, d, US_ALLOC_META));
	ck_assert_int_eq(us_domain_create(e, d, "d2", 0, &d2), 0);
	ck_assert_ptr_nonnull(hk_find(h, d2, US_ALLOC_META));

	meta = h->nalloc[US_ALLOC_META];
	bk = tk_backend(e, &t);
	ck_assert_uint_gt(h->nalloc[US_ALLOC_META], meta);
	ck_assert_ptr_nonnull(hk_find(h, bk, US_ALLOC_META));

	meta = h->nalloc[US_ALLOC_META];
	ck_assert_int_eq(us_object_create(bk, d2, NULL, &o), 0);
	ck_assert_uint_gt(h->nalloc[US_ALLOC_META], meta);
	ck_assert_ptr_nonnull(hk_find(h, o, US_ALLOC_META));
	ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], 0);

	/* Buffers with data: one record and one payload of exactly length bytes. */
	for (i = 0; i < 3; i++) {
		uint64_t len = 1000 + 1000 * (uint64_t)i;
		const struct hk_live *l;

		meta = h->nalloc[US_ALLOC_META];
		b[i] = get_buf(o, 8192 * (uint64_t)i, len, 0);
		ck_assert_uint_gt(h->nalloc[US_ALLOC_META], meta);
		ck_assert_ptr_nonnull(hk_find(h, b[i], US_ALLOC_META));
		ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], (uint64_t)i + 1);
		l = hk_find(h, us_buf_data(b[i]), US_ALLOC_PAYLOAD);
		ck_assert_ptr_nonnull(l);
		ck_assert_ptr_eq(l->p, us_buf_data(b[i]));
		ck_assert_uint_eq(l->size, len);
	}
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_PAYLOAD], 1000 + 2000 + 3000);
	/* US_GET_NODATA: a record, no payload. */
	meta = h->nalloc[US_ALLOC_META];
	b[3] = get_buf(o, 65536, 1 << 16, US_GET_NODATA);
	ck_assert_ptr_null(us_buf_data(b[3]));
	ck_assert_uint_gt(h->nalloc[US_ALLOC_META], meta);
	ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], 3);
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_PAYLOAD], 6000);

	/* Writeback allocates no payload; whatever it takes it gives back. */
	meta = h->out_bytes[US_ALLOC_META];
	for (i = 0; i < 4; i++)
		ck_assert_int_ge(us_buf_dirty(b[i], NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 4);
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_META], meta);
	ck_assert_uint_eq(h->nalloc[US_ALLOC_PAYLOAD], 3);
	tk_complete_all(&t);
	ck_assert_int_eq(us_domain_purge(d), 0);

	/* Dropping one frees its record and payload through the hooks. */
	ck_assert_int_eq(us_buf_drop(b[0]), 0);
	ck_assert_uint_eq(h->out_bytes[US_ALLOC_PAYLOAD], 5000);
	ck_assert_uint_eq(h->nfree[US_ALLOC_PAYLOAD], 1);
	for (i = 1; i < 4; i++)
		ck_assert_int_eq(us_buf_put(b[i]), 0);
	engine_ok(e);
	ck_assert_uint_eq(h->bad_free, 0);

	/* The engine and everything in it. */
	ck_assert_int_eq(us_engine_destroy(e), 0);
	ck_assert_uint_eq(t.evictions, 3);
	hk_assert_clean(h);
	free(h);
}
END_TEST

/*
 * Failure injection: allocation number fail_at fails once. Each step that
 * sees the failure must return -ENOMEM and change nothing; it is then
 * retried and must succeed, and the scenario goes on to the end. Returns the
 * number of steps that failed (0 once fail_at is past the last allocation).
 */
#define TRY(step, call)                                                                           \
	do {                                                                                      \
		if (e)                                                                            \
			eng_snap(e, d ? d : us_engine_root(e), bk, &t, &before);                  \
		h->fired = false;                                                                 \
		rc = (call);                                                                      \
		if (h->fired) {                                                                   \
			ck_assert_msg(rc == -ENOMEM, "%s: allocation %" PRIu64 " failed: rc %d",  \
				      step, fail_at, rc);                                         \
			if (e) {                                                                  \
				eng_snap(e, d ? d : us_engine_root(e), bk, &t, &after);           \
				eng_snap_same(&before, &after);                                   \
			} else {                                                                  \
				ck_assert_uint_eq(h->out_count[0] + h->out_count[1], 0);          \
			}                                                                         \
			failed++;                                                                 \
			h->fired = false;                                                         \
			rc = (call);                                                              \
			ck_assert(!h->fired);                                                     \
		}                                                                                 \
		ck_assert_msg(rc >= 0, "%s: rc %d with allocation %" PRIu64 " failing", step, rc, \
			      fail_at);                                                           \
	} while (0)

static int inject_run(struct hk *h, uint64_t fail_at)
{
	struct us_alloc_hooks hooks = { hk_alloc, hk_free, h };
	struct us_engine_options o;
	struct eng_snap before, after;
	struct tk t = { .complete_stable = false };
	us_engine *e = NULL;
	us_domain *d = NULL;
	us_backend *bk = NULL;
	us_object *obj = NULL;
	us_buf *b[3] = { NULL, NULL, NULL };
	int rc, i, failed = 0;

	memset(h, 0, sizeof(*h));
	h->fail_at = fail_at;
	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = 1 << 20;
	o.alloc = &hooks;

	TRY("us_engine_create", us_engine_create(&o, &e));
	TRY("us_domain_create", us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d));
	{
		struct us_backend_ops ops;

		memset(&ops, 0, sizeof(ops));
		ops.size = sizeof(ops);
		ops.flush = tk_flush;
		ops.commit = tk_commit;
		ops.evict = tk_evict;
		TRY("us_backend_create", us_backend_create(e, &ops, &t, &bk));
	}
	TRY("us_object_create", us_object_create(bk, d, NULL, &obj));
	for (i = 0; i < 3; i++) {
		TRY("us_buf_get", us_buf_get(obj, 4096 * (uint64_t)i, 4096, 0, &b[i]));
		ck_assert_int_eq(rc, 1);
	}
	for (i = 0; i < 3; i++)
		ck_assert_int_ge(us_buf_dirty(b[i], NULL), 0);
	TRY("us_object_flush", us_object_flush(obj, 0, US_UNLIMITED, 0));
	ck_assert_int_eq(rc, 3);
	ck_assert_uint_eq(t.flushes, 1);
	ck_assert_uint_eq(t.npending, 3);
	tk_complete_all(&t);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(us_buf_state(b[i]), US_BUF_CLEAN);
		ck_assert_int_eq(us_buf_put(b[i]), 0);
	}
	engine_ok(e);
	ck_assert_uint_eq(dstats(d).charged_bytes, 3 * 4096);

	ck_assert_int_eq(us_object_destroy(obj), 0);
	ck_assert_uint_eq(t.evictions, 3);
	ck_assert_int_eq(us_backend_destroy(bk), 0);
	ck_assert_int_eq(us_domain_destroy(d), 0);
	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	hk_assert_clean(h);
	return failed;
}

#undef TRY

START_TEST(test_failure_injection)
{
	struct hk *h = calloc(1, sizeof(*h));
	uint64_t n, clean_allocs;

	ck_assert_ptr_nonnull(h);
	/* A run without failure: how many allocations the scenario makes. */
	ck_assert_int_eq(inject_run(h, 0), 0);
	clean_allocs = h->calls;
	/* Engine, root, domain, backend, object, 3 records and 3 payloads. */
	ck_assert_uint_ge(clean_allocs, 11);
	for (n = 1; n <= 10000; n++) {
		if (inject_run(h, n) == 0)
			break;
	}
	/* Every allocation of the scenario failed once, and was survived. */
	ck_assert_uint_eq(n, clean_allocs + 1);
	printf("failure injection: %" PRIu64 " allocations, each failed once and survived\n",
	       clean_allocs);
	free(h);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Two engines                                                               */

struct side {
	us_engine *e;
	us_domain *d;
	us_backend *bk;
	us_object *o;
	us_buf *b[8];
	struct tk t;
};

static void side_fill(struct side *s)
{
	int i;

	ck_assert_int_eq(us_domain_create(s->e, NULL, "d", 0, &s->d), 0);
	s->bk = tk_backend(s->e, &s->t);
	ck_assert_int_eq(us_object_create(s->bk, s->d, NULL, &s->o), 0);
	for (i = 0; i < 4; i++)
		s->b[i] = get_buf(s->o, 16384 * (uint64_t)i, 16384, 0);
	ck_assert_int_ge(us_buf_dirty(s->b[0], NULL), 0);
	ck_assert_int_ge(us_buf_dirty(s->b[1], NULL), 0);
	ck_assert_int_eq(us_buf_put(s->b[2]), 0);
	ck_assert_int_eq(us_buf_put(s->b[3]), 0);
	engine_ok(s->e);
}

START_TEST(test_two_engines)
{
	struct hk *ha = calloc(1, sizeof(*ha));
	struct side *A = calloc(1, sizeof(*A)), *B = calloc(1, sizeof(*B));
	struct eng_snap sb0, sb1;
	struct us_domain_stats sa, sbs;
	uint64_t ha_calls;
	us_domain *d2;
	us_object *o2;
	us_buf *x;
	int i;

	ck_assert_ptr_nonnull(ha);
	ck_assert_ptr_nonnull(A);
	ck_assert_ptr_nonnull(B);
	/* A: 64 KiB, through counting hooks; B: 1 MiB, the default allocator. */
	A->e = mk_engine(64 << 10, ha);
	B->e = mk_engine(1 << 20, NULL);
	ck_assert_ptr_ne(us_engine_root(A->e), us_engine_root(B->e));
	side_fill(A);
	ha_calls = ha->calls;
	side_fill(B);
	/* B's allocations do not go through A's hooks. */
	ck_assert_uint_eq(ha->calls, ha_calls);

	/* The same operations, the same figures; the limits are each their own. */
	sa = dstats(us_engine_root(A->e));
	sbs = dstats(us_engine_root(B->e));
	ck_assert_uint_eq(sa.charged_bytes, 65536);
	ck_assert_uint_eq(sbs.charged_bytes, 65536);
	ck_assert_uint_eq(sa.dirty_bytes, 32768);
	ck_assert_uint_eq(sbs.dirty_bytes, 32768);
	ck_assert_uint_eq(sa.evictable_bytes, 32768);
	ck_assert_uint_eq(sbs.evictable_bytes, 32768);
	ck_assert_uint_eq(dlimits(A->d).max_bytes, 64 << 10);
	ck_assert_uint_eq(dlimits(B->d).max_bytes, 1 << 20);

	/* A is full: a new buffer evicts A's oldest clean one; B has room. */
	A->b[4] = get_buf(A->o, 65536, 16384, 0);
	B->b[4] = get_buf(B->o, 65536, 16384, 0);
	ck_assert_uint_eq(A->t.evictions, 1);
	ck_assert_uint_eq(A->t.evicted_off[0], 32768);
	ck_assert_uint_eq(B->t.evictions, 0);
	ck_assert_uint_eq(dstats(A->d).evictions, 1);
	ck_assert_uint_eq(dstats(B->d).evictions, 0);
	ck_assert_uint_eq(dstats(A->d).charged_bytes, 65536);
	ck_assert_uint_eq(dstats(B->d).charged_bytes, 81920);

	/* A again: evicts its last clean buffer. Then A is all pinned. */
	eng_snap(B->e, B->d, B->bk, &B->t, &sb0);
	A->b[5] = get_buf(A->o, 81920, 16384, 0);
	ck_assert_uint_eq(A->t.evictions, 2);
	/* All pinned: the charge waits for reclaim, which wrote A's two
	 * dirty buffers back. */
	ck_assert_int_eq(us_buf_get(A->o, 98304, 16384, 0, &x), -EAGAIN);
	sa = dstats(us_engine_root(A->e));
	ck_assert_uint_eq(sa.enomem, 0);
	ck_assert_uint_eq(sa.reclaims, 1);
	ck_assert_uint_eq(sa.charged_bytes, 65536);
	engine_ok(A->e);
	/* None of it touched B. */
	eng_snap(B->e, B->d, B->bk, &B->t, &sb1);
	eng_snap_same(&sb0, &sb1);
	ck_assert_uint_eq(sb1.root.enomem, 0);
	ck_assert_uint_eq(sb1.root.max_events, 0);

	/* Clocks: A's moves, B's stays. */
	ck_assert_int_eq(us_engine_clock_advance(A->e, 1000), 0);
	ck_assert_uint_eq(us_engine_now(A->e), 1000);
	ck_assert_uint_eq(us_engine_now(B->e), 0);

	/* Destroy A with everything in it (objects, backend, domain). */
	ck_assert_int_eq(us_object_flush(A->o, 0, US_UNLIMITED, 0), 0);
	tk_complete_all(&A->t);
	ck_assert_int_eq(us_buf_put(A->b[0]), 0);
	ck_assert_int_eq(us_buf_put(A->b[1]), 0);
	ck_assert_int_eq(us_buf_put(A->b[4]), 0);
	ck_assert_int_eq(us_buf_put(A->b[5]), 0);
	ck_assert_int_eq(us_engine_destroy(A->e), 0);
	ck_assert_uint_eq(A->t.evictions, 6);
	hk_assert_clean(ha);
	ck_assert_uint_eq(B->t.evictions, 0);

	/* B works in full. */
	eng_snap(B->e, B->d, B->bk, &B->t, &sb1);
	eng_snap_same(&sb0, &sb1);
	B->b[5] = get_buf(B->o, 81920, 16384, 0);
	ck_assert_int_ge(us_buf_dirty(B->b[4], NULL), 0);
	ck_assert_int_ge(us_buf_dirty(B->b[5], NULL), 0);
	ck_assert_int_eq(us_object_flush(B->o, 0, US_UNLIMITED, 0), 4);
	ck_assert_uint_eq(B->t.npending, 4);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(us_buf_write_done(B->t.pending[i], US_WRITE_UNSTABLE, 1, 0), 0);
	B->t.npending = 0;
	ck_assert_uint_eq(dstats(B->d).unstable_bytes, 4 * 16384);
	ck_assert_int_eq(us_object_commit(B->o), 0);
	ck_assert_uint_eq(B->t.commits, 1);
	ck_assert_int_eq(us_backend_commit_done(B->bk, 1), 4);
	ck_assert_int_eq(us_domain_create(B->e, B->d, "child", 0, &d2), 0);
	ck_assert_int_eq(us_object_create(B->bk, d2, NULL, &o2), 0);
	x = get_buf(o2, 0, 4096, 0);
	ck_assert_int_eq(us_buf_put(x), 0);
	for (i = 0; i < 6; i++) {
		if (i != 2 && i != 3)
			ck_assert_int_eq(us_buf_put(B->b[i]), 0);
	}
	engine_ok(B->e);
	ck_assert_uint_eq(dstats(B->d).charged_bytes, 6 * 16384 + 4096);
	ck_assert_uint_eq(dstats(B->d).evictable_bytes, 6 * 16384 + 4096);
	ck_assert_int_eq(us_engine_destroy(B->e), 0);
	ck_assert_uint_eq(B->t.evictions, 7);
	free(ha);
	free(A);
	free(B);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Destruction                                                               */

static void destroy_refused(us_engine *e, us_domain *d, us_backend *bk, struct tk *t)
{
	struct eng_snap s0, s1;

	eng_snap(e, d, bk, t, &s0);
	ck_assert_int_eq(us_engine_destroy(e), -EBUSY);
	eng_snap(e, d, bk, t, &s1);
	eng_snap_same(&s0, &s1);
}

START_TEST(test_destroy_evicts_or_refuses)
{
	struct hk *h = calloc(1, sizeof(*h));
	struct tk t = { .complete_stable = false };
	uint64_t total = 0, seen = 0;
	us_engine *e;
	us_domain *d, *d2;
	us_backend *bk;
	us_object *o, *o2, *empty;
	us_buf *x, *y;
	size_t i, j;

	ck_assert_ptr_nonnull(h);
	e = mk_engine(1 << 20, h);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_create(e, d, "d2", 0, &d2), 0);
	bk = tk_backend(e, &t);
	ck_assert_int_eq(us_object_create(bk, d, NULL, &o), 0);
	ck_assert_int_eq(us_object_create(bk, d2, NULL, &o2), 0);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &empty), 0);
	/* Six clean unreferenced buffers in two domains, one without payload. */
	for (i = 0; i < 5; i++) {
		uint64_t len = 4096 + 512 * i;

		x = get_buf(i < 3 ? o : o2, 8192 * i, len, 0);
		ck_assert_int_eq(us_buf_put(x), 0);
		total += len;
	}
	x = get_buf(o2, 65536, 2048, US_GET_NODATA);
	ck_assert_int_eq(us_buf_put(x), 0);
	total += 2048;
	/* And x, taken through every pinned state. */
	x = get_buf(o, 100000, 1000, 0);
	total += 1000;
	destroy_refused(e, d, bk, &t); /* clean, referenced */
	ck_assert_int_ge(us_buf_dirty(x, NULL), 0);
	destroy_refused(e, d, bk, &t); /* dirty, referenced */
	ck_assert_int_eq(us_buf_put(x), 0);
	destroy_refused(e, d, bk, &t); /* dirty */
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	destroy_refused(e, d, bk, &t); /* writeback */
	ck_assert_int_eq(us_buf_write_done(t.pending[0], US_WRITE_UNSTABLE, 3, 0), 0);
	t.npending = 0;
	destroy_refused(e, d, bk, &t); /* unstable */
	ck_assert_int_eq(us_object_commit_done(o, 3), 1);
	ck_assert_uint_eq(t.evictions, 0);
	/* A reference taken by lookup pins too. */
	ck_assert_int_eq(us_buf_lookup(o2, 65536 + 100, &y), 0);
	destroy_refused(e, d, bk, &t);
	ck_assert_int_eq(us_buf_put(y), 0);
	ck_assert_uint_eq(t.evictions, 0);
	ck_assert_uint_eq(dstats(us_engine_root(e)).evictable_bytes, total);

	/* All clean and unreferenced: every buffer is evicted, with its callback. */
	ck_assert_int_eq(us_engine_destroy(e), 0);
	ck_assert_uint_eq(t.evictions, 7);
	ck_assert_uint_eq(t.evicted_bytes, total);
	ck_assert_uint_eq(t.evicted_nodata, 1);
	ck_assert_uint_eq(t.nevicted_off, 7);
	for (i = 0; i < t.nevicted_off; i++) {
		for (j = 0; j < i; j++)
			ck_assert_uint_ne(t.evicted_off[j], t.evicted_off[i]);
		seen += t.evicted_off[i];
	}
	ck_assert_uint_eq(seen, 0 + 8192 + 16384 + 24576 + 32768 + 65536 + 100000);
	hk_assert_clean(h);
	free(h);
}
END_TEST

START_TEST(test_destroy_empty)
{
	us_engine *e = mk_engine(1 << 20, NULL);

	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Stat text and purge                                                       */

/* The value of key in text, which must have it exactly once. */
static uint64_t text_value(const char *text, const char *key)
{
	size_t klen = strlen(key);
	const char *p = text, *found = NULL;

	while (*p) {
		const char *nl = strchr(p, '\n');

		ck_assert_msg(nl != NULL, "line without a newline: %s", p);
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
			ck_assert_msg(found == NULL, "key %s twice", key);
			found = p + klen + 1;
		}
		p = nl + 1;
	}
	ck_assert_msg(found != NULL, "no line \"%s N\"", key);
	return strtoull(found, NULL, 10);
}

static void check_text(const us_domain *d)
{
	struct us_domain_stats st = dstats(d);
	struct us_domain_limits l = dlimits(d);
	char text[4096], *p;
	int need, rc;

	need = us_domain_stat_text(d, NULL, 0);
	ck_assert_int_gt(need, 0);
	ck_assert_int_lt(need, (int)sizeof(text));
	rc = us_domain_stat_text(d, text, sizeof(text));
	ck_assert_int_eq(rc, need);
	ck_assert_uint_eq(strlen(text), (size_t)need);
	ck_assert_int_eq(text[need - 1], '\n');

	/* Every line is "key value". */
	for (p = text; *p;) {
		char *nl = strchr(p, '\n'), *sp = strchr(p, ' ');

		ck_assert_ptr_nonnull(nl);
		ck_assert_msg(sp && sp < nl && sp > p, "bad line in %s", text);
		sp++;
		ck_assert_msg(nl > sp && strspn(sp, "0123456789") == (size_t)(nl - sp),
			      "value not a number in %s", text);
		p = nl + 1;
	}
	ck_assert_uint_eq(text_value(text, "charged"), st.charged_bytes);
	ck_assert_uint_eq(text_value(text, "clean"), st.clean_bytes);
	ck_assert_uint_eq(text_value(text, "dirty"), st.dirty_bytes);
	ck_assert_uint_eq(text_value(text, "writeback"), st.writeback_bytes);
	ck_assert_uint_eq(text_value(text, "unstable"), st.unstable_bytes);
	ck_assert_uint_eq(text_value(text, "evictable"), st.evictable_bytes);
	ck_assert_uint_eq(text_value(text, "peak_charged"), st.peak_charged_bytes);
	ck_assert_uint_eq(text_value(text, "buffers"), st.buffers);
	ck_assert_uint_eq(text_value(text, "charges"), st.charges);
	ck_assert_uint_eq(text_value(text, "evictions"), st.evictions);
	ck_assert_uint_eq(text_value(text, "enomem"), st.enomem);
	ck_assert_uint_eq(text_value(text, "dirtied"), st.dirtied);
	ck_assert_uint_eq(text_value(text, "writeback_started"), st.writeback_started);
	ck_assert_uint_eq(text_value(text, "written_stable"), st.written_stable);
	ck_assert_uint_eq(text_value(text, "max"), l.max_bytes);
	ck_assert_uint_eq(text_value(text, "high"), l.high_bytes);
	ck_assert_uint_eq(text_value(text, "dirty_thresh"), l.dirty_thresh_bytes);
	ck_assert_uint_eq(text_value(text, "bg_thresh"), l.bg_thresh_bytes);
}

START_TEST(test_stat_text)
{
	struct tk t = { .complete_stable = true };
	us_engine *e = mk_engine(1 << 20, NULL);
	us_domain *d, *root = us_engine_root(e);
	us_object *o;
	us_buf *b[3];
	char full[4096], buf[4200];
	int need, i;
	size_t len;

	ck_assert_int_eq(us_domain_create(e, NULL, "d", 0, &d), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 300000), 0);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_HIGH, 10000), 0);
	ck_assert_int_eq(us_object_create(tk_backend(e, &t), d, NULL, &o), 0);
	check_text(root);
	check_text(d);
	for (i = 0; i < 3; i++)
		b[i] = get_buf(o, 10000 * (uint64_t)i, 5000 + (uint64_t)i, 0);
	ck_assert_int_ge(us_buf_dirty(b[0], NULL), 0);
	ck_assert_int_ge(us_buf_dirty(b[1], NULL), 0);
	ck_assert_int_eq(us_object_flush(o, 0, 10000, 0), 1);
	ck_assert_int_eq(us_buf_put(b[2]), 0);
	ck_assert_int_eq(us_buf_get(o, 1 << 20, 400000, US_GET_NODATA, &b[2]), -ENOMEM);
	check_text(root);
	check_text(d);
	need = us_domain_stat_text(d, full, sizeof(full));
	ck_assert_int_gt(need, 0);
	ck_assert_uint_eq(text_value(full, "charged"), 15003);
	ck_assert_uint_eq(text_value(full, "dirty"), 5001);
	ck_assert_uint_eq(text_value(full, "clean"), 10002);
	ck_assert_uint_eq(text_value(full, "buffers"), 3);
	ck_assert_uint_eq(text_value(full, "enomem"), 1);
	ck_assert_uint_eq(text_value(full, "high_events"), 2);
	ck_assert_uint_eq(text_value(full, "written_stable"), 1);
	ck_assert_uint_eq(text_value(full, "max"), 300000);

	/* Truncation as snprintf: the return is always the whole length, at most
	 * len - 1 bytes and a NUL are written, nothing past them. */
	for (len = 0; len <= (size_t)need + 2; len++) {
		size_t n = len ? (len - 1 < (size_t)need ? len - 1 : (size_t)need) : 0;

		memset(buf, 'X', sizeof(buf));
		ck_assert_int_eq(us_domain_stat_text(d, buf, len), need);
		if (len) {
			ck_assert_int_eq(memcmp(buf, full, n), 0);
			ck_assert_int_eq(buf[n], '\0');
			n++;
		}
		/* One assertion per length: Check records every one it passes. */
		while (n < sizeof(buf) && buf[n] == 'X')
			n++;
		ck_assert_msg(n == sizeof(buf), "len %zu: byte %zu written", len, n);
	}
	ck_assert_int_eq(us_domain_stat_text(d, NULL, 0), need);

	ck_assert_int_eq(us_buf_put(b[0]), 0);
	ck_assert_int_eq(us_buf_put(b[1]), 0);
	ck_assert_int_eq(us_object_flush(o, 0, US_UNLIMITED, 0), 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * A new payload is zeroed unless us_buf_get() has US_GET_UNINIT (a caller that
 * overwrites the whole buffer): through poisoning hooks the default buffer
 * reads all zero and the uninitialised one keeps the poison; with the default
 * allocator the flag is accepted and the buffer works like any other.
 */
START_TEST(test_get_uninit)
{
	struct hk *h = calloc(1, sizeof(*h));
	us_engine *e = mk_engine(1u << 20, h), *e2;
	struct tk *t = calloc(1, sizeof(*t));
	us_backend *bk;
	us_object *o;
	us_buf *z, *u;
	const unsigned char *p;
	size_t i, zeros = 0, poison = 0;

	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(t);
	bk = tk_backend(e, t);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, 4096, 0, &z), 1);
	ck_assert_int_eq(us_buf_get(o, 4096, 4096, US_GET_UNINIT, &u), 1);
	for (p = us_buf_data(z), i = 0; i < 4096; i++)
		zeros += p[i] == 0;
	for (p = us_buf_data(u), i = 0; i < 4096; i++)
		poison += p[i] == 0xa5;
	ck_assert_uint_eq(zeros, 4096);
	ck_assert_uint_eq(poison, 4096);
	/* Found, not created: the flag changes nothing then. */
	us_buf_put(u);
	ck_assert_int_eq(us_buf_get(o, 4096, 4096, US_GET_UNINIT, &u), 0);
	ck_assert_int_eq(us_buf_get(o, 8192, 4096, 0x10u, &u), -EINVAL);
	ck_assert_int_eq(us_buf_drop(z), 0);
	ck_assert_int_eq(us_buf_drop(u), 0);
	engine_ok(e);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	free(h);

	e2 = mk_engine(1u << 20, NULL);
	bk = tk_backend(e2, t);
	ck_assert_int_eq(us_object_create(bk, NULL, NULL, &o), 0);
	ck_assert_int_eq(us_buf_get(o, 0, 128 << 10, US_GET_UNINIT, &u), 1);
	memset(us_buf_data(u), 7, 128 << 10);
	ck_assert_int_eq(((unsigned char *)us_buf_data(u))[(128 << 10) - 1], 7);
	ck_assert_int_eq(us_buf_drop(u), 0);
	engine_ok(e2);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_int_eq(us_engine_destroy(e2), 0);
	free(t);
}
END_TEST

START_TEST(test_purge)
{
	struct hk *h = calloc(1, sizeof(*h));
	struct tk t = { .complete_stable = true };
	us_engine *e = mk_engine(64 << 20, NULL), *eh;
	us_domain *d, *child, *dh;
	us_object *o;
	us_buf *b;
	int i;

	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(us_domain_purge(us_engine_root(e)), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d), 0);
	ck_assert_int_eq(us_domain_create(e, d, "child", 0, &child), 0);
	ck_assert_int_eq(us_object_create(tk_backend(e, &t), child, NULL, &o), 0);
	for (i = 0; i < 64; i++) {
		b = get_buf(o, (uint64_t)i << 16, 1 << 16, 0);
		memset(us_buf_data(b), 0xa5, 1 << 16);
		ck_assert_int_eq(us_buf_put(b), 0);
	}
	ck_assert_int_eq(us_domain_purge(child), 0);
	ck_assert_int_eq(us_object_destroy(o), 0);
	ck_assert_uint_eq(t.evictions, 64);
	ck_assert_int_eq(us_domain_purge(child), 0);
	ck_assert_int_eq(us_domain_purge(d), 0);
	ck_assert_int_eq(us_domain_purge(us_engine_root(e)), 0);
	engine_ok(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);

	/* With hooks there are no arenas: still 0. */
	eh = mk_engine(1 << 20, h);
	ck_assert_int_eq(us_domain_create(eh, NULL, "d", US_DOMAIN_ARENA, &dh), 0);
	ck_assert_int_eq(us_domain_purge(dh), 0);
	ck_assert_int_eq(us_domain_purge(us_engine_root(eh)), 0);
	ck_assert_int_eq(us_engine_destroy(eh), 0);
	hk_assert_clean(h);
	free(h);
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc;

	tc = tcase_create("basics");
	tcase_add_test(tc, test_version);
	tcase_add_test(tc, test_options_init);
	tcase_add_test(tc, test_create_null_options);
	tcase_add_test(tc, test_create_options_applied);
	tcase_add_test(tc, test_strerror);
	suite_add_tcase(s, tc);

	tc = tcase_create("clock");
	tcase_add_test(tc, test_virtual_clock);
	tcase_add_test(tc, test_custom_clock);
	tcase_add_test(tc, test_monotonic_clock);
	suite_add_tcase(s, tc);

	tc = tcase_create("hooks");
	tcase_add_test(tc, test_hooks_see_every_allocation);
	tcase_add_test(tc, test_failure_injection);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifetime");
	tcase_add_test(tc, test_two_engines);
	tcase_add_test(tc, test_destroy_evicts_or_refuses);
	tcase_add_test(tc, test_destroy_empty);
	suite_add_tcase(s, tc);

	tc = tcase_create("stats");
	tcase_add_test(tc, test_stat_text);
	tcase_add_test(tc, test_purge);
	tcase_add_test(tc, test_get_uninit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(engine_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
