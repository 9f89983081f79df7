/*
 * Charging and reclaim.
 *
 * SPDX-License-Identifier: MIT
 *
 * A charge of n bytes to domain D is admitted only if, for D and every
 * ancestor A, A.charged + n <= A.max after eviction (invariant I3: max is
 * never crossed, not even for an instant). The check comes first and evicts
 * nothing when it cannot succeed: a domain A can free at most A.evictable
 * bytes (its clean unreferenced buffers), so the charge fails with -ENOMEM,
 * leaving everything as it was, when A.charged - A.evictable + n > A.max for
 * any A on the path. Otherwise eviction runs from D upwards: for each A over
 * its limit, the least recently used clean unreferenced buffers of A's
 * subtree go first.
 *
 * Eviction works in two halves. Under the engine lock a victim is detached
 * (out of its object's index and LRU, uncharged) and put on a private list;
 * after the lock is dropped the evict callback is told and the memory freed
 * (us__victims_release()). The victim's object is kept alive meanwhile by its
 * busy count.
 *
 * Waiting for writeback and commits to free memory (memcg-style reclaim
 * throttling) belongs to the reclaim policy built on top of this.
 */
#include "internal.h"

/*
 * EVICTION ORDER (invariant I8). Stamps are unique and say the order in
 * which buffers are to go (ordinary ones count up from 2^62, those written
 * back for reclaim count down from it, so they go first). Each domain keeps
 * the smallest stamp of its subtree's LRU lists, lru_min, and a tree of its
 * children with evictable buffers keyed by theirs. The victim for a subtree
 * is found by walking down from its top, at each level taking the smaller
 * of the domain's own LRU head and its first child: O(depth log n), however
 * many domains there are. Every change of a domain's LRU list calls
 * us__lru_fix(), which moves the domain in its parent's tree when its
 * lru_min changed, and so on up; appending a new stamp at a list's tail, the
 * usual case, changes nothing above the list.
 */
static uint64_t own_min(const us_domain *d)
{
	return us_list_empty(&d->lru) ? 0 : us_container_of(d->lru.next, us_buf, link)->lru_stamp;
}

static struct us_tnode *tree_first(struct us_tnode *t)
{
	if (t)
		while (t->left)
			t = t->left;
	return t;
}

/*
 * Changes the key of the node keyed old to key in place when that keeps the
 * tree ordered (key still between the node's neighbours), as it mostly does
 * when a domain's oldest buffer is evicted and its next one is still older
 * than the other domains'; returns false, changing nothing, otherwise.
 */
static bool tree_rekey(struct us_tnode *root, uint64_t old, uint64_t key)
{
	struct us_tnode *n = root, *pred = NULL, *succ = NULL;

	while (n && n->key != old) {
		if (old < n->key) {
			succ = n;
			n = n->left;
		} else {
			pred = n;
			n = n->right;
		}
	}
	if (!n)
		return false;
	if (n->left)
		for (pred = n->left; pred->right; pred = pred->right)
			;
	if (n->right)
		for (succ = n->right; succ->left; succ = succ->left)
			;
	if ((pred && pred->key >= key) || (succ && succ->key <= key))
		return false;
	n->key = key;
	return true;
}

void us__lru_fix(us_domain *d)
{
	/* d's own list changed; unless its head did, its oldest stamp did
	 * not (a buffer appended at the tail, one taken from the middle):
	 * nothing to read, not even the head buffer. */
	if (d->lru.next == d->lru_head)
		return;
	d->lru_head = d->lru.next;
	for (; d; d = d->parent) {
		struct us_tnode *k = tree_first(d->lru_kids);
		uint64_t m = own_min(d);

		if (k && (!m || k->key < m))
			m = k->key;
		if (m == d->lru_min)
			return;
		if (d->parent &&
		    !(d->lru_min && m && tree_rekey(d->parent->lru_kids, d->lru_min, m))) {
			if (d->lru_min)
				d->parent->lru_kids =
					us__tree_remove(d->parent->lru_kids, d->lru_min);
			if (m) {
				d->lru_node.key = m;
				d->lru_node.mark = 0;
				d->parent->lru_kids =
					us__tree_insert(d->parent->lru_kids, &d->lru_node);
			}
		}
		d->lru_min = m;
	}
}

/* The least recently used evictable buffer of d's subtree, or NULL. */
static us_buf *oldest_evictable(us_domain *d)
{
	while (d->lru_min) {
		struct us_tnode *k = tree_first(d->lru_kids);
		uint64_t m = own_min(d);

		if (m && (!k || m < k->key))
			return us_container_of(d->lru.next, us_buf, link);
		assert(k && k->key == d->lru_min);
		d = us_container_of(k, us_domain, lru_node);
	}
	return NULL;
}

void us__buf_uncharge(us_buf *b)
{
	us_object *o = b->obj;
	us_domain *d = o->domain;

	o->root = us__tree_remove(o->root, b->node.key);
	b->attached = false;
	o->nbufs--;
	us__domain_add(d, US_COUNTER(clean), -(int64_t)b->length);
	us__domain_add(d, US_COUNTER(charged), -(int64_t)b->length);
	us__domain_add(d, US_COUNTER(buffers), -1);
	us__domain_event(d, US_EV_UNCHARGES, 1);
}

