/*
 * The invariant checker (invariants I1-I6 and I8-I11 of internal.h), SQLite-style: it
 * recomputes everything from the buffers and compares. Slow by design.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

struct ctx {
	char *msg;
	size_t len;
	int rc;
	uint64_t ndecay; /* domains linked on the pipeline decay list */
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static bool
fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->rc)
		return false;
	c->rc = -EUCLEAN;
	if (c->msg && c->len) {
		va_start(ap, fmt);
		vsnprintf(c->msg, c->len, fmt, ap);
		va_end(ap);
	}
	return false;
}

static void zero_scratch(us_domain *d)
{
	struct us_list *pos;

	memset(&d->chk, 0, sizeof(d->chk));
	us_list_for_each (pos, &d->children)
		zero_scratch(us_container_of(pos, us_domain, sibling));
}

struct objsum {
	uint64_t nbufs, nlru, ndirty, nunstable, pinned;
	uint64_t prev_end;
	bool have_prev;
};

static void check_bufs(struct ctx *c, us_object *o, struct us_tnode *t, struct objsum *s)
{
	us_buf *b;

	if (!t || c->rc)
		return;
	check_bufs(c, o, t->left, s);
	b = us_container_of(t, us_buf, node);
	if (s->have_prev && t->key < s->prev_end)
		fail(c, "object %p: buffer at %llu overlaps the previous one", (void *)o,
		     (unsigned long long)t->key);
	s->have_prev = true;
	s->prev_end = t->key + b->length;
	if (b->obj != o || !b->attached)
		fail(c, "buffer %p: wrong object or not attached", (void *)b);
	if (b->state > US_BUF_UNSTABLE)
		fail(c, "buffer %p: bad state %u", (void *)b, b->state);
	if (t->mark != (b->state == US_BUF_DIRTY))
		fail(c, "buffer %p: index mark %u in state %u", (void *)b, t->mark, b->state);
	if (b->on_lru != (b->state == US_BUF_CLEAN && b->refs == 0 && b->pins == 0))
		fail(c, "buffer %p: on_lru %d with state %u refs %u pins %u (I4)", (void *)b,
		     b->on_lru, b->state, b->refs, b->pins);
	if ((b->state == US_BUF_UNSTABLE) != (b->seq != 0))
		fail(c, "buffer %p: seq %llu in state %u", (void *)b, (unsigned long long)b->seq,
		     b->state);
	s->nbufs++;
	s->nlru += b->on_lru;
	s->ndirty += b->state == US_BUF_DIRTY;
	s->nunstable += b->state == US_BUF_UNSTABLE;
	if (b->state != US_BUF_CLEAN)
		s->pinned += b->length;
	o->domain->chk.charged += b->length;
	o->domain->chk.buffers++;
	if (b->on_lru)
		o->domain->chk.evictable += b->length;
	switch ((unsigned)b->state) {
	case US_BUF_CLEAN:
		o->domain->chk.clean += b->length;
		break;
	case US_BUF_DIRTY:
		o->domain->chk.dirty += b->length;
		break;
	case US_BUF_WRITEBACK:
		o->domain->chk.writeback += b->length;
		break;
	case US_BUF_UNSTABLE:
		o->domain->chk.unstable += b->length;
		break;
	}
	check_bufs(c, o, t->right, s);
}

