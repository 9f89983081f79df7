/*
 * Domains: the tree, limits at runtime, hierarchical charging and eviction.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K4 4096u

static us_domain *mk(us_engine *e, us_domain *parent, const char *name)
{
	us_domain *d;

	ck_assert_int_eq(us_domain_create(e, parent, name, 0, &d), 0);
	return d;
}

static us_object *obj(struct tb *t, us_domain *d)
{
	us_object *o;

	ck_assert_int_eq(us_object_create(t->backend, d, NULL, &o), 0);
	return o;
}

/* Creates a buffer; dirty (pinned) or clean and released. */
static int put_buf(us_object *o, uint64_t offset, uint64_t length, bool pinned)
{
	us_buf *b;
	int rc = us_buf_get(o, offset, length, US_GET_NODATA, &b);

	if (rc < 0)
		return rc;
	if (pinned)
		ck_assert_int_ge(us_buf_dirty(b, NULL), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
	return rc;
}

static void clean_all(struct tb *t, us_object **objs, size_t n)
{
	size_t i;

	tb_complete_all(t); /* what reclaim wrote back */
	t->mode = TB_STABLE;
	for (i = 0; i < n; i++)
		ck_assert_int_ge(us_object_flush(objs[i], 0, US_UNLIMITED, 0), 0);
}

START_TEST(test_tree)
{
	us_engine *e = tu_engine(1u << 30);
	us_domain *root = us_engine_root(e), *a, *b, *ab, *x;

	ck_assert_str_eq(us_domain_name(root), "root");
	ck_assert_ptr_null(us_domain_parent(root));
	a = mk(e, NULL, "a");
	b = mk(e, root, "b");
	ab = mk(e, a, "b"); /* the same name under another parent */
	ck_assert_ptr_eq(us_domain_parent(a), root);
	ck_assert_ptr_eq(us_domain_parent(ab), a);
	ck_assert_str_eq(us_domain_name(ab), "b");
	ck_assert_int_eq(us_domain_create(e, a, "b", 0, &x), -EEXIST);
	ck_assert_int_eq(us_domain_destroy(a), -EBUSY);
	ck_assert_int_eq(us_domain_destroy(root), -EINVAL);
	ck_assert_int_eq(us_domain_destroy(ab), 0);
	ck_assert_int_eq(us_domain_destroy(a), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "a", US_DOMAIN_ARENA, &a), 0);
	ck_assert_int_eq(us_domain_purge(a), 0);
	ck_assert_int_eq(us_domain_destroy(b), 0);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * Sibling names at scale (the engine's name table, grown while domains are
 * made): 10,000 children under each of two parents with the same names, every
 * duplicate refused under its own parent only, names free again once their
 * domain is destroyed, and the table consistent after half are gone.
 */
START_TEST(test_names_at_scale)
{
	enum { N = 10000 };
	us_engine *e = tu_engine(1u << 30);
	us_domain *p1 = mk(e, NULL, "p1"), *p2 = mk(e, NULL, "p2"), *x;
	static us_domain *d1[N], *d2[N];
	char name[32];
	int i;

	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, p1, name, 0, &d1[i]), 0);
		ck_assert_int_eq(us_domain_create(e, p2, name, 0, &d2[i]), 0);
		ck_assert_int_eq(us_domain_create(e, p1, name, 0, &x), -EEXIST);
	}
	/* A name of p1's children is free under the root and p1's children. */
	ck_assert_int_eq(us_domain_create(e, d1[7], "d7", 0, &x), 0);
	ck_assert_int_eq(us_domain_destroy(x), 0);
	for (i = 0; i < N; i += 2)
		ck_assert_int_eq(us_domain_destroy(d1[i]), 0);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		ck_assert_int_eq(us_domain_create(e, p2, name, 0, &x), -EEXIST);
		if (i % 2) {
			ck_assert_int_eq(us_domain_create(e, p1, name, 0, &x), -EEXIST);
		} else {
			ck_assert_int_eq(us_domain_create(e, p1, name, 0, &d1[i]), 0);
			ck_assert_ptr_eq(us_domain_parent(d1[i]), p1);
			ck_assert_str_eq(us_domain_name(d1[i]), name);
		}
	}
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_hierarchical_charging)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *root = us_engine_root(e), *a = mk(e, NULL, "a"), *a1 = mk(e, a, "a1"),
		  *a2 = mk(e, a, "a2"), *b = mk(e, NULL, "b");
	us_object *o1, *o2, *ob, *objs[3];

	tb_init(&t, e, true, false);
	o1 = obj(&t, a1);
	o2 = obj(&t, a2);
	ob = obj(&t, b);
	ck_assert_int_eq(put_buf(o1, 0, K4, true), 1);
	ck_assert_int_eq(put_buf(o1, K4, 2 * K4, false), 1);
	ck_assert_int_eq(put_buf(o2, 0, 3 * K4, true), 1);
	ck_assert_int_eq(put_buf(ob, 0, 5 * K4, false), 1);
	/* A child's charges count in every ancestor. */
	ck_assert_uint_eq(tu_stats(a1).charged_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(a2).charged_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(a).charged_bytes, 6 * K4);
	ck_assert_uint_eq(tu_stats(a).dirty_bytes, 4 * K4);
	ck_assert_uint_eq(tu_stats(a).clean_bytes, 2 * K4);
	ck_assert_uint_eq(tu_stats(a).buffers, 3);
	ck_assert_uint_eq(tu_stats(a).charges, 3);
	ck_assert_uint_eq(tu_stats(b).charged_bytes, 5 * K4);
	ck_assert_uint_eq(tu_stats(root).charged_bytes, 11 * K4);
	ck_assert_uint_eq(tu_stats(root).peak_charged_bytes, 11 * K4);
	ck_assert_int_eq(us_domain_destroy(a1), -EBUSY);
	tu_check(e);
	objs[0] = o1;
	objs[1] = o2;
	objs[2] = ob;
	clean_all(&t, objs, 3);
	ck_assert_int_eq(us_object_destroy(o1), 0);
	ck_assert_uint_eq(tu_stats(a).charged_bytes, 3 * K4);
	ck_assert_uint_eq(tu_stats(root).charged_bytes, 8 * K4);
	ck_assert_uint_eq(tu_stats(root).peak_charged_bytes, 11 * K4);
	ck_assert_int_eq(us_domain_destroy(a1), 0);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_parent_max_bounds_subtree)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *p = mk(e, NULL, "p"), *c1 = mk(e, p, "c1"), *c2 = mk(e, p, "c2");
	us_object *o1, *o2, *objs[2];
	struct us_domain_stats before, after;

	tb_init(&t, e, true, false);
	o1 = obj(&t, c1);
	o2 = obj(&t, c2);
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_MAX, 8 * K4), 0);
	/* c1 fills half with pinned data, c2 the other half with clean data. */
	ck_assert_int_eq(put_buf(o1, 0, 4 * K4, true), 1);
	ck_assert_int_eq(put_buf(o2, 0, 2 * K4, false), 1);
	ck_assert_int_eq(put_buf(o2, 2 * K4, 2 * K4, false), 1);
	ck_assert_uint_eq(tu_stats(p).charged_bytes, 8 * K4);
	/* c1 is unlimited itself, but its parent's max holds: c2's clean data goes. */
	ck_assert_int_eq(put_buf(o1, 4 * K4, 2 * K4, true), 1);
	ck_assert_uint_eq(t.evictions, 1);
	ck_assert_uint_eq(tu_stats(c2).charged_bytes, 2 * K4);
	ck_assert_uint_eq(tu_stats(c2).evictions, 1);
	ck_assert_uint_eq(tu_stats(p).charged_bytes, 8 * K4);
	tu_check(e);
	/* More than what can be evicted: nothing is evicted or charged; the
	 * charge waits for reclaim (polled mode: -EAGAIN), which started
	 * writing back c1's dirty data. */
	before = tu_stats(p);
	ck_assert_int_eq(put_buf(o1, 6 * K4, 3 * K4, true), -EAGAIN);
	after = tu_stats(p);
	ck_assert_uint_eq(after.charged_bytes, before.charged_bytes);
	ck_assert_uint_eq(after.evictions, before.evictions);
	ck_assert_uint_eq(after.enomem, before.enomem);
	ck_assert_uint_eq(tu_stats(c1).reclaims, 1);
	ck_assert_uint_eq(after.writeback_bytes, 6 * K4);
	ck_assert_uint_eq(t.evictions, 1);
	/* Exactly what can be evicted: admitted, at max exactly. */
	ck_assert_int_eq(put_buf(o1, 6 * K4, 2 * K4, true), 1);
	ck_assert_uint_eq(tu_stats(p).charged_bytes, 8 * K4);
	ck_assert_uint_eq(tu_stats(p).peak_charged_bytes, 8 * K4);
	ck_assert_int_eq(put_buf(o2, 0, K4, false), -EAGAIN);
	/* More than the max itself: refused at once. */
	ck_assert_int_eq(put_buf(o2, 0, 9 * K4, false), -ENOMEM);
	ck_assert_uint_eq(tu_stats(c2).enomem, 1);
	tu_check(e);
	objs[0] = o1;
	objs[1] = o2;
	clean_all(&t, objs, 2);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_lower_max_at_runtime)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d = mk(e, NULL, "d");
	us_object *o;
	uint64_t v;

	tb_init(&t, e, true, false);
	o = obj(&t, d);
	ck_assert_int_eq(put_buf(o, 0, 4 * K4, true), 1);
	ck_assert_int_eq(put_buf(o, 4 * K4, 4 * K4, false), 1);
	/* Below what pinned data holds: refused, limit unchanged. */
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 3 * K4), -EBUSY);
	ck_assert_int_eq(us_domain_get_limit(d, US_LIMIT_MAX, &v), 0);
	ck_assert_uint_eq(v, US_UNLIMITED);
	ck_assert_uint_eq(tu_stats(d).charged_bytes, 8 * K4);
	ck_assert_uint_eq(t.evictions, 0);
	/* Below usage but reachable by eviction: evicts, then holds. */
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 5 * K4), 0);
	ck_assert_uint_eq(tu_stats(d).charged_bytes, 4 * K4);
	ck_assert_uint_eq(t.evictions, 1);
	ck_assert_int_eq(us_domain_get_limit(d, US_LIMIT_MAX, &v), 0);
	ck_assert_uint_eq(v, 5 * K4);
	tu_check(e);
	/* The next charges fit, then fail: never corrupt. */
	ck_assert_int_eq(put_buf(o, 8 * K4, K4, true), 1);
	ck_assert_int_eq(put_buf(o, 9 * K4, K4, true), -EAGAIN); /* reclaim: all pinned */
	ck_assert_uint_eq(tu_stats(d).charged_bytes, 5 * K4);
	tu_check(e);
	/* Raising it again admits more. */
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, US_UNLIMITED), 0);
	ck_assert_int_eq(put_buf(o, 9 * K4, K4, true), 1);
	/* The root's max bounds everyone. */
	ck_assert_int_eq(us_domain_set_limit(us_engine_root(e), US_LIMIT_MAX, 6 * K4), 0);
	ck_assert_int_eq(put_buf(o, 10 * K4, K4, true), -EAGAIN);
	tu_check(e);
	clean_all(&t, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_effective_limits)
{
	us_engine *e = tu_engine(1000 * K4);
	struct tb t;
	us_domain *root = us_engine_root(e), *p = mk(e, NULL, "p"), *c = mk(e, p, "c"),
		  *s = mk(e, p, "s");
	struct us_domain_limits l = { .size = sizeof(l) };
	us_object *os;
	uint64_t v;

	tb_init(&t, e, true, false);
	os = obj(&t, s);
	/* Defaults: unlimited, bounded by the root's memory: 10 % and 20 %. */
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.max_bytes, 1000 * K4);
	ck_assert_uint_eq(l.high_bytes, 1000 * K4);
	ck_assert_uint_eq(l.bg_thresh_bytes, 100 * K4);
	ck_assert_uint_eq(l.dirty_thresh_bytes, 200 * K4);
	ck_assert_int_eq(us_domain_get_limit(c, US_LIMIT_DIRTY_RATIO, &v), 0);
	ck_assert_uint_eq(v, 20);
	/* A parent's max and a sibling's usage bound the child. */
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_MAX, 100 * K4), 0);
	ck_assert_int_eq(put_buf(os, 0, 40 * K4, true), 1);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.max_bytes, 60 * K4);
	ck_assert_uint_eq(l.bg_thresh_bytes, 6 * K4);
	ck_assert_uint_eq(l.dirty_thresh_bytes, 12 * K4);
	/* Bytes replace the ratio and clear it; a parent's threshold bounds. */
	ck_assert_int_eq(us_domain_set_limit(c, US_LIMIT_DIRTY_BYTES, 30 * K4), 0);
	ck_assert_int_eq(us_domain_get_limit(c, US_LIMIT_DIRTY_RATIO, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.dirty_thresh_bytes, 20 * K4); /* p: 20 % of 100 */
	ck_assert_int_eq(us_domain_set_limit(c, US_LIMIT_DIRTY_BYTES, 8 * K4), 0);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.dirty_thresh_bytes, 8 * K4);
	ck_assert_uint_eq(l.bg_thresh_bytes, 6 * K4);
	/* Background at or above dirty is halved, as Linux does. */
	ck_assert_int_eq(us_domain_set_limit(c, US_LIMIT_DIRTY_BG_BYTES, 9 * K4), 0);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.bg_thresh_bytes, 4 * K4);
	ck_assert_int_eq(us_domain_set_limit(c, US_LIMIT_DIRTY_RATIO, 50), 0);
	ck_assert_int_eq(us_domain_get_limit(c, US_LIMIT_DIRTY_BYTES, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(us_domain_set_limit(c, US_LIMIT_DIRTY_BG_RATIO, 5), 0);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.bg_thresh_bytes, 3 * K4);
	ck_assert_uint_eq(l.dirty_thresh_bytes, 20 * K4);
	/* high: bounded like max. */
	ck_assert_int_eq(us_domain_set_limit(p, US_LIMIT_HIGH, 50 * K4), 0);
	ck_assert_int_eq(us_domain_effective_limits(c, &l), 0);
	ck_assert_uint_eq(l.high_bytes, 10 * K4);
	ck_assert_int_eq(us_domain_effective_limits(root, &l), 0);
	ck_assert_uint_eq(l.max_bytes, 1000 * K4);
	ck_assert_uint_eq(l.high_bytes, 1000 * K4);
	clean_all(&t, &os, 1);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_high_events)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d = mk(e, NULL, "d");
	us_object *o;

	tb_init(&t, e, true, false);
	o = obj(&t, d);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_HIGH, 2 * K4), 0);
	ck_assert_int_eq(put_buf(o, 0, 2 * K4, false), 1);
	ck_assert_uint_eq(tu_stats(d).high_events, 0);
	/* Crossing high evicts the clean unreferenced data down to it. */
	ck_assert_int_eq(put_buf(o, 2 * K4, K4, false), 1);
	ck_assert_uint_eq(tu_stats(d).high_events, 1);
	ck_assert_uint_eq(tu_stats(d).charged_bytes, K4);
	ck_assert_uint_eq(tu_stats(d).high_delay_ns, 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

/*
 * Above high with nothing to evict (the buffers are referenced): each
 * charge earns the writer a delay, 2 s * min(1, (4 * overage / high)^2),
 * returned with its next pause: it grows with the square of the overage
 * and stops at the 2 s cap.
 */
START_TEST(test_high_penalty)
{
	us_engine *e = tu_engine(1u << 30);
	const uint64_t bs = 64 * 1024, high = 16 * bs;
	struct tb t;
	us_domain *d = mk(e, NULL, "d");
	us_buf *held[24];
	us_object *o;
	uint64_t p, prev = 0;
	int i;

	tb_init(&t, e, true, false);
	o = obj(&t, d);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_HIGH, high), 0);
	for (i = 0; i < 24; i++) {
		ck_assert_int_eq(us_buf_get(o, (uint64_t)i * bs, bs, US_GET_NODATA, &held[i]), 1);
		ck_assert_int_eq(us_object_balance(o, &p), 0);
		if (i < 16) {
			ck_assert_uint_eq(p, 0);
			continue;
		}
		{
			double r = 4.0 * (double)((uint64_t)(i - 15) * bs) / (double)high;
			uint64_t want = (uint64_t)(2e9 * (r * r > 1.0 ? 1.0 : r * r));

			ck_assert_uint_eq(p, want);
		}
		ck_assert_uint_ge(p, prev);
		ck_assert_uint_le(p, 2000000000u);
		prev = p;
	}
	ck_assert_uint_eq(prev, 2000000000u); /* the cap, from 25 % over */
	ck_assert_uint_eq(tu_stats(d).high_events, 8);
	ck_assert_uint_gt(tu_stats(d).high_delay_ns, 8000000000u);
	ck_assert_uint_eq(tu_stats(d).charged_bytes, 24 * bs); /* max is not high */
	for (i = 0; i < 24; i++)
		ck_assert_int_eq(us_buf_put(held[i]), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

START_TEST(test_stat_text)
{
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d = mk(e, NULL, "d");
	us_object *o;
	char buf[2048], small[8];
	int n;

	tb_init(&t, e, true, false);
	o = obj(&t, d);
	ck_assert_int_eq(put_buf(o, 0, 3 * K4, true), 1);
	n = us_domain_stat_text(d, NULL, 0);
	ck_assert_int_gt(n, 0);
	ck_assert_int_lt(n, (int)sizeof(buf));
	ck_assert_int_eq(us_domain_stat_text(d, buf, sizeof(buf)), n);
	ck_assert_uint_eq(strlen(buf), (size_t)n);
	ck_assert_ptr_nonnull(strstr(buf, "charged 12288\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\ndirty 12288\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\nunstable 0\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\ncharges 1\n"));
	ck_assert_int_eq(us_domain_stat_text(d, small, sizeof(small)), n);
	ck_assert_str_eq(small, "charged");
	clean_all(&t, &o, 1);
	ck_assert_int_eq(us_engine_destroy(e), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("domain");
	TCase *tc = tcase_create("hierarchy");

	tcase_add_test(tc, test_tree);
	tcase_add_test(tc, test_names_at_scale);
	tcase_add_test(tc, test_hierarchical_charging);
	tcase_add_test(tc, test_parent_max_bounds_subtree);
	tcase_add_test(tc, test_lower_max_at_runtime);
	tcase_add_test(tc, test_effective_limits);
	tcase_add_test(tc, test_high_events);
	tcase_add_test(tc, test_high_penalty);
	tcase_add_test(tc, test_stat_text);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
