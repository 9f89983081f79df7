/*
 * Integrity sync.
 *
 * SPDX-License-Identifier: MIT
 *
 * A sync covers an object, or every object of a domain's subtree, and the
 * data dirtied before it started. Each buffer carries dirty_seq, the
 * engine's count of CLEAN -> DIRTY transitions when its oldest data not yet
 * durable was dirtied; it keeps it through WRITEBACK, UNSTABLE, rewrites,
 * failed writes and lost commits, until the buffer is CLEAN again. A sync
 * started when the count was S is done when no buffer in its scope is
 * pinned with dirty_seq <= S. Data dirtied after the start does not hold it
 * back (a buffer rewritten without pause can, as in Linux without tagging:
 * its oldest data stays unwritten).
 *
 * The sync counts the bytes of those buffers by state: once at its start,
 * then as they change state (us__sync_account(), from account()). At the
 * start every pinned buffer has dirty_seq <= S, so a domain's counts are its
 * subtree's counters (O(1)) and an object's a scan of its own buffers. Each
 * step (at the start, at every poll, at every us_sync_done()) writes back
 * the scope's dirty buffers while it waits for dirty data (reason SYNC,
 * within the backends' in-flight caps, objects in error backoff excepted)
 * and, once the writes it waits for are done, asks for one commit of the
 * unstable ones (the commit policy's bounds apply); it is done when it waits
 * for nothing. A domain's step visits only what is due: the domains of the
 * subtree with dirty data, their contexts' dirty objects (wb->dirty_objs),
 * and the backends' objects with unstable data (unstable_objs); never the
 * clean ones, however many.
 *
 * Errors are reported the errseq_t way: a permanent error recorded on the
 * object (US_WRITE_LOST) cleans the buffer, so the sync completes, and each
 * caller that has not seen the error yet sees it once through its own
 * cursor (us_object_sync(), us_object_check_error()).
 */
#include "internal.h"

/* Under the lock: s's counts, from the buffers of its scope (once). */
static void count_object(us_sync *s, us_object *o)
{
	struct us_tnode *t;

	for (t = us__tree_find_ge(o->root, 0); t;) {
		us_buf *b = us_container_of(t, us_buf, node);
		uint8_t st = atomic_load_explicit(&b->state, memory_order_relaxed);

		if (st != US_BUF_CLEAN && b->dirty_seq <= s->seq)
			s->nwait[st] += b->length;
		if (t->key + b->length < t->key)
			break;
		t = us__tree_find_ge(o->root, t->key + b->length);
	}
}

/* Under the lock: whether every sync's counts match its buffers (the
 * checker's). */
bool us__sync_counts_ok(us_engine *e)
{
	struct us_list *pos, *bpos, *opos;

	us_list_for_each (pos, &e->syncs) {
		us_sync *s = us_container_of(pos, us_sync, link);
		us_sync t = *s;

		memset(t.nwait, 0, sizeof(t.nwait));
		us_list_for_each (bpos, &e->backends)
			us_list_for_each (opos, &us_container_of(bpos, us_backend, link)->objects) {
				us_object *o = us_container_of(opos, us_object, link);

				if (us__sync_in_scope(s, o))
					count_object(&t, o);
			}
		if (memcmp(t.nwait, s->nwait, sizeof(t.nwait)))
			return false;
	}
	return true;
}

/* Whether bk takes a write now: room in its in-flight cap, or nothing in
 * flight (then one run goes whatever the cap). */
static bool bk_open(const us_backend *bk)
{
	return bk->max_inflight > bk->writeback || !bk->writeback;
}

/* Under the lock: what one object of the scope needs now. When it writes,
 * *open counts the backends still open (bk_open()), if given. */
static void act_object(us_sync *s, us_object *o, uint64_t now, bool commit,
		       struct us_flush_req **flushes, struct us_commit_req **commits,
		       unsigned *open)
{
	struct us_flush_req *r;

	if (o->ndirty && now >= o->retry_ns && us__flush_request(o, s->reason, &r) > 0) {
		r->next = *flushes;
		*flushes = r;
		if (open && !bk_open(o->backend))
			(*open)--;
	}
	if (commit && !us_list_empty(&o->unstable))
		us__want_commit(s->e, o, s->o == NULL, s->reason, commits, now);
}

