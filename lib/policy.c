/*
 * The commit policy: the commits the engine asks for, and the issue of
 * the flushes and commits collected under the lock.
 *
 * SPDX-License-Identifier: MIT
 *
 * COMMITS THE ENGINE ASKS FOR
 *
 * Unstable buffers are freed only by a commit on the server. The engine asks
 * for one (reason given to the callback):
 *  - BACKGROUND / THROTTLE: a domain on the object's chain is past its
 *    background threshold and unstable bytes are at least half of its
 *    writeback context's pinned bytes: flushing alone would not bring the
 *    domain down (the Lustre change: "flush, then sync, force the commit");
 *  - BACKGROUND, also: the context's unstable bytes reach half of its
 *    domain's background threshold, whatever the rest: while a commit is
 *    in flight a fast writer's next batch is acknowledged, so commits run
 *    back to back (one per commit latency at most, each covering at least
 *    bg / 2) instead of waiting for the domain to climb past bg again;
 *  - RECLAIM: a charge is waiting for memory in a domain on the chain;
 *  - EXPIRY: the object's unstable data is older than commit_interval;
 * the first two only with US_PARAM_FORCE_COMMIT on (the default).
 * Under pressure a backend with a sync callback is synced as a whole (one
 * call frees everything it holds); otherwise, and for expiry, objects are
 * committed one by one.
 *
 * No commit storms: a backend has at most max_commits commits of the
 * engine's in flight (a sync counts for all of them), and an object or a
 * backend already being committed is not asked again until that commit is
 * done (its target seq reached, or its unstable data gone) or timed out
 * (US_COMMIT_TIMEOUT). A callback that fails backs off exponentially from
 * 100 ms to 5 s; its buffers stay unstable. Every call is counted in the
 * backend's stats, with the bytes written, so the cost per GiB is visible.
 */
#include "internal.h"

struct us_commit_req {
	us_backend *bk;
	us_object *o; /* NULL: a backend-wide sync */
	uint64_t target;
	enum us_reason reason;
	struct us_commit_req *next;
};

/* A commit of o that never completed frees its slot of the backend's cap
 * after US_COMMIT_TIMEOUT. */
static void commit_slot_expire(us_object *o, uint64_t now)
{
	if (o->commit_target && now >= o->commit_issued_ns + US_COMMIT_TIMEOUT) {
		o->commit_target = 0;
		o->backend->commits_busy--;
	}
}

/* Retires the backend-wide sync once it is done, moot or timed out. */
static void sync_retire(us_backend *bk, uint64_t now)
{
	if (bk->sync_target && (bk->committed_seq >= bk->sync_target || bk->unstable == 0 ||
				now >= bk->sync_issued_ns + US_COMMIT_TIMEOUT))
		bk->sync_target = 0;
}

/*
 * Under the lock: asks for a commit covering o's unstable data (or its
 * backend's, with sync), unless one is in flight, backing off or over the
 * cap. Returns true when a request was added.
 */
bool us__want_commit(us_engine *e, us_object *o, bool prefer_sync, enum us_reason reason,
		     struct us_commit_req **list, uint64_t now)
{
	us_backend *bk = o->backend;
	struct us_commit_req *r;
	bool sync;

	if (us_list_empty(&o->unstable) || now < bk->commit_retry_ns)
		return false;
	sync_retire(bk, now);
	if (bk->sync_target)
		return false; /* a sync in flight covers it */
	sync = bk->ops.sync && (prefer_sync || !bk->ops.commit);
	if (!sync) {
		commit_slot_expire(o, now);
		if (o->commit_target || bk->commits_busy >= e->max_commits)
			return false;
	} else if (bk->commits_busy >= e->max_commits) {
		return false;
	}
	r = us__meta_alloc(e, sizeof(*r));
	if (!r)
		return false; /* asked again at the next poll */
	r->bk = bk;
	r->reason = reason;
	if (!bk->commit_lat_ns && !bk->commit_first_ns)
		bk->commit_first_ns = now;
	if (sync) {
		struct us_list *pos;

		r->o = NULL;
		r->target = bk->max_seq;
		bk->sync_target = bk->max_seq;
		bk->sync_issued_ns = now;
		bk->sync_calls++;
		/* The commit interval counts again from now, for all of it. */
		us_list_for_each (pos, &bk->unstable_objs)
			us_container_of(pos, us_object, unstable_link)->unstable_since_ns = now;
	} else {
		r->o = o;
		r->target = us_container_of(o->unstable.prev, us_buf, link)->seq;
		o->commit_target = r->target;
		o->commit_issued_ns = now;
		o->unstable_since_ns = now; /* the interval counts again */
		bk->commits_busy++;
		bk->commit_calls++;
		o->busy++;
	}
	r->next = *list;
	*list = r;
	return true;
}

int us__flush_request(us_object *o, enum us_reason reason, struct us_flush_req **out)
{
	us_backend *bk = o->backend;
	us_engine *e = o->engine;
	uint64_t budget = bk->max_inflight > bk->writeback ? bk->max_inflight - bk->writeback : 0;
	struct us_flush_req *r;
	uint64_t bytes;
	int rc;

	*out = NULL;
	if (!budget && bk->writeback)
		return 0;
	r = us__meta_alloc(e, sizeof(*r));
	if (!r)
		return -ENOMEM;
	rc = us__flush_collect(o, 0, UINT64_MAX, budget, bk->writeback == 0, &r->bt, &bytes);
	if (rc <= 0) {
		us__meta_free(e, r, sizeof(*r));
		return 0;
	}
	r->bt.reason = reason;
	*out = r;
	return rc;
}

