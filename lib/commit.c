/*
 * Commits: unstable buffers become clean when the backend reports their
 * commit sequence number durable, or dirty again when it lost them (all
 * of the backend's, or one object's).
 *
 * SPDX-License-Identifier: MIT
 *
 * Each UNSTABLE buffer carries the seq its write was acknowledged with, and
 * sits on its object's unstable list sorted by seq; objects with unstable
 * buffers sit on their backend's unstable list. commit_done(seq) pops each
 * list's head while it is covered: O(objects with unstable data + buffers
 * cleaned). The highest seq reported is remembered (per backend and per
 * object), so a write acknowledged after the commit that covers it goes
 * straight to CLEAN (us_buf_write_done()).
 */
#include "internal.h"

/* Cleans o's unstable buffers with seq <= seq; returns how many. */
static uint64_t clean_upto(us_object *o, uint64_t seq)
{
	uint64_t n = 0;

	/* The object's own commit reached its target: time it. */
	if (o->commit_target && seq >= o->commit_target)
		us__commit_latency(o->backend, us__now(o->engine) - o->commit_issued_ns);

	while (!us_list_empty(&o->unstable)) {
		us_buf *b = us_container_of(o->unstable.next, us_buf, link);

		if (b->seq > seq)
			break;
		us__buf_unstable_unlink(b);
		us__buf_set_state(b, US_BUF_CLEAN);
		us__domain_event(o->domain, US_EV_COMMITTED, 1);
		n++;
	}
	return n;
}

