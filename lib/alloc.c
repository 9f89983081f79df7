/*
 * Memory: engine records and buffer payloads.
 *
 * SPDX-License-Identifier: MIT
 *
 * Three sources, in order of precedence:
 *  1. the engine's allocator hooks, when given, for everything;
 *  2. for payloads, when built with US_WITH_JEMALLOC: jemalloc's *allocx
 *     entry points in dedicated arenas, without the thread cache, so that
 *     purging an arena after reclaim really returns its pages (with engine
 *     option hugepages, arenas whose memory is advised MADV_HUGEPAGE);
 *  3. the C allocator.
 *
 * The library never replaces the host's malloc. Debian's jemalloc exports
 * unprefixed malloc too, but a program linked against libunstable.so finds
 * the C library's malloc first (libc precedes jemalloc in the breadth-first
 * lookup order), and this file calls only mallocx/sdallocx/mallctl. A program
 * that links the static archive with -ljemalloc does get jemalloc's malloc for
 * the whole process: see the README.
 *
 * Arenas are not free (an epoch refresh walks every arena), so only a bounded
 * number of domains own one (engine option max_arenas); the others share
 * their nearest ancestor's.
 */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/types.h>

#ifdef US_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

void *us__meta_alloc(us_engine *e, size_t size)
{
	void *p;

	if (e->have_hooks) {
		p = e->hooks.alloc(e->hooks.ctx, size, US_ALLOC_META);
		if (p)
			memset(p, 0, size);
		return p;
	}
	return calloc(1, size);
}

void us__meta_free(us_engine *e, void *p, size_t size)
{
	if (!p)
		return;
	if (e->have_hooks)
		e->hooks.free(e->hooks.ctx, p, size, US_ALLOC_META);
	else
		free(p);
}

#ifdef US_WITH_JEMALLOC
/*
 * Payloads of whole pages are page-aligned: jemalloc otherwise places a
 * large allocation at a random cache-line offset inside one more page
 * (cache-oblivious placement), which costs a page per payload that the
 * engine's charged bytes do not show (6 % at 64 KiB, 25 % at 16 KiB) and
 * keeps hosts from handing payloads to O_DIRECT. The same flags free it.
 */
static int payload_flags(size_t size)
{
	if (size >= 16384 && size % 4096 == 0)
		return MALLOCX_TCACHE_NONE | MALLOCX_ALIGN(4096);
	return MALLOCX_TCACHE_NONE;
}
#endif

void *us__payload_alloc(us_engine *e, const us_domain *d, size_t size, bool zero)
{
	void *p;

	if (e->have_hooks) {
		p = e->hooks.alloc(e->hooks.ctx, size, US_ALLOC_PAYLOAD);
		if (p && zero)
			memset(p, 0, size);
		return p;
	}
#ifdef US_WITH_JEMALLOC
	/*
	 * Zeroed here, not with MALLOCX_ZERO: jemalloc zeroes a reused dirty
	 * extent by purging it (madvise DONTNEED), which hands the pages back
	 * and faults them in again, the cost the resident pool is there to
	 * avoid.
	 */
	p = mallocx(size, (d->has_arena ? MALLOCX_ARENA(d->arena) : 0) | payload_flags(size));
	if (p && zero)
		memset(p, 0, size);
	return p;
#else
	(void)d;
	return zero ? calloc(1, size) : malloc(size);
#endif
}

void us__payload_free(us_engine *e, void *p, size_t size)
{
	if (!p)
		return;
	if (e->have_hooks) {
		e->hooks.free(e->hooks.ctx, p, size, US_ALLOC_PAYLOAD);
		return;
	}
#ifdef US_WITH_JEMALLOC
	sdallocx(p, size, payload_flags(size));
#else
	free(p);
#endif
}

#ifdef US_WITH_JEMALLOC
/*
 * The payload arenas' extent hooks: jemalloc's own, read from arena 0, with
 * these changes.
 *
 * Free extents are never merged (merge is NULL). jemalloc coalesces
 * adjacent free extents, and it does not carve an allocation out of a free
 * extent more than 64 times its size (opt.lg_extent_max_active_fit, which
 * only the host's malloc_conf can set). Payloads evicted or dropped in
 * file order coalesce past that within a few MiB; the arena then maps fresh
 * memory for every new payload, and the pool outgrows the charge until the
 * purge rule (reclaim.c) hands it back and each page faults in again.
 * unstable-fuse dropping clean 128 KiB chunks behind, a 300 MiB max and
 * 144 MiB charged: the daemon reached 510 MiB resident at 209 MB/s, and
 * 144 MiB at 543 MB/s with the pool reused. Unmerged, a freed payload is
 * taken again by the next one of its size.
 *
 * dalloc is NULL: jemalloc's own refuses to unmap when it retains (it
 * always does on Linux) and this tells it so without a call;
 * arenas.<i>.destroy still unmaps through destroy.
 *
 * With engine option hugepages (transparent huge pages for the pool), alloc
 * maps 2 MiB-aligned memory advised MADV_HUGEPAGE, so that a pool growing
 * into fresh memory takes one fault per 2 MiB instead of 512 (on a
 * paravirtualised guest a 4 KiB first touch costs about 15 us: 4 s per
 * GiB). Only these arenas get the advice: the process's heap keeps the
 * system's setting. Purging works as before (jemalloc's purge hooks),
 * splitting the huge pages it purges.
 */
