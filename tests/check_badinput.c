/*
 * Bad input, table-driven: every public function, given NULL, zero or
 * overflowing lengths, overlapping ranges, foreign handles (from another
 * engine) or a wrong state, returns a negative errno and leaves everything as
 * it was ("On failure nothing has changed, and no callback was called").
 *
 * SPDX-License-Identifier: MIT
 *
 * Each case runs in a fresh fixture of two engines, A and B, built alike:
 *
 *   root ── a ── b      o1 on a/b, with a buffer in every state and
 *        │              reference count (the table bufdefs[] below);
 *        └─ c           o2 on a, a few more; o3 on c, empty.
 *
 * The backend's flush callback keeps what it is handed in WRITEBACK, so that
 * wrong-state calls can be tried on it. Before and after the call the test
 * takes a snapshot of both engines — us_engine_check(), every domain's stats,
 * limits and stat text, the backend's stats, every fixture buffer, the
 * callback counters, and a few private counters and list orders read through
 * lib/internal.h — and asserts that the two are equal. The only figures
 * allowed to move are the event counts enomem and max_events, and only in
 * the cases that expect -ENOMEM: a refused charge is counted by design.
 *
 * Accessors that have no error return (us_buf_offset(NULL) and the like) are
 * in the table too, as "neutral" cases: they must return their documented
 * neutral value (NULL or 0) and change nothing.
 */
#include "internal.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unstable/unstable.h>

/* ------------------------------------------------------------------------ */
/* The fixture                                                               */

enum {
	B_CLEAN,  /* o1: CLEAN, unreferenced */
	B_CREF,	  /* o1: CLEAN, one reference */
	B_DIRTY,  /* o1: DIRTY, one reference */
	B_DIRTY2, /* o1: DIRTY, two references */
	B_WB,	  /* o1: WRITEBACK, one reference */
	B_WB0,	  /* o1: WRITEBACK, unreferenced */
	B_UNST,	  /* o1: UNSTABLE (seq 5), one reference */
	B_UNST0,  /* o1: UNSTABLE (seq 7), unreferenced */
	B_NODATA, /* o1: CLEAN without payload, unreferenced */
	B2_CLEAN, /* o2: CLEAN, unreferenced */
	B2_DIRTY, /* o2: DIRTY, one reference */
	B2_UNST0, /* o2: UNSTABLE (seq 3), unreferenced */
	NBUF,
};

struct bufdef {
	int obj; /* 1 or 2 */
	uint64_t offset, length;
	unsigned flags;
	int state;
	unsigned refs;
	uint64_t seq;
};

static const struct bufdef bufdefs[NBUF] = {
	[B_CLEAN] = { 1, 0, 4096, 0, US_BUF_CLEAN, 0, 0 },
	[B_CREF] = { 1, 4096, 4096, 0, US_BUF_CLEAN, 1, 0 },
	[B_DIRTY] = { 1, 8192, 4096, 0, US_BUF_DIRTY, 1, 0 },
	[B_DIRTY2] = { 1, 12288, 4096, 0, US_BUF_DIRTY, 2, 0 },
	[B_WB] = { 1, 16384, 4096, 0, US_BUF_WRITEBACK, 1, 0 },
	[B_WB0] = { 1, 20480, 4096, 0, US_BUF_WRITEBACK, 0, 0 },
	/* [24576, 32768) is a hole. */
	[B_UNST] = { 1, 32768, 4096, 0, US_BUF_UNSTABLE, 1, 5 },
	[B_UNST0] = { 1, 36864, 8192, 0, US_BUF_UNSTABLE, 0, 7 },
	/* [45056, 65536) is a hole. */
	[B_NODATA] = { 1, 65536, 8192, US_GET_NODATA, US_BUF_CLEAN, 0, 0 },
	[B2_CLEAN] = { 2, 0, 1024, 0, US_BUF_CLEAN, 0, 0 },
	[B2_DIRTY] = { 2, 1024, 1024, 0, US_BUF_DIRTY, 1, 0 },
	[B2_UNST0] = { 2, 4096, 2048, 0, US_BUF_UNSTABLE, 0, 3 },
};

/* The end of o1's last buffer. */
#define O1_END (65536 + 8192)
/* A hole of o1. */
#define O1_HOLE 24576

#define NDOM	    4 /* root, a, a/b, c */
#define MAX_PENDING 64

struct cb_counts {
	uint64_t flush, flush_bufs, commit, sync, evict;
};

struct side {
	us_engine *e;
	us_domain *dom[NDOM]; /* root, a, ab, c */
	us_backend *bk;
	us_object *o1, *o2, *o3;
	us_buf *buf[NBUF];
	unsigned held[NBUF]; /* references the fixture holds */
	struct cb_counts cnt;
	us_buf *pending[MAX_PENDING]; /* handed to flush, not completed */
	size_t npending;
	bool pending_overflow;
	uint64_t since; /* an errseq cursor */
};

struct fixture {
	struct side s[2];
};

#define FA (&f->s[0])
#define FB (&f->s[1])

/* Check's fixtures take no argument: the one piece of state they share. */
static struct fixture fx;

static const char *const dom_names[NDOM] = { "root", "a", "a/b", "c" };

static int fx_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct side *s = ctx;
	size_t i;

	s->cnt.flush++;
	s->cnt.flush_bufs += n;
	for (i = 0; i < n; i++) {
		if (s->npending < MAX_PENDING)
			s->pending[s->npending++] = bufs[i];
		else
			s->pending_overflow = true;
	}
	return 0; /* started; completed later by the test */
}

static int fx_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct side *s = ctx;

	s->cnt.commit++;
	return 0; /* started; never reported */
}

static int fx_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct side *s = ctx;

	s->cnt.sync++;
	return 0;
}

static void fx_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	struct side *s = ctx;

	s->cnt.evict++;
}

static void side_check(const struct side *s)
{
	char msg[512];
	int rc = us_engine_check(s->e, msg, sizeof(msg));

	ck_assert_msg(rc == 0, "us_engine_check: %d %s", rc, msg);
}

static us_object *side_obj(struct side *s, int which)
{
	return which == 1 ? s->o1 : s->o2;
}

static void make_buf(struct side *s, int i)
{
	const struct bufdef *d = &bufdefs[i];
	us_object *o = side_obj(s, d->obj);
	us_buf *b = NULL;
	int rc;

	rc = us_buf_get(o, d->offset, d->length, d->flags, &b);
	ck_assert_int_eq(rc, 1);
	if (d->state != US_BUF_CLEAN)
		ck_assert_int_eq(us_buf_dirty(b, NULL), 0);
	if (d->state == US_BUF_WRITEBACK || d->state == US_BUF_UNSTABLE) {
		size_t before = s->npending;

		ck_assert_int_eq(us_object_flush(o, d->offset, d->length, 0), 1);
		ck_assert_uint_eq(s->npending, before + 1);
		ck_assert_ptr_eq(s->pending[before], b);
	}
	if (d->state == US_BUF_UNSTABLE) {
		ck_assert_int_eq(us_buf_write_done(b, US_WRITE_UNSTABLE, d->seq, 0), 0);
		s->npending--;
	}
	if (d->refs == 0)
		ck_assert_int_eq(us_buf_put(b), 0);
	else if (d->refs == 2)
		ck_assert_int_eq(us_buf_ref(b), 0);
	ck_assert_int_eq(us_buf_state(b), d->state);
	s->buf[i] = b;
	s->held[i] = d->refs;
}

static void side_build(struct side *s, uint64_t memory_bytes, uint64_t ab_max, uint64_t clock_ns)
{
	struct us_engine_options opts;
	struct us_backend_ops ops;
	int i;

	memset(s, 0, sizeof(*s));
	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = memory_bytes;
	ck_assert_int_eq(us_engine_create(&opts, &s->e), 0);
	ck_assert_int_eq(us_engine_clock_advance(s->e, clock_ns), 0);
	s->dom[0] = us_engine_root(s->e);
	ck_assert_int_eq(us_domain_create(s->e, NULL, "a", 0, &s->dom[1]), 0);
	ck_assert_int_eq(us_domain_create(s->e, s->dom[1], "b", 0, &s->dom[2]), 0);
	ck_assert_int_eq(us_domain_create(s->e, NULL, "c", US_DOMAIN_ARENA, &s->dom[3]), 0);
	ck_assert_int_eq(us_domain_set_limit(s->dom[2], US_LIMIT_MAX, ab_max), 0);
	ck_assert_int_eq(us_domain_set_limit(s->dom[1], US_LIMIT_HIGH, 512 * 1024), 0);
	ck_assert_int_eq(us_domain_set_limit(s->dom[1], US_LIMIT_DIRTY_BYTES, 256 * 1024), 0);

	memset(&ops, 0, sizeof(ops));
	ops.size = sizeof(ops);
	ops.flush = fx_flush;
	ops.commit = fx_commit;
	ops.sync = fx_sync;
	ops.evict = fx_evict;
	ck_assert_int_eq(us_backend_create(s->e, &ops, s, &s->bk), 0);
	ck_assert_int_eq(us_object_create(s->bk, s->dom[2], s, &s->o1), 0);
	ck_assert_int_eq(us_object_create(s->bk, s->dom[1], NULL, &s->o2), 0);
	ck_assert_int_eq(us_object_create(s->bk, s->dom[3], NULL, &s->o3), 0);
	for (i = 0; i < NBUF; i++)
		make_buf(s, i);
	side_check(s);
	ck_assert_uint_eq(s->npending, 2);
}