/*
 * Under the lock: writes back the dirty objects of d's subtree, visiting
 * only the domains with dirty data, while some backend is open (*open:
 * their number). A backend only closes during the walk (each write taken
 * fills its cap), and the objects of a closed one are left as they are, so
 * once all are closed the rest of the walk would do nothing: it stops
 * there. The final sync of 2,000 domains' writers (unstable-sim --domain
 * d,count=2000,max=16M --writer d,bytes=32M) visited 2,000 domains and
 * 1,500 objects at each of its 8,700 steps, to find the cap full.
 */
static void flush_domain(us_sync *s, us_domain *d, uint64_t now, struct us_flush_req **flushes,
			 unsigned *open)
{
	struct us_list *pos, *opos, *onext;

	if (!d->c.dirty)
		return;
	us_list_for_each (pos, &d->wbs) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);

		/* Collecting may take o off the list, never the next one. */
		for (opos = wb->dirty_objs.next; opos != &wb->dirty_objs && *open; opos = onext) {
			onext = opos->next;
			act_object(s, us_container_of(opos, us_object, dirty_link), now, false,
				   flushes, NULL, open);
		}
	}
	for (pos = d->children.next; pos != &d->children && *open; pos = pos->next)
		flush_domain(s, us_container_of(pos, us_domain, sibling), now, flushes, open);
}

/* Under the lock: one step of s; issues nothing (the caller does). */
static void step(us_sync *s, struct us_flush_req **flushes, struct us_commit_req **commits)
{
	us_engine *e = s->e;
	uint64_t now = us__now(e);
	struct us_list *bpos, *opos;
	bool commit;

	if (s->done)
		return;
	if (!s->nwait[US_BUF_DIRTY] && !s->nwait[US_BUF_WRITEBACK] && !s->nwait[US_BUF_UNSTABLE]) {
		s->done = true;
		return;
	}
	/* One commit for all of it, once the writes it waits for are done. */
	commit = !s->nwait[US_BUF_DIRTY] && !s->nwait[US_BUF_WRITEBACK];
	if (s->o) {
		act_object(s, s->o, now, commit, flushes, commits, NULL);
		return;
	}
	if (s->nwait[US_BUF_DIRTY]) {
		unsigned open = 0;

		us_list_for_each (bpos, &e->backends)
			open += bk_open(us_container_of(bpos, us_backend, link));
		flush_domain(s, s->d, now, flushes, &open);
	}
	if (!commit)
		return;
	us_list_for_each (bpos, &e->backends) {
		us_backend *bk = us_container_of(bpos, us_backend, link);

		us_list_for_each (opos, &bk->unstable_objs) {
			us_object *o = us_container_of(opos, us_object, unstable_link);

			if (us__under(o->domain, s->d) &&
			    us__want_commit(e, o, true, s->reason, commits, now) && bk->sync_target)
				break; /* one sync covers the whole backend */
		}
	}
}

/* Calls the callbacks of the syncs that are done and not told yet. Lock
 * held on entry and on return; dropped around each callback. */
static void notify(us_engine *e)
{
	struct us_list *pos;

again:
	us_list_for_each (pos, &e->syncs) {
		us_sync *s = us_container_of(pos, us_sync, link);

		if (s->done && !s->notified) {
			s->notified = true;
			if (s->cb) {
				us__unlock(e);
				us__callback_enter(e);
				s->cb(s->ctx, s);
				us__callback_exit(e);
				us__lock(e);
				goto again; /* the list may have changed */
			}
		}
	}
}

/*
 * Lock held: steps one sync, or all of them, and issues what they ask for
 * (dropping the lock); a second round takes the completions that came
 * inside the callbacks.
 */
static void step_issue(us_engine *e, us_sync *only)
{
	struct us_flush_req *flushes = NULL;
	struct us_commit_req *commits = NULL;
	struct us_list *pos;
	int round;

	for (round = 0; round < 2; round++) {
		if (only)
			step(only, &flushes, &commits);
		else
			us_list_for_each (pos, &e->syncs)
				step(us_container_of(pos, us_sync, link), &flushes, &commits);
		if (!flushes && !commits)
			return;
		us__unlock(e);
		us__issue(e, &flushes, &commits);
		us__lock(e);
	}
}