void us__buf_detach(us_buf *b, struct us_list *victims)
{
	us_object *o = b->obj;
	us_domain *d = o->domain;

	assert(b->on_lru && b->attached && b->state == US_BUF_CLEAN && !b->refs);
	us_list_del(&b->link);
	b->on_lru = false;
	o->nlru--;
	us__lru_fix(d);
	us__domain_add(d, US_COUNTER(evictable), -(int64_t)b->length);
	us__buf_uncharge(b);
	us__domain_event(d, US_EV_EVICTIONS, 1);
	us__domain_progress(d, b->length);
	us__domain_event(d, US_EV_EVICTED_BYTES, b->length);
	o->busy++;
	us_list_add_tail(victims, &b->link);
}

int us__evict_to(us_domain *d, uint64_t target, struct us_list *victims)
{
	while (d->c.charged > target) {
		us_buf *b = oldest_evictable(d);

		if (!b)
			return -ENOMEM;
		us__buf_detach(b, victims);
	}
	return 0;
}

bool us__charge_possible(const us_domain *d, uint64_t len)
{
	for (; d; d = d->parent)
		if (d->max != US_UNLIMITED &&
		    (len > d->max || d->c.charged - d->c.evictable > d->max - len))
			return false;
	return true;
}

/*
 * Room under a max goes to the charges waiting for it in the order they
 * came (turn.c): the waiter o must let go first on its chain, or NULL.
 */
struct us_turn *us__room_ahead(us_object *o, uint64_t now)
{
	struct us_turn *h = NULL;
	us_domain *a;

	for (a = o->domain; a && !h; a = a->parent)
		h = us__turn_ahead(&a->room_q, &o->room, us__turn_key(o, now), now);
	return h;
}

bool us__charge_turn(us_object *o, uint64_t len)
{
	return us__charge_possible(o->domain, len) && !us__room_ahead(o, us__now(o->engine));
}

int us__charge_refused(us_domain *d, uint64_t len)
{
	us_domain *a;

	for (a = d; a; a = a->parent)
		if (a->max != US_UNLIMITED && len > a->max - a->c.charged)
			a->ev[US_EV_MAX_EVENTS]++;
	us__domain_event(d, US_EV_ENOMEM, 1);
	return -ENOMEM;
}

int us__charge(us_domain *d, uint64_t len, struct us_list *victims)
{
	us_domain *a;

	if (!us__charge_possible(d, len))
		return us__charge_refused(d, len);
	for (a = d; a; a = a->parent) {
		if (a->max != US_UNLIMITED && len > a->max - a->c.charged) {
			int rc;

			a->ev[US_EV_MAX_EVENTS]++;
			rc = us__evict_to(a, a->max - len, victims);
			assert(rc == 0);
			(void)rc;
		}
	}
	return 0;
}

/*
 * After eviction the payloads' pages are free in their arenas and stay
 * resident (no decay, us__arena_create()): the next buffer reuses them
 * without a page fault, and a purge per eviction (a madvise with its TLB
 * shootdown, then a refault per page) cost most of a write's time. They are
 * purged only when the pages the arenas keep plus the root's charge exceed
 * the root's max by an eighth (several arenas each keeping its peak), checked
 * at most once per reclaim_wait; explicitly by us_domain_purge(); and when a
 * max is lowered (us__victims_release_purge()).
 */
#define US_PURGE_MAX 8

static void victims_release(us_engine *e, struct us_list *victims, bool force)
{
	unsigned arenas[US_PURGE_MAX], narenas = 0, i;
	uint64_t charged = 0, limit = UINT64_MAX;
	bool check = false;
	struct us_list *pos;

	us__lock_nodrain(e);
	if (force || (!us_list_empty(victims) && us__now(e) >= e->next_purge_ns)) {
		check = true;
		if (!force)
			e->next_purge_ns = sat_add(us__now(e), e->reclaim_wait_ns);
		charged = e->root->c.charged;
		if (e->root->max != US_UNLIMITED)
			limit = sat_add(e->root->max, e->root->max / 8);
		/* The arenas that keep pages: the root's and its children's
		 * (those that own one, listed apart: not a walk of every
		 * child at each purge, or at each max lowered). */
		if (e->root->own_arena)
			arenas[narenas++] = e->root->arena;
		us_list_for_each (pos, &e->arena_kids) {
			if (narenas == US_PURGE_MAX)
				break;
			arenas[narenas++] = us_container_of(pos, us_domain, arena_link)->arena;
		}
	}
	us__unlock(e);
	while (!us_list_empty(victims)) {
		us_buf *b = us_container_of(victims->next, us_buf, link);
		us_object *o = b->obj;

		if (check && b->data && o->domain->has_arena) {
			for (i = 0; i < narenas && arenas[i] != o->domain->arena; i++)
				;
			if (i == narenas && narenas < US_PURGE_MAX)
				arenas[narenas++] = o->domain->arena;
		}

		us_list_del(&b->link);
		if (o->backend->ops.evict) {
			us__callback_enter(e);
			o->backend->ops.evict(o->backend->ctx, o, b->node.key, b->length, b->data);
			us__callback_exit(e);
		}
		/* Bookkeeping only: no buffer a writer may have queued is
		 * read, so the queues are left to the next full lock. */
		us__lock_nodrain(e);
		us__obj_unbusy(o);
		us__unlock(e);
		us__buf_free(e, b);
	}
	if (!check || narenas == 0)
		return;
	if (!force && sat_add(charged, us__arenas_dirty(arenas, narenas)) <= limit)
		return;
	for (i = 0; i < narenas; i++)
		us__arena_purge(e, arenas[i]);
}

void us__victims_release(us_engine *e, struct us_list *victims)
{
	victims_release(e, victims, false);
}

void us__victims_release_purge(us_engine *e, struct us_list *victims)
{
	victims_release(e, victims, true);
}