#define US_HUGE_BYTES ((size_t)2 << 20)

static extent_hooks_t *pool_next; /* jemalloc's default hooks */
static extent_hooks_t pool_hooks, huge_hooks;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static bool pool_ok;

#ifdef MADV_HUGEPAGE
static void *huge_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t alignment,
			bool *zero, bool *commit, unsigned ind)
{
	void *p;

	(void)h;
	if (!new_addr && size >= US_HUGE_BYTES && alignment < US_HUGE_BYTES)
		alignment = US_HUGE_BYTES;
	p = pool_next->alloc(pool_next, new_addr, size, alignment, zero, commit, ind);
	if (p)
		(void)madvise(p, size, MADV_HUGEPAGE); /* advice: a refusal is harmless */
	return p;
}
#endif

static void pool_init(void)
{
	extent_hooks_t *def = NULL;
	size_t sz = sizeof(def);

	if (mallctl("arena.0.extent_hooks", &def, &sz, NULL, 0) != 0 || !def || !def->alloc)
		return;
	pool_next = def;
	pool_hooks = *def;
	pool_hooks.dalloc = NULL;
	pool_hooks.merge = NULL;
	huge_hooks = pool_hooks;
#ifdef MADV_HUGEPAGE
	huge_hooks.alloc = huge_alloc;
#endif
	pool_ok = true;
}

/* The hooks for a new arena of e: NULL for jemalloc's own. */
static extent_hooks_t *arena_hooks(const us_engine *e)
{
	pthread_once(&pool_once, pool_init);
	if (!pool_ok)
		return NULL;
	return e->hugepages ? &huge_hooks : &pool_hooks;
}
#endif

bool us__arena_create(us_engine *e, unsigned *ind)
{
#ifdef US_WITH_JEMALLOC
	size_t sz = sizeof(*ind);
	ssize_t never = -1;
	extent_hooks_t *hooks;
	char name[64];

	if (e->have_hooks || e->narenas >= e->max_arenas)
		return false;
	hooks = arena_hooks(e);
	if (mallctl("arenas.create", ind, &sz, hooks ? &hooks : NULL, hooks ? sizeof(hooks) : 0) !=
	    0)
		return false;
	/*
	 * Freed payloads stay resident in the arena, to be reused by the next
	 * buffer without a fault: no decay. The engine purges explicitly
	 * (us__victims_release(), us_domain_set_limit(), us_domain_purge()).
	 */
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", *ind);
	mallctl(name, NULL, NULL, &never, sizeof(never));
	snprintf(name, sizeof(name), "arena.%u.muzzy_decay_ms", *ind);
	mallctl(name, NULL, NULL, &never, sizeof(never));
	e->narenas++;
	return true;
#else
	(void)e;
	(void)ind;
	return false;
#endif
}

void us__arena_destroy(us_engine *e, unsigned ind)
{
#ifdef US_WITH_JEMALLOC
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.destroy", ind);
	mallctl(name, NULL, NULL, NULL, 0);
	e->narenas--;
#else
	(void)e;
	(void)ind;
#endif
}

void us__arena_purge(us_engine *e, unsigned ind)
{
#ifdef US_WITH_JEMALLOC
	char name[64];

	(void)e;
	snprintf(name, sizeof(name), "arena.%u.purge", ind);
	mallctl(name, NULL, NULL, NULL, 0);
#else
	(void)e;
	(void)ind;
#endif
}

uint64_t us__arenas_dirty(const unsigned *ind, unsigned n)
{
#ifdef US_WITH_JEMALLOC
	uint64_t epoch = 1, total = 0;
	size_t sz = sizeof(epoch), pdirty, psz, page = 0;
	char name[64];
	unsigned i;

	if (mallctl("epoch", &epoch, &sz, &epoch, sz) != 0)
		return UINT64_MAX;
	psz = sizeof(page);
	if (mallctl("arenas.page", &page, &psz, NULL, 0) != 0)
		return UINT64_MAX;
	for (i = 0; i < n; i++) {
		psz = sizeof(pdirty);
		snprintf(name, sizeof(name), "stats.arenas.%u.pdirty", ind[i]);
		if (mallctl(name, &pdirty, &psz, NULL, 0) != 0)
			return UINT64_MAX; /* no statistics: purge as before */
		total += (uint64_t)pdirty * page;
	}
	return total;
#else
	(void)ind;
	(void)n;
	return 0;
#endif
}

void us__buf_free(us_engine *e, us_buf *b)
{
	us__payload_free(e, b->data, b->length);
	us__meta_free(e, b, sizeof(*b));
}