/* Completes, commits and releases everything, then destroys it all. */
static void side_teardown(struct side *s)
{
	struct us_domain_stats st;
	int i, round;
	size_t k;

	if (!s->e)
		return;
	for (round = 0; round < 4; round++) {
		for (k = 0; k < s->npending; k++) {
			int rc = us_buf_write_done(s->pending[k], US_WRITE_STABLE, 0, 0);

			ck_assert_msg(rc == 0 || rc == -EALREADY, "write_done: %d", rc);
		}
		s->npending = 0;
		ck_assert_int_ge(us_backend_commit_done(s->bk, UINT64_MAX), 0);
		ck_assert_int_ge(us_object_flush(s->o1, 0, US_UNLIMITED, 0), 0);
		ck_assert_int_ge(us_object_flush(s->o2, 0, US_UNLIMITED, 0), 0);
		ck_assert_int_ge(us_object_flush(s->o3, 0, US_UNLIMITED, 0), 0);
		ck_assert(!s->pending_overflow);
		if (s->npending == 0)
			break;
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	ck_assert_int_eq(us_domain_stats(s->dom[0], &st), 0);
	ck_assert_uint_eq(st.dirty_bytes + st.writeback_bytes + st.unstable_bytes, 0);
	for (i = 0; i < NBUF; i++) {
		while (s->held[i]) {
			ck_assert_int_eq(us_buf_put(s->buf[i]), 0);
			s->held[i]--;
		}
	}
	side_check(s);
	ck_assert_int_eq(us_object_destroy(s->o1), 0);
	ck_assert_int_eq(us_object_destroy(s->o2), 0);
	ck_assert_int_eq(us_object_destroy(s->o3), 0);
	ck_assert_int_eq(us_backend_destroy(s->bk), 0);
	ck_assert_int_eq(us_domain_destroy(s->dom[2]), 0);
	ck_assert_int_eq(us_domain_destroy(s->dom[1]), 0);
	ck_assert_int_eq(us_domain_destroy(s->dom[3]), 0);
	side_check(s);
	ck_assert_int_eq(us_engine_destroy(s->e), 0);
	s->e = NULL;
}

static void fixture_setup(void)
{
	side_build(&fx.s[0], (uint64_t)64 << 20, (uint64_t)1 << 20, 1000);
	side_build(&fx.s[1], (uint64_t)32 << 20, (uint64_t)2 << 20, 2000);
}

static void fixture_teardown(void)
{
	side_teardown(&fx.s[0]);
	side_teardown(&fx.s[1]);
}

/* ------------------------------------------------------------------------ */
/* Snapshots                                                                 */

#define LRU_MAX 16

struct dom_snap {
	struct us_domain_stats st;
	struct us_domain_limits lim;
	uint64_t limit[6];
	char text[2048];
	int text_len;
	const char *name;
	const us_domain *parent;
	/* Private. */
	uint64_t nchildren, nobjects;
	const us_buf *lru[LRU_MAX];
	size_t nlru;
};

struct buf_snap {
	int state;
	unsigned flags;
	uint64_t seq, offset, length;
	const void *data;
	const us_object *obj;
	uint32_t refs; /* private */
};

struct obj_snap {
	uint64_t errseq;
	const void *user;
	const us_domain *dom;
	const us_backend *bk;
	uint64_t nbufs, nlru, ndirty, busy; /* private */
};

struct side_snap {
	uint64_t now;
	struct dom_snap dom[NDOM];
	struct us_backend_stats bst;
	struct buf_snap buf[NBUF];
	struct obj_snap obj[3];
	struct cb_counts cnt;
	size_t npending;
	us_domain *root;
	/* Private. */
	unsigned narenas;
	uint64_t lru_tick, bk_nobjects;
};

struct snap {
	struct side_snap s[2];
};

static void snap_dom(const us_domain *d, struct dom_snap *ds)
{
	const struct us_list *pos;
	int i;

	ds->st.size = sizeof(ds->st);
	ck_assert_int_eq(us_domain_stats(d, &ds->st), 0);
	ds->lim.size = sizeof(ds->lim);
	ck_assert_int_eq(us_domain_effective_limits(d, &ds->lim), 0);
	for (i = 0; i < 6; i++)
		ck_assert_int_eq(us_domain_get_limit(d, (enum us_limit)i, &ds->limit[i]), 0);
	ds->text_len = us_domain_stat_text(d, ds->text, sizeof(ds->text));
	ck_assert_int_gt(ds->text_len, 0);
	ck_assert_int_lt(ds->text_len, (int)sizeof(ds->text));
	ds->name = us_domain_name(d);
	ds->parent = us_domain_parent(d);
	ds->nchildren = d->nchildren;
	ds->nobjects = d->nobjects;
	us_list_for_each (pos, &d->lru) {
		if (ds->nlru < LRU_MAX)
			ds->lru[ds->nlru] = us_container_of(pos, us_buf, link);
		ds->nlru++;
	}
}

static void snap_obj(const us_object *o, struct obj_snap *os)
{
	os->errseq = us_object_errseq(o);
	os->user = us_object_user(o);
	os->dom = us_object_domain(o);
	os->bk = us_object_backend(o);
	os->nbufs = o->nbufs;
	os->nlru = o->nlru;
	os->ndirty = o->ndirty;
	os->busy = o->busy;
}

static void snap_side(struct side *s, struct side_snap *ss)
{
	int i;

	side_check(s);
	ss->now = us_engine_now(s->e);
	ss->root = us_engine_root(s->e);
	for (i = 0; i < NDOM; i++)
		snap_dom(s->dom[i], &ss->dom[i]);
	ss->bst.size = sizeof(ss->bst);
	ck_assert_int_eq(us_backend_stats(s->bk, &ss->bst), 0);
	for (i = 0; i < NBUF; i++) {
		const us_buf *b = s->buf[i];
		struct buf_snap *bs = &ss->buf[i];

		bs->state = us_buf_state(b);
		bs->flags = us_buf_flags(b);
		bs->seq = us_buf_commit_seq(b);
		bs->offset = us_buf_offset(b);
		bs->length = us_buf_length(b);
		bs->data = us_buf_data(b);
		bs->obj = us_buf_object(b);
		bs->refs = b->refs;
	}
	snap_obj(s->o1, &ss->obj[0]);
	snap_obj(s->o2, &ss->obj[1]);
	snap_obj(s->o3, &ss->obj[2]);
	ss->cnt = s->cnt;
	ss->npending = s->npending;
	ss->narenas = s->e->narenas;
	ss->lru_tick = s->e->lru_tick;
	ss->bk_nobjects = s->bk->nobjects;
}

static void snap_take(struct fixture *f, struct snap *sn)
{
	memset(sn, 0, sizeof(*sn));
	snap_side(FA, &sn->s[0]);
	snap_side(FB, &sn->s[1]);
}

/* Compares one figure; where says which. */
static void same_u64(const char *cname, const char *where, const char *what, uint64_t before,
		     uint64_t after)
{
	ck_assert_msg(before == after, "case \"%s\": %s %s changed from %" PRIu64 " to %" PRIu64,
		      cname, where, what, before, after);
}

static void same_ptr(const char *cname, const char *where, const char *what, const void *before,
		     const void *after)
{
	ck_assert_msg(before == after, "case \"%s\": %s %s changed from %p to %p", cname, where,
		      what, before, after);
}

/* The stat text without the lines that a refused charge may move. */
static void strip_refused(const char *in, char *out, size_t len)
{
	const char *p = in;
	size_t n = 0;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p + 1) : strlen(p);

		if (strncmp(p, "enomem ", 7) != 0 && strncmp(p, "max_events ", 11) != 0) {
			ck_assert(n + l < len);
			memcpy(out + n, p, l);
			n += l;
		}
		p += l;
	}
	out[n] = '\0';
}

#define DSTAT_FIELDS(X)       \
	X(charged_bytes)      \
	X(clean_bytes)        \
	X(dirty_bytes)        \
	X(writeback_bytes)    \
	X(unstable_bytes)     \
	X(evictable_bytes)    \
	X(peak_charged_bytes) \
	X(buffers)            \
	X(charges)            \
	X(uncharges)          \
	X(evictions)          \
	X(evicted_bytes)      \
	X(drops)              \
	X(dropped_bytes)      \
	X(high_events)        \
	X(dirtied)            \
	X(redirtied)          \
	X(writeback_started)  \
	X(written_stable)     \
	X(written_unstable)   \
	X(write_errors)       \
	X(write_lost)         \
	X(committed)          \
	X(commit_lost)

#define BSTAT_FIELDS(X)    \
	X(objects)         \
	X(dirty_bytes)     \
	X(writeback_bytes) \
	X(unstable_bytes)  \
	X(flush_calls)     \
	X(flush_bytes)     \
	X(flush_failed)    \
	X(commit_calls)    \
	X(sync_calls)      \
	X(commit_done)     \
	X(commit_lost)     \
	X(last_committed_seq)

static void same_dom(const char *cname, const char *where, const struct dom_snap *a,
		     const struct dom_snap *b, bool refused_charge)
{
	char ta[2048], tb[2048];
	size_t i;
	int k;

#define SAME_DSTAT(f) same_u64(cname, where, "stats." #f, a->st.f, b->st.f);
	DSTAT_FIELDS(SAME_DSTAT)
#undef SAME_DSTAT
	if (refused_charge) {
		/* Counted by design; they may only go up. */
		ck_assert_msg(b->st.enomem >= a->st.enomem, "%s: %s enomem went down", cname,
			      where);
		ck_assert_msg(b->st.max_events >= a->st.max_events, "%s: %s max_events went down",
			      cname, where);
		strip_refused(a->text, ta, sizeof(ta));
		strip_refused(b->text, tb, sizeof(tb));
		ck_assert_msg(strcmp(ta, tb) == 0, "case \"%s\": %s stat text changed:\n%s\n--\n%s",
			      cname, where, ta, tb);
	} else {
		same_u64(cname, where, "stats.enomem", a->st.enomem, b->st.enomem);
		same_u64(cname, where, "stats.max_events", a->st.max_events, b->st.max_events);
		ck_assert_msg(a->text_len == b->text_len && strcmp(a->text, b->text) == 0,
			      "case \"%s\": %s stat text changed:\n%s\n--\n%s", cname, where,
			      a->text, b->text);
	}
	same_u64(cname, where, "limits.max_bytes", a->lim.max_bytes, b->lim.max_bytes);
	same_u64(cname, where, "limits.high_bytes", a->lim.high_bytes, b->lim.high_bytes);
	same_u64(cname, where, "limits.bg_thresh_bytes", a->lim.bg_thresh_bytes,
		 b->lim.bg_thresh_bytes);
	same_u64(cname, where, "limits.dirty_thresh_bytes", a->lim.dirty_thresh_bytes,
		 b->lim.dirty_thresh_bytes);
	for (k = 0; k < 6; k++) {
		char what[32];

		snprintf(what, sizeof(what), "limit %d", k);
		same_u64(cname, where, what, a->limit[k], b->limit[k]);
	}
	same_ptr(cname, where, "name", a->name, b->name);
	ck_assert_str_eq(a->name, b->name);
	same_ptr(cname, where, "parent", a->parent, b->parent);
	same_u64(cname, where, "nchildren", a->nchildren, b->nchildren);
	same_u64(cname, where, "nobjects", a->nobjects, b->nobjects);
	same_u64(cname, where, "LRU length", a->nlru, b->nlru);
	for (i = 0; i < a->nlru && i < LRU_MAX; i++)
		same_ptr(cname, where, "LRU entry", a->lru[i], b->lru[i]);
}

