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

int us_object_flush(us_object *o, uint64_t offset, uint64_t length, uint64_t max_run_bytes)
{
	uint64_t end, n = 0, i, j, start;
	struct us_tnode *t;
	us_buf **bufs;
	us_backend *bk;
	us_engine *e;
	size_t cap;

	if (!o)
		return -EINVAL;
	e = o->engine;
	bk = o->backend;
	end = (length == US_UNLIMITED || offset > UINT64_MAX - length) ? UINT64_MAX :
									 offset + length;

	us__lock(e);
	if (!o->ndirty) {
		us__unlock(e);
		return 0;
	}
	cap = (size_t)o->ndirty;
	bufs = us__meta_alloc(e, cap * sizeof(*bufs));
	if (!bufs) {
		us__unlock(e);
		return -ENOMEM;
	}
	/* Collect the dirty buffers wholly inside the range, ascending offset. */
	for (t = us__tree_find_ge(o->root, offset); t && n < cap;) {
		us_buf *b = us_container_of(t, us_buf, node);

		if (t->key + b->length > end || t->key + b->length < t->key)
			break;
		if (b->state == US_BUF_DIRTY && b->refs < UINT32_MAX) {
			/*
			 * Pinned by a reference until the callback has returned:
			 * a buffer completed inside the callback could otherwise
			 * be evicted or dropped under our feet.
			 */
			b->refs++;
			bufs[n++] = b;
			us__buf_set_state(b, US_BUF_WRITEBACK);
			b->flags &= (uint8_t)~US_BUF_REDIRTIED;
		}
		if (t->key + b->length == UINT64_MAX)
			break;
		t = us__tree_find_ge(o->root, t->key + b->length);
	}
	if (n) {
		us__domain_event(o->domain, US_EV_WRITEBACK_STARTED, n);
		o->busy++;
	}
	us__unlock(e);

	/* Hand over runs of adjacent buffers, each at most max_run_bytes. */
	for (start = 0; start < n; start = i) {
		uint64_t run_off = bufs[start]->node.key, run_len = bufs[start]->length;
		int rc;

		for (i = start + 1; i < n; i++) {
			us_buf *b = bufs[i];

			if (b->node.key != run_off + run_len)
				break;
			if (max_run_bytes && run_len + b->length > max_run_bytes)
				break;
			run_len += b->length;
		}
		us__lock(e);
		bk->flush_calls++;
		bk->flush_bytes += run_len;
		us__unlock(e);
		rc = bk->ops.flush(bk->ctx, o, bufs + start, (size_t)(i - start), run_off, run_len,
				   US_REASON_USER);
		us__lock(e);
		if (rc < 0)
			bk->flush_failed++;
		for (j = start; j < i; j++) {
			us_buf *b = bufs[j];

			/* Not started: what was not completed goes back to DIRTY. */
			if (rc < 0 && b->state == US_BUF_WRITEBACK) {
				b->flags &= (uint8_t)~US_BUF_REDIRTIED;
				us__buf_set_state(b, US_BUF_DIRTY);
			}
			b->refs--;
			us__buf_lru_update(b);
		}
		us__unlock(e);
	}
	us__lock(e);
	if (n)
		o->busy--;
	us__meta_free(e, bufs, cap * sizeof(*bufs));
	us__unlock(e);
	return (int)(n > INT32_MAX ? INT32_MAX : n);
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
	us__lock(e);
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
	if (b->flags & US_BUF_REDIRTIED) {
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
	us__unlock(e);
	return 0;
}
