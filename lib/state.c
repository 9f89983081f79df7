/*
 * The buffer state machine: the one function that moves a buffer between
 * states with all its accounting (us__buf_set_state()), the state change of
 * a write, the drain of a dirtying a writer cache queued, the LRU and the
 * unstable lists. The buffer API that drives it is buf.c.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

/* The counter of each state, by enum us_buf_state. */
static const size_t state_counter[] = {
	[US_BUF_CLEAN] = US_COUNTER(clean),
	[US_BUF_DIRTY] = US_COUNTER(dirty),
	[US_BUF_WRITEBACK] = US_COUNTER(writeback),
	[US_BUF_UNSTABLE] = US_COUNTER(unstable),
};

/* Adds delta to the object's, the backend's and the writeback context's
 * counter of s. */
static void pinned_add(us_object *o, enum us_buf_state s, int64_t delta)
{
	us_backend *bk = o->backend;
	struct us_wb *wb = o->wb;

	if (s != US_BUF_CLEAN)
		o->pinned += (uint64_t)delta;
	switch (s) {
	case US_BUF_DIRTY:
		bk->dirty += (uint64_t)delta;
		wb->dirty += (uint64_t)delta;
		break;
	case US_BUF_WRITEBACK:
		bk->writeback += (uint64_t)delta;
		wb->writeback += (uint64_t)delta;
		break;
	case US_BUF_UNSTABLE:
		bk->unstable += (uint64_t)delta;
		wb->unstable += (uint64_t)delta;
		break;
	default:
		break;
	}
}

/*
 * Moves b to state to, updating its domain chain, its backend, its
 * writeback context and its object. List membership for UNSTABLE is the
 * caller's (it needs the seq); the LRU follows through us__buf_lru_update().
 * An object enters its writeback context's dirty list, at the young end,
 * when its first buffer becomes DIRTY, and leaves it with its last.
 */
static void account(us_buf *b, enum us_buf_state from, enum us_buf_state to)
{
	us_object *o = b->obj;
	struct us_wb *wb = o->wb;

	/*
	 * A context going from idle to busy starts a new bandwidth window:
	 * the idle time says nothing about the backend's speed.
	 */
	if (!wb->dirty && !wb->writeback && !wb->unstable && to != US_BUF_CLEAN) {
		wb->bw_stamp_ns = us__now(o->engine);
		wb->bw_cleaned = wb->cleaned;
		/* Nobody wrote meanwhile: its writers' pace is learnt anew. */
		wb->ratelimit = 0;
		wb->rl_stamp_ns = wb->bw_stamp_ns;
		us__wb_restamped(o->engine, wb);
	}

	us__domain_add(o->domain, state_counter[from], -(int64_t)b->length);
	us__domain_add(o->domain, state_counter[to], b->length);
	if (from == US_BUF_CLEAN) {
		us_domain *a;

		for (a = o->domain; a; a = a->parent) {
			uint64_t p = a->c.dirty + a->c.writeback + a->c.unstable;

			if (p > a->peak_pinned)
				a->peak_pinned = p;
		}
	}
	if (to == US_BUF_WRITEBACK && !o->backend->writeback) {
		o->backend->busy_since_ns = us__now(o->engine);
		o->backend->wlat_armed = true;
	}
	pinned_add(o, from, -(int64_t)b->length);
	pinned_add(o, to, b->length);
	if (from == US_BUF_WRITEBACK) {
		us_backend *bk = o->backend;

		bk->written += b->length;
		if (bk->wlat_armed && us__now(o->engine) > bk->busy_since_ns) {
			/* The first write of a busy stretch had no queue (a run
			 * refused at once is not a write). */
			bk->wlat_armed = false;
			us__wlat(bk, us__now(o->engine) - bk->busy_since_ns);
		}
		if (!bk->writeback)
			bk->busy_ns += us__now(o->engine) - bk->busy_since_ns;
	}
	us__wb_lists(wb);
	/* New data: newer than every sync running (set before they count). */
	if (from == US_BUF_CLEAN && to == US_BUF_DIRTY)
		b->dirty_seq = ++o->engine->dirty_seq;
	if (!us_list_empty(&o->engine->syncs) && from != to)
		us__sync_account(b, from, to);
	if (to == US_BUF_CLEAN && (from == US_BUF_WRITEBACK || from == US_BUF_UNSTABLE))
		o->wb->cleaned += b->length;
	if (to == US_BUF_DIRTY && from == US_BUF_CLEAN)
		us__wb_writer_note(o, b->length, 0); /* the writers' pace (wb.c) */
	if (to == US_BUF_CLEAN && from != US_BUF_CLEAN)
		us__domain_progress(o->domain, b->length);
	if (from == US_BUF_DIRTY) {
		us__tree_set_mark(o->root, b->node.key, false);
		if (--o->ndirty == 0)
			us_list_del(&o->dirty_link);
	}
	if (to == US_BUF_DIRTY) {
		b->flags &= (uint8_t)~US_BUF_RECLAIM;
		us__tree_set_mark(o->root, b->node.key, true);
		if (o->ndirty++ == 0) {
			struct us_list *pos = o->wb->dirty_objs.prev;

			/* Data back from writeback or a lost commit is as old as
			 * it was: it keeps its place for expiry. */
			if (from == US_BUF_CLEAN)
				o->dirtied_when_ns = us__now(o->engine);
			while (pos != &o->wb->dirty_objs &&
			       us_container_of(pos, us_object, dirty_link)->dirtied_when_ns >
				       o->dirtied_when_ns)
				pos = pos->prev;
			us_list_insert_after(pos, &o->dirty_link);
		}
	}
}

