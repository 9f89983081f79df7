/*
 * The writer caches' lock-free credit: how much a thread may dirty without
 * the engine lock, granted from the throttle's margins (throttle.c), and
 * taken back when a charge leaves less room than was granted.
 *
 * SPDX-License-Identifier: MIT
 *
 * Below freerun no writer pauses, so the only question the first dirtying
 * of a buffer must answer is whether it stays below freerun. A writer
 * thread's cache (tcache.c) is granted credit in one domain: a quarter of
 * the smallest margin on the domain's chain, at most US_CREDIT_MAX, where
 * the margin of a domain is bg_thresh - pinned - granted (granted: the
 * credit outstanding in its subtree, in every thread's cache). The thread
 * spends it with plain stores, without the engine lock (buf.c); the next
 * lock holder accounts what was spent. The margin is taken to the
 * background threshold, below freerun, so that crossing it always goes
 * through the locked path, which wakes the flushers. Since every grant fits
 * inside every margin on the chain, pinned plus all outstanding credit
 * stays below each threshold: the cheap check is exact where it matters.
 * Near it the margin, hence the grant, shrinks to nothing and every
 * dirtying takes the locked, exact path.
 *
 * Locked dirtyings do not spend credit, so they can take pinned + granted
 * past a background threshold (a large buffer, or a writer with no credit
 * beside one with some). The locked path checks: when it happens, the
 * credit of that domain's subtree is taken back like on a limit change.
 * Limit changes renew the credit generation of the domains concerned:
 * credit granted under the old thresholds can no longer be spent (but for
 * a writer already past the check, one buffer each), and stays counted in
 * granted, which only makes later grants smaller, until its thread comes
 * back to the locked path or exits and gives it back. US_CREDIT_MAX (8 MiB)
 * bounds what an idle thread can hold that way. A revoke is due once per
 * grant (grant_seq, revoked_at), not at every check while such stale credit
 * is out. Thresholds also shrink when a charge anywhere under a max'd
 * ancestor eats the headroom: after each charge, while credit is out, every
 * cache's credit is checked against its domain's chain again
 * (us__credit_police()).
 */
#include "internal.h"

#define US_CREDIT_MIN (64u << 10)
#define US_CREDIT_MAX (8u << 20)

bool us__credit_grant(struct us_tcache *tc, us_object *o)
{
	struct us_margins t;
	us_domain *d = o->domain, *a;
	int64_t have;
	uint64_t g;

	if (!tc)
		return false;
	if (atomic_load_explicit(&tc->dom, memory_order_relaxed) != d ||
	    atomic_load_explicit(&tc->wb, memory_order_relaxed) != o->wb ||
	    tc->gen != atomic_load_explicit(&d->credit_gen, memory_order_relaxed)) {
		/* A queue holds buffers of its credit's domain only. */
		if (atomic_load_explicit(&tc->dom, memory_order_relaxed) != d)
			us__tcache_drain_one(o->engine, tc);
		us__tcache_return(tc);
		atomic_store_explicit(&tc->dom, d, memory_order_relaxed);
		atomic_store_explicit(&tc->wb, o->wb, memory_order_relaxed);
		tc->gen = atomic_load_explicit(&d->credit_gen, memory_order_relaxed);
	}
	have = atomic_load_explicit(&tc->credit, memory_order_relaxed);
	/*
	 * Only the margin decides, not whether pinned alone is past freerun:
	 * pinned may not have drained yet, but pinned + granted has (a drain
	 * moves bytes from one to the other), and a margin means that even
	 * the undrained bytes are below the background threshold. Where other
	 * contexts share a domain of the chain, the margin is the context's,
	 * to its share's background threshold (SHARES): a context not
	 * measured yet gets one run, and its writers must not dirty past it
	 * without a look, at memory speed.
	 */
	us__throttle_margins(d, o->wb, &t);
	if (t.spent)
		us__credit_revoke(t.spent);
	/* Beside other writers of its context that the engine measured held
	 * (its ratelimit estimated, below 3/4 of the link's), under a limit,
	 * every dirtying is paced (throttle()), and a lock-free one would be
	 * paced by nothing: with credit, 64 writers in 1 GiB whose threshold
	 * rose while the first commit was out dirtied 1 to 21 MiB each in a
	 * tenth of a second, in the order they came for it. Before the first
	 * estimate (a guess, the link shared by the writers seen) credit is
	 * granted: threads that merely run side by side keep the lock-free
	 * path, and lose it only while the engine holds them. */
	if (t.below != UINT64_MAX && o->wb->ratelimit && us__pace_shared(o)) {
		if (have > 0) {
			for (a = d; a; a = a->parent)
				a->granted -= (uint64_t)have;
			atomic_store_explicit(&tc->credit, 0, memory_order_relaxed);
		}
		return false;
	}
	g = t.margin == UINT64_MAX ? US_CREDIT_MAX : min_u64(t.margin / 4, US_CREDIT_MAX);
	if (g < US_CREDIT_MIN || have >= (int64_t)(g / 2))
		return have > 0;
	for (a = d; a; a = a->parent) {
		a->granted += g;
		a->grant_seq++;
	}
	atomic_store_explicit(&tc->credit, have + (int64_t)g, memory_order_relaxed);
	return true;
}

void us__credit_police(us_engine *e)
{
	struct us_list *pos;

	us_list_for_each (pos, &e->tcaches) {
		struct us_tcache *tc = us_container_of(pos, struct us_tcache, link);
		struct us_margins t;
		us_domain *d = atomic_load_explicit(&tc->dom, memory_order_relaxed);

		if (!d || atomic_load_explicit(&tc->credit, memory_order_relaxed) <= 0 ||
		    tc->gen != atomic_load_explicit(&d->credit_gen, memory_order_relaxed))
			continue;
		us__throttle_margins(d, NULL, &t);
		if (t.spent)
			us__credit_revoke(t.spent);
	}
}
