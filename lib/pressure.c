/*
 * Reclaim beyond eviction: what a charge does when evicting clean data is
 * not enough.
 *
 * SPDX-License-Identifier: MIT
 *
 * RECLAIM
 *
 * A charge that would cross a max even after evicting every clean
 * unreferenced buffer (reclaim.c) goes through us__reclaim(): for the
 * topmost domain in the way, it writes back the subtree's dirty buffers
 * (reason RECLAIM, within the backends' in-flight caps) and forces commits
 * on its unstable ones, marking them RECLAIM so that they are the first
 * evicted once clean; then the charge waits for progress: bytes of the
 * domain's subtree that left the pinned states or were freed. The wait is
 * reclaim_wait (100 ms) at a time, cut short as soon as the charge fits.
 * -ENOMEM means that nothing can make progress, not that a timer ran out:
 * a wait without progress counts as a stall only when no write or commit of
 * the subtree is in flight, none is backing off to retry, and no write is
 * in flight on a backend whose cap holds the subtree's dirty data back (a
 * 10 s commit, or other domains' writes on a shared slow link, are waited
 * for, however long); after reclaim_retries (16) such stalls in a
 * row, or when no progress at all came for reclaim_timeout (60 s, counted
 * from the last completion that freed something, whatever is in flight),
 * the charge fails with -ENOMEM, counted, with nothing changed. A blocking
 * caller waits here (threaded mode); a non-blocking one gets -EAGAIN with
 * the time to retry, and stalls are counted only once a whole wait has
 * passed, so retrying early does not hasten the failure.
 */
#include "internal.h"

/* Under the lock: runs of the dirty buffers of top's subtree, for reclaim. */
static void reclaim_collect(us_engine *e, us_domain *d, struct us_flush_req **list)
{
	struct us_list *pos, *opos, *onext;

	us_list_for_each (pos, &d->wbs) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);

		for (opos = wb->dirty_objs.next; opos != &wb->dirty_objs; opos = onext) {
			us_object *o = us_container_of(opos, us_object, dirty_link);
			struct us_flush_req *r;
			size_t i;
			int rc;

			onext = opos->next;
			if (us__now(e) < o->retry_ns)
				continue; /* a write failed: backing off */
			rc = us__flush_request(o, US_REASON_RECLAIM, &r);
			if (rc < 0)
				return;
			if (rc == 0)
				break; /* the cap is full, or nothing taken */
			for (i = 0; i < r->bt.n; i++)
				r->bt.bufs[i]->flags |= US_BUF_RECLAIM;
			r->next = *list;
			*list = r;
			/* Collecting took o off the list only if it has no
			 * dirty buffer left; then onext is still linked. */
			if (o->ndirty)
				break; /* out of budget */
		}
	}
	us_list_for_each (pos, &d->children)
		reclaim_collect(e, us_container_of(pos, us_domain, sibling), list);
}

/* Under the lock: forced commits for the unstable data of top's subtree. */
static void reclaim_commits(us_engine *e, us_domain *top, struct us_commit_req **list, uint64_t now)
{
	struct us_list *bpos, *opos, *p;

	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		us_list_for_each (opos, &bk->unstable_objs) {
			us_object *o = us_container_of(opos, us_object, unstable_link);

			if (!us__under(o->domain, top))
				continue;
			us_list_for_each (p, &o->unstable)
				us_container_of(p, us_buf, link)->flags |= US_BUF_RECLAIM;
			if (us__want_commit(e, o, true, US_REASON_RECLAIM, list, now) &&
			    bk->sync_target)
				break;
		}
	}
}

/* Under the lock: whether a commit or write of top's subtree that failed
 * is waiting for its backoff to end. */
static bool retry_pending(us_engine *e, us_domain *top, uint64_t now)
{
	struct us_list *bpos, *opos;

	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		us_list_for_each (opos, &bk->objects) {
			us_object *o = us_container_of(opos, us_object, link);

			if (!us__under(o->domain, top))
				continue;
			if ((o->ndirty && now < o->retry_ns) ||
			    (!us_list_empty(&o->unstable) && now < bk->commit_retry_ns))
				return true;
		}
	}
	return false;
}

/*
 * Under the lock: whether dirty data of d's subtree waits for room on a
 * backend that has writes in flight. reclaim_collect() sends a context's
 * dirty data within its backend's in-flight cap; when other domains' writes
 * fill it (a slow link shared by several domains), this subtree has nothing
 * in flight of its own, but the next completion on that backend makes room
 * for its data.
 */