static void same_side(const char *cname, const char *sname, const struct side_snap *a,
		      const struct side_snap *b, bool refused_charge)
{
	char where[64];
	int i;

	snprintf(where, sizeof(where), "engine %s", sname);
	same_u64(cname, where, "clock", a->now, b->now);
	same_ptr(cname, where, "root", a->root, b->root);
	same_u64(cname, where, "arenas", a->narenas, b->narenas);
	same_u64(cname, where, "lru_tick", a->lru_tick, b->lru_tick);
	same_u64(cname, where, "backend objects", a->bk_nobjects, b->bk_nobjects);
	for (i = 0; i < NDOM; i++) {
		snprintf(where, sizeof(where), "engine %s domain %s", sname, dom_names[i]);
		same_dom(cname, where, &a->dom[i], &b->dom[i], refused_charge);
	}
	snprintf(where, sizeof(where), "engine %s backend", sname);
#define SAME_BSTAT(f) same_u64(cname, where, "stats." #f, a->bst.f, b->bst.f);
	BSTAT_FIELDS(SAME_BSTAT)
#undef SAME_BSTAT
	for (i = 0; i < NBUF; i++) {
		const struct buf_snap *x = &a->buf[i], *y = &b->buf[i];

		snprintf(where, sizeof(where), "engine %s buffer %d", sname, i);
		same_u64(cname, where, "state", (uint64_t)x->state, (uint64_t)y->state);
		same_u64(cname, where, "flags", x->flags, y->flags);
		same_u64(cname, where, "commit seq", x->seq, y->seq);
		same_u64(cname, where, "offset", x->offset, y->offset);
		same_u64(cname, where, "length", x->length, y->length);
		same_u64(cname, where, "refs", x->refs, y->refs);
		same_ptr(cname, where, "data", x->data, y->data);
		same_ptr(cname, where, "object", x->obj, y->obj);
	}
	for (i = 0; i < 3; i++) {
		const struct obj_snap *x = &a->obj[i], *y = &b->obj[i];

		snprintf(where, sizeof(where), "engine %s object o%d", sname, i + 1);
		same_u64(cname, where, "errseq", x->errseq, y->errseq);
		same_ptr(cname, where, "user", x->user, y->user);
		same_ptr(cname, where, "domain", x->dom, y->dom);
		same_ptr(cname, where, "backend", x->bk, y->bk);
		same_u64(cname, where, "nbufs", x->nbufs, y->nbufs);
		same_u64(cname, where, "nlru", x->nlru, y->nlru);
		same_u64(cname, where, "ndirty", x->ndirty, y->ndirty);
		same_u64(cname, where, "busy", x->busy, y->busy);
	}
	snprintf(where, sizeof(where), "engine %s callbacks", sname);
	same_u64(cname, where, "flush", a->cnt.flush, b->cnt.flush);
	same_u64(cname, where, "flushed buffers", a->cnt.flush_bufs, b->cnt.flush_bufs);
	same_u64(cname, where, "commit", a->cnt.commit, b->cnt.commit);
	same_u64(cname, where, "sync", a->cnt.sync, b->cnt.sync);
	same_u64(cname, where, "evict", a->cnt.evict, b->cnt.evict);
	same_u64(cname, where, "pending", a->npending, b->npending);
}

/* ------------------------------------------------------------------------ */
/* The cases                                                                 */

/* A value no function returns: the call wrote through its out pointer on
 * failure, or a neutral accessor returned something else. */
#define WROTE_OUT   (-100001)
#define NOT_NEUTRAL (-100002)
/* The expected value of a neutral case: the wrapper returns 0 when the
 * accessor returned its documented neutral value. */
#define NEUTRAL 0

/* Where out pointers point before a call that must fail. */
static char sentinel_byte;
#define SENTINEL ((void *)&sentinel_byte)

/* The options every engine-creation case starts from. */
static void vopts(struct us_engine_options *o)
{
	us_engine_options_init(o);
	o->clock = US_CLOCK_VIRTUAL;
	o->memory_bytes = 1 << 20;
}

static void *hk_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	return malloc(size);
}

static void hk_free(void *ctx, void *p, size_t size, enum us_alloc_kind kind)
{
	free(p);
}

static uint64_t my_clock(void *ctx)
{
	return 42;
}

static int do_engine_create(const struct us_engine_options *o, bool null_out)
{
	us_engine *e = SENTINEL;
	int rc = us_engine_create(o, null_out ? NULL : &e);

	if (rc == 0) {
		us_engine_destroy(e);
		return rc;
	}
	return e == SENTINEL ? rc : WROTE_OUT;
}

static int c_ec_null_out(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	return do_engine_create(&o, true);
}

static int c_ec_null_out_null_opts(struct fixture *f)
{
	return do_engine_create(NULL, true);
}

static int c_ec_size0(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.size = 0;
	return do_engine_create(&o, false);
}

static int c_ec_size_small(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.size = offsetof(struct us_engine_options, max_arenas);
	return do_engine_create(&o, false);
}

static int c_ec_size_big(struct fixture *f)
{
	struct us_engine_options o[2];

	vopts(&o[0]);
	memset(&o[1], 0, sizeof(o[1]));
	o[0].size = sizeof(o[0]) + 8;
	return do_engine_create(&o[0], false);
}

static int c_ec_size_max(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.size = SIZE_MAX;
	return do_engine_create(&o, false);
}

static int c_ec_clock3(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.clock = (enum us_clock_kind)3;
	return do_engine_create(&o, false);
}

static int c_ec_clock_neg(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.clock = (enum us_clock_kind) - 1;
	return do_engine_create(&o, false);
}

static int c_ec_custom_no_fn(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.clock = US_CLOCK_CUSTOM;
	o.clock_ctx = f;
	return do_engine_create(&o, false);
}

static int c_ec_hooks_no_alloc(struct fixture *f)
{
	struct us_alloc_hooks h = { NULL, hk_free, NULL };
	struct us_engine_options o;

	vopts(&o);
	o.alloc = &h;
	return do_engine_create(&o, false);
}

static int c_ec_hooks_no_free(struct fixture *f)
{
	struct us_alloc_hooks h = { hk_alloc, NULL, NULL };
	struct us_engine_options o;

	vopts(&o);
	o.alloc = &h;
	return do_engine_create(&o, false);
}

static int c_ec_hooks_empty(struct fixture *f)
{
	struct us_alloc_hooks h = { NULL, NULL, NULL };
	struct us_engine_options o;

	vopts(&o);
	o.alloc = &h;
	return do_engine_create(&o, false);
}

static int c_ec_mem0(struct fixture *f)
{
	struct us_engine_options o;

	vopts(&o);
	o.memory_bytes = 0;
	return do_engine_create(&o, false);
}

/* An engine with another clock, for the clock_advance cases. */
static int advance_other_clock(enum us_clock_kind k, uint64_t delta)
{
	struct us_engine_options o;
	us_engine *e = NULL;
	uint64_t before;
	int rc;

	vopts(&o);
	o.clock = k;
	o.clock_fn = my_clock;
	ck_assert_int_eq(us_engine_create(&o, &e), 0);
	before = us_engine_now(e);
	rc = us_engine_clock_advance(e, delta);
	if (k == US_CLOCK_CUSTOM)
		ck_assert_uint_eq(us_engine_now(e), before);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	return rc;
}

static int c_adv_monotonic(struct fixture *f)
{
	return advance_other_clock(US_CLOCK_MONOTONIC, 1);
}

static int c_adv_monotonic0(struct fixture *f)
{
	return advance_other_clock(US_CLOCK_MONOTONIC, 0);
}

static int c_adv_custom(struct fixture *f)
{
	return advance_other_clock(US_CLOCK_CUSTOM, 1);
}

static int do_domain_create(us_engine *e, us_domain *parent, const char *name, unsigned flags,
			    bool null_out)
{
	us_domain *d = SENTINEL;
	int rc = us_domain_create(e, parent, name, flags, null_out ? NULL : &d);

	if (rc == 0) {
		us_domain_destroy(d);
		return rc;
	}
	return d == SENTINEL ? rc : WROTE_OUT;
}

static int c_dc_name64(struct fixture *f)
{
	char name[65];

	memset(name, 'n', 64);
	name[64] = '\0';
	return do_domain_create(FA->e, FA->dom[1], name, 0, false);
}

static int c_dc_name_huge(struct fixture *f)
{
	static char name[4097];

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	return do_domain_create(FA->e, NULL, name, 0, false);
}

static int pinned_minus_one(const us_domain *d)
{
	struct us_domain_stats st = { .size = sizeof(st) };

	ck_assert_int_eq(us_domain_stats(d, &st), 0);
	ck_assert_uint_gt(st.evictable_bytes, 0);
	ck_assert_uint_gt(st.charged_bytes - st.evictable_bytes, 0);
	return (int)(st.charged_bytes - st.evictable_bytes - 1);
}

static int c_sl_max_below_pinned_ab(struct fixture *f)
{
	return us_domain_set_limit(FA->dom[2], US_LIMIT_MAX,
				   (uint64_t)pinned_minus_one(FA->dom[2]));
}

static int c_sl_max_below_pinned_a(struct fixture *f)
{
	return us_domain_set_limit(FA->dom[1], US_LIMIT_MAX,
				   (uint64_t)pinned_minus_one(FA->dom[1]));
}

static int c_sl_max_below_pinned_root(struct fixture *f)
{
	return us_domain_set_limit(FB->dom[0], US_LIMIT_MAX,
				   (uint64_t)pinned_minus_one(FB->dom[0]));
}

static int do_get_limit(const us_domain *d, enum us_limit which, bool null_out)
{
	uint64_t v = 0xdeadbeefu;
	int rc = us_domain_get_limit(d, which, null_out ? NULL : &v);

	if (rc == 0)
		return rc;
	return v == 0xdeadbeefu ? rc : WROTE_OUT;
}

static int do_eff_limits(const us_domain *d, size_t size, bool null_out)
{
	struct us_domain_limits l, orig;
	int rc;

	memset(&l, 0xab, sizeof(l));
	l.size = size;
	orig = l;
	rc = us_domain_effective_limits(d, null_out ? NULL : &l);
	if (rc == 0)
		return rc;
	return memcmp(&l, &orig, sizeof(l)) == 0 ? rc : WROTE_OUT;
}

static int do_backend_create(us_engine *e, const struct us_backend_ops *ops, bool null_out)
{
	us_backend *b = SENTINEL;
	int rc = us_backend_create(e, ops, NULL, null_out ? NULL : &b);

	if (rc == 0) {
		us_backend_destroy(b);
		return rc;
	}
	return b == SENTINEL ? rc : WROTE_OUT;
}

static struct us_backend_ops good_ops(void)
{
	struct us_backend_ops ops;

	memset(&ops, 0, sizeof(ops));
	ops.size = sizeof(ops);
	ops.flush = fx_flush;
	ops.commit = fx_commit;
	ops.sync = fx_sync;
	ops.evict = fx_evict;
	return ops;
}

static int c_bc_no_flush(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	ops.flush = NULL;
	return do_backend_create(FA->e, &ops, false);
}

static int c_bc_no_commit_sync(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	ops.commit = NULL;
	ops.sync = NULL;
	return do_backend_create(FA->e, &ops, false);
}