static void check_object(struct ctx *c, us_object *o)
{
	struct objsum s = { 0 };
	struct us_list *pos;
	uint64_t n = 0, prev_seq = 0;
	int64_t count = us__tree_check(o->root);

	if (count < 0)
		fail(c, "object %p: index is not a valid AVL tree (I6)", (void *)o);
	check_bufs(c, o, o->root, &s);
	if (c->rc)
		return;
	if ((uint64_t)count != s.nbufs || s.nbufs != o->nbufs)
		fail(c, "object %p: %llu buffers counted, %llu recorded", (void *)o,
		     (unsigned long long)s.nbufs, (unsigned long long)o->nbufs);
	if (s.nlru != o->nlru || s.ndirty != o->ndirty)
		fail(c, "object %p: lru/dirty counts %llu/%llu, recorded %llu/%llu", (void *)o,
		     (unsigned long long)s.nlru, (unsigned long long)s.ndirty,
		     (unsigned long long)o->nlru, (unsigned long long)o->ndirty);
	if (s.pinned != o->pinned)
		fail(c, "object %p: %llu bytes pinned, recorded %llu", (void *)o,
		     (unsigned long long)s.pinned, (unsigned long long)o->pinned);
	us_list_for_each (pos, &o->unstable) {
		us_buf *b = us_container_of(pos, us_buf, link);

		if (b->obj != o || b->state != US_BUF_UNSTABLE || b->seq < prev_seq)
			fail(c, "object %p: unstable list out of order or wrong state (I5)",
			     (void *)o);
		prev_seq = b->seq;
		n++;
		if (c->rc)
			return;
	}
	if (n != s.nunstable)
		fail(c, "object %p: %llu on unstable list, %llu unstable", (void *)o,
		     (unsigned long long)n, (unsigned long long)s.nunstable);
	if (us_list_empty(&o->unstable) != (o->unstable_link.next == &o->unstable_link))
		fail(c, "object %p: on backend unstable list iff it has unstable (I5)", (void *)o);
}

static void check_lru(struct ctx *c, us_domain *d)
{
	struct us_list *pos;
	uint64_t bytes = 0, prev = 0;

	us_list_for_each (pos, &d->lru) {
		us_buf *b = us_container_of(pos, us_buf, link);

		if (!b->on_lru || b->obj->domain != d || b->lru_stamp <= prev) {
			fail(c, "domain %s: LRU list holds a wrong or unordered buffer", d->name);
			return;
		}
		prev = b->lru_stamp;
		bytes += b->length;
	}
	if (bytes != d->chk.evictable)
		fail(c, "domain %s: LRU holds %llu bytes, evictable buffers %llu", d->name,
		     (unsigned long long)bytes, (unsigned long long)d->chk.evictable);
}

/* I8: d's lru_min is the oldest stamp of its subtree, and its lru_kids tree
 * holds exactly its children with one, keyed by it (children checked). */
static void check_lru_order(struct ctx *c, us_domain *d)
{
	struct us_list *pos;
	uint64_t m = 0, nkids = 0;
	int64_t count = us__tree_check(d->lru_kids);

	if (!us_list_empty(&d->lru))
		m = us_container_of(d->lru.next, us_buf, link)->lru_stamp;
	us_list_for_each (pos, &d->children) {
		us_domain *ch = us_container_of(pos, us_domain, sibling);

		if (!ch->lru_min)
			continue;
		nkids++;
		if (!m || ch->lru_min < m)
			m = ch->lru_min;
		if (ch->lru_node.key != ch->lru_min ||
		    us__tree_find_ge(d->lru_kids, ch->lru_min) != &ch->lru_node)
			fail(c, "domain %s: child %s missing from its eviction tree (I8)", d->name,
			     ch->name);
	}
	if (count < 0 || (uint64_t)count != nkids)
		fail(c,
		     "domain %s: eviction tree of %lld nodes, %llu children with evictable "
		     "buffers (I8)",
		     d->name, (long long)count, (unsigned long long)nkids);
	if (d->lru_head != d->lru.next && (d->lru_head || !us_list_empty(&d->lru)))
		fail(c, "domain %s: LRU head moved unseen (I8)", d->name);
	if (m != d->lru_min)
		fail(c, "domain %s: oldest stamp of the subtree %llu, recorded %llu (I8)", d->name,
		     (unsigned long long)m, (unsigned long long)d->lru_min);
}

/* I12: a queue of waiters in (key, ticket) order, each naming it (and
 * marked, so that a subtree's marks count its waiters). */
static bool turns_named(const struct us_tnode *n, const struct us_turnq *q)
{
	return !n || (us_container_of(n, struct us_turn, node)->q == q && n->mark == 1 &&
		      turns_named(n->left, q) && turns_named(n->right, q));
}

static void check_turns(struct ctx *c, const struct us_turnq *q, const char *what, const void *at)
{
	if (!us__turnq_valid(q) || !turns_named(q->root, q))
		fail(c, "%s %p: waiters out of order or misfiled (I12)", what, at);
}

