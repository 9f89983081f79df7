/*
 * Writeback: handing dirty runs to the flush callback and taking the
 * completions back.
 *
 * SPDX-License-Identifier: MIT
 *
 * A buffer has at most one write in flight: only DIRTY buffers are handed
 * to flush, and a buffer dirtied again while in WRITEBACK only gets the
 * REDIRTIED flag. When that write completes, the buffer goes back to DIRTY
 * whatever the result, so the newer data is written by a later flush and an
 * older write can never land after a newer one.
 *
 * The policy that decides when to flush which object (writeback contexts,
 * thresholds, expiry) sits on top of us_object_flush().
 */
#include "internal.h"

int us__flush_collect(us_object *o, uint64_t start, uint64_t end, uint64_t budget, bool force,
		      struct us_batch *bt, uint64_t *bytes)
{
	struct us_tnode *t;
	us_engine *e = o->engine;
	uint64_t got = 0;
	size_t ndirty;

	memset(bt, 0, sizeof(*bt));
	*bytes = 0;
	if (!o->ndirty)
		return 0;
	/* Sized by what is taken, not by all of o's dirty buffers: a flush
	 * within a budget costs what it hands over (grown by doubling). */
	ndirty = (size_t)o->ndirty; /* o->ndirty falls as buffers are taken */
	bt->cap = ndirty < 64 ? ndirty : 64;
	bt->bufs = us__meta_alloc(e, bt->cap * sizeof(*bt->bufs));
	if (!bt->bufs)
		return -ENOMEM;
	bt->obj = o;
	bt->max_run = e->max_flush_bytes;
	bt->gen = ++e->wb_gen;
	/* The dirty buffers wholly inside [start, end), ascending offset:
	 * the index finds each next dirty one without visiting clean ones. */
	for (t = us__tree_find_ge_marked(o->root, start); t;) {
		us_buf *b = us_container_of(t, us_buf, node);
		uint64_t bend = t->key + b->length;

		if (bend > end)
			break;
		if (bt->n == bt->cap) {
			size_t cap = bt->cap * 2 < ndirty ? bt->cap * 2 : ndirty;
			us_buf **bufs;

			if (cap <= bt->cap)
				break; /* every dirty buffer of o is taken */
			bufs = us__meta_alloc(e, cap * sizeof(*bufs));
			if (!bufs)
				break; /* hand over what is taken; the rest waits */
			memcpy(bufs, bt->bufs, bt->n * sizeof(*bufs));
			us__meta_free(e, bt->bufs, bt->cap * sizeof(*bt->bufs));
			bt->bufs = bufs;
			bt->cap = cap;
		}
		assert(b->state == US_BUF_DIRTY);
		if (b->pins < UINT32_MAX) {
			if (got + b->length > budget && !(force && bt->n == 0))
				break;
			/*
			 * Pinned until the callback has returned: a buffer
			 * completed inside the callback could otherwise be
			 * evicted or dropped under our feet. A pin, not a
			 * reference: the callback holds none through it, so its
			 * put or drop is refused (-EINVAL), not obeyed.
			 */
			b->pins++;
			b->wb_gen = bt->gen;
			b->epoch = o->backend->epoch + o->loss_epoch;
			bt->bufs[bt->n++] = b;
			got += b->length;
			us__buf_set_state(b, US_BUF_WRITEBACK);
			b->flags &= (uint8_t)~US_BUF_REDIRTIED;
		}
		if (bend == UINT64_MAX)
			break;
		t = us__tree_find_ge_marked(o->root, bend);
	}
	if (!bt->n) {
		us__meta_free(e, bt->bufs, bt->cap * sizeof(*bt->bufs));
		memset(bt, 0, sizeof(*bt));
		return 0;
	}
	us__domain_event(o->domain, US_EV_WRITEBACK_STARTED, bt->n);
	e->wb_moves++; /* a barrier must cover it before the data is read */
	o->busy++;
	*bytes = got;
	return (int)(bt->n > INT32_MAX ? INT32_MAX : bt->n);
}

/*
 * The barrier for rewrites without a fence was refused (tcache.c): a writer
 * may have seen its buffer DIRTY and skipped the fence, and its new bytes
 * may not be those the callback reads. The batch is written again after
 * this write completes, as for a rewrite during writeback.
 */