static int c_bc_size0(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	ops.size = 0;
	return do_backend_create(FA->e, &ops, false);
}

static int c_bc_size_small(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	ops.size = offsetof(struct us_backend_ops, evict);
	return do_backend_create(FA->e, &ops, false);
}

static int c_bc_size_big(struct fixture *f)
{
	struct us_backend_ops ops[2];

	ops[0] = good_ops();
	ops[1] = good_ops();
	ops[0].size = sizeof(ops[0]) + sizeof(void *);
	return do_backend_create(FA->e, &ops[0], false);
}

static int c_bc_null_ops(struct fixture *f)
{
	return do_backend_create(FA->e, NULL, false);
}

static int c_bc_null_engine(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	return do_backend_create(NULL, &ops, false);
}

static int c_bc_null_out(struct fixture *f)
{
	struct us_backend_ops ops = good_ops();

	return do_backend_create(FA->e, &ops, true);
}

static int do_object_create(us_backend *b, us_domain *d, bool null_out)
{
	us_object *o = SENTINEL;
	int rc = us_object_create(b, d, NULL, null_out ? NULL : &o);

	if (rc == 0) {
		us_object_destroy(o);
		return rc;
	}
	return o == SENTINEL ? rc : WROTE_OUT;
}

static int do_check_error(us_object *o, bool null_since)
{
	uint64_t since = 12345;
	int err = 777;
	int rc = us_object_check_error(o, null_since ? NULL : &since, &err);

	return since == 12345 && err == 777 ? rc : WROTE_OUT;
}

static int do_buf_get(us_object *o, uint64_t offset, uint64_t length, unsigned flags, bool null_out)
{
	us_buf *b = SENTINEL;
	int rc = us_buf_get(o, offset, length, flags, null_out ? NULL : &b);

	if (rc >= 0) {
		/* Unexpected success: undo it, the return code tells. */
		if (rc == 1 && b != SENTINEL) {
			us_buf_drop(b);
		} else if (b != SENTINEL) {
			us_buf_put(b);
		}
		return rc;
	}
	return b == SENTINEL ? rc : WROTE_OUT;
}

/* The bytes that make o1's charge fail even after evicting all of a/b. */
static uint64_t just_too_big(const struct side *s)
{
	struct us_domain_stats st = { .size = sizeof(st) };
	uint64_t max;

	ck_assert_int_eq(us_domain_get_limit(s->dom[2], US_LIMIT_MAX, &max), 0);
	ck_assert_int_eq(us_domain_stats(s->dom[2], &st), 0);
	ck_assert_uint_gt(st.evictable_bytes, 0);
	/* Even with its pinned data cleaned and evicted (what reclaim could
	 * wait for), one byte short: -ENOMEM at once, nothing changed. */
	return max -
	       (st.charged_bytes - st.evictable_bytes -
		(st.dirty_bytes + st.writeback_bytes + st.unstable_bytes)) +
	       1;
}

static int c_bg_enomem_evict_not_enough(struct fixture *f)
{
	return do_buf_get(FA->o1, (uint64_t)1 << 32, just_too_big(FA), 0, false);
}

static int c_bg_enomem_nodata(struct fixture *f)
{
	return do_buf_get(FB->o1, (uint64_t)1 << 32, just_too_big(FB), US_GET_NODATA, false);
}

static int c_bg_enomem_root(struct fixture *f)
{
	uint64_t max;

	/* o2 is on a, which has no max: the root's is what refuses. */
	ck_assert_int_eq(us_domain_get_limit(FA->dom[0], US_LIMIT_MAX, &max), 0);
	ck_assert_uint_lt(max, US_BUF_MAX_BYTES);
	return do_buf_get(FA->o2, (uint64_t)1 << 32, max + 1, US_GET_NODATA, false);
}

static int do_lookup(us_object *o, uint64_t offset, bool next, bool null_out)
{
	us_buf *b = SENTINEL;
	us_buf **out = null_out ? NULL : &b;
	int rc = next ? us_buf_next(o, offset, out) : us_buf_lookup(o, offset, out);

	if (rc == 0) {
		if (b != SENTINEL)
			us_buf_put(b);
		return rc;
	}
	return b == SENTINEL ? rc : WROTE_OUT;
}

static int do_domain_stats(const us_domain *d, size_t size, bool null_out)
{
	struct us_domain_stats st, orig;
	int rc;

	memset(&st, 0xab, sizeof(st));
	st.size = size;
	orig = st;
	rc = us_domain_stats(d, null_out ? NULL : &st);
	if (rc == 0)
		return rc;
	return memcmp(&st, &orig, sizeof(st)) == 0 ? rc : WROTE_OUT;
}

static int do_backend_stats(const us_backend *b, size_t size, bool null_out)
{
	struct us_backend_stats st, orig;
	int rc;

	memset(&st, 0xab, sizeof(st));
	st.size = size;
	orig = st;
	rc = us_backend_stats(b, null_out ? NULL : &st);
	if (rc == 0)
		return rc;
	return memcmp(&st, &orig, sizeof(st)) == 0 ? rc : WROTE_OUT;
}

static int do_stat_text(const us_domain *d, bool null_buf, size_t len)
{
	char buf[64];
	int rc;

	memset(buf, 'Z', sizeof(buf));
	rc = us_domain_stat_text(d, null_buf ? NULL : buf, len);
	if (rc >= 0)
		return rc;
	return buf[0] == 'Z' ? rc : WROTE_OUT;
}

static int do_engine_check(bool with_msg)
{
	char msg[64];

	memset(msg, 'Z', sizeof(msg));
	return us_engine_check(NULL, with_msg ? msg : NULL, with_msg ? sizeof(msg) : 0);
}

static int neutral(bool ok)
{
	return ok ? 0 : NOT_NEUTRAL;
}

static int c_n_options_init(struct fixture *f)
{
	us_engine_options_init(NULL); /* must not crash */
	return 0;
}

static int c_n_strerror(struct fixture *f)
{
	const char *a = us_strerror(-12345), *b = us_strerror(12345), *c = us_strerror(INT32_MIN);

	return neutral(a && b && c && *a && *b && *c);
}

/*
 * One line per case. The wrappers above cover the calls with out pointers
 * (checked to be left alone on failure) or with arguments computed from the
 * fixture; the others are single expressions.
 */
/* clang-format off */
#define E(body) (struct fixture *f) { (void)f; return (body); }
#define FN(id) static int id

/* us_engine_destroy */
FN(c_ed_null) E(us_engine_destroy(NULL))
FN(c_ed_pinned_a) E(us_engine_destroy(FA->e))
FN(c_ed_pinned_b) E(us_engine_destroy(FB->e))
/* us_engine_clock_advance */
FN(c_adv_null) E(us_engine_clock_advance(NULL, 1))
FN(c_adv_overflow) E(us_engine_clock_advance(FA->e, UINT64_MAX))
FN(c_adv_overflow_edge) E(us_engine_clock_advance(FA->e, UINT64_MAX - 999))
FN(c_adv_overflow_b) E(us_engine_clock_advance(FB->e, UINT64_MAX - 1999))
/* us_domain_create */
FN(c_dc_null_engine) E(do_domain_create(NULL, NULL, "x", 0, false))
FN(c_dc_null_name) E(do_domain_create(FA->e, NULL, NULL, 0, false))
FN(c_dc_empty_name) E(do_domain_create(FA->e, FA->dom[1], "", 0, false))
FN(c_dc_null_out) E(do_domain_create(FA->e, NULL, "x", 0, true))
FN(
			c_dc_foreign_parent) E(do_domain_create(FA->e, FB->dom[1], "x", 0, false))
FN(c_dc_foreign_root) E(do_domain_create(FA->e, FB->dom[0], "x", 0, false))
FN(
				c_dc_foreign_leaf) E(do_domain_create(FB->e, FA->dom[2], "x", US_DOMAIN_ARENA, false))
FN(c_dc_bad_flag) E(do_domain_create(FA->e, NULL, "x", 0x2u, false))
FN(c_dc_bad_flag_high) E(do_domain_create(FA->e, NULL, "x", 0x80000001u, false))
FN(c_dc_dup_top) E(do_domain_create(FA->e, NULL, "a", 0, false))
FN(c_dc_dup_top_explicit) E(do_domain_create(FA->e, FA->dom[0], "c", US_DOMAIN_ARENA, false))
FN(c_dc_dup_child) E(do_domain_create(FB->e, FB->dom[1], "b", 0, false))
/* us_domain_destroy */
FN(c_dd_null) E(us_domain_destroy(NULL))
FN(c_dd_root) E(us_domain_destroy(FA->dom[0]))
FN(c_dd_children) E(us_domain_destroy(FA->dom[1]))
FN(c_dd_charged) E(us_domain_destroy(FA->dom[2]))
FN(c_dd_empty_object) E(us_domain_destroy(FB->dom[3]))
/* us_domain_set_limit */
FN(c_sl_null) E(us_domain_set_limit(NULL, US_LIMIT_MAX, 1))
FN(c_sl_enum6) E(us_domain_set_limit(FA->dom[1], (enum us_limit)6, 1))
FN(c_sl_enum_neg) E(us_domain_set_limit(FA->dom[1], (enum us_limit) - 1, 1))
FN(c_sl_bg_ratio101) E(us_domain_set_limit(FA->dom[1], US_LIMIT_DIRTY_BG_RATIO, 101))
FN(
				c_sl_dirty_ratio101) E(us_domain_set_limit(FA->dom[2], US_LIMIT_DIRTY_RATIO, 101))
FN(c_sl_ratio_huge) E(us_domain_set_limit(FA->dom[0], US_LIMIT_DIRTY_RATIO, UINT64_MAX))
FN(c_sl_dirty_bytes0) E(us_domain_set_limit(FA->dom[1], US_LIMIT_DIRTY_BYTES, 0))
FN(c_sl_bg_bytes0) E(us_domain_set_limit(FA->dom[2], US_LIMIT_DIRTY_BG_BYTES, 0))
FN(c_sl_max0) E(us_domain_set_limit(FA->dom[2], US_LIMIT_MAX, 0))
FN(c_sl_root_max0) E(us_domain_set_limit(FA->dom[0], US_LIMIT_MAX, 0))
/* us_domain_get_limit */
FN(c_gl_null) E(do_get_limit(NULL, US_LIMIT_MAX, false))
FN(c_gl_null_out) E(do_get_limit(FA->dom[1], US_LIMIT_MAX, true))
FN(c_gl_enum6) E(do_get_limit(FA->dom[1], (enum us_limit)6, false))
FN(c_gl_enum_big) E(do_get_limit(FA->dom[0], (enum us_limit)1000, false))
/* us_domain_effective_limits */
FN(c_el_null) E(do_eff_limits(NULL, sizeof(struct us_domain_limits), false))
FN(
		c_el_null_out) E(do_eff_limits(FA->dom[1], sizeof(struct us_domain_limits), true))