/* Checks d's subtree; leaves d->chk summed over it; returns its credit. */
static int64_t check_domain(struct ctx *c, us_domain *d)
{
	struct us_list *pos;
	const struct us_counters *x = &d->chk, *y = &d->c;
	uint64_t nchildren = 0;
	int64_t credit = 0;

	check_lru(c, d);
	check_turns(c, &d->gate_q, "domain gate", d);
	check_turns(c, &d->room_q, "domain room", d);
	us_list_for_each (pos, &d->engine->tcaches) {
		struct us_tcache *tc = us_container_of(pos, struct us_tcache, link);

		if (atomic_load_explicit(&tc->dom, memory_order_relaxed) == d)
			credit += atomic_load_explicit(&tc->credit, memory_order_relaxed);
	}
	us_list_for_each (pos, &d->children) {
		us_domain *ch = us_container_of(pos, us_domain, sibling);

		if (ch->parent != d)
			fail(c, "domain %s: wrong parent", ch->name);
		credit += check_domain(c, ch);
		d->chk.charged += ch->chk.charged;
		d->chk.clean += ch->chk.clean;
		d->chk.dirty += ch->chk.dirty;
		d->chk.writeback += ch->chk.writeback;
		d->chk.unstable += ch->chk.unstable;
		d->chk.evictable += ch->chk.evictable;
		d->chk.buffers += ch->chk.buffers;
		nchildren++;
	}
	check_lru_order(c, d);
	{
		uint64_t kids = 0;

		us_list_for_each (pos, &d->children)
			kids += us_container_of(pos, us_domain, sibling)->pipe_bytes;
		if (kids != d->pipe_kids || d->pipe_marked || d->pipe_marked_kids)
			fail(c, "domain %s: pipeline sum of the children or marks wrong (I10)",
			     d->name);
		c->ndecay += d->pipe_decay_link.next != NULL;
	}
	if (c->rc)
		return credit;
	if (nchildren != d->nchildren)
		fail(c, "domain %s: %llu children, recorded %llu", d->name,
		     (unsigned long long)nchildren, (unsigned long long)d->nchildren);
	if (x->charged != y->charged || x->clean != y->clean || x->dirty != y->dirty ||
	    x->writeback != y->writeback || x->unstable != y->unstable ||
	    x->evictable != y->evictable || x->buffers != y->buffers)
		fail(c,
		     "domain %s (I1): recomputed charged/clean/dirty/writeback/unstable/evictable/"
		     "buffers %llu/%llu/%llu/%llu/%llu/%llu/%llu, engine has "
		     "%llu/%llu/%llu/%llu/%llu/%llu/%llu",
		     d->name, (unsigned long long)x->charged, (unsigned long long)x->clean,
		     (unsigned long long)x->dirty, (unsigned long long)x->writeback,
		     (unsigned long long)x->unstable, (unsigned long long)x->evictable,
		     (unsigned long long)x->buffers, (unsigned long long)y->charged,
		     (unsigned long long)y->clean, (unsigned long long)y->dirty,
		     (unsigned long long)y->writeback, (unsigned long long)y->unstable,
		     (unsigned long long)y->evictable, (unsigned long long)y->buffers);
	if (y->charged != y->clean + y->dirty + y->writeback + y->unstable)
		fail(c, "domain %s (I2): charged is not the sum of the states", d->name);
	if (d->max != US_UNLIMITED && y->charged > d->max)
		fail(c, "domain %s (I3): charged %llu above max %llu", d->name,
		     (unsigned long long)y->charged, (unsigned long long)d->max);
	if (d->peak_charged < y->charged)
		fail(c, "domain %s: peak below charged", d->name);
	/* Quiescent (no writer between its spend and the drain): the granted
	 * bytes are exactly the credit the subtree's writer caches hold. */
	if ((int64_t)d->granted != credit)
		fail(c, "domain %s: granted %llu, credit in the subtree %lld", d->name,
		     (unsigned long long)d->granted, (long long)credit);
	return credit;
}