static void write_again(us_engine *e, struct us_batch *bt)
{
	size_t i;

	us__lock_nodrain(e);
	for (i = 0; i < bt->n; i++) {
		us_buf *b = bt->bufs[i];

		if (b->state == US_BUF_WRITEBACK && b->wb_gen == bt->gen)
			b->flags |= US_BUF_REDIRTIED;
	}
	us__unlock(e);
}

uint64_t us__flush_issue(us_engine *e, struct us_batch *bt)
{
	us_object *o = bt->obj;
	us_backend *bk;
	size_t i, j, start;
	uint64_t failed = 0, moves = 0;
	bool refused = false;

	bt->untaken = 0;
	if (!o)
		return 0;
	bk = o->backend;
	/* Hand over runs of adjacent buffers, each at most max_run bytes. */
	for (start = 0; start < bt->n; start = i) {
		uint64_t run_off = bt->bufs[start]->node.key, run_len = bt->bufs[start]->length;
		int rc;

		for (i = start + 1; i < bt->n; i++) {
			us_buf *b = bt->bufs[i];

			if (b->node.key != run_off + run_len)
				break;
			if (bt->max_run && run_len + b->length > bt->max_run)
				break;
			run_len += b->length;
		}
		if (refused) {
			/* The backend refused a run of this batch: the rest
			 * waits for the backoff too, without a call. */
			rc = -ECANCELED;
		} else {
			us__lock_nodrain(e);
			bk->flush_calls++;
			bk->flush_bytes += run_len;
			bk->flushed_by_reason[bt->reason] += i - start;
			/* After the collection, which moved the whole batch. */
			if (start == 0)
				moves = us__rewrite_barrier_due(e);
			us__unlock(e);
			/* Between the move to WRITEBACK and the first read of the
			 * data, for the writers that rewrite without a fence... */
			if (moves && !us__rewrite_barrier(e, moves))
				write_again(e, bt);
			moves = 0;
			/* ...and for those with one, this fence pairs with theirs
			 * (the contract is in buf.c, above us_buf_dirty()). */
			atomic_thread_fence(memory_order_seq_cst);
			us__callback_enter(e);
			rc = bk->ops.flush(bk->ctx, o, bt->bufs + start, i - start, run_off,
					   run_len, bt->reason);
			us__callback_exit(e);
		}
		us__lock_nodrain(e);
		if (rc < 0 && !refused) {
			bk->flush_failed++;
			us__obj_backoff(o);
			refused = true;
		}
		for (j = start; j < i; j++) {
			us_buf *b = bt->bufs[j]; /*
			 * Not started: what this write still holds goes back to
			 * DIRTY. A buffer completed meanwhile, dirtied again and
			 * handed to a newer write carries that write's gen.
			 */
			if (rc < 0 && b->state == US_BUF_WRITEBACK && b->wb_gen == bt->gen) {
				b->flags &= (uint8_t)~US_BUF_REDIRTIED;
				us__buf_set_state(b, US_BUF_DIRTY);
				failed++;
				bt->untaken++;
			} else if (b->state == US_BUF_DIRTY && (b->flags & US_BUF_ERROR)) {
				failed++; /* completed with an error inside the callback */
			}
			b->pins--;
			us__buf_lru_update(b);
		}
		us__unlock(e);
	}
	us__lock_nodrain(e);
	if (bt->n)
		us__obj_unbusy(o);
	us__meta_free(e, bt->bufs, bt->cap * sizeof(*bt->bufs));
	us__unlock(e);
	bt->bufs = NULL;
	bt->obj = NULL;
	return failed;
}

int us_object_flush(us_object *o, uint64_t offset, uint64_t length, uint64_t max_run_bytes)
{
	struct us_batch bt;
	uint64_t end, bytes;
	us_engine *e;
	int rc;

	if (!o)
		return -EINVAL;
	e = o->engine;
	end = (length == US_UNLIMITED || offset > UINT64_MAX - length) ? UINT64_MAX :
									 offset + length;
	/* o's queued buffers are in the queues of o's domain. */
	us__lock_domain(e, o->domain);
	rc = us__flush_collect(o, offset, end, UINT64_MAX, true, &bt, &bytes);
	us__unlock(e);
	if (rc <= 0)
		return rc;
	bt.reason = US_REASON_USER;
	if (max_run_bytes)
		bt.max_run = max_run_bytes;
	/* Only what the callback took: a refused run and the rest of its
	 * batch went back to DIRTY. */
	us__flush_issue(e, &bt);
	return rc - (int)bt.untaken;
}

