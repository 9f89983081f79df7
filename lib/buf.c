/*
 * Buffers: creation, lookup, references, dirtying, dropping, and the one
 * function that moves a buffer between states with its accounting.
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
static uint64_t dirtying(us_buf *b)
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
		dirtying(b);
}

/*
 * The lock-free first dirtying of a CLEAN buffer the caller references:
 * spend the thread's credit for the domain and queue the buffer in the
 * thread's cache, with plain stores (tcache.c). Returns false when the
 * locked path must run instead: no cache for this engine yet, no credit
 * for this domain, credit taken back, or the queue at its bound.
 */
static bool dirty_lockfree(us_buf *b)
{
	struct us_tcache *tc = us__tls.tc;
	us_domain *d = b->obj->domain;
	int64_t credit;

	if (!tc)
		return false;
	credit = atomic_load_explicit(&tc->credit, memory_order_relaxed);
	if (atomic_load_explicit(&tc->dom, memory_order_relaxed) != d ||
	    atomic_load_explicit(&tc->wb, memory_order_relaxed) != b->obj->wb ||
	    tc->gen != atomic_load_explicit(&d->credit_gen, memory_order_relaxed) ||
	    credit < (int64_t)b->length)
		return false;
	if (!us__tcache_push(tc, b))
		return false;
	atomic_store_explicit(&tc->credit, credit - (int64_t)b->length, memory_order_relaxed);
	return true;
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

void us__buf_free(us_engine *e, us_buf *b)
{
	us__payload_free(e, b->data, b->length);
	us__meta_free(e, b, sizeof(*b));
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

static bool valid_range(uint64_t offset, uint64_t length)
{
	return length > 0 && length <= US_BUF_MAX_BYTES && offset <= UINT64_MAX - length;
}

/* The buffer overlapping [offset, offset + length), or NULL. */
static us_buf *overlapping(us_object *o, uint64_t offset, uint64_t length)
{
	struct us_tnode *n = us__tree_find_le(o->root, offset);
	us_buf *b;

	if (n) {
		b = us_container_of(n, us_buf, node);
		if (n->key + b->length > offset)
			return b;
	}
	n = us__tree_find_ge(o->root, offset);
	if (n && n->key < offset + length)
		return us_container_of(n, us_buf, node);
	return NULL;
}

/* Takes a reference on an existing buffer b if it is exactly the range asked. */
static int found(us_buf *b, uint64_t offset, uint64_t length, us_buf **out)
{
	if (b->node.key != offset || b->length != length)
		return -EEXIST;
	if (b->refs == UINT32_MAX)
		return -EINVAL;
	b->refs++;
	us__buf_lru_update(b);
	*out = b;
	return 0;
}

int us_buf_get(us_object *o, uint64_t offset, uint64_t length, unsigned flags, us_buf **out)
{
	struct us_list victims;
	us_engine *e;
	us_buf *b, *nb;
	void *data = NULL;
	int rc, tries = 0;

	if (!o || !out || !valid_range(offset, length) ||
	    (flags & ~(US_GET_NOCREATE | US_GET_NODATA | US_GET_NOWAIT | US_GET_UNINIT)))
		return -EINVAL;
	e = o->engine;
	us_list_init(&victims);

again:
	us__lock(e);
	b = overlapping(o, offset, length);
	if (b) {
		rc = found(b, offset, length, out);
		us__unlock(e);
		return rc;
	}
	if (flags & US_GET_NOCREATE) {
		us__unlock(e);
		return -ENOENT;
	}
	/* Reclaim first what cannot fit, before allocating a payload for it;
	 * or wait for the charges that waited for room before this one. */
	if (!us__charge_turn(o, length)) {
		bool wait = e->nthreads && !(flags & US_GET_NOWAIT);
		uint64_t retry;

		us__unlock(e);
		if (wait && us__in_callback(e))
			wait = false;
		while ((rc = us__reclaim_step(o, length, &retry)) == -EAGAIN && wait) {
			us__kick(e);
			us__wait_progress(e, retry);
		}
		if (rc)
			return rc;
	} else {
		us__unlock(e);
	}

	/* Allocate before changing anything, so that a failure changes nothing. */
	nb = us__meta_alloc(e, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	if (!(flags & US_GET_NODATA)) {
		data = us__payload_alloc(e, o->domain, (size_t)length, !(flags & US_GET_UNINIT));
		if (!data) {
			us__meta_free(e, nb, sizeof(*nb));
			return -ENOMEM;
		}
	}

	us__lock(e);
	/* Another thread may have created or overlapped it meanwhile. */
	b = overlapping(o, offset, length);
	if (b) {
		rc = found(b, offset, length, out);
		us__unlock(e);
		us__payload_free(e, data, (size_t)length);
		us__meta_free(e, nb, sizeof(*nb));
		return rc;
	}
	/* Another writer took the room reclaim made: reclaim again (a few
	 * times), or let a non-blocking caller retry. */
	if (!us__charge_turn(o, length) && tries < 8) {
		us__unlock(e);
		us__payload_free(e, data, (size_t)length);
		us__meta_free(e, nb, sizeof(*nb));
		data = NULL;
		if (e->nthreads && !(flags & US_GET_NOWAIT)) {
			tries++;
			goto again;
		}
		return -EAGAIN;
	}
	rc = us__charge(o->domain, length, &victims);
	us__turn_leave(&o->room); /* served, or refused for good */
	if (rc) {
		if (rc == -ENOMEM && us__stalling(o))
			us__stall_note(o, true, 0); /* the stall ends in ENOMEM */
		us__unlock(e);
		us__payload_free(e, data, (size_t)length);
		us__meta_free(e, nb, sizeof(*nb));
		return rc;
	}
	nb->node.key = offset;
	nb->length = (uint32_t)length;
	nb->obj = o;
	nb->data = data;
	nb->refs = 1;
	nb->state = US_BUF_CLEAN;
	nb->attached = true;
	us_list_init(&nb->link);
	o->root = us__tree_insert(o->root, &nb->node);
	o->nbufs++;
	us__domain_add(o->domain, US_COUNTER(charged), length);
	us__domain_add(o->domain, US_COUNTER(clean), length);
	us__domain_add(o->domain, US_COUNTER(buffers), 1);
	us__domain_event(o->domain, US_EV_CHARGES, 1);
	if (us__stalling(o))
		us__stall_note(o, true, 0); /* a charge went through: progress */
	us__high_penalty(o, &victims);
	/* Less headroom for every domain under a max'd ancestor: credit
	 * granted before may no longer fit their thresholds. */
	if (e->root->granted)
		us__credit_police(e);
	*out = nb;
	us__unlock(e);
	us__victims_release(e, &victims);
	return 1;
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

static int lookup(us_object *o, uint64_t offset, bool containing, us_buf **out)
{
	struct us_tnode *n;
	us_buf *b = NULL;

	if (!o || !out)
		return -EINVAL;
	us__lock(o->engine);
	if (containing) {
		n = us__tree_find_le(o->root, offset);
		if (n && n->key + us_container_of(n, us_buf, node)->length > offset)
			b = us_container_of(n, us_buf, node);
	} else {
		n = us__tree_find_ge(o->root, offset);
		if (n)
			b = us_container_of(n, us_buf, node);
	}
	if (b && b->refs == UINT32_MAX) {
		us__unlock(o->engine);
		return -EINVAL;
	}
	if (b) {
		b->refs++;
		us__buf_lru_update(b);
		*out = b;
	}
	us__unlock(o->engine);
	return b ? 0 : -ENOENT;
}

int us_buf_lookup(us_object *o, uint64_t offset, us_buf **out)
{
	return lookup(o, offset, true, out);
}

int us_buf_next(us_object *o, uint64_t offset, us_buf **out)
{
	return lookup(o, offset, false, out);
}

int us_buf_ref(us_buf *b)
{
	us_engine *e;

	if (!b)
		return -EINVAL;
	e = b->obj->engine;
	us__lock_nodrain(e);
	if (!b->refs || b->refs == UINT32_MAX) {
		us__unlock(e);
		return -EINVAL;
	}
	b->refs++;
	us__unlock(e);
	return 0;
}

int us_buf_put(us_buf *b)
{
	us_engine *e;

	if (!b)
		return -EINVAL;
	e = b->obj->engine;
	/* The last reference must not go while b waits in a queue: b's queues
	 * are those of b's domain. */
	us__lock_domain(e, b->obj->domain);
	if (!b->refs) {
		us__unlock(e);
		return -EINVAL;
	}
	b->refs--;
	us__buf_lru_update(b);
	us__unlock(e);
	return 0;
}

/*
 * THE FAST PATHS of us_buf_dirty(), without the engine lock.
 *
 * First dirtying of a CLEAN buffer: spend the thread's credit, granted only
 * below the background threshold where no writer pauses, and queue the
 * buffer for the next lock holder, with plain stores (tcache.c). That needs
 * no fence: the queue is published with release after the caller's data,
 * and reading a stale CLEAN only queues a buffer that the drain then finds
 * already dirty. The common case (credit in hand, room in the segment) is
 * written out in us_buf_dirty() itself, a leaf without a stack frame; all
 * else goes to us__dirty_slow().
 *
 * Rewriting a buffer already dirty pins nothing new, so it is neither
 * throttled nor locked (as in Linux, only newly dirtied pages are
 * balanced). Returning without doing anything, when the buffer is DIRTY or
 * queued by this very thread and not drained yet (its entry is published,
 * so the next lock sees it), is the one decision that must not read stale
 * state. The writer stores its data, then loads state and lf_tag; a flusher
 * stores them (the drain clears lf_tag, the collection sets WRITEBACK, under
 * the lock), then its callback loads the data. Store then load on both
 * sides: unless each side has a full barrier between the two, both can read
 * the old values, the writer DIRTY and the flusher the old bytes, which it
 * writes and then cleans the buffer: the new bytes are lost.
 *
 * The barrier is asymmetric, paid by the flusher, not by every write:
 *
 *  1. Writer: a compiler barrier between the caller's stores and its loads
 *     of state and lf_tag, nothing else, when its thread's cache (the one
 *     in its fast slot) has nofence set to b's engine. It keeps a compiler
 *     that inlines this call (LTO) from moving the stores after the loads;
 *     the hardware ordering is the kernel's guarantee in 2, which the C11
 *     model has no word for.
 *  2. Flusher: every path that moves DIRTY -> WRITEBACK collects with
 *     us__flush_collect() (the poll, a sync's step, reclaim,
 *     us_object_flush()) and hands the data over with us__flush_issue(),
 *     which, after the collection and before the first callback of the
 *     batch, issues membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED): every
 *     thread of the process executes a full memory barrier before it
 *     returns. For each writer that barrier falls either after its data
 *     stores, which the callback then reads, or before its loads, which
 *     then see WRITEBACK or a cleared tag and take the locked path (a
 *     rewrite during writeback is flagged REDIRTIED and written again).
 *  3. The flusher needs it only if some thread other than itself may have
 *     rewritten so: the caches with nofence set are counted in the
 *     engine's nofence_caches, under the lock, before their thread can
 *     skip a fence, so a single-threaded program never makes the call.
 *     One barrier covers every collection before it (wb_moves, wb_fenced):
 *     a poll's batches share one.
 *  4. nofence is set only in a process registered with
 *     MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (once per process, on the
 *     first cache). A thread without a cache, one whose fast slot holds
 *     its cache for another engine, and every thread where registration
 *     failed (a kernel before 4.14, a seccomp filter) take us__dirty_slow()
 *     and its seq_cst fence, which pairs with the seq_cst fence the flusher
 *     issues before each callback, after the unlock that follows the
 *     collection.
 *  5. A barrier refused after registration (a seccomp filter on the
 *     command) clears nofence on the engine's caches, so their writers
 *     fence from then on, and the batch is written again after this write.
 *
 * The thread's cache is the one it used last, whichever engine that was:
 * its credit names a domain and that domain's generation, unique in the
 * process, so credit for another engine's domain never matches, and its
 * tag is unique too; its nofence names its engine, cleared before that
 * engine goes.
 */
#if defined(__GNUC__)
int us__dirty_slow(us_buf *b, uint64_t *pause_ns) __attribute__((noinline));
#else
int us__dirty_slow(us_buf *b, uint64_t *pause_ns);
#endif

int us_buf_dirty(us_buf *b, uint64_t *pause_ns)
{
	struct us_tcache *tc = us__tls.tc;
	uint64_t tail;
	us_domain *d;
	int64_t credit;
	uint32_t tag;
	unsigned i;
	uint8_t s;

	/* The caller's data stores stay before the loads below (1 above). */
	atomic_signal_fence(memory_order_seq_cst);
	if (!b || !tc || atomic_load_explicit(&b->refs, memory_order_relaxed) == 0)
		goto slow;
	s = atomic_load_explicit(&b->state, memory_order_relaxed);
	tag = atomic_load_explicit(&b->lf_tag, memory_order_relaxed);
	if (s != US_BUF_CLEAN || tag == tc->tag)
		goto rewrite;
	d = b->obj->domain;
	credit = atomic_load_explicit(&tc->credit, memory_order_relaxed) - (int64_t)b->length;
	i = tc->pidx;
	tail = atomic_load_explicit(&tc->tail, memory_order_relaxed);
	if (us_unlikely(atomic_load_explicit(&tc->dom, memory_order_relaxed) != d ||
			atomic_load_explicit(&tc->wb, memory_order_relaxed) != b->obj->wb ||
			tc->gen != atomic_load_explicit(&d->credit_gen, memory_order_relaxed) ||
			credit < 0 || i == US_TC_SEG || tail - tc->head_cache >= US_TC_MAX_QUEUED))
		goto slow;
	if (pause_ns)
		*pause_ns = 0;
	atomic_store_explicit(&b->lf_tag, tc->tag, memory_order_relaxed);
	tc->pseg->slot[i] = b;
	tc->pidx = i + 1;
	atomic_store_explicit(&tc->credit, credit, memory_order_relaxed);
	atomic_store_explicit(&tc->tail, tail + 1, memory_order_release);
	return 0;
rewrite:
	if ((s == US_BUF_DIRTY || tag == tc->tag) &&
	    atomic_load_explicit(&tc->nofence, memory_order_relaxed) == b->obj->engine) {
		if (pause_ns)
			*pause_ns = 0;
		return 0;
	}
slow:
	return us__dirty_slow(b, pause_ns);
}

int us__dirty_slow(us_buf *b, uint64_t *pause_ns)
{
	struct us_tcache *tc;
	uint64_t newly, pause = 0;
	bool wake = false;
	us_engine *e;
	int rc;

	if (!b)
		return -EINVAL;
	if (atomic_load_explicit(&b->refs, memory_order_relaxed) > 0) {
		uint8_t s = atomic_load_explicit(&b->state, memory_order_relaxed);
		uint32_t tag = atomic_load_explicit(&b->lf_tag, memory_order_relaxed);

		tc = us__tls.tc;
		if (s == US_BUF_CLEAN && (!tc || tag != tc->tag) && dirty_lockfree(b)) {
			if (pause_ns)
				*pause_ns = 0;
			return 0;
		}
		/* The writer's full barrier (4 above). */
		atomic_thread_fence(memory_order_seq_cst);
		s = atomic_load_explicit(&b->state, memory_order_relaxed);
		tag = atomic_load_explicit(&b->lf_tag, memory_order_relaxed);
		if (s == US_BUF_DIRTY || (tag && tc && tag == tc->tag)) {
			if (pause_ns)
				*pause_ns = 0;
			return 0;
		}
	}
	e = b->obj->engine;
	/* The blocking form would wait for writeback this very callback holds. */
	if (!pause_ns && e->nthreads && us__in_callback(e))
		return -EDEADLK;
	tc = us__tcache_get(e); /* before the lock: it may take it */
	/*
	 * Out of credit: get more, and take the lock-free path again. The
	 * grant needs no drain (us__credit_grant()), so the queues are left
	 * to the next full lock, usually a flusher's, rather than drained in
	 * the middle of this writer's stream.
	 */
	if (tc && atomic_load_explicit(&b->state, memory_order_relaxed) == US_BUF_CLEAN) {
		bool again;

		us__lock_nodrain(e);
		again = b->refs && us__credit_grant(tc, b->obj);
		us__unlock(e);
		if (again && dirty_lockfree(b)) {
			if (pause_ns)
				*pause_ns = 0;
			return 0;
		}
	}
	us__lock(e);
	if (!b->refs) {
		us__unlock(e);
		return -EINVAL;
	}
	/* A lock-free writer may queue a CLEAN b meanwhile: its entry will
	 * find it DIRTY, and only use up its credit. */
	newly = dirtying(b);
	/* Rewriting dirty data pins nothing new: only new bytes are throttled. */
	rc = us__throttle(b->obj, newly, &pause, &wake);
	/* This dirtying is progress; the pause or gate after it, a stall. */
	if (pause || us__stalling(b->obj))
		us__stall_note(b->obj, true, pause);
	if (rc == 0 && pause == 0)
		us__credit_grant(tc, b->obj);
	/* Past the background threshold: the flushers have work. Kicked with
	 * the engine lock held, so that the engine cannot go under us. */
	if (wake)
		us__kick(e);
	us__unlock(e);
	if (pause_ns) {
		*pause_ns = pause;
		return rc == -EAGAIN ? US_DIRTY_OVER_LIMIT : 0;
	}
	if (!e->nthreads)
		return rc == -EAGAIN ? US_DIRTY_OVER_LIMIT : 0;
	/* The blocking form: pause, and at the limit wait until under it. */
	us__sleep(e, pause);
	if (rc == -EAGAIN)
		rc = us_object_balance_wait(b->obj);
	return rc < 0 ? rc : 0;
}

int us_buf_drop(us_buf *b)
{
	us_object *o;
	us_engine *e;
	us_domain *d;

	if (!b)
		return -EINVAL;
	o = b->obj;
	e = o->engine;
	d = o->domain;
	us__lock(e);
	if (!b->refs) {
		us__unlock(e);
		return -EINVAL;
	}
	/* Pinned: a flush callback it was handed in has not returned yet,
	 * and the engine looks at it when it does. */
	if (b->refs > 1 || b->pins || b->state == US_BUF_WRITEBACK) {
		us__unlock(e);
		return -EBUSY;
	}
	if (b->state == US_BUF_UNSTABLE) {
		us__buf_unstable_unlink(b);
		/* Dropped, not cleaned: keep it out of the bandwidth estimate. */
		o->wb->cleaned -= b->length;
	}
	/* Through CLEAN, so that every counter moves by the one function. */
	us__buf_set_state(b, US_BUF_CLEAN);
	b->refs = 0;
	b->attached = false;
	us__buf_lru_update(b);
	us__buf_uncharge(b);
	us__domain_event(d, US_EV_DROPS, 1);
	us__domain_event(d, US_EV_DROPPED_BYTES, b->length);
	us__unlock(e);
	us__buf_free(e, b);
	return 0;
}

void *us_buf_data(const us_buf *b)
{
	return b ? b->data : NULL;
}

uint64_t us_buf_offset(const us_buf *b)
{
	return b ? b->node.key : 0;
}

uint64_t us_buf_length(const us_buf *b)
{
	return b ? b->length : 0;
}

us_object *us_buf_object(const us_buf *b)
{
	return b ? b->obj : NULL;
}

int us_buf_state(const us_buf *b)
{
	int s;

	if (!b)
		return -EINVAL;
	us__lock(b->obj->engine);
	s = b->state;
	us__unlock(b->obj->engine);
	return s;
}

unsigned us_buf_flags(const us_buf *b)
{
	unsigned f;

	if (!b)
		return 0;
	us__lock(b->obj->engine);
	f = b->flags;
	us__unlock(b->obj->engine);
	return f;
}

uint64_t us_buf_commit_seq(const us_buf *b)
{
	uint64_t s;

	if (!b)
		return 0;
	us__lock(b->obj->engine);
	s = b->state == US_BUF_UNSTABLE ? b->seq : 0;
	us__unlock(b->obj->engine);
	return s;
}