void us__buf_set_state(us_buf *b, enum us_buf_state to)
{
	enum us_buf_state from = b->state;

	if (from == to)
		return;
	account(b, from, to);
	b->state = (uint8_t)to;
	us__buf_lru_update(b);
}

/*
 * Under the lock: the state change of a write into b (CLEAN or UNSTABLE to
 * DIRTY; WRITEBACK marked to be written again). Returns the bytes it pins
 * anew: b's length when it was CLEAN or UNSTABLE, or the first write into
 * it during its writeback (one more write to come); 0 when already DIRTY or
 * already marked.
 */
uint64_t us__buf_dirtying(us_buf *b)
{
	us_domain *d = b->obj->domain;

	switch (atomic_load_explicit(&b->state, memory_order_relaxed)) {
	case US_BUF_UNSTABLE:
		us__buf_unstable_unlink(b);
		/* fallthrough */
	case US_BUF_CLEAN:
		us__buf_set_state(b, US_BUF_DIRTY);
		us__domain_event(d, US_EV_DIRTIED, 1);
		return b->length;
	case US_BUF_WRITEBACK:
		if (b->flags & US_BUF_REDIRTIED)
			return 0;
		b->flags |= US_BUF_REDIRTIED;
		us__domain_event(d, US_EV_REDIRTIED, 1);
		return b->length;
	default: /* DIRTY */
		return 0;
	}
}

/*
 * Applies one lock-free dirtying queued by a writer cache: what the locked
 * path of us_buf_dirty() would have done then, now. The credit it spent
 * leaves the chain's granted bytes: if the buffer was CLEAN it became part
 * of pinned; if not (two writers queued it, or it was accounted and moved
 * on before this drain), it pinned nothing new and the credit is simply
 * used up. The entry's writer still holds its reference, or drained its
 * queue before it let go (us_buf_put() drains the queues of b's domain),
 * so b is alive and attached.
 */
void us__drain_buf(us_engine *e, us_buf *b)
{
	us_object *o = b->obj;
	us_domain *a;

	(void)e;
	atomic_store_explicit(&b->lf_tag, 0, memory_order_relaxed);
	for (a = o->domain; a; a = a->parent)
		a->granted -= b->length;
	if (b->attached)
		us__buf_dirtying(b);
}