int us_buf_write_done(us_buf *b, enum us_write_result result, uint64_t seq, int err)
{
	us_object *o;
	us_engine *e;
	us_domain *d;
	uint64_t committed;

	if (!b)
		return -EINVAL;
	switch (result) {
	case US_WRITE_STABLE:
		break;
	case US_WRITE_UNSTABLE:
		if (seq == 0)
			return -EINVAL;
		break;
	case US_WRITE_ERROR:
	case US_WRITE_LOST:
		if (err > 0)
			return -EINVAL;
		if (err == 0)
			err = -EIO;
		break;
	default:
		return -EINVAL;
	}
	o = b->obj;
	e = o->engine;
	d = o->domain;
	/* A completion looks at b alone, which a queued entry changes only
	 * when drained: either order ends in the same state (the stats may
	 * count a redirtying where they would have counted a dirtying). */
	us__lock_nodrain(e);
	if (b->state != US_BUF_WRITEBACK) {
		us__unlock(e);
		return -EALREADY;
	}
	switch (result) {
	case US_WRITE_STABLE:
		us__domain_event(d, US_EV_WRITTEN_STABLE, 1);
		b->flags &= (uint8_t)~US_BUF_ERROR;
		b->err = 0;
		break;
	case US_WRITE_UNSTABLE:
		us__domain_event(d, US_EV_WRITTEN_UNSTABLE, 1);
		b->flags &= (uint8_t)~US_BUF_ERROR;
		b->err = 0;
		break;
	case US_WRITE_ERROR:
		us__domain_event(d, US_EV_WRITE_ERRORS, 1);
		b->flags |= US_BUF_ERROR;
		b->err = err;
		break;
	case US_WRITE_LOST:
		us__domain_event(d, US_EV_WRITE_LOST, 1);
		b->flags |= US_BUF_ERROR;
		b->err = err;
		us__obj_record_error(o, err);
		break;
	}
	b->wb_gen = 0;
	if (result == US_WRITE_ERROR)
		us__obj_backoff(o);
	else
		o->backoff_ns = 0;
	if (result == US_WRITE_UNSTABLE && b->epoch != o->backend->epoch + o->loss_epoch) {
		/* Acknowledged by a server that has restarted since, or after
		 * o's own uncommitted data was lost: lost. (Both epochs only
		 * grow, so their sum moves with either.) */
		b->flags &= (uint8_t)~US_BUF_REDIRTIED;
		us__domain_event(d, US_EV_COMMIT_LOST, 1);
		us__buf_set_state(b, US_BUF_DIRTY);
	} else if (b->flags & US_BUF_REDIRTIED) {
		/* Newer data waits: write it again, whatever this write did. */
		b->flags &= (uint8_t)~US_BUF_REDIRTIED;
		us__buf_set_state(b, US_BUF_DIRTY);
	} else if (result == US_WRITE_ERROR) {
		us__buf_set_state(b, US_BUF_DIRTY);
	} else if (result == US_WRITE_UNSTABLE) {
		committed = o->backend->committed_seq > o->committed_seq ?
				    o->backend->committed_seq :
				    o->committed_seq;
		if (seq <= committed) {
			/* Its commit was reported first: durable already. */
			us__domain_event(d, US_EV_COMMITTED, 1);
			us__buf_set_state(b, US_BUF_CLEAN);
		} else {
			us__buf_unstable_link(b, seq);
			us__buf_set_state(b, US_BUF_UNSTABLE);
		}
	} else {
		us__buf_set_state(b, US_BUF_CLEAN);
	}
	/* In-flight budget freed, memory cleaned: wake the flushers, with the
	 * engine lock held so that a destroy cannot free it under the kick. */
	us__kick(e);
	us__unlock(e);
	return 0;
}