FN(c_el_size0) E(do_eff_limits(FA->dom[1], 0, false))
FN(c_el_size_small) E(do_eff_limits(FA->dom[2], sizeof(struct us_domain_limits) - 1, false))
/* us_backend_destroy */
FN(c_bd_null) E(us_backend_destroy(NULL))
FN(c_bd_objects) E(us_backend_destroy(FA->bk))
FN(c_bd_objects_b) E(us_backend_destroy(FB->bk))
/* us_backend_commit_done, us_backend_commit_lost */
FN(c_bcd_null) E(us_backend_commit_done(NULL, 1))
FN(c_bcd_seq0) E(us_backend_commit_done(FA->bk, 0))
FN(c_bcl_null) E(us_backend_commit_lost(NULL))
/* us_object_create */
FN(c_oc_null_backend) E(do_object_create(NULL, FA->dom[1], false))
FN(c_oc_null_out) E(do_object_create(FA->bk, FA->dom[1], true))
FN(c_oc_foreign_domain) E(do_object_create(FA->bk, FB->dom[2], false))
FN(c_oc_foreign_root) E(do_object_create(FA->bk, FB->dom[0], false))
FN(c_oc_foreign_b) E(do_object_create(FB->bk, FA->dom[3], false))
/* us_object_destroy */
FN(c_od_null) E(us_object_destroy(NULL))
FN(c_od_busy_o1) E(us_object_destroy(FA->o1))
FN(c_od_busy_o2) E(us_object_destroy(FA->o2))
FN(c_od_busy_b) E(us_object_destroy(FB->o1))
/* us_object_flush, commit, commit_done, check_error */
FN(c_of_null) E(us_object_flush(NULL, 0, US_UNLIMITED, 0))
FN(c_ocm_null) E(us_object_commit(NULL))
FN(c_ocd_null) E(us_object_commit_done(NULL, 1))
FN(c_ocd_seq0) E(us_object_commit_done(FA->o1, 0))
FN(c_ocd_seq0_b) E(us_object_commit_done(FB->o2, 0))
FN(c_ocl_null) E(us_object_commit_lost(NULL))
FN(c_or_null) E(us_object_reclaim(NULL, 4096, NULL))
FN(c_or_zero) E(us_object_reclaim(FA->o1, 0, NULL))
FN(c_or_huge) E(us_object_reclaim(FA->o1, (uint64_t)1 << 33, NULL))
static int c_op_null(struct fixture *f)
{
	uint64_t v = 0xdeadbeefu;
	int rc = us_object_pace(NULL, &v);

	(void)f;
	return v == 0xdeadbeefu ? rc : WROTE_OUT;
}
FN(c_op_null_out) E(us_object_pace(FA->o1, NULL))
FN(c_oss_null) E(us_object_sync_start(NULL, NULL, NULL, (us_sync **)SENTINEL))
FN(c_oss_null_out) E(us_object_sync_start(FA->o1, NULL, NULL, NULL))
FN(c_dss_null) E(us_domain_sync_start(NULL, NULL, NULL, (us_sync **)SENTINEL))
FN(c_dss_null_out) E(us_domain_sync_start(FA->dom[0], NULL, NULL, NULL))
FN(c_sd_null) E(us_sync_done(NULL))
FN(c_sf_null) E(us_sync_free(NULL))
FN(c_os_null) E(us_object_sync(NULL, (uint64_t *)SENTINEL))
FN(c_os_null_since) E(us_object_sync(FA->o1, NULL))
FN(c_os_polled) E(us_object_sync(FA->o1, &FA->since))
FN(c_dsy_null) E(us_domain_sync(NULL))
FN(c_ds_polled) E(us_domain_sync(FA->dom[0]))
FN(c_es_null) E(us_engine_shutdown(NULL))
FN(c_oce_null) E(do_check_error(NULL, false))
FN(c_oce_null_since) E(do_check_error(FA->o1, true))
/* us_buf_get */
FN(c_bg_null_obj) E(do_buf_get(NULL, 0, 4096, 0, false))
FN(c_bg_null_out) E(do_buf_get(FA->o1, O1_HOLE, 4096, 0, true))
FN(c_bg_null_out_existing) E(do_buf_get(FA->o1, 0, 4096, 0, true))
FN(c_bg_len0) E(do_buf_get(FA->o1, O1_HOLE, 0, 0, false))
FN(c_bg_len0_existing) E(do_buf_get(FA->o1, 0, 0, 0, false))
FN(c_bg_len_max1) E(do_buf_get(FA->o1, (uint64_t)1 << 40, US_BUF_MAX_BYTES + 1, 0, false))
FN(c_bg_len_huge) E(do_buf_get(FA->o3, 0, UINT64_MAX, US_GET_NODATA, false))
FN(c_bg_overflow) E(do_buf_get(FA->o3, UINT64_MAX - 4095, 4096, 0, false))
FN(c_bg_overflow_far) E(do_buf_get(FA->o1, UINT64_MAX, 1, 0, false))
FN(c_bg_flag4) E(do_buf_get(FA->o1, O1_HOLE, 4096, 0x10u, false))
FN(c_bg_flag_high) E(do_buf_get(FA->o1, 0, 4096, 0x80000000u, false))
FN(c_bg_overlap_tail) E(do_buf_get(FA->o1, 2048, 4096, 0, false))
FN(c_bg_overlap_head) E(do_buf_get(FA->o1, 32768 - 1, 2, 0, false))
FN(c_bg_overlap_inside) E(do_buf_get(FA->o1, 36864 + 100, 100, 0, false))
FN(c_bg_overlap_span) E(do_buf_get(FA->o1, 0, 3 * 4096, 0, false))
FN(c_bg_overlap_wb) E(do_buf_get(FA->o1, 16384 + 4095, 4096, US_GET_NODATA, false))
FN(c_bg_overlap_nocreate) E(do_buf_get(FB->o2, 512, 1024, US_GET_NOCREATE, false))
FN(c_bg_same_off_longer) E(do_buf_get(FA->o1, 0, 8192, 0, false))
FN(c_bg_same_off_shorter) E(do_buf_get(FA->o1, 8192, 1024, 0, false))
FN(c_bg_same_off_nocreate) E(do_buf_get(FB->o1, 65536, 4096, US_GET_NOCREATE, false))
FN(c_bg_nocreate_hole) E(do_buf_get(FA->o1, O1_HOLE, 4096, US_GET_NOCREATE, false))
FN(c_bg_nocreate_far) E(do_buf_get(FA->o1, (uint64_t)1 << 40, 1, US_GET_NOCREATE, false))
FN(c_bg_nocreate_empty) E(do_buf_get(FB->o3, 0, 4096, US_GET_NOCREATE | US_GET_NODATA, false))
FN(c_bg_enomem_max) E(do_buf_get(FA->o1, (uint64_t)1 << 32, (uint64_t)2 << 20, 0, false))
FN(c_bg_enomem_maxbuf) E(do_buf_get(FA->o1, 1ull << 32, US_BUF_MAX_BYTES, US_GET_NODATA, false))
/* us_buf_lookup, us_buf_next */
FN(c_bl_null) E(do_lookup(NULL, 0, false, false))
FN(c_bl_null_out) E(do_lookup(FA->o1, 0, false, true))
FN(c_bl_hole) E(do_lookup(FA->o1, O1_HOLE, false, false))
FN(c_bl_end) E(do_lookup(FA->o1, O1_END, false, false))
FN(c_bl_max) E(do_lookup(FB->o1, UINT64_MAX, false, false))
FN(c_bl_empty) E(do_lookup(FA->o3, 0, false, false))
FN(c_bn_null) E(do_lookup(NULL, 0, true, false))
FN(c_bn_null_out) E(do_lookup(FA->o1, 0, true, true))
FN(c_bn_end) E(do_lookup(FA->o1, O1_END - 1, true, false))
FN(c_bn_max) E(do_lookup(FB->o2, UINT64_MAX, true, false))
FN(c_bn_empty) E(do_lookup(FB->o3, 0, true, false))
/* us_buf_ref */
FN(c_br_null) E(us_buf_ref(NULL))
FN(c_br_unref_clean) E(us_buf_ref(FA->buf[B_CLEAN]))
FN(c_br_unref_wb) E(us_buf_ref(FA->buf[B_WB0]))
FN(c_br_unref_unstable) E(us_buf_ref(FA->buf[B_UNST0]))
FN(c_br_unref_nodata) E(us_buf_ref(FB->buf[B_NODATA]))
/* us_buf_put */
FN(c_bp_null) E(us_buf_put(NULL))
FN(c_bp_unref_clean) E(us_buf_put(FA->buf[B_CLEAN]))
FN(c_bp_unref_wb) E(us_buf_put(FA->buf[B_WB0]))
FN(c_bp_unref_unstable) E(us_buf_put(FB->buf[B2_UNST0]))
/* us_buf_dirty */
FN(c_bdi_null) E(us_buf_dirty(NULL, NULL))
FN(c_bdi_unref_clean) E(us_buf_dirty(FA->buf[B_CLEAN], NULL))
FN(c_bdi_unref_wb) E(us_buf_dirty(FA->buf[B_WB0], NULL))
FN(c_bdi_unref_unstable) E(us_buf_dirty(FA->buf[B_UNST0], NULL))
FN(c_bdi_unref_o2) E(us_buf_dirty(FB->buf[B2_CLEAN], NULL))
/* us_buf_drop */
FN(c_bdr_null) E(us_buf_drop(NULL))
FN(c_bdr_unref_clean) E(us_buf_drop(FA->buf[B_CLEAN]))
FN(c_bdr_unref_wb) E(us_buf_drop(FA->buf[B_WB0]))
FN(c_bdr_unref_unstable) E(us_buf_drop(FA->buf[B_UNST0]))
FN(c_bdr_writeback) E(us_buf_drop(FA->buf[B_WB]))
FN(c_bdr_two_refs) E(us_buf_drop(FA->buf[B_DIRTY2]))
FN(c_bdr_writeback_b) E(us_buf_drop(FB->buf[B_WB]))
/* us_buf_write_done */
FN(c_wd_null) E(us_buf_write_done(NULL, US_WRITE_STABLE, 0, 0))
FN(c_wd_clean) E(us_buf_write_done(FA->buf[B_CREF], US_WRITE_STABLE, 0, 0))
FN(c_wd_clean_unref_lost) E(us_buf_write_done(FA->buf[B_CLEAN], US_WRITE_LOST, 0, -EIO))
FN(c_wd_dirty) E(us_buf_write_done(FA->buf[B_DIRTY], US_WRITE_STABLE, 0, 0))
FN(c_wd_dirty_unstable) E(us_buf_write_done(FA->buf[B_DIRTY2], US_WRITE_UNSTABLE, 9, 0))
FN(
				c_wd_dirty_error) E(us_buf_write_done(FB->buf[B2_DIRTY], US_WRITE_ERROR, 0, -EIO))
