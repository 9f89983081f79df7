/*
 * The resident payload pool: an arena keeps the pages of evicted payloads
 * (no purge, no decay) while the domains stay under the root's max, so the
 * next buffer reuses them without a page fault; it gives them back when a
 * max is lowered, on us_domain_purge(), and when the pages kept by several
 * arenas would take the process past the root's max.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef US_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

static void refresh(void)
{
	uint64_t epoch = 1;
	size_t sz = sizeof(epoch);

	ck_assert_int_eq(mallctl("epoch", &epoch, &sz, &epoch, sz), 0);
}

static uint64_t arena_u64(unsigned ind, const char *what)
{
	uint64_t v = 0;
	size_t sz = sizeof(v);
	char name[96];

	refresh();
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", ind, what);
	ck_assert_int_eq(mallctl(name, &v, &sz, NULL, 0), 0);
	return v;
}

static long minor_faults(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_minflt;
}

static size_t arena_resident(unsigned ind)
{
	size_t v = 0, sz = sizeof(v);
	char name[96];

	refresh();
	snprintf(name, sizeof(name), "stats.arenas.%u.resident", ind);
	ck_assert_int_eq(mallctl(name, &v, &sz, NULL, 0), 0);
	return v;
}

/* Writes n clean 64 KiB buffers from offset first, touching every page,
 * the clock moving 1 s between them (past every reclaim_wait). */
static void fill(us_engine *e, us_object *o, uint64_t first, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		us_buf *b;

		ck_assert_int_eq(us_buf_get(o, (first + (uint64_t)i) << 16, 1 << 16, 0, &b), 1);
		memset(us_buf_data(b), 0x5a, 1 << 16);
		ck_assert_int_eq(us_buf_put(b), 0);
		ck_assert_int_eq(us_engine_clock_advance(e, US_SEC), 0);
	}
}
#endif

/*
 * A domain of 8 MiB writes 32 MiB: 384 evictions, none of which purges its
 * arena (jemalloc's count of purged pages does not move); the arena keeps
 * about 8 MiB resident, and the 24 MiB written after the first 8 reuse its
 * pages without faulting them in again (fewer minor faults than the 8,192
 * pages written; each would fault if the payload were zeroed by a purge). us_domain_purge() then gives the kept pages back,
 * and lowering the max purges too.
 */
START_TEST(test_evictions_keep_pages)
{
#ifndef US_WITH_JEMALLOC
	fprintf(stderr, "residentpool: built without jemalloc, nothing to measure\n");
#else
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d;
	us_object *o;
	uint64_t purged0, purged1;
	size_t resident;
	long faults;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d), 0);
	ck_assert(d->own_arena);
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 8u << 20), 0);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	purged0 = arena_u64(d->arena, "dirty_purged");
	faults = minor_faults();
	fill(e, o, 0, 512);
	faults = minor_faults() - faults;
	ck_assert_uint_eq(tu_stats(d).evictions, 384);
	purged1 = arena_u64(d->arena, "dirty_purged");
	resident = arena_resident(d->arena);
	fprintf(stderr,
		"residentpool: 384 evictions, %llu pages purged, arena resident %zu KiB, %ld faults\n",
		(unsigned long long)(purged1 - purged0), resident >> 10, faults);
	/* ThreadSanitizer's shadow memory faults in beside every page the
	 * test touches: the process's fault count says nothing there; the
	 * purge count below does. */
#if !defined(__SANITIZE_THREAD__)
	ck_assert_int_lt(faults, 4096);
#endif
	ck_assert_uint_eq(purged1, purged0);
	ck_assert_uint_ge(resident, 8u << 20);
	ck_assert_uint_le(resident, 10u << 20);

	/* Lowering the max gives back what the arena kept beyond it. */
	ck_assert_int_eq(us_domain_set_limit(d, US_LIMIT_MAX, 2u << 20), 0);
	ck_assert_uint_gt(arena_u64(d->arena, "dirty_purged"), purged1);
	ck_assert_uint_lt(arena_resident(d->arena), 4u << 20);

	/* us_domain_purge() after evictions by the (unchanged) max. */
	fill(e, o, 1024, 64);
	purged1 = arena_u64(d->arena, "dirty_purged");
	ck_assert_int_eq(us_domain_purge(d), 0);
	ck_assert_uint_gt(arena_u64(d->arena, "dirty_purged"), purged1);
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
#endif
}
END_TEST

/*
 * Two top-level domains, each with its arena, under a root of 8 MiB: a
 * fills 8 MiB, then b writes 8 MiB, evicting a's buffers. The pages a's
 * arena keeps plus b's charge would be twice the root's max: the arenas are
 * purged, and the two arenas' resident memory stays within the root's max
 * and an eighth (plus a little for the arenas' own metadata).
 */
