/*
 * The buffer API: creation, lookup, references, dirtying (its lock-free
 * fast paths here, the state change in state.c), dropping.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

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

	if (tc == &us__tc_none)
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
	nb->engine = e;
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
 * state. The writer stores its data, then loads state, and lf_tag unless
 * state is DIRTY; a flusher stores them (the drain clears lf_tag, the
 * collection sets WRITEBACK, under the lock), then its callback loads the
 * data. Store then load on both sides: unless each side has a full barrier
 * between the two, both can read the old values, the writer DIRTY and the
 * flusher the old bytes, which it writes and then cleans the buffer: the
 * new bytes are lost. (A writer that reads DIRTY needs no lf_tag: the
 * collection's WRITEBACK is the store that must not be missed.)
 *
 * The rewrite of a DIRTY buffer is tested first and laid out straight: it
 * reads b's state, refs and engine (a copy of obj->engine, so that no
 * load waits for another), the first 16 bytes of b, one cache line, and
 * the thread's cache. refs == 0 still goes to us__dirty_slow(), which
 * refuses it with -EINVAL.
 *
 * The barrier is asymmetric, paid by the flusher, not by every write:
 *
 *  1. Writer: a compiler barrier between the caller's stores and its loads
 *     of state and lf_tag, nothing else, when its thread's cache (the one
 *     in its fast slot) has nofence set to b's engine (b->engine). It
 *     keeps a compiler that inlines this call (LTO) from moving the stores
 *     after the loads;
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

US_HOT_ENTRY int us_buf_dirty(us_buf *b, uint64_t *pause_ns)
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
	if (us_unlikely(!b))
		goto slow;
	/* A rewrite of a DIRTY buffer: state, refs and engine, one cache line
	 * of b, and a straight line of code to the return. */
	s = atomic_load_explicit(&b->state, memory_order_relaxed);
	if (us_likely(s == US_BUF_DIRTY)) {
		if (us_unlikely(atomic_load_explicit(&b->refs, memory_order_relaxed) == 0 ||
				atomic_load_explicit(&tc->nofence, memory_order_relaxed) !=
					b->engine))
			goto slow;
		if (pause_ns)
			*pause_ns = 0;
		return 0;
	}
	if (us_unlikely(atomic_load_explicit(&b->refs, memory_order_relaxed) == 0))
		goto slow;
	/* A rewrite of a buffer this thread queued. Hinted likely only for the
	 * layout: in line here, it costs what it did when the DIRTY test came
	 * after it; the first dirtying below takes one jump more, which does
	 * not show beside its own work (us-bench-hotpath). */
	tag = atomic_load_explicit(&b->lf_tag, memory_order_relaxed);
	if (us_likely(tag == tc->tag)) {
		if (atomic_load_explicit(&tc->nofence, memory_order_relaxed) != b->engine)
			goto slow;
		if (pause_ns)
			*pause_ns = 0;
		return 0;
	}
	/* The first dirtying of a CLEAN buffer. */
	if (s != US_BUF_CLEAN)
		goto slow;
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
		if (s == US_BUF_CLEAN && tag != tc->tag && dirty_lockfree(b)) {
			if (pause_ns)
				*pause_ns = 0;
			return 0;
		}
		/* The writer's full barrier (4 above). */
		atomic_thread_fence(memory_order_seq_cst);
		s = atomic_load_explicit(&b->state, memory_order_relaxed);
		tag = atomic_load_explicit(&b->lf_tag, memory_order_relaxed);
		if (s == US_BUF_DIRTY || (tag && tag == tc->tag)) {
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
	newly = us__buf_dirtying(b);
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