FN(c_wd_unstable) E(us_buf_write_done(FA->buf[B_UNST], US_WRITE_STABLE, 0, 0))
FN(
					c_wd_unstable_again) E(us_buf_write_done(FA->buf[B_UNST0], US_WRITE_UNSTABLE, 8, 0))
FN(c_wd_unstable_lost) E(us_buf_write_done(FB->buf[B2_UNST0], US_WRITE_LOST, 0, -EIO))
FN(c_wd_result4) E(us_buf_write_done(FA->buf[B_WB], (enum us_write_result)4, 1, 0))
FN(c_wd_result_neg) E(us_buf_write_done(FA->buf[B_WB0], (enum us_write_result) - 1, 1, 0))
FN(c_wd_unstable_seq0) E(us_buf_write_done(FA->buf[B_WB], US_WRITE_UNSTABLE, 0, 0))
FN(c_wd_error_pos) E(us_buf_write_done(FA->buf[B_WB], US_WRITE_ERROR, 0, EIO))
FN(c_wd_lost_pos) E(us_buf_write_done(FB->buf[B_WB0], US_WRITE_LOST, 0, 1))
/* us_buf_state */
FN(c_bs_null) E(us_buf_state(NULL))
/* us_domain_purge, us_domain_stats, us_backend_stats, us_domain_stat_text, us_engine_check */
FN(c_dp_null) E(us_domain_purge(NULL))
FN(c_ds_null) E(do_domain_stats(NULL, sizeof(struct us_domain_stats), false))
FN(c_ds_null_out) E(do_domain_stats(FA->dom[0], sizeof(struct us_domain_stats), true))
FN(
			c_ds_size0) E(do_domain_stats(FA->dom[1], 0, false))
FN(c_ds_size_small) E(do_domain_stats(FA->dom[2], sizeof(struct us_domain_stats) - 1, false))
FN(
				c_bst_null) E(do_backend_stats(NULL, sizeof(struct us_backend_stats), false))
FN(c_bst_null_out) E(do_backend_stats(FA->bk, sizeof(struct us_backend_stats), true))
FN(c_bst_size0) E(do_backend_stats(FA->bk, 0, false))
FN(c_bst_size_small) E(do_backend_stats(FB->bk, sizeof(struct us_backend_stats) - 1, false))
FN(c_st_null) E(do_stat_text(NULL, false, 64))
FN(c_st_null_null) E(do_stat_text(NULL, true, 0))
FN(
							c_st_null_buf) E(do_stat_text(FA->dom[1], true, 10))
FN(c_st_null_buf_1) E(do_stat_text(FB->dom[0], true, 1))
FN(c_ck_null) E(do_engine_check(false))
FN(
									c_ck_null_msg) E(do_engine_check(true))
/* Accessors without an error return: their neutral value for NULL. */
FN(c_n_version) E(neutral(us_version() != NULL && strlen(us_version()) > 0))
FN(c_n_now) E(neutral(us_engine_now(NULL) == 0))
FN(c_n_root) E(neutral(us_engine_root(NULL) == NULL))
FN(c_n_domain_name) E(neutral(us_domain_name(NULL) == NULL))
FN(c_n_domain_parent) E(neutral(us_domain_parent(NULL) == NULL))
FN(c_n_object_user) E(neutral(us_object_user(NULL) == NULL))
FN(c_n_object_domain) E(neutral(us_object_domain(NULL) == NULL))
FN(c_n_object_backend) E(neutral(us_object_backend(NULL) == NULL))
FN(c_n_object_errseq) E(neutral(us_object_errseq(NULL) == 0))
FN(c_n_buf_data) E(neutral(us_buf_data(NULL) == NULL))
FN(c_n_buf_offset) E(neutral(us_buf_offset(NULL) == 0))
FN(c_n_buf_length) E(neutral(us_buf_length(NULL) == 0))
FN(c_n_buf_object) E(neutral(us_buf_object(NULL) == NULL))
FN(c_n_buf_flags) E(neutral(us_buf_flags(NULL) == 0))
FN(c_n_buf_commit_seq) E(neutral(us_buf_commit_seq(NULL) == 0))
/* clang-format on */

#undef E
#undef FN

								struct bad_case {
	const char *name; /* "function/what": the prefix names the function */
	int (*call)(struct fixture *f);
	int expected;
};

#define CASE(fn, what, call, expected)       \
	{                                    \
#fn "/" what, call, expected \
	}