/* I9: the sampling order holds every writeback context once, in order. */
static void check_samples(struct ctx *c, us_engine *e)
{
	struct us_list *pos, *wpos;
	uint64_t n = 0, nwbs = 0, prev = 0;

	us_list_for_each (pos, &e->wb_samples) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, sample_link);

		if (wb->bw_stamp_ns < prev || wb->backend->engine != e) {
			fail(c, "context %p: out of order on the sampling list (I9)", (void *)wb);
			return;
		}
		prev = wb->bw_stamp_ns;
		if (++n > (1ull << 40))
			break;
	}
	us_list_for_each (pos, &e->backends)
		us_list_for_each (wpos, &us_container_of(pos, us_backend, link)->wbs)
			nwbs++;
	if (n != nwbs)
		fail(c, "%llu contexts on the sampling list, %llu in the backends (I9)",
		     (unsigned long long)n, (unsigned long long)nwbs);
}

/* The writer caches' marks for rewrites without a fence (tcache.c): the
 * engine counts those that name it, none names another, and no barrier
 * covers more collections than there were. */
static void check_nofence(struct ctx *c, us_engine *e)
{
	struct us_list *pos;
	unsigned n = 0;

	us_list_for_each (pos, &e->tcaches) {
		struct us_tcache *tc = us_container_of(pos, struct us_tcache, link);
		us_engine *x = atomic_load_explicit(&tc->nofence, memory_order_relaxed);

		if (x && x != e)
			fail(c, "writer cache %p: marked for another engine", (void *)tc);
		n += x == e;
	}
	if (n != e->nofence_caches)
		fail(c, "%u writer caches rewrite without a fence, %u counted", n,
		     e->nofence_caches);
	if (atomic_load_explicit(&e->wb_fenced, memory_order_relaxed) > e->wb_moves)
		fail(c, "barriers cover %llu collections of %llu",
		     (unsigned long long)atomic_load(&e->wb_fenced),
		     (unsigned long long)e->wb_moves);
}

/* I11: the root's children that own an arena, in order, and no other. */
static void check_arena_kids(struct ctx *c, us_engine *e)
{
	struct us_list *pos, *k = e->arena_kids.next;

	us_list_for_each (pos, &e->root->children) {
		us_domain *d = us_container_of(pos, us_domain, sibling);

		if (!d->own_arena)
			continue;
		if (k == &e->arena_kids || k != &d->arena_link) {
			fail(c, "domain %s: not in its place on the list of arenas (I11)", d->name);
			return;
		}
		k = k->next;
	}
	if (k != &e->arena_kids)
		fail(c, "the list of arenas holds a domain that is not a child owning one (I11)");
}