static bool waits_for_room(us_domain *d)
{
	struct us_list *pos;

	us_list_for_each (pos, &d->wbs) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);

		if (wb->dirty && wb->backend->writeback)
			return true;
	}
	us_list_for_each (pos, &d->children)
		if (waits_for_room(us_container_of(pos, us_domain, sibling)))
			return true;
	return false;
}

/*
 * Under the lock: whether a write or a commit that will free memory of top's
 * subtree is in flight: its writeback, a write on a backend whose cap holds
 * the subtree's dirty data back, or its unstable data with a commit or sync
 * of the engine's running on its backend (the server's own commits are not
 * seen, so without forced commits unstable data waits as stalls do).
 */
static bool in_flight(us_engine *e, us_domain *top)
{
	struct us_list *bpos;

	if (top->c.writeback)
		return true;
	if (top->c.dirty && waits_for_room(top))
		return true;
	if (!top->c.unstable)
		return false;
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		if (bk->unstable && (bk->sync_target || bk->commits_busy))
			return true;
	}
	return false;
}

/* Under the lock: the charge no longer waits on d's chain. */
static void reclaim_done(us_domain *d)
{
	for (; d; d = d->parent) {
		us__reclaim_unmark(d);
		d->reclaim_progress_ns = 0;
	}
}

/* The shortest wait behind a charge waiting for room before this one. */
#define ROOM_TURN_MIN_NS (50 * 1000)

/*
 * Whether now is just past end, the expected end of a commit in flight:
 * within 1 ms after it, when a charge waiting for room tries again at a
 * fine grain. Not longer: where a server queues commits they end long
 * after it, and every waiter would poll at that grain all the while.
 */
static bool just_past(uint64_t end, uint64_t now)
{
	return end && end <= now && now - end < US_MSEC;
}

int us__reclaim(us_object *o, uint64_t len, uint64_t *retry_ns)
{
	us_engine *e = o->engine;
	struct us_flush_req *flushes = NULL;
	struct us_commit_req *commits = NULL;
	us_domain *a, *top = NULL;
	uint64_t now, wait = 0;
	bool fail = false;
	int rc;

	us__lock(e);
	now = us__now(e);
	if (us__charge_possible(o->domain, len)) {
		struct us_turn *h = us__room_ahead(o, now);

		if (!h) {
			reclaim_done(o->domain);
			us__unlock(e);
			return 0;
		}
		/* Room, but a charge that comes first waits for it (turn.c):
		 * back when that one is due. Held by the order, not by the
		 * room, it takes no place in the queue. */
		wait = h->due_ns > now + ROOM_TURN_MIN_NS ? h->due_ns - now : ROOM_TURN_MIN_NS;
		us__unlock(e);
		if (retry_ns)
			*retry_ns = wait;
		return -EAGAIN;
	}
	for (a = o->domain; a; a = a->parent) {
		if (a->max == US_UNLIMITED || a->c.charged - a->c.evictable + len <= a->max)
			continue;
		/* Even with all its pinned data cleaned and evicted, it would
		 * not fit: nothing to wait for. */
		if (a->c.charged - a->c.evictable - (a->c.dirty + a->c.writeback + a->c.unstable) +
			    len >
		    a->max) {
			fail = true;
			break;
		}
		top = a;
		if (!a->reclaiming || !a->reclaim_last_ns) {
			us__reclaim_mark(a, now);
			a->reclaim_progress_ns = now;
		} else if (now >= sat_add(a->reclaim_last_ns, e->reclaim_wait_ns)) {
			/* A wait without progress is a stall only when nothing
			 * could end it: no write or commit of the subtree in
			 * flight, and no retry the engine scheduled (a commit or
			 * a write backing off) still to come. */
			if (a->progress != a->reclaim_seen) {
				a->reclaim_stalls = 0;
				a->reclaim_progress_ns = now;
			} else if (!in_flight(e, a) && !retry_pending(e, a, now)) {
				a->reclaim_stalls++;
			}
			a->reclaim_seen = a->progress;
			a->reclaim_last_ns = now;
		}
		if (!a->reclaim_progress_ns) /* marked by a high penalty */
			a->reclaim_progress_ns = now;
		/* Out of stalls, or no progress at all for reclaim_timeout
		 * whatever is in flight (a server that never answers). */
		if (a->reclaim_stalls >= e->reclaim_retries ||
		    now >= sat_add(a->reclaim_progress_ns, e->reclaim_timeout_ns))
			fail = true;
		if (sat_add(a->reclaim_last_ns, e->reclaim_wait_ns) - now > wait)
			wait = sat_add(a->reclaim_last_ns, e->reclaim_wait_ns) - now;
	}
	if (fail || !top) {
		reclaim_done(o->domain);
		us__turn_leave(&o->room);
		rc = us__charge_refused(o->domain, len);
		us__unlock(e);
		return rc;
	}
	/* Back in a commit latency (between 50 us and a min pause), or when
	 * the commit in flight is expected to end if sooner (50 us while it
	 * is just past that end: just_past()), not at the next
	 * stall check: the first waiter keeps the room it is owed while it
	 * sleeps (turn.c), so it must not sleep past the commit that frees
	 * it. */
	{
		uint64_t soon = o->backend->commit_lat_ns, end = us__commit_due(o);

		if (end > now && end - now < soon)
			soon = end - now;
		else if (just_past(end, now))
			soon = 0; /* due any moment */
		soon = soon < ROOM_TURN_MIN_NS ? ROOM_TURN_MIN_NS : soon;
		soon = soon > e->min_pause_ns ? e->min_pause_ns : soon;
		if (wait > soon)
			wait = soon;
	}
	us__domain_event(o->domain, US_EV_RECLAIMS, 1);
	reclaim_collect(e, top, &flushes);
	if (e->force_commit)
		reclaim_commits(e, top, &commits, now);
	us__unlock(e);

	us__issue(e, &flushes, &commits);

	/* Completions inside the callbacks may have made room already. */
	us__lock(e);
	rc = us__charge_possible(o->domain, len) ? 0 : -EAGAIN;
	if (rc == 0)
		reclaim_done(o->domain);
	else /* waits for room in top's queue (turn.c) */
		us__turn_join(e, &o->room, &top->room_q, us__turn_key(o, now),
			      now + (wait ? wait : 1));
	us__unlock(e);
	if (retry_ns)
		*retry_ns = rc ? (wait ? wait : 1) : 0;
	return rc;
}