START_TEST(test_arenas_bounded_by_root)
{
#ifndef US_WITH_JEMALLOC
	fprintf(stderr, "residentpool: built without jemalloc, nothing to measure\n");
#else
	us_engine *e = tu_engine(8u << 20);
	struct tb t;
	us_domain *a, *b;
	us_object *oa, *ob;
	size_t ra, rb;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_domain_create(e, NULL, "a", 0, &a), 0);
	ck_assert_int_eq(us_domain_create(e, NULL, "b", 0, &b), 0);
	ck_assert(a->own_arena && b->own_arena);
	ck_assert_int_eq(us_object_create(t.backend, a, NULL, &oa), 0);
	ck_assert_int_eq(us_object_create(t.backend, b, NULL, &ob), 0);
	fill(e, oa, 0, 128);
	fill(e, ob, 0, 128);
	ck_assert_uint_eq(tu_stats(a).evictions, 128);
	ra = arena_resident(a->arena);
	rb = arena_resident(b->arena);
	fprintf(stderr,
		"residentpool: arenas a %zu KiB, b %zu KiB resident under a root of 8 MiB\n",
		ra >> 10, rb >> 10);
	ck_assert_uint_le(ra + rb, (9u << 20) + (1u << 20));
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
#endif
}
END_TEST

/*
 * A run of payloads freed together is taken again: 32 MiB of 64 KiB
 * buffers dropped in offset order (as a writer drops clean chunks behind,
 * or a reclaim batch evicts), then 32 MiB written again. Merged, the free
 * run would be 512 times the payload size, past what jemalloc carves an
 * allocation out of (64 times), and the second 32 MiB would map fresh
 * memory: the arena's resident memory stays where the first 32 MiB put it,
 * nothing is purged, and the second pass faults in no new pages.
 */
START_TEST(test_dropped_run_reused)
{
#ifndef US_WITH_JEMALLOC
	fprintf(stderr, "residentpool: built without jemalloc, nothing to measure\n");
#else
	enum { N = 512 };
	static us_buf *bufs[N];
	us_engine *e = tu_engine(1u << 30);
	struct tb t;
	us_domain *d;
	us_object *o;
	size_t r1, r2, mapped1, mapped2;
	uint64_t purged;
	long faults;
	int pass, i;

	tb_init(&t, e, true, false);
	ck_assert_int_eq(us_domain_create(e, NULL, "d", US_DOMAIN_ARENA, &d), 0);
	ck_assert(d->own_arena);
	ck_assert_int_eq(us_object_create(t.backend, d, NULL, &o), 0);
	r1 = mapped1 = 0;
	purged = 0;
	faults = 0;
	for (pass = 0; pass < 2; pass++) {
		if (pass == 1)
			faults = minor_faults();
		for (i = 0; i < N; i++) {
			ck_assert_int_eq(us_buf_get(o, (uint64_t)i << 16, 1 << 16, 0, &bufs[i]), 1);
			memset(us_buf_data(bufs[i]), 0x5a, 1 << 16);
		}
		if (pass == 1)
			faults = minor_faults() - faults;
		for (i = 0; i < N; i++)
			ck_assert_int_eq(us_buf_drop(bufs[i]), 0);
		if (pass == 0) {
			r1 = arena_resident(d->arena);
			mapped1 = (size_t)arena_u64(d->arena, "mapped");
			purged = arena_u64(d->arena, "dirty_purged");
		}
	}
	r2 = arena_resident(d->arena);
	mapped2 = (size_t)arena_u64(d->arena, "mapped");
	fprintf(stderr,
		"residentpool: 32 MiB dropped and written again: resident %zu -> %zu KiB, "
		"mapped %zu -> %zu KiB, %ld faults\n",
		r1 >> 10, r2 >> 10, mapped1 >> 10, mapped2 >> 10, faults);
	ck_assert_uint_ge(r1, 32u << 20);
	ck_assert_uint_le(r2, r1 + (1u << 20));
	ck_assert_uint_le(mapped2, mapped1 + (1u << 20));
	ck_assert_uint_eq(arena_u64(d->arena, "dirty_purged"), purged);
#if !defined(__SANITIZE_THREAD__)
	ck_assert_int_lt(faults, 1024); /* 8,192 pages written */
#endif
	tu_check(e);
	ck_assert_int_eq(us_engine_destroy(e), 0);
#endif
}
END_TEST

