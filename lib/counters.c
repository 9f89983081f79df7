/*
 * A domain's counters and events, and the set-up of its fields.
 *
 * SPDX-License-Identifier: MIT
 *
 * Every counter of a domain covers its whole subtree (invariant I1), so a
 * change to a buffer walks from its domain up to the root: O(depth), and
 * reading any domain's figures is O(1).
 */
#include "internal.h"

void us__domain_add(us_domain *d, size_t field, int64_t delta)
{
	for (; d; d = d->parent) {
		uint64_t *c = (uint64_t *)((char *)&d->c + field);

		assert(delta >= 0 || *c >= (uint64_t)-delta);
		*c += (uint64_t)delta;
		if (field == US_COUNTER(charged) && d->c.charged > d->peak_charged)
			d->peak_charged = d->c.charged;
	}
}

void us__domain_event(us_domain *d, enum us_event ev, uint64_t n)
{
	for (; d; d = d->parent)
		d->ev[ev] += n;
}

void us__domain_init(us_domain *d, us_engine *e, us_domain *parent, const char *name,
		     uint64_t max)
{
	d->engine = e;
	d->credit_gen = us__gen_next();
	d->parent = parent;
	d->depth = parent ? parent->depth + 1 : 0;
	strcpy(d->name, name);
	us_list_init(&d->children);
	us_list_init(&d->sibling);
	us_list_init(&d->lru);
	us_list_init(&d->wbs);
	us__turnq_init(&d->gate_q);
	us__turnq_init(&d->room_q);
	d->max = max;
	d->high = US_UNLIMITED;
	d->bg_ratio = 10;
	d->dirty_ratio = 20;
}

/* Makes the lock-free credit of d's subtree unspendable: a new generation
 * for each domain, which the writer caches holding credit see. */
void us__credit_revoke(us_domain *d)
{
	struct us_list *pos;

	d->revoked_at = d->grant_seq;
	atomic_store_explicit(&d->credit_gen, us__gen_next(), memory_order_relaxed);
	us_list_for_each (pos, &d->children)
		us__credit_revoke(us_container_of(pos, us_domain, sibling));
}

void us__reclaim_mark(us_domain *d, uint64_t now)
{
	d->reclaiming = true;
	d->reclaim_last_ns = now;
	d->reclaim_seen = d->progress;
	d->reclaim_stalls = 0;
}

void us__reclaim_unmark(us_domain *d)
{
	d->reclaiming = false;
	d->reclaim_stalls = 0;
	d->reclaim_last_ns = 0;
}