static const struct bad_case cases[] = {
	CASE(us_engine_create, "NULL out", c_ec_null_out, -EINVAL),
	CASE(us_engine_create, "NULL out, NULL options", c_ec_null_out_null_opts, -EINVAL),
	CASE(us_engine_create, "options size 0", c_ec_size0, -EINVAL),
	CASE(us_engine_create, "options size below the first release's", c_ec_size_small, -EINVAL),
	CASE(us_engine_create, "options size too big", c_ec_size_big, -EINVAL),
	CASE(us_engine_create, "options size SIZE_MAX", c_ec_size_max, -EINVAL),
	CASE(us_engine_create, "clock 3", c_ec_clock3, -EINVAL),
	CASE(us_engine_create, "clock -1", c_ec_clock_neg, -EINVAL),
	CASE(us_engine_create, "custom clock without clock_fn", c_ec_custom_no_fn, -EINVAL),
	CASE(us_engine_create, "hooks with NULL alloc", c_ec_hooks_no_alloc, -EINVAL),
	CASE(us_engine_create, "hooks with NULL free", c_ec_hooks_no_free, -EINVAL),
	CASE(us_engine_create, "hooks all NULL", c_ec_hooks_empty, -EINVAL),
	CASE(us_engine_create, "memory_bytes 0", c_ec_mem0, -EINVAL),
	CASE(us_engine_destroy, "NULL", c_ed_null, -EINVAL),
	CASE(us_engine_destroy, "engine A with pinned buffers", c_ed_pinned_a, -EBUSY),
	CASE(us_engine_destroy, "engine B with pinned buffers", c_ed_pinned_b, -EBUSY),
	CASE(us_engine_clock_advance, "NULL", c_adv_null, -EINVAL),
	CASE(us_engine_clock_advance, "monotonic engine", c_adv_monotonic, -EINVAL),
	CASE(us_engine_clock_advance, "monotonic engine, delta 0", c_adv_monotonic0, -EINVAL),
	CASE(us_engine_clock_advance, "custom clock engine", c_adv_custom, -EINVAL),
	CASE(us_engine_clock_advance, "overflow by UINT64_MAX", c_adv_overflow, -EINVAL),
	CASE(us_engine_clock_advance, "overflow by one", c_adv_overflow_edge, -EINVAL),
	CASE(us_engine_clock_advance, "overflow by one, engine B", c_adv_overflow_b, -EINVAL),
	CASE(us_domain_create, "NULL engine", c_dc_null_engine, -EINVAL),
	CASE(us_domain_create, "NULL name", c_dc_null_name, -EINVAL),
	CASE(us_domain_create, "empty name", c_dc_empty_name, -EINVAL),
	CASE(us_domain_create, "64-byte name", c_dc_name64, -EINVAL),
	CASE(us_domain_create, "4096-byte name", c_dc_name_huge, -EINVAL),
	CASE(us_domain_create, "NULL out", c_dc_null_out, -EINVAL),
	CASE(us_domain_create, "parent from engine B", c_dc_foreign_parent, -EINVAL),
	CASE(us_domain_create, "parent is B's root", c_dc_foreign_root, -EINVAL),
	CASE(us_domain_create, "in B under A's leaf, ARENA", c_dc_foreign_leaf, -EINVAL),
	CASE(us_domain_create, "unknown flag 0x2", c_dc_bad_flag, -EINVAL),
	CASE(us_domain_create, "unknown flag 0x80000000", c_dc_bad_flag_high, -EINVAL),
	CASE(us_domain_create, "duplicate top-level name", c_dc_dup_top, -EEXIST),
	CASE(us_domain_create, "duplicate name under explicit root", c_dc_dup_top_explicit,
	     -EEXIST),
	CASE(us_domain_create, "duplicate child name", c_dc_dup_child, -EEXIST),
	CASE(us_domain_destroy, "NULL", c_dd_null, -EINVAL),
	CASE(us_domain_destroy, "root", c_dd_root, -EINVAL),
	CASE(us_domain_destroy, "with children", c_dd_children, -EBUSY),
	CASE(us_domain_destroy, "with objects and charges", c_dd_charged, -EBUSY),
	CASE(us_domain_destroy, "with an empty object", c_dd_empty_object, -EBUSY),
	CASE(us_domain_set_limit, "NULL", c_sl_null, -EINVAL),
	CASE(us_domain_set_limit, "limit 6", c_sl_enum6, -EINVAL),
	CASE(us_domain_set_limit, "limit -1", c_sl_enum_neg, -EINVAL),
	CASE(us_domain_set_limit, "background ratio 101", c_sl_bg_ratio101, -EINVAL),
	CASE(us_domain_set_limit, "dirty ratio 101", c_sl_dirty_ratio101, -EINVAL),
	CASE(us_domain_set_limit, "dirty ratio UINT64_MAX", c_sl_ratio_huge, -EINVAL),
	CASE(us_domain_set_limit, "dirty bytes 0", c_sl_dirty_bytes0, -EINVAL),
	CASE(us_domain_set_limit, "background bytes 0", c_sl_bg_bytes0, -EINVAL),
	CASE(us_domain_set_limit, "max one below pinned, a/b", c_sl_max_below_pinned_ab, -EBUSY),
	CASE(us_domain_set_limit, "max one below pinned, a", c_sl_max_below_pinned_a, -EBUSY),
	CASE(us_domain_set_limit, "max one below pinned, B root", c_sl_max_below_pinned_root,
	     -EBUSY),
	CASE(us_domain_set_limit, "max 0 with pinned", c_sl_max0, -EBUSY),
	CASE(us_domain_set_limit, "root max 0 with pinned", c_sl_root_max0, -EBUSY),
	CASE(us_domain_get_limit, "NULL", c_gl_null, -EINVAL),
	CASE(us_domain_get_limit, "NULL out", c_gl_null_out, -EINVAL),
	CASE(us_domain_get_limit, "limit 6", c_gl_enum6, -EINVAL),
	CASE(us_domain_get_limit, "limit 1000", c_gl_enum_big, -EINVAL),
	CASE(us_domain_effective_limits, "NULL", c_el_null, -EINVAL),
	CASE(us_domain_effective_limits, "NULL out", c_el_null_out, -EINVAL),
	CASE(us_domain_effective_limits, "size 0", c_el_size0, -EINVAL),
	CASE(us_domain_effective_limits, "size one short", c_el_size_small, -EINVAL),
	CASE(us_backend_create, "NULL engine", c_bc_null_engine, -EINVAL),
	CASE(us_backend_create, "NULL ops", c_bc_null_ops, -EINVAL),
	CASE(us_backend_create, "NULL out", c_bc_null_out, -EINVAL),
	CASE(us_backend_create, "no flush", c_bc_no_flush, -EINVAL),
	CASE(us_backend_create, "neither commit nor sync", c_bc_no_commit_sync, -EINVAL),
	CASE(us_backend_create, "ops size 0", c_bc_size0, -EINVAL),
	CASE(us_backend_create, "ops size below the first release's", c_bc_size_small, -EINVAL),
	CASE(us_backend_create, "ops size too big", c_bc_size_big, -EINVAL),
	CASE(us_backend_destroy, "NULL", c_bd_null, -EINVAL),
	CASE(us_backend_destroy, "with objects", c_bd_objects, -EBUSY),
	CASE(us_backend_destroy, "with objects, engine B", c_bd_objects_b, -EBUSY),
	CASE(us_backend_commit_done, "NULL", c_bcd_null, -EINVAL),
	CASE(us_backend_commit_done, "seq 0", c_bcd_seq0, -EINVAL),
	CASE(us_backend_commit_lost, "NULL", c_bcl_null, -EINVAL),
	CASE(us_object_create, "NULL backend", c_oc_null_backend, -EINVAL),
	CASE(us_object_create, "NULL out", c_oc_null_out, -EINVAL),
	CASE(us_object_create, "domain from engine B", c_oc_foreign_domain, -EINVAL),
	CASE(us_object_create, "B's root domain", c_oc_foreign_root, -EINVAL),
	CASE(us_object_create, "B's backend, A's domain", c_oc_foreign_b, -EINVAL),
	CASE(us_object_destroy, "NULL", c_od_null, -EINVAL),
	CASE(us_object_destroy, "dirty, writeback, unstable, referenced", c_od_busy_o1, -EBUSY),
	CASE(us_object_destroy, "dirty and unstable", c_od_busy_o2, -EBUSY),
	CASE(us_object_destroy, "busy, engine B", c_od_busy_b, -EBUSY),
	CASE(us_object_flush, "NULL", c_of_null, -EINVAL),
	CASE(us_object_commit, "NULL", c_ocm_null, -EINVAL),
	CASE(us_object_commit_done, "NULL", c_ocd_null, -EINVAL),
	CASE(us_object_commit_done, "seq 0", c_ocd_seq0, -EINVAL),
	CASE(us_object_commit_done, "seq 0, engine B", c_ocd_seq0_b, -EINVAL),
	CASE(us_object_commit_lost, "NULL", c_ocl_null, -EINVAL),
	CASE(us_object_reclaim, "NULL object", c_or_null, -EINVAL),
	CASE(us_object_reclaim, "length 0", c_or_zero, -EINVAL),
	CASE(us_object_reclaim, "length over 4 GiB", c_or_huge, -EINVAL),
	CASE(us_object_pace, "NULL object", c_op_null, -EINVAL),
	CASE(us_object_pace, "NULL out", c_op_null_out, -EINVAL),
	CASE(us_object_sync_start, "NULL object", c_oss_null, -EINVAL),
	CASE(us_object_sync_start, "NULL out", c_oss_null_out, -EINVAL),
	CASE(us_domain_sync_start, "NULL domain", c_dss_null, -EINVAL),
	CASE(us_domain_sync_start, "NULL out", c_dss_null_out, -EINVAL),
	CASE(us_sync_done, "NULL", c_sd_null, -EINVAL),
	CASE(us_sync_free, "NULL", c_sf_null, -EINVAL),
	CASE(us_object_sync, "NULL object", c_os_null, -EINVAL),
	CASE(us_object_sync, "NULL cursor", c_os_null_since, -EINVAL),
	CASE(us_object_sync, "polled mode", c_os_polled, -EAGAIN),
	CASE(us_domain_sync, "NULL", c_dsy_null, -EINVAL),
	CASE(us_domain_sync, "polled mode", c_ds_polled, -EAGAIN),
	CASE(us_engine_shutdown, "NULL", c_es_null, -EINVAL),
	CASE(us_object_check_error, "NULL", c_oce_null, -EINVAL),
	CASE(us_object_check_error, "NULL since", c_oce_null_since, -EINVAL),
	CASE(us_buf_get, "NULL object", c_bg_null_obj, -EINVAL),
	CASE(us_buf_get, "NULL out", c_bg_null_out, -EINVAL),
	CASE(us_buf_get, "NULL out, existing buffer", c_bg_null_out_existing, -EINVAL),
	CASE(us_buf_get, "length 0", c_bg_len0, -EINVAL),
	CASE(us_buf_get, "length 0 at an existing buffer", c_bg_len0_existing, -EINVAL),
	CASE(us_buf_get, "length US_BUF_MAX_BYTES + 1", c_bg_len_max1, -EINVAL),
	CASE(us_buf_get, "length UINT64_MAX", c_bg_len_huge, -EINVAL),
	CASE(us_buf_get, "offset + length = 2^64", c_bg_overflow, -EINVAL),
	CASE(us_buf_get, "offset UINT64_MAX, length 1", c_bg_overflow_far, -EINVAL),
	CASE(us_buf_get, "unknown flag 0x10", c_bg_flag4, -EINVAL),
	CASE(us_buf_get, "unknown flag 0x80000000", c_bg_flag_high, -EINVAL),
	CASE(us_buf_get, "overlaps a buffer's tail", c_bg_overlap_tail, -EEXIST),
	CASE(us_buf_get, "overlaps a buffer's head", c_bg_overlap_head, -EEXIST),
	CASE(us_buf_get, "inside a buffer", c_bg_overlap_inside, -EEXIST),
	CASE(us_buf_get, "spans three buffers", c_bg_overlap_span, -EEXIST),
	CASE(us_buf_get, "overlaps a writeback buffer", c_bg_overlap_wb, -EEXIST),
	CASE(us_buf_get, "overlaps, NOCREATE", c_bg_overlap_nocreate, -EEXIST),
	CASE(us_buf_get, "same offset, longer", c_bg_same_off_longer, -EEXIST),
	CASE(us_buf_get, "same offset, shorter", c_bg_same_off_shorter, -EEXIST),
	CASE(us_buf_get, "same offset, other length, NOCREATE", c_bg_same_off_nocreate, -EEXIST),
	CASE(us_buf_get, "NOCREATE in a hole", c_bg_nocreate_hole, -ENOENT),
	CASE(us_buf_get, "NOCREATE far away", c_bg_nocreate_far, -ENOENT),
	CASE(us_buf_get, "NOCREATE|NODATA in an empty object", c_bg_nocreate_empty, -ENOENT),
	CASE(us_buf_get, "over a/b's max", c_bg_enomem_max, -ENOMEM),
	CASE(us_buf_get, "US_BUF_MAX_BYTES over a/b's max", c_bg_enomem_maxbuf, -ENOMEM),
	CASE(us_buf_get, "evicting and reclaiming all of a/b is one byte short",
	     c_bg_enomem_evict_not_enough, -ENOMEM),
	CASE(us_buf_get, "the same, NODATA, engine B", c_bg_enomem_nodata, -ENOMEM),
	CASE(us_buf_get, "over the root's max", c_bg_enomem_root, -ENOMEM),
	CASE(us_buf_lookup, "NULL object", c_bl_null, -EINVAL),
	CASE(us_buf_lookup, "NULL out at a buffer", c_bl_null_out, -EINVAL),
	CASE(us_buf_lookup, "in a hole", c_bl_hole, -ENOENT),
	CASE(us_buf_lookup, "at the end", c_bl_end, -ENOENT),
	CASE(us_buf_lookup, "UINT64_MAX", c_bl_max, -ENOENT),
	CASE(us_buf_lookup, "empty object", c_bl_empty, -ENOENT),
	CASE(us_buf_next, "NULL object", c_bn_null, -EINVAL),
	CASE(us_buf_next, "NULL out", c_bn_null_out, -EINVAL),
	CASE(us_buf_next, "inside the last buffer", c_bn_end, -ENOENT),
	CASE(us_buf_next, "UINT64_MAX", c_bn_max, -ENOENT),
	CASE(us_buf_next, "empty object", c_bn_empty, -ENOENT),
	CASE(us_buf_ref, "NULL", c_br_null, -EINVAL),
	CASE(us_buf_ref, "unreferenced clean", c_br_unref_clean, -EINVAL),
	CASE(us_buf_ref, "unreferenced writeback", c_br_unref_wb, -EINVAL),
	CASE(us_buf_ref, "unreferenced unstable", c_br_unref_unstable, -EINVAL),
	CASE(us_buf_ref, "unreferenced, no payload", c_br_unref_nodata, -EINVAL),
	CASE(us_buf_put, "NULL", c_bp_null, -EINVAL),
	CASE(us_buf_put, "no reference, clean", c_bp_unref_clean, -EINVAL),
	CASE(us_buf_put, "no reference, writeback", c_bp_unref_wb, -EINVAL),
	CASE(us_buf_put, "no reference, unstable", c_bp_unref_unstable, -EINVAL),
	CASE(us_buf_dirty, "NULL", c_bdi_null, -EINVAL),
	CASE(us_buf_dirty, "no reference, clean", c_bdi_unref_clean, -EINVAL),
	CASE(us_buf_dirty, "no reference, writeback", c_bdi_unref_wb, -EINVAL),
	CASE(us_buf_dirty, "no reference, unstable", c_bdi_unref_unstable, -EINVAL),
	CASE(us_buf_dirty, "no reference, engine B", c_bdi_unref_o2, -EINVAL),
	CASE(us_buf_drop, "NULL", c_bdr_null, -EINVAL),
	CASE(us_buf_drop, "no reference, clean", c_bdr_unref_clean, -EINVAL),
	CASE(us_buf_drop, "no reference, writeback", c_bdr_unref_wb, -EINVAL),
	CASE(us_buf_drop, "no reference, unstable", c_bdr_unref_unstable, -EINVAL),
	CASE(us_buf_drop, "writeback", c_bdr_writeback, -EBUSY),
	CASE(us_buf_drop, "two references", c_bdr_two_refs, -EBUSY),
	CASE(us_buf_drop, "writeback, engine B", c_bdr_writeback_b, -EBUSY),
	CASE(us_buf_write_done, "NULL", c_wd_null, -EINVAL),
	CASE(us_buf_write_done, "clean", c_wd_clean, -EALREADY),
	CASE(us_buf_write_done, "clean, unreferenced, LOST", c_wd_clean_unref_lost, -EALREADY),
	CASE(us_buf_write_done, "dirty", c_wd_dirty, -EALREADY),
	CASE(us_buf_write_done, "dirty, UNSTABLE", c_wd_dirty_unstable, -EALREADY),
	CASE(us_buf_write_done, "dirty, ERROR", c_wd_dirty_error, -EALREADY),
	CASE(us_buf_write_done, "unstable", c_wd_unstable, -EALREADY),
	CASE(us_buf_write_done, "unstable, UNSTABLE again", c_wd_unstable_again, -EALREADY),
	CASE(us_buf_write_done, "unstable, LOST", c_wd_unstable_lost, -EALREADY),
	CASE(us_buf_write_done, "result 4", c_wd_result4, -EINVAL),
	CASE(us_buf_write_done, "result -1", c_wd_result_neg, -EINVAL),
	CASE(us_buf_write_done, "UNSTABLE with seq 0", c_wd_unstable_seq0, -EINVAL),
	CASE(us_buf_write_done, "ERROR with a positive err", c_wd_error_pos, -EINVAL),
	CASE(us_buf_write_done, "LOST with a positive err", c_wd_lost_pos, -EINVAL),
	CASE(us_buf_state, "NULL", c_bs_null, -EINVAL),
	CASE(us_domain_purge, "NULL", c_dp_null, -EINVAL),
	CASE(us_domain_stats, "NULL", c_ds_null, -EINVAL),
	CASE(us_domain_stats, "NULL out", c_ds_null_out, -EINVAL),
	CASE(us_domain_stats, "size 0", c_ds_size0, -EINVAL),
	CASE(us_domain_stats, "size one short", c_ds_size_small, -EINVAL),
	CASE(us_backend_stats, "NULL", c_bst_null, -EINVAL),
	CASE(us_backend_stats, "NULL out", c_bst_null_out, -EINVAL),
	CASE(us_backend_stats, "size 0", c_bst_size0, -EINVAL),
	CASE(us_backend_stats, "size one short", c_bst_size_small, -EINVAL),
	CASE(us_domain_stat_text, "NULL domain", c_st_null, -EINVAL),
	CASE(us_domain_stat_text, "NULL domain, NULL buffer", c_st_null_null, -EINVAL),
	CASE(us_domain_stat_text, "NULL buffer, length 10", c_st_null_buf, -EINVAL),
	CASE(us_domain_stat_text, "NULL buffer, length 1", c_st_null_buf_1, -EINVAL),
	CASE(us_engine_check, "NULL", c_ck_null, -EINVAL),
	CASE(us_engine_check, "NULL with a message buffer", c_ck_null_msg, -EINVAL),
	/* Neutral: no error return, a documented value for NULL. */
	CASE(us_version, "not NULL, not empty", c_n_version, NEUTRAL),
	CASE(us_strerror, "unknown codes", c_n_strerror, NEUTRAL),
	CASE(us_engine_options_init, "NULL", c_n_options_init, NEUTRAL),
	CASE(us_engine_now, "NULL is 0", c_n_now, NEUTRAL),
	CASE(us_engine_root, "NULL", c_n_root, NEUTRAL),
	CASE(us_domain_name, "NULL", c_n_domain_name, NEUTRAL),
	CASE(us_domain_parent, "NULL", c_n_domain_parent, NEUTRAL),
	CASE(us_object_user, "NULL", c_n_object_user, NEUTRAL),
	CASE(us_object_domain, "NULL", c_n_object_domain, NEUTRAL),
	CASE(us_object_backend, "NULL", c_n_object_backend, NEUTRAL),
	CASE(us_object_errseq, "NULL is 0", c_n_object_errseq, NEUTRAL),
	CASE(us_buf_data, "NULL", c_n_buf_data, NEUTRAL),
	CASE(us_buf_offset, "NULL is 0", c_n_buf_offset, NEUTRAL),
	CASE(us_buf_length, "NULL is 0", c_n_buf_length, NEUTRAL),
	CASE(us_buf_object, "NULL", c_n_buf_object, NEUTRAL),
	CASE(us_buf_flags, "NULL is 0", c_n_buf_flags, NEUTRAL),
	CASE(us_buf_commit_seq, "NULL is 0", c_n_buf_commit_seq, NEUTRAL),
};