int us_object_reclaim(us_object *o, uint64_t length, uint64_t *retry_ns)
{
	if (!o || length == 0 || length > US_BUF_MAX_BYTES)
		return -EINVAL;
	return us__reclaim_step(o, length, retry_ns);
}

int us__reclaim_step(us_object *o, uint64_t len, uint64_t *retry_ns)
{
	uint64_t retry = 0;
	int rc = us__reclaim(o, len, &retry);

	/* A wait for reclaim continues the writer's stall; -ENOMEM ends it
	 * (recorded all the same); a charge that fits ends it once made. */
	if (rc == -EAGAIN || rc == -ENOMEM) {
		us__lock_nodrain(o->engine);
		us__stall_note(o, rc == -ENOMEM, rc == -EAGAIN ? retry : 0);
		us__unlock(o->engine);
	}
	if (retry_ns)
		*retry_ns = retry;
	return rc;
}

/*
 * MEMORY.HIGH. A charge that leaves a domain above its high limit evicts
 * the domain's clean unreferenced buffers down to high, starts reclaim
 * writeback and commits for the rest (as a charge at max does, without
 * waiting), and earns the charging object a delay, returned with its next
 * pause (us_buf_dirty(), us_object_balance()):
 *
 *     delay = HIGH_DELAY_MAX * min(1, (4 * overage / high)^2)
 *
 * with overage = charged - high after the charge, the largest on the chain:
 * 5 % over high costs 80 ms, 10 % 320 ms, 25 % and more the cap of 2 s (as
 * Linux caps memory.high throttling). Debts do not add up past the cap. The
 * domain's lock-free credit is taken back so that the next dirtying, which
 * returns the delay, takes the locked path.
 */
#define US_HIGH_DELAY_MAX (2 * US_SEC)

void us__high_penalty(us_object *o, struct us_list *victims)
{
	uint64_t worst = 0;
	us_domain *a;

	for (a = o->domain; a; a = a->parent) {
		double r, f;
		uint64_t delay;

		if (a->high == US_UNLIMITED || a->c.charged <= a->high)
			continue;
		a->ev[US_EV_HIGH_EVENTS]++;
		(void)us__evict_to(a, a->high, victims); /* what it can */
		if (a->c.charged <= a->high)
			continue;
		if (!a->reclaiming)
			us__reclaim_mark(a, us__now(o->engine));
		r = 4.0 * (double)(a->c.charged - a->high) / (double)(a->high ? a->high : 1);
		f = r * r > 1.0 ? 1.0 : r * r;
		delay = (uint64_t)((double)US_HIGH_DELAY_MAX * f);
		if (delay > worst)
			worst = delay;
	}
	if (!worst)
		return;
	o->high_debt_ns = min_u64(o->high_debt_ns + worst, US_HIGH_DELAY_MAX);
	us__credit_revoke(o->domain);
}