void us__issue(us_engine *e, struct us_flush_req **fl, struct us_commit_req **cl)
{
	struct us_flush_req *flushes = *fl;
	struct us_commit_req *commits = *cl;

	*fl = NULL;
	*cl = NULL;
	while (flushes) {
		struct us_flush_req *r = flushes;

		flushes = r->next;
		us__flush_issue(e, &r->bt);
		us__lock_nodrain(e);
		us__meta_free(e, r, sizeof(*r));
		us__unlock(e);
	}
	us__commit_issue(e, commits);
}

/* Without the lock: calls the commit and sync callbacks; frees the list. */
void us__commit_issue(us_engine *e, struct us_commit_req *list)
{
	while (list) {
		struct us_commit_req *r = list;
		us_backend *bk = r->bk;
		int rc;

		list = r->next;
		rc = us__commit_call(bk, r->o, r->reason);
		us__lock_nodrain(e);
		if (rc < 0) {
			/* Kept unstable; asked again after the backoff. */
			bk->commit_failed++;
			bk->commit_backoff_ns = us__backoff_next(bk->commit_backoff_ns);
			bk->commit_retry_ns = us__now(e) + bk->commit_backoff_ns;
			if (!r->o && bk->sync_target == r->target)
				bk->sync_target = 0;
			if (r->o && r->o->commit_target == r->target) {
				r->o->commit_target = 0;
				bk->commits_busy--;
			}
		} else {
			bk->commit_backoff_ns = 0;
		}
		if (r->o)
			us__obj_unbusy(r->o);
		us__meta_free(e, r, sizeof(*r));
		us__unlock(e);
	}
}

/* Under the lock: the reason the policy commits o now, or -1. */
static int commit_reason(us_engine *e, us_object *o, uint64_t now)
{
	struct us_wb *wb = o->wb;
	us_domain *a;

	if (e->force_commit) {
		for (a = o->domain; a; a = a->parent)
			if (a->reclaiming)
				return US_REASON_RECLAIM;
		if (wb->unstable) {
			int why = us__wb_reason(wb);

			/* Flushing alone would not bring the domain down:
			 * unstable data is half of the context's pinned
			 * bytes, or its writers are held and it has a run's
			 * worth (a context behind a slow link holds mostly
			 * dirty data, and its writers wait for commits). */
			if ((why == US_REASON_BACKGROUND || why == US_REASON_THROTTLE) &&
			    2 * wb->unstable >= wb->dirty + wb->writeback + wb->unstable)
				return why;
			if (why == US_REASON_THROTTLE && wb->unstable >= e->max_flush_bytes)
				return why;
		}
		{
			uint64_t bg, dirty;

			us__domain_thresholds(wb->domain, &bg, &dirty);
			if (bg != US_UNLIMITED && 2 * wb->unstable >= bg)
				return US_REASON_BACKGROUND;
		}
	}
	if (now >= sat_add(o->unstable_since_ns, e->commit_interval_ns))
		return US_REASON_EXPIRY;
	return -1;
}

/*
 * A charge that stopped retrying leaves its domain marked: not for long, 4
 * reclaim_waits after its last attempt. The marks are set in several places
 * (us__reclaim(), us__high_penalty()) and cleared here by a walk of the
 * tree, which runs when the earliest mark the last walk saw is due, and
 * otherwise once per reclaim_wait: a new mark is seen within one wait, well
 * before it is due, so each goes at the first poll after its time, as with
 * a walk at every poll; but the polls in between cost nothing per domain.
 */
static uint64_t reclaim_expire_walk(us_engine *e, us_domain *d, uint64_t now, uint64_t four)
{
	uint64_t next = UINT64_MAX;
	struct us_list *pos;

	if (d->reclaiming && now >= sat_add(d->reclaim_last_ns, four))
		us__reclaim_unmark(d);
	if (d->reclaiming)
		next = sat_add(d->reclaim_last_ns, four);
	us_list_for_each (pos, &d->children)
		next = min_u64(next,
			       reclaim_expire_walk(e, us_container_of(pos, us_domain, sibling), now,
						   four));
	return next;
}

static void reclaim_expire(us_engine *e, uint64_t now)
{
	uint64_t four = e->reclaim_wait_ns > UINT64_MAX / 4 ? UINT64_MAX : 4 * e->reclaim_wait_ns;

	if (now < e->reclaim_expiry_ns)
		return;
	e->reclaim_expiry_ns = min_u64(reclaim_expire_walk(e, e->root, now, four),
				       sat_add(now, e->reclaim_wait_ns));
}

void us__commit_policy(us_engine *e, uint64_t now)
{
	struct us_commit_req *list = NULL;
	struct us_list *bpos, *opos;

	reclaim_expire(e, now);
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		sync_retire(bk, now);
		/* A sync in flight covers every object, and a backend backing
		 * off is asked nothing: no object needs its reason computed. */
		if (bk->sync_target || now < bk->commit_retry_ns)
			continue;
		us_list_for_each (opos, &bk->unstable_objs) {
			us_object *o = us_container_of(opos, us_object, unstable_link);
			int why;

			commit_slot_expire(o, now);
			why = commit_reason(e, o, now);

			if (why >= 0 &&
			    us__want_commit(e, o, why != US_REASON_EXPIRY, (enum us_reason)why,
					    &list, now) &&
			    bk->sync_target)
				break; /* one sync covers the whole backend */
		}
	}
	if (!list)
		return;
	us__unlock(e);
	us__commit_issue(e, list);
	us__lock(e);
}