#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

/* Every function of the header: each must have at least one case. */
static const char *const public_functions[] = {
	"us_version",
	"us_strerror",
	"us_engine_options_init",
	"us_engine_create",
	"us_engine_destroy",
	"us_engine_now",
	"us_engine_clock_advance",
	"us_engine_root",
	"us_domain_create",
	"us_domain_destroy",
	"us_domain_name",
	"us_domain_parent",
	"us_domain_set_limit",
	"us_domain_get_limit",
	"us_domain_effective_limits",
	"us_backend_create",
	"us_backend_destroy",
	"us_backend_commit_done",
	"us_backend_commit_lost",
	"us_object_create",
	"us_object_destroy",
	"us_object_user",
	"us_object_domain",
	"us_object_backend",
	"us_object_flush",
	"us_object_commit",
	"us_object_commit_done",
	"us_object_commit_lost",
	"us_object_errseq",
	"us_object_check_error",
	"us_object_reclaim",
	"us_object_pace",
	"us_object_sync_start",
	"us_domain_sync_start",
	"us_sync_done",
	"us_sync_free",
	"us_object_sync",
	"us_domain_sync",
	"us_engine_shutdown",
	"us_buf_get",
	"us_buf_lookup",
	"us_buf_next",
	"us_buf_ref",
	"us_buf_put",
	"us_buf_dirty",
	"us_buf_drop",
	"us_buf_write_done",
	"us_buf_data",
	"us_buf_offset",
	"us_buf_length",
	"us_buf_object",
	"us_buf_state",
	"us_buf_flags",
	"us_buf_commit_seq",
	"us_domain_purge",
	"us_domain_stats",
	"us_backend_stats",
	"us_domain_stat_text",
	"us_engine_check",
};

#define NFUNCS ((int)(sizeof(public_functions) / sizeof(public_functions[0])))

/* The number of cases of function fn (the prefix of their names). */
static int cases_of(const char *fn, bool errno_only)
{
	size_t len = strlen(fn);
	int i, n = 0;

	for (i = 0; i < NCASES; i++) {
		if (strncmp(cases[i].name, fn, len) == 0 && cases[i].name[len] == '/' &&
		    (!errno_only || cases[i].expected != NEUTRAL))
			n++;
	}
	return n;
}

static int errno_cases(void)
{
	int i, n = 0;

	for (i = 0; i < NCASES; i++)
		n += cases[i].expected != NEUTRAL;
	return n;
}

/* ------------------------------------------------------------------------ */
/* The tests                                                                 */

START_TEST(test_bad_input)
{
	const struct bad_case *c = &cases[_i];
	struct snap *before = malloc(sizeof(*before)), *after = malloc(sizeof(*after));
	bool refused = c->expected == -ENOMEM;
	int rc;

	ck_assert_ptr_nonnull(before);
	ck_assert_ptr_nonnull(after);
	snap_take(&fx, before);
	rc = c->call(&fx);
	if (c->expected == NEUTRAL) {
		ck_assert_msg(rc == 0, "case \"%s\": returned %d, not the neutral value", c->name,
			      rc);
	} else {
		ck_assert_msg(rc < 0, "case \"%s\": returned %d, not a negative errno", c->name,
			      rc);
		ck_assert_msg(rc != WROTE_OUT, "case \"%s\": wrote through its out pointer",
			      c->name);
		ck_assert_msg(rc == c->expected, "case \"%s\": returned %d (%s), expected %d (%s)",
			      c->name, rc, us_strerror(rc), c->expected, us_strerror(c->expected));
	}
	snap_take(&fx, after);
	same_side(c->name, "A", &before->s[0], &after->s[0], refused);
	same_side(c->name, "B", &before->s[1], &after->s[1], refused);
	free(before);
	free(after);
}
END_TEST

START_TEST(test_case_count)
{
	int i, total = 0, nerrno = errno_cases();

	for (i = 0; i < NFUNCS; i++) {
		int n = cases_of(public_functions[i], false);

		ck_assert_msg(n > 0, "no bad-input case for %s", public_functions[i]);
		total += n;
	}
	/* Every case names a public function. */
	ck_assert_int_eq(total, NCASES);
	ck_assert_int_ge(nerrno, 80);
}
END_TEST

/* The fixture itself is what the cases assume. */
START_TEST(test_fixture_states)
{
	int i, side;

	for (side = 0; side < 2; side++) {
		struct side *s = &fx.s[side];

		for (i = 0; i < NBUF; i++) {
			ck_assert_int_eq(us_buf_state(s->buf[i]), bufdefs[i].state);
			ck_assert_uint_eq(s->buf[i]->refs, bufdefs[i].refs);
			ck_assert_uint_eq(us_buf_offset(s->buf[i]), bufdefs[i].offset);
			ck_assert_uint_eq(us_buf_length(s->buf[i]), bufdefs[i].length);
			ck_assert_uint_eq(us_buf_commit_seq(s->buf[i]), bufdefs[i].seq);
			ck_assert((us_buf_data(s->buf[i]) != NULL) ==
				  !(bufdefs[i].flags & US_GET_NODATA));
		}
		ck_assert_uint_eq(s->cnt.evict, 0);
		ck_assert_uint_eq(s->cnt.commit, 0);
		ck_assert_uint_eq(s->cnt.flush, 5);
	}
	ck_assert_uint_eq(us_engine_now(fx.s[0].e), 1000);
	ck_assert_uint_eq(us_engine_now(fx.s[1].e), 2000);
}
END_TEST

static void print_counts(void)
{
	int i;

	printf("bad-input cases: %d (%d with a negative errno, %d neutral accessors)\n", NCASES,
	       errno_cases(), NCASES - errno_cases());
	for (i = 0; i < NFUNCS; i++)
		printf("  %-28s %d\n", public_functions[i], cases_of(public_functions[i], false));
}

static Suite *badinput_suite(void)
{
	Suite *s = suite_create("badinput");
	TCase *tc = tcase_create("table");

	tcase_add_checked_fixture(tc, fixture_setup, fixture_teardown);
	tcase_add_test(tc, test_fixture_states);
	tcase_add_loop_test(tc, test_bad_input, 0, NCASES);
	suite_add_tcase(s, tc);

	tc = tcase_create("count");
	tcase_add_test(tc, test_case_count);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(badinput_suite());
	int failed, run;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	run = srunner_ntests_run(sr);
	srunner_free(sr);
	print_counts();
	/* Each case ran as its own test, with its own fixture. */
	if (run != NCASES + 2) {
		printf("ran %d tests, expected %d\n", run, NCASES + 2);
		return EXIT_FAILURE;
	}
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
