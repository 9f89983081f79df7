/*
 * The polled core: everything the engine does on its own happens here, and
 * the threaded mode only calls it.
 *
 * SPDX-License-Identifier: MIT
 *
 * One call:
 *  1. samples the bandwidth of every writeback context (wb.c);
 *  2. for every writeback context with dirty data, decides whether it must
 *     be written back and why: THROTTLE when a domain on its chain is past
 *     its freerun (its writers are being paused), BACKGROUND when past its
 *     background threshold, EXPIRY for objects dirtied longer ago than
 *     dirty_expire when the expiry check is due;
 *  3. collects, under the lock, runs from those contexts' objects, oldest
 *     dirtied first and ascending offset within an object, within the
 *     backend's in-flight budget, then calls flush for them without the
 *     lock; and repeats while that made progress (a flush may complete
 *     synchronously and free budget), at most POLL_ROUNDS times.
 *
 * Shares and turns. A context's share of the backend's in-flight cap is
 * max_inflight / active contexts, but never less than a quarter of a run
 * (max_flush_bytes, or half the cap when that is smaller). With more
 * contexts than shares fit in the cap they take turns. The contexts with
 * dirty data wait on their backend's list (wb.c) in turn order: the walk
 * starts at its head; a context that has sent its turn goes to the tail,
 * one that had nothing more eligible (under its thresholds, backing off)
 * too; one whose share is in flight keeps its place, and so does one cut
 * short by the backend's room, where the walk stops: it is served the rest
 * of its turn when room comes back, before the contexts behind it. So over
 * time every backlogged context gets the same bytes whatever their number
 * and however the room frees, and a poll costs the contexts it serves, not
 * all of them. (When a turn was whatever room happened to be free, equal
 * domains started 10 ms apart finished up to a second out of order.)
 *
 * A turn is the share; where the contexts are too many for a quarter run
 * each to fit in the cap, less if a round of them would last more than
 * ROUND_NS at the link's measured rate: 100 contexts on 1 GiB/s send a
 * quarter run each, 2,000 one buffer of 64 KiB each (with a quarter run each, rounds of 0.5 s, and of 2.4 s at 10,000
 * domains: as long a wait for every writer). A context with nothing in
 * flight may send one buffer larger than its turn when it fits in the room;
 * larger than the room, it waits at the head for room.
 *
 * The room is the cap minus what the contexts hold in flight within their
 * shares (each counts min(its writeback, its share)): one domain with a
 * slow stream of completions cannot take another's share of the backend,
 * and a context that filled more than its share while it was alone keeps
 * it until its writes complete without shutting the others out. While
 * every context stays within its share the cap holds. When nothing at all
 * is in flight on the backend, one run is always allowed, so a buffer
 * larger than the cap cannot stall.
 *
 * Flushing never stops while a domain is over its thresholds: as long as a
 * context has dirty data and a reason, every poll hands out all the budget
 * there is, whatever unstable holds.
 */
#include "internal.h"

#define POLL_ROUNDS 64
#define ROUND_NS    100000000.0 /* the longest round of turns, at the link's rate */

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Collects up to budget bytes of wb's eligible dirty data, oldest dirtied
 * object first (at least one buffer when force). Returns the buffers
 * taken, or a negative errno; *bytes: their bytes; *fits: false when an
 * eligible object's next buffer did not fit in the budget. */
static int collect_wb(us_engine *e, struct us_wb *wb, uint64_t budget, bool force,
		      struct us_flush_req ***tail, uint64_t *bytes, bool *fits)
{
	struct us_list *pos, *next;
	int why = us__wb_reason(wb), taken = 0;

	*bytes = 0;
	*fits = true;
	for (pos = wb->dirty_objs.next; pos != &wb->dirty_objs; pos = next) {
		us_object *o = us_container_of(pos, us_object, dirty_link);
		enum us_reason reason;
		struct us_flush_req *p;
		uint64_t got;
		int rc;

		next = pos->next;
		if (us__now(e) < o->retry_ns)
			continue; /* a write failed: backing off */
		if (why >= 0)
			reason = (enum us_reason)why;
		else if (e->expiring && o->dirtied_when_ns <= e->expire_cutoff_ns)
			reason = US_REASON_EXPIRY;
		else
			break; /* the list is in dirtied order: nothing older follows */
		p = us__meta_alloc(e, sizeof(*p));
		if (!p)
			return -ENOMEM;
		rc = us__flush_collect(o, 0, UINT64_MAX, budget - *bytes, force && !taken, &p->bt,
				       &got);
		if (rc <= 0) {
			us__meta_free(e, p, sizeof(*p));
			if (rc < 0)
				return rc;
			*fits = false;
			break; /* no budget for its first buffer */
		}
		p->bt.reason = reason;
		p->next = NULL;
		us__domain_event(o->domain,
				 reason == US_REASON_EXPIRY ? US_EV_EXPIRED_FLUSHED :
							      US_EV_BG_FLUSHED,
				 (uint64_t)rc);
		/* Appended: runs go out in the order they were chosen. */
		**tail = p;
		*tail = &p->next;
		taken += rc;
		*bytes += got;
		/* The object keeps the rest when the budget ran out: its
		 * context's next turn resumes from it. */
		if (o->ndirty || *bytes >= budget)
			break;
	}
	return taken;
}