/* Puts b on or takes it off its domain's LRU to keep invariant I4. */
void us__buf_lru_update(us_buf *b)
{
	bool want = b->attached && b->state == US_BUF_CLEAN && b->refs == 0 && b->pins == 0;
	us_object *o = b->obj;

	if (want == b->on_lru)
		return;
	if (want && (b->flags & US_BUF_RECLAIM)) {
		/* Written back for reclaim: the first to go. */
		b->flags &= (uint8_t)~US_BUF_RECLAIM;
		b->lru_stamp = --o->engine->lru_low; /* below every other stamp */
		us_list_insert_after(&o->domain->lru, &b->link);
		us__domain_add(o->domain, US_COUNTER(evictable), b->length);
		o->nlru++;
	} else if (want) {
		b->lru_stamp = ++o->engine->lru_tick;
		us_list_add_tail(&o->domain->lru, &b->link);
		us__domain_add(o->domain, US_COUNTER(evictable), b->length);
		o->nlru++;
	} else {
		us_list_del(&b->link);
		us__domain_add(o->domain, US_COUNTER(evictable), -(int64_t)b->length);
		o->nlru--;
	}
	b->on_lru = want;
	us__lru_fix(o->domain);
}

void us__buf_unstable_unlink(us_buf *b)
{
	us_object *o = b->obj;

	assert(b->state == US_BUF_UNSTABLE);
	us_list_del(&b->link);
	b->seq = 0;
	if (us_list_empty(&o->unstable))
		us_list_del(&o->unstable_link);
	us__commit_retire(o);
}

/* Inserts b in its object's unstable list, kept sorted by seq (I5). Writes
 * complete mostly in order, so the walk from the tail is short. */
void us__buf_unstable_link(us_buf *b, uint64_t seq)
{
	us_object *o = b->obj;
	struct us_list *pos = o->unstable.prev;

	b->seq = seq;
	if (seq > o->backend->max_seq)
		o->backend->max_seq = seq;
	while (pos != &o->unstable && us_container_of(pos, us_buf, link)->seq > seq)
		pos = pos->prev;
	if (us_list_empty(&o->unstable)) {
		us_list_add_tail(&o->backend->unstable_objs, &o->unstable_link);
		o->unstable_since_ns = us__now(o->engine);
	}
	us_list_insert_after(pos, &b->link);
}

void us__obj_backoff(us_object *o)
{
	uint64_t now = us__now(o->engine);

	/* Once per attempt: the runs and buffers of one failed batch, or the
	 * failures reported while backing off, do not escalate it. */
	if (now < o->retry_ns)
		return;
	o->backoff_ns = us__backoff_next(o->backoff_ns);
	o->retry_ns = now + o->backoff_ns;
}

void us__obj_record_error(us_object *o, int err)
{
	o->err = err;
	o->errseq++;
}

/*
 * Under the lock, from account(): b moves from one state to another; the
 * syncs that wait for it count it. A buffer counts for a sync while it is
 * pinned with data from before the sync's start (dirty_seq <= seq); a
 * CLEAN -> DIRTY transition gives it a newer dirty_seq first.
 */
void us__sync_account(us_buf *b, enum us_buf_state from, enum us_buf_state to)
{
	us_engine *e = b->obj->engine;
	struct us_list *pos;

	us_list_for_each (pos, &e->syncs) {
		us_sync *s = us_container_of(pos, us_sync, link);

		if (b->dirty_seq > s->seq || !us__sync_in_scope(s, b->obj))
			continue;
		if (from != US_BUF_CLEAN)
			s->nwait[from] -= b->length;
		if (to != US_BUF_CLEAN)
			s->nwait[to] += b->length;
	}
}

/* Under the lock: o's commit in flight ends once no unstable buffer it
 * covers is left (its slot of the backend's cap is freed). */
void us__commit_retire(us_object *o)
{
	us_buf *head;

	if (!o->commit_target)
		return;
	if (!us_list_empty(&o->unstable)) {
		head = us_container_of(o->unstable.next, us_buf, link);
		if (head->seq <= o->commit_target)
			return;
	}
	o->commit_target = 0;
	o->backend->commits_busy--;
}
