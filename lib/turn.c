/*
 * Turns: writers that wait are served in the order they arrived.
 *
 * SPDX-License-Identifier: MIT
 *
 * A writer waits at two places: at the gate of a dirty threshold (its
 * domain's, an ancestor's, or its writeback context's share: throttle.c),
 * and for room under a max (reclaim: policy.c). Room comes back in pieces
 * (a completion, a commit's batch), and whoever asks first after it takes
 * it. A host that polls its writers in a fixed order, or threads that wake
 * in one, would then serve the same writer at every piece while another
 * waits for ever. So each place keeps a queue of its waiters, oldest first,
 * and room goes to them in that order:
 *
 *   - a writer that must wait joins the queue of the place that holds it
 *     (once: it keeps its place while it waits) with a ticket, an engine-wide
 *     number that grows with every join;
 *   - a writer may go when, on every queue of its chain (its context's, its
 *     domain's and every ancestor's), the first live waiter is itself, or
 *     arrived after it, or is not due back yet (room that comes while the
 *     first waiter sleeps is not kept empty for it: it would be wasted); a
 *     writer not queued arrived after everyone queued. Room under a max is
 *     kept for a first waiter due back within a min pause: charges wait
 *     for room until the commit that frees it ends, and a waiter woken by
 *     that end a little later than another must still find it;
 *   - a writer that may not go is told to come back shortly (the waiter
 *     ahead of it is due now or soon, and goes first), and joins the queue
 *     that holds it if it was not queued yet;
 *   - a writer that goes leaves its queue; to wait again it joins at the end.
 *
 * So the queue only orders writers that want the same room at the same
 * time, such as those woken by the end of a commit that freed a batch: it
 * never makes a writer wait while the room is there and nobody due wants
 * it, and it empties as soon as the room lasts for everyone due.
 *
 * A waiter that does not come back (its host gave up writing) must not hold
 * the others: one that is more than a grace (max_pause) past the time it
 * was told to come back loses its place when it is found at the head, and
 * joins at the end again if it returns. A writer's object leaves its queues
 * when it is destroyed.
 *
 * Costs: joining and leaving are O(1); the check looks at the head of each
 * queue of the chain, O(depth), plus the stale heads it drops.
 */
#include "internal.h"

void us__turn_join(us_engine *e, struct us_turn *t, struct us_list *q, uint64_t due_ns)
{
	if (!t->q) {
		t->q = q;
		t->ticket = ++e->turn_tickets;
		us_list_add_tail(q, &t->link);
	}
	t->due_ns = due_ns;
}

void us__turn_leave(struct us_turn *t)
{
	if (t->q) {
		us_list_del(&t->link);
		t->q = NULL;
	}
}

/* The first live waiter of q, dropping those that did not come back. */
static struct us_turn *live_head(us_engine *e, struct us_list *q, uint64_t now)
{
	while (!us_list_empty(q)) {
		struct us_turn *h = us_container_of(q->next, struct us_turn, link);

		if (sat_add(h->due_ns, e->max_pause_ns) >= now)
			return h;
		us__turn_leave(h);
	}
	return NULL;
}

struct us_turn *us__turn_ahead(us_engine *e, struct us_list *q, const struct us_turn *t,
			       uint64_t now, uint64_t soon)
{
	struct us_turn *h = live_head(e, q, now);

	if (!h || h == t || (t->q && h->ticket > t->ticket) || h->due_ns > sat_add(now, soon))
		return NULL;
	return h;
}