/* The length of the buffer wb's flush would take first (0: none). */
static uint64_t next_len(struct us_wb *wb)
{
	struct us_tnode *t;

	if (us_list_empty(&wb->dirty_objs))
		return 0;
	t = us__tree_find_ge_marked(
		us_container_of(wb->dirty_objs.next, us_object, dirty_link)->root, 0);
	return t ? us_container_of(t, us_buf, node)->length : 0;
}

/* Collects this round's work from bk's contexts, in turn (see above). */
static int collect_backend(us_engine *e, us_backend *bk, struct us_flush_req ***tail, uint64_t *nbufs)
{
	uint64_t run = e->max_flush_bytes, share, turn, held = 0, room;
	struct us_list *pos, *next, *last;
	bool done = false;

	/* One run, but at most half the cap: two contexts can always have
	 * writes in flight, so one whose writes are stuck never holds the
	 * whole cap. */
	if (run == 0 || run > bk->max_inflight / 2)
		run = bk->max_inflight / 2 ? bk->max_inflight / 2 : 1;
	/* The share (see above): at least a quarter of a run. A turn: the
	 * share; where the contexts' quarter runs do not all fit in the cap,
	 * less if a round of them would last more than ROUND_NS at the link's
	 * rate; one buffer at least (the force below). */
	share = bk->max_inflight / (bk->nactive ? bk->nactive : 1);
	turn = share;
	if (share < run / 4) {
		double q = (double)bk->wbw * ROUND_NS / 1e9 / (double)bk->nactive;

		share = run / 4;
		turn = bk->wbw && q < (double)share ? (uint64_t)q : share;
		if (turn == 0)
			turn = 1;
	}
	/* What the contexts hold within their shares (a few contexts: at
	 * most the runs that fit in the cap, and those over their shares). */
	us_list_for_each (pos, &bk->flight_wbs)
		held += min_u64(us_container_of(pos, struct us_wb, flight_link)->writeback, share);
	room = sub0(bk->max_inflight, held);

	/* Each context with dirty data is visited at most once: the walk ends
	 * with the last one there now, and those moved to the tail come after
	 * it. Only the context visited can leave the list meanwhile. */
	last = bk->dirty_wbs.prev;
	for (pos = bk->dirty_wbs.next; pos != &bk->dirty_wbs && !done; pos = next) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dirty_link);
		uint64_t own = sub0(share, wb->writeback), budget, bytes;
		uint64_t left = sub0(turn, wb->turn_sent);
		bool fits, force;
		int rc;

		next = pos->next;
		done = pos == last;
		if (room == 0 && bk->writeback)
			break; /* the backend is full */
		if (own == 0 && bk->writeback)
			continue; /* its share is in flight: it keeps its place */
		budget = min_u64(min_u64(own, left), room);
		/* A context with nothing in flight may send one buffer larger
		 * than its turn (a block size over a quarter run) when it fits
		 * in the room; one larger than the room waits for it at the
		 * head (and for an empty backend when larger than the cap). */
		force = bk->writeback == 0;
		rc = collect_wb(e, wb, budget, force, tail, &bytes, &fits);
		if (rc == 0 && !fits && !force && wb->writeback == 0) {
			if (next_len(wb) > room)
				break;
			rc = collect_wb(e, wb, budget, true, tail, &bytes, &fits);
		}
		if (rc < 0)
			return rc;
		*nbufs += (uint64_t)rc;
		wb->turn_sent += bytes;
		if ((!fits || bytes >= budget) && wb->turn_sent < turn) {
			/* It has more to send than it was given. Cut short by
			 * the backend's room: it keeps its place and the walk
			 * ends; by its share in flight: it keeps its place. By
			 * the rest of its turn: the turn is over. */
			if (budget == room)
				break;
			if (budget == own) {
				room = sub0(room, bytes);
				continue;
			}
		}
		room = sub0(room, bytes);
		/* Served, or nothing eligible: its turn is over. A context
		 * that has no dirty data left has left the list already. */
		wb->turn_sent = 0;
		if (!us_list_empty(&wb->dirty_link)) {
			us_list_del(&wb->dirty_link);
			us_list_add_tail(&bk->dirty_wbs, &wb->dirty_link);
		}
	}
	return 0;
}

