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
 * The in-flight budget of a context is the smaller of the backend's free
 * cap (max_inflight - writeback) and the context's fair share of the cap
 * (max_inflight / active contexts - its own writeback), so one domain with a
 * slow stream of completions cannot take another's share of the backend.
 * When nothing at all is in flight on the backend, one run is always
 * allowed, so a buffer larger than the cap cannot stall.
 *
 * Flushing never stops while a domain is over its thresholds: as long as a
 * context has dirty data and a reason, every poll hands out all the budget
 * there is, whatever unstable holds.
 */
#include "internal.h"

#define POLL_ROUNDS 64

struct pending {
	struct us_batch bt;
	struct pending *next;
};

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Collects this round's work from one writeback context. */
static int collect_wb(us_engine *e, struct us_wb *wb, uint64_t share, struct pending **list,
		      uint64_t *nbufs)
{
	us_backend *bk = wb->backend;
	struct us_list *pos, *next;
	int why = us__wb_reason(wb);

	for (pos = wb->dirty_objs.next; pos != &wb->dirty_objs; pos = next) {
		us_object *o = us_container_of(pos, us_object, dirty_link);
		uint64_t budget, bytes;
		enum us_reason reason;
		struct pending *p;
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
		/*
		 * Its fair share: while every context is within its share the
		 * shares add up to the cap; a context that took more while it
		 * was alone keeps it until its writes complete, and cannot
		 * shut the others out meanwhile.
		 */
		budget = sub0(share, wb->writeback);
		if (budget == 0 && bk->writeback)
			break;
		p = us__meta_alloc(e, sizeof(*p));
		if (!p)
			return -ENOMEM;
		rc = us__flush_collect(o, 0, UINT64_MAX, budget, bk->writeback == 0, &p->bt,
				       &bytes);
		if (rc <= 0) {
			us__meta_free(e, p, sizeof(*p));
			if (rc < 0)
				return rc;
			break; /* no budget for its first run */
		}
		p->bt.reason = reason;
		p->next = NULL;
		us__domain_event(o->domain,
				 reason == US_REASON_EXPIRY ? US_EV_EXPIRED_FLUSHED :
							      US_EV_BG_FLUSHED,
				 (uint64_t)rc);
		/* Appended: runs go out in the order they were chosen. */
		while (*list)
			list = &(*list)->next;
		*list = p;
		*nbufs += (uint64_t)rc;
		/* The object keeps the rest when the budget ran out: the next
		 * round or poll resumes from it. */
		if (o->ndirty)
			break;
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

		if (bk->wbw || !bk->written || !us__link_sample(e, bk, now))
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
	struct us_list *bpos, *wpos;
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
		struct pending *list = NULL;
		uint64_t n = 0;

		us_list_for_each (bpos, &e->backends) {
			us_backend *bk = us_container_of(bpos, us_backend, link);
			uint64_t active = 0, share;

			if (!bk->dirty)
				continue; /* nothing to collect: no walk of its contexts */
			us_list_for_each (wpos, &bk->wbs) {
				struct us_wb *wb = us_container_of(wpos, struct us_wb, bk_link);

				active += wb->dirty || wb->writeback;
			}
			share = bk->max_inflight / (active ? active : 1);
			us_list_for_each (wpos, &bk->wbs) {
				struct us_wb *wb = us_container_of(wpos, struct us_wb, bk_link);

				if (wb->dirty && rc == 0)
					rc = collect_wb(e, wb, share, &list, &n);
			}
		}
		us__unlock(e);
		while (list) {
			struct pending *p = list;

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