void us__sync_poll(us_engine *e)
{
	if (us_list_empty(&e->syncs))
		return;
	step_issue(e, NULL);
	notify(e);
}

static int advance_sync(us_sync *s, bool tell);

int us__sync_start(us_engine *e, us_object *o, us_domain *d, enum us_reason reason,
		   us_sync_cb cb, void *ctx, us_sync **out)
{
	us_sync *s = us__meta_alloc(e, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->e = e;
	s->o = o;
	s->d = d;
	s->reason = reason;
	s->cb = cb;
	s->ctx = ctx;
	us__lock(e);
	s->seq = e->dirty_seq;
	if (o)
		o->busy++;
	else
		d->nsyncs++;
	if (o) {
		count_object(s, o);
	} else {
		/* Everything pinned now has dirty_seq <= seq: the subtree's
		 * counters are the counts. */
		s->nwait[US_BUF_DIRTY] = d->c.dirty;
		s->nwait[US_BUF_WRITEBACK] = d->c.writeback;
		s->nwait[US_BUF_UNSTABLE] = d->c.unstable;
	}
	us_list_add_tail(&e->syncs, &s->link);
	us__unlock(e);
	*out = s;
	/* The first step; the callback comes later (a poll, us_sync_done()),
	 * never before the caller has its handle. */
	advance_sync(s, false);
	return 0;
}

int us_object_sync_start(us_object *o, us_sync_cb cb, void *ctx, us_sync **out)
{
	if (!o || !out)
		return -EINVAL;
	return us__sync_start(o->engine, o, NULL, US_REASON_SYNC, cb, ctx, out);
}

int us_domain_sync_start(us_domain *d, us_sync_cb cb, void *ctx, us_sync **out)
{
	if (!d || !out)
		return -EINVAL;
	return us__sync_start(d->engine, NULL, d, US_REASON_SYNC, cb, ctx, out);
}

/* Steps s; with tell, calls the callbacks of the syncs done (which may
 * free s: its result is read before). */
static int advance_sync(us_sync *s, bool tell)
{
	us_engine *e = s->e;
	int done;

	us__lock(e);
	step_issue(e, s);
	done = s->done;
	if (tell)
		notify(e);
	us__unlock(e);
	return done;
}

int us_sync_done(us_sync *s)
{
	if (!s)
		return -EINVAL;
	return advance_sync(s, true);
}

int us_sync_free(us_sync *s)
{
	us_engine *e;

	if (!s)
		return -EINVAL;
	e = s->e;
	us__lock(e);
	us_list_del(&s->link);
	if (s->o)
		us__obj_unbusy(s->o);
	else
		s->d->nsyncs--;
	us__unlock(e);
	us__meta_free(e, s, sizeof(*s));
	return 0;
}

/* The blocking forms wait on the engine's clock, for the flushers. */
int us__sync_wait(us_engine *e, us_sync *s)
{
	int rc;

	while ((rc = us_sync_done(s)) == 0) {
		us__kick(e);
		us__wait_progress(e, 10 * US_MSEC);
	}
	return rc < 0 ? rc : 0;
}

int us_object_sync(us_object *o, uint64_t *since)
{
	us_sync *s;
	int rc, err = 0;

	if (!o || !since)
		return -EINVAL;
	if (!o->engine->nthreads)
		return -EAGAIN; /* polled mode: us_object_sync_start() */
	if (us__in_callback(o->engine))
		return -EDEADLK;
	if ((rc = us_object_sync_start(o, NULL, NULL, &s)))
		return rc;
	rc = us__sync_wait(o->engine, s);
	us_sync_free(s);
	if (rc)
		return rc;
	return us_object_check_error(o, since, &err) == 1 ? err : 0;
}

int us_domain_sync(us_domain *d)
{
	us_sync *s;
	int rc;

	if (!d)
		return -EINVAL;
	if (!d->engine->nthreads)
		return -EAGAIN;
	if (us__in_callback(d->engine))
		return -EDEADLK;
	if ((rc = us_domain_sync_start(d, NULL, NULL, &s)))
		return rc;
	rc = us__sync_wait(d->engine, s);
	us_sync_free(s);
	return rc;
}