/*
 * Samples the bandwidth of the writeback contexts due (wb.c): they are the
 * first of engine->wb_samples, ordered by stamp (I9), so only those are
 * visited, however many contexts there are. Returns whether any was.
 */
static bool sample_due(us_engine *e, uint64_t now)
{
	bool sampled = false;
	struct us_list *bpos, *wpos;

	/* A backend's first link rate resizes its contexts' pipelines at
	 * once (once in its life); later ones count at their samples. */
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		if ((bk->wbw && !bk->wbw_early) || !bk->written || !us__link_sample(e, bk, now))
			continue;
		us_list_for_each (wpos, &bk->wbs)
			us__pipe_mark(us_container_of(wpos, struct us_wb, bk_link)->domain);
		sampled = true;
	}
	while (!us_list_empty(&e->wb_samples)) {
		struct us_wb *wb = us_container_of(e->wb_samples.next, struct us_wb, sample_link);

		if (!us__wb_sample(e, wb, now))
			break; /* not due: nor is any after it */
		sampled = true;
		us__wb_restamped(e, wb);
		us__pipe_mark(wb->domain);
	}
	return sampled;
}

int us_engine_poll(us_engine *e, uint64_t now_ns, uint64_t *next_ns)
{
	struct us_list *bpos;
	uint64_t now, total = 0, next, failed = 0;
	bool busy = false, sampled = false;
	int round, rc = 0;

	if (!e)
		return -EINVAL;
	if (e->clock == US_CLOCK_VIRTUAL) {
		uint64_t cur = atomic_load(&e->vclock_ns);

		while (now_ns > cur && !atomic_compare_exchange_weak(&e->vclock_ns, &cur, now_ns))
			;
	}
	us__lock(e);
	now = us__now(e);
	sampled = sample_due(e, now);
	if (sampled)
		us__pipe_update_marked(e);
	/*
	 * Expiry runs on a fixed grid of writeback_interval, whatever the times
	 * the host polls at: data expires within one interval of its age. The
	 * cutoff stays in force between grid points, so expired data the
	 * in-flight cap held back goes at the next poll with room.
	 */
	if (now >= e->next_expiry_ns) {
		e->expire_cutoff_ns = sub0(now, e->dirty_expire_ns);
		e->expiring = now >= e->dirty_expire_ns;
		e->next_expiry_ns += ((now - e->next_expiry_ns) / e->writeback_interval_ns + 1) *
				     e->writeback_interval_ns;
	}

	for (round = 0; round < POLL_ROUNDS && rc == 0; round++) {
		struct us_flush_req *list = NULL, **tail = &list;
		uint64_t n = 0;

		us_list_for_each (bpos, &e->backends) {
			us_backend *bk = us_container_of(bpos, us_backend, link);

			if (!bk->dirty)
				continue; /* nothing to collect */
			if (rc == 0)
				rc = collect_backend(e, bk, &tail, &n);
		}
		us__unlock(e);
		while (list) {
			struct us_flush_req *p = list;

			list = p->next;
			failed += us__flush_issue(e, &p->bt);
			n -= p->bt.untaken; /* back to DIRTY unsent: not counted */
			us__lock(e);
			us__meta_free(e, p, sizeof(*p));
			us__unlock(e);
		}
		us__lock(e);
		total += n;
		/* Nothing more, or writes failing: retrying belongs to later
		 * polls (with backoff), not to this one. */
		if (n == 0 || failed)
			break;
	}

	/* Commits the policy asks for, and the syncs' steps (both drop the
	 * lock around callbacks). */
	us__commit_policy(e, now);
	us__sync_poll(e);

	/* Next: the expiry check, and bandwidth samples while data is pinned. */
	next = e->next_expiry_ns;
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		busy |= bk->dirty || bk->writeback || bk->unstable;
	}
	if (busy && now + e->bw_interval_ns < next)
		next = now + e->bw_interval_ns;
	if (round == POLL_ROUNDS)
		next = now; /* more work than one call does: come back at once */
	us__unlock(e);
	if (next_ns)
		*next_ns = next;
	if (rc < 0)
		return rc;
	return total > INT32_MAX ? INT32_MAX : (int)total;
}