static int clamp_count(uint64_t n)
{
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

/*
 * Under the lock: whether a commit report for epoch (the us_backend_epoch()
 * its server instance was known by; NULL: not said) may be taken: 0, or
 * -ESTALE when us_backend_commit_lost() was called since (the old server's
 * report covers nothing the new one holds), -EINVAL for an epoch to come.
 */
static int epoch_check(const us_backend *bk, const uint64_t *epoch)
{
	if (!epoch || *epoch == bk->commit_lost_calls)
		return 0;
	return *epoch < bk->commit_lost_calls ? -ESTALE : -EINVAL;
}

static int backend_commit_done(us_backend *bk, const uint64_t *epoch, uint64_t seq)
{
	struct us_list *pos, *next;
	uint64_t n = 0;
	int rc;

	if (!bk || seq == 0)
		return -EINVAL;
	us__lock(bk->engine);
	rc = epoch_check(bk, epoch);
	if (rc) {
		us__unlock(bk->engine);
		return rc;
	}
	bk->commit_done_calls++;
	if (seq > bk->committed_seq)
		bk->committed_seq = seq;
	for (pos = bk->unstable_objs.next; pos != &bk->unstable_objs; pos = next) {
		next = pos->next; /* clean_upto() may unlink pos */
		n += clean_upto(us_container_of(pos, us_object, unstable_link), seq);
	}
	if (bk->sync_target && bk->committed_seq >= bk->sync_target) {
		us__commit_latency(bk, us__now(bk->engine) - bk->sync_issued_ns);
		bk->sync_target = 0;
	}
	us__kick(bk->engine); /* progress: reclaim and sync waiters */
	us__unlock(bk->engine);
	return clamp_count(n);
}

int us_backend_commit_done(us_backend *bk, uint64_t seq)
{
	return backend_commit_done(bk, NULL, seq);
}

int us_backend_commit_done_epoch(us_backend *bk, uint64_t epoch, uint64_t seq)
{
	return backend_commit_done(bk, &epoch, seq);
}

uint64_t us_backend_epoch(const us_backend *bk)
{
	uint64_t ep;

	if (!bk)
		return 0;
	us__lock_nodrain(bk->engine);
	ep = bk->commit_lost_calls;
	us__unlock(bk->engine);
	return ep;
}

static int object_commit_done(us_object *o, const uint64_t *epoch, uint64_t seq)
{
	uint64_t n;
	int rc;

	if (!o || seq == 0)
		return -EINVAL;
	us__lock(o->engine);
	rc = epoch_check(o->backend, epoch);
	if (rc) {
		us__unlock(o->engine);
		return rc;
	}
	o->backend->commit_done_calls++;
	if (seq > o->committed_seq)
		o->committed_seq = seq;
	n = clean_upto(o, seq);
	us__kick(o->engine);
	us__unlock(o->engine);
	return clamp_count(n);
}

int us_object_commit_done(us_object *o, uint64_t seq)
{
	return object_commit_done(o, NULL, seq);
}

int us_object_commit_done_epoch(us_object *o, uint64_t epoch, uint64_t seq)
{
	return object_commit_done(o, &epoch, seq);
}

/* Under the lock: o's UNSTABLE buffers DIRTY again, to be written again;
 * how many. */
static uint64_t redirty_unstable(us_object *o)
{
	uint64_t n = 0;

	while (!us_list_empty(&o->unstable)) {
		us_buf *b = us_container_of(o->unstable.next, us_buf, link);

		us__buf_unstable_unlink(b);
		us__buf_set_state(b, US_BUF_DIRTY);
		us__domain_event(o->domain, US_EV_COMMIT_LOST, 1);
		n++;
	}
	return n;
}

int us_backend_commit_lost(us_backend *bk)
{
	uint64_t n = 0;

	if (!bk)
		return -EINVAL;
	us__lock(bk->engine);
	bk->commit_lost_calls++;
	/* Writes in flight now will be acknowledged by a server that forgot.
	 * Its numbering may start again: what it reported committed before
	 * covers nothing now. */
	bk->epoch++;
	bk->sync_target = 0;
	bk->committed_seq = 0;
	bk->max_seq = 0;
	{
		struct us_list *pos;

		us_list_for_each (pos, &bk->objects)
			us_container_of(pos, us_object, link)->committed_seq = 0;
	}
	/* Each object leaves the list with its last unstable buffer. */
	while (!us_list_empty(&bk->unstable_objs))
		n += redirty_unstable(
			us_container_of(bk->unstable_objs.next, us_object, unstable_link));
	us__unlock(bk->engine);
	return clamp_count(n);
}

int us_object_commit_lost(us_object *o)
{
	uint64_t n;

	if (!o)
		return -EINVAL;
	us__lock(o->engine);
	/* Not the backend's epoch: the server keeps the other objects'
	 * writes and its numbering. o's own: a write of o in flight now,
	 * acknowledged UNSTABLE later, is written again too (its data may be
	 * what the failed commit dropped: a local fdatasync() reports the
	 * error once, and the next one succeeds without it). The unlinks free
	 * o's commit slot (us__commit_retire()) once none is left that it
	 * covers. */
	o->loss_epoch++;
	n = redirty_unstable(o);
	us__kick(o->engine); /* the flushers write them again */
	us__unlock(o->engine);
	return clamp_count(n);
}

int us__commit_call(us_backend *bk, us_object *o, enum us_reason reason)
{
	us_engine *e = bk->engine;
	int rc;

	us__callback_enter(e);
	if (o && bk->ops.commit)
		rc = bk->ops.commit(bk->ctx, o, reason);
	else
		rc = bk->ops.sync(bk->ctx, bk, reason);
	us__callback_exit(e);
	return rc;
}

int us_object_commit(us_object *o)
{
	us_backend *bk;
	us_engine *e;
	int rc;

	if (!o)
		return -EINVAL;
	e = o->engine;
	bk = o->backend;
	us__lock(e);
	if (us_list_empty(&o->unstable)) {
		us__unlock(e);
		return 0;
	}
	o->busy++;
	if (bk->ops.commit)
		bk->commit_calls++;
	else
		bk->sync_calls++;
	us__unlock(e);
	rc = us__commit_call(bk, o, US_REASON_USER);
	us__lock(e);
	if (rc < 0)
		bk->commit_failed++;
	us__obj_unbusy(o);
	us__unlock(e);
	return rc > 0 ? 0 : rc;
}