int us_engine_check(us_engine *e, char *msg, size_t len)
{
	struct ctx c = { msg, len, 0, 0 };
	struct us_list *bpos, *opos;

	if (!e)
		return -EINVAL;
	if (msg && len)
		msg[0] = '\0';
	us__lock(e);
	if (!us__sync_counts_ok(e))
		fail(&c, "a sync's counts of the buffers it waits for are wrong");
	zero_scratch(e->root);
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);
		uint64_t sum[3] = { 0, 0, 0 }, nobj = 0, lists[5] = { 0 };
		struct us_list *wpos;

		us_list_for_each (wpos, &bk->wbs)
			memset(us_container_of(wpos, struct us_wb, bk_link)->chk, 0,
			       sizeof(((struct us_wb *)0)->chk));
		us_list_for_each (opos, &bk->objects) {
			us_object *o = us_container_of(opos, us_object, link);
			uint64_t d0 = o->domain->chk.dirty, w0 = o->domain->chk.writeback,
				 u0 = o->domain->chk.unstable;

			if (o->backend != bk)
				fail(&c, "object %p: wrong backend", (void *)o);
			check_object(&c, o);
			sum[0] += o->domain->chk.dirty - d0;
			sum[1] += o->domain->chk.writeback - w0;
			sum[2] += o->domain->chk.unstable - u0;
			nobj++;
			if (!o->wb || o->wb->backend != bk || o->wb->domain != o->domain) {
				fail(&c, "object %p: wrong writeback context", (void *)o);
				continue;
			}
			o->wb->chk[0] += o->domain->chk.dirty - d0;
			o->wb->chk[1] += o->domain->chk.writeback - w0;
			o->wb->chk[2] += o->domain->chk.unstable - u0;
			o->wb->chk[3]++;
			o->wb->chk[4] += o->ndirty > 0;
			if ((o->ndirty > 0) == (o->dirty_link.next == &o->dirty_link))
				fail(&c, "object %p: on its context's dirty list iff dirty",
				     (void *)o);
		}
		us_list_for_each (wpos, &bk->wbs) {
			struct us_wb *wb = us_container_of(wpos, struct us_wb, bk_link);
			uint64_t ndirty = 0, prev = 0, n;

			us_list_for_each (opos, &wb->dirty_objs) {
				us_object *o = us_container_of(opos, us_object, dirty_link);

				if (o->wb != wb || !o->ndirty || o->dirtied_when_ns < prev)
					fail(&c, "context %p: dirty list wrong or out of order",
					     (void *)wb);
				prev = o->dirtied_when_ns;
				ndirty++;
			}
			if (wb->chk[0] != wb->dirty || wb->chk[1] != wb->writeback ||
			    wb->chk[2] != wb->unstable || wb->chk[3] != wb->nobjects ||
			    wb->chk[4] != ndirty || wb->cleaned < wb->bw_cleaned)
				fail(&c, "context %p: counters or dirty list do not add up",
				     (void *)wb);
			check_turns(&c, &wb->gate_q, "context gate", wb);
			n = 0;
			us_list_for_each (opos, &wb->rl_writers) {
				n++;
				if (us_container_of(opos, us_object, rl_link)->wb != wb)
					fail(&c,
					     "context %p: a writer of another on its pace list (I12)",
					     (void *)wb);
			}
			if (n != wb->rl_nwriters)
				fail(&c,
				     "context %p: %llu writers on its pace list, %llu counted (I12)",
				     (void *)wb, (unsigned long long)n,
				     (unsigned long long)wb->rl_nwriters);
			/* The backend's lists of contexts (wb.c, poll.c). */
			if (!wb->dirty != us_list_empty(&wb->dirty_link) ||
			    !wb->writeback != us_list_empty(&wb->flight_link))
				fail(&c, "context %p: wrong on its backend's lists", (void *)wb);
			lists[0] += wb->dirty > 0;
			lists[1] += wb->writeback > 0;
			lists[2] += wb->dirty || wb->writeback;
		}
		us_list_for_each (wpos, &bk->dirty_wbs)
			lists[3] += us_container_of(wpos, struct us_wb, dirty_link)->backend == bk;
		us_list_for_each (wpos, &bk->flight_wbs)
			lists[4] += us_container_of(wpos, struct us_wb, flight_link)->backend == bk;
		if (lists[3] != lists[0] || lists[4] != lists[1] || bk->nactive != lists[2])
			fail(&c, "backend %p: lists of dirty or in-flight contexts wrong",
			     (void *)bk);
		us_list_for_each (opos, &bk->unstable_objs) {
			us_object *o = us_container_of(opos, us_object, unstable_link);

			if (o->backend != bk || us_list_empty(&o->unstable))
				fail(&c,
				     "backend %p: unstable list holds a foreign or clean object (I5)",
				     (void *)bk);
		}
		if (nobj != bk->nobjects || sum[0] != bk->dirty || sum[1] != bk->writeback ||
		    sum[2] != bk->unstable)
			fail(&c, "backend %p: objects/dirty/writeback/unstable do not add up",
			     (void *)bk);
	}
	check_samples(&c, e);
	check_nofence(&c, e);
	check_arena_kids(&c, e);
	if (!c.rc) {
		uint64_t n = 0;

		check_domain(&c, e->root);
		us_list_for_each (bpos, &e->pipe_decay)
			if (++n > c.ndecay)
				break;
		if (n != c.ndecay)
			fail(&c, "pipeline decay list of %llu domains, %llu linked (I10)",
			     (unsigned long long)n, (unsigned long long)c.ndecay);
	}
	us__unlock(e);
	return c.rc;
}
