/*
 * Turns: writers that wait are served in the order of what they have had.
 *
 * SPDX-License-Identifier: MIT
 *
 * A writer waits at two places: at the gate of a dirty threshold (its
 * domain's, an ancestor's, or its writeback context's share: throttle.c),
 * and for room under a max (reclaim: pressure.c). Room comes back in pieces
 * (a completion, a commit's batch), and whoever asks first after it takes
 * it. A host that polls its writers in a fixed order, or threads that wake
 * in one, would then serve the same writer at every piece while another
 * waits for ever; and a writer of 1 MiB blocks served as often as one of 4
 * KiB blocks would have 256 times its bytes. So each place keeps a queue of
 * its waiters, ordered by their writers' virtual time (us_object.vtime_ns:
 * each byte a writer dirtied moves it on by the time that byte takes at its
 * context's per-writer rate, from now if it is behind: wb.c), and room
 * goes to them in that order:
 *
 *   - a writer that must wait joins the queue of the place that holds it
 *     (once: it keeps its place while it waits), keyed by its virtual time
 *     then (at least now), and by an engine-wide arrival number among equal
 *     keys;
 *   - a writer may go when, on every queue of its chain (its context's, its
 *     domain's and every ancestor's), the first live waiter is itself or
 *     comes after it; a writer not queued goes before the first waiter only
 *     if its virtual time is behind that waiter's key (it has had less);
 *   - a writer that may not go is told to come back shortly (behind a
 *     waiter that is due and not back, later by its rank in that queue:
 *     order_pause() in throttle.c); it joins the queue only when a limit
 *     holds it (over a threshold, no room under a max), not when only the
 *     order does (under every limit, behind a waiter): a queue of writers
 *     held by the order alone would each wait for the one before it to
 *     wake, one pause per writer, with room for all of them;
 *   - a writer that goes leaves its queue; to wait again it joins anew.
 *
 * Equal writers have equal virtual times: they are served in the order
 * they arrived, never one twice while another waits. A writer of large
 * blocks moves its virtual time on as far with one block as one of small
 * blocks with many, so over time both get the same bytes.
 *
 * The first waiter is waited for even while it sleeps (the room it is
 * owed is kept): a writer that comes back at the end of its wait must find
 * it, or a commit's batch would go to whoever polls most often. That costs
 * throughput where room comes in pieces much shorter than a pause.
 *
 * A waiter that does not come back (its host gave up writing, or wrote its
 * last block) must not hold the others: one that is more than a grace past
 * the time it was told to come back (as long again as it was told to wait,
 * at least a min pause, at most a max pause) loses its place when it is
 * found at the head, and joins anew if it returns. A writer's object
 * leaves its queues when it is destroyed.
 *
 * A queue is a balanced tree of its waiters in that order (tree.c), with
 * its first waiter at hand, and each subtree counting its waiters (the
 * tree's marks: every waiter is marked): joining, leaving and a waiter's
 * rank (how many come before it) cost O(log n) for n waiters, wherever the
 * key falls among theirs (a sorted list walked from its end cost as many
 * steps as waiters with a larger key: thousands at a root's gate, where
 * writers of every domain wait with keys spread over seconds); the check
 * looks at the first waiter of each queue of the chain, O(depth), plus the
 * stale ones it drops.
 */
#include "internal.h"

/* Queue order: by key, then by ticket (arrival). */
static bool before(const struct us_tnode *a, const struct us_tnode *b)
{
	const struct us_turn *x = us_container_of(a, struct us_turn, node);
	const struct us_turn *y = us_container_of(b, struct us_turn, node);

	return x->node.key != y->node.key ? x->node.key < y->node.key : x->ticket < y->ticket;
}

void us__turn_join(us_engine *e, struct us_turn *t, struct us_turnq *q, uint64_t key,
		   uint64_t due_ns)
{
	if (!t->q) {
		t->q = q;
		t->node.key = key;
		t->node.mark = 1; /* a subtree's marks count its waiters */
		t->ticket = ++e->turn_tickets;
		q->root = us__tree_insert_by(q->root, &t->node, before);
		if (!q->first || before(&t->node, &q->first->node))
			q->first = t;
	}
	t->due_ns = due_ns;
	/* As long again as it was told to wait, at least a min pause, at
	 * most a max pause. */
	{
		uint64_t now = us__now(e), w = due_ns > now ? due_ns - now : 0;

		w = w < e->min_pause_ns ? e->min_pause_ns : w;
		t->grace_ns = w > e->max_pause_ns ? e->max_pause_ns : w;
	}
}

void us__turn_leave(struct us_turn *t)
{
	struct us_turnq *q = t->q;

	if (q) {
		q->root = us__tree_remove_by(q->root, &t->node, before);
		if (q->first == t) {
			struct us_tnode *f = us__tree_first(q->root);

			q->first = f ? us_container_of(f, struct us_turn, node) : NULL;
		}
		t->q = NULL;
	}
}

/*
 * The count only grows on the way down, so it stops as soon as it reaches
 * limit: a waiter far back in a queue of 100,000 (a root's gate) turns right
 * at the top and is done, instead of loading a node of another writer's
 * object at each of 17 levels (a fifth of a run's time, most of it misses).
 */
uint64_t us__turn_rank(const struct us_turnq *q, const struct us_turn *t, uint64_t key,
		       uint64_t limit)
{
	const struct us_tnode *n = q->root;
	uint64_t r = 0;

	while (n && r < limit) {
		uint64_t left = n->left ? n->left->marks : 0;

		if (n == &t->node) {
			r += left;
			break;
		}
		if (t->q == q ? before(&t->node, n) : key < n->key) {
			n = n->left;
		} else {
			r += 1 + left;
			n = n->right;
		}
	}
	return r < limit ? r : limit;
}

bool us__turnq_valid(const struct us_turnq *q)
{
	struct us_tnode *f = us__tree_first(q->root);

	return us__tree_check_by(q->root, before) >= 0 &&
	       q->first == (f ? us_container_of(f, struct us_turn, node) : NULL);
}

/* The first live waiter of q, dropping those that did not come back. */
static struct us_turn *live_head(struct us_turnq *q, uint64_t now)
{
	struct us_turn *h;

	while ((h = q->first)) {
		if (sat_add(h->due_ns, h->grace_ns) >= now)
			return h;
		us__turn_leave(h);
	}
	return NULL;
}

struct us_turn *us__turn_ahead(struct us_turnq *q, const struct us_turn *t, uint64_t key,
			       uint64_t now)
{
	struct us_turn *h = live_head(q, now);

	if (!h || h == t)
		return NULL;
	/* Queued: its own place decides. Not queued: it goes before the
	 * head only with a smaller pace (it has had less). */
	if (t->q ? before(&t->node, &h->node) : h->node.key > key)
		return NULL;
	return h;
}