#ifdef US_WITH_JEMALLOC
/* Whether the mapping that holds p is advised MADV_HUGEPAGE ("hg" in its
 * VmFlags in /proc/self/smaps); -1 when p is in none. */
static int advised_huge(const void *p)
{
	uintptr_t a = (uintptr_t)p, lo, hi;
	char line[512];
	int in = 0, found = -1;
	FILE *f = fopen("/proc/self/smaps", "r");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long l, h;

		if (sscanf(line, "%lx-%lx ", &l, &h) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			lo = l;
			hi = h;
			in = a >= lo && a < hi;
		} else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			found = strstr(line, " hg") != NULL;
			break;
		}
	}
	fclose(f);
	return found;
}

static void *count_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	if (kind == US_ALLOC_PAYLOAD)
		++*(int *)ctx;
	return malloc(size);
}

static void count_free(void *ctx, void *p, size_t size, enum us_alloc_kind kind)
{
	(void)ctx;
	(void)size;
	(void)kind;
	free(p);
}
#endif

/*
 * Engine option hugepages: the payloads of an engine that asks for them lie
 * in mappings advised MADV_HUGEPAGE, those of one that does not (the
 * default) and the process's own heap do not; purging and destroying such an
 * arena still give its pages back (jemalloc's hooks, forwarded); with
 * allocator hooks the hooks serve the payloads as before; and any value but
 * 0 and 1 is refused.
 */
START_TEST(test_hugepages_advised)
{
#ifndef US_WITH_JEMALLOC
	fprintf(stderr, "residentpool: built without jemalloc, nothing to measure\n");
#else
	struct us_engine_options o;
	struct us_alloc_hooks hooks = { count_alloc, count_free, NULL };
	int hooked = 0, mode;
	void *heap;

	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
		fprintf(stderr, "residentpool: no transparent huge pages here\n");
		return;
	}
	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = 64u << 20;
	o.hugepages = 2;
	ck_assert_int_eq(us_engine_create(&o, &(us_engine *){ NULL }), -EINVAL);
	for (mode = 0; mode <= 1; mode++) {
		us_engine *e;
		struct tb t;
		us_object *obj;
		us_buf *b[8];
		uint64_t purged;
		int i;

		o.hugepages = (unsigned)mode;
		ck_assert_int_eq(us_engine_create(&o, &e), 0);
		ck_assert(e->root->own_arena);
		tb_init(&t, e, true, false);
		ck_assert_int_eq(us_object_create(t.backend, e->root, NULL, &obj), 0);
		for (i = 0; i < 8; i++) {
			ck_assert_int_eq(us_buf_get(obj, (uint64_t)i << 20, 1u << 20, 0, &b[i]), 1);
			memset(us_buf_data(b[i]), 0x5a, 1u << 20);
			ck_assert_int_eq(advised_huge(us_buf_data(b[i])), mode);
		}
		for (i = 0; i < 8; i++)
			ck_assert_int_eq(us_buf_drop(b[i]), 0); /* and its reference */
		purged = arena_u64(e->root->arena, "dirty_purged");
		ck_assert_int_eq(us_domain_purge(e->root), 0);
		ck_assert_uint_gt(arena_u64(e->root->arena, "dirty_purged"), purged);
		ck_assert_uint_lt(arena_resident(e->root->arena), 2u << 20);
		tu_check(e);
		ck_assert_int_eq(us_engine_destroy(e), 0);
	}
	heap = malloc(8u << 20);
	ck_assert_ptr_nonnull(heap);
	ck_assert_int_eq(advised_huge(heap), 0);
	free(heap);

	o.alloc = &hooks;
	hooks.ctx = &hooked;
	o.hugepages = 1;
	{
		us_engine *e;
		struct tb t;
		us_object *obj;
		us_buf *b;

		ck_assert_int_eq(us_engine_create(&o, &e), 0);
		ck_assert(!e->root->has_arena);
		tb_init(&t, e, true, false);
		ck_assert_int_eq(us_object_create(t.backend, e->root, NULL, &obj), 0);
		ck_assert_int_eq(us_buf_get(obj, 0, 1u << 20, 0, &b), 1);
		ck_assert_int_eq(hooked, 1);
		ck_assert_int_eq(us_buf_drop(b), 0);
		ck_assert_int_eq(us_engine_destroy(e), 0);
	}
#endif
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("residentpool");
	TCase *tc = tcase_create("residentpool");

	tcase_add_test(tc, test_evictions_keep_pages);
	tcase_add_test(tc, test_arenas_bounded_by_root);
	tcase_add_test(tc, test_dropped_run_reused);
	tcase_add_test(tc, test_hugepages_advised);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
