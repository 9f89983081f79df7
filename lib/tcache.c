/*
 * Writer caches: the per-thread state behind the lock-free first dirtying.
 *
 * SPDX-License-Identifier: MIT
 *
 * Each thread that dirties buffers of an engine gets a cache for it, made on
 * its first locked dirtying. The cache holds
 *  - credit: bytes its thread may dirty in one domain without the engine
 *    lock, granted under the lock (throttle.c) and counted in the granted
 *    bytes of the domain's chain until spent and drained;
 *  - a queue of the buffers its thread dirtied lock-free, one producer (the
 *    thread) and one consumer (whoever holds the engine lock), in segments
 *    of US_TC_SEG entries so that it never fills before the credit runs out.
 *
 * Spending credit and queueing a buffer are plain stores: the only ordering
 * the first dirtying needs is that the queue's tail is published with
 * release, after the caller's data and the queued entry, so that the lock
 * holder who drains it (with acquire) sees both. The engine lock drains
 * every queue first (us__lock()), so a call that takes it sees all the
 * dirtyings that happened before it. Two kinds of calls drain less: those
 * that look at one domain's buffers only drain the queues of that domain
 * (us__lock_domain(): a queue holds buffers of its credit's domain only),
 * and pure bookkeeping that no queued buffer can affect drains nothing
 * (us__lock_nodrain()).
 *
 * Rewriting a buffer already DIRTY takes neither the lock nor, for most
 * threads, a fence: the flusher issues the barrier instead (the contract is
 * in buf.c, above us_buf_dirty()). The bookkeeping for it is here: a cache
 * whose thread skips the fence has nofence set to its engine, and is
 * counted in the engine's nofence_caches, under the engine lock before the
 * thread can use it; only in a process registered for the expedited
 * private membarrier. A flusher issues the barrier after a collection and
 * before the callback reads the data, when a cache of another thread skips
 * the fence and no completed barrier covers the collection yet.
 *
 * Lifetimes: a cache is linked into its engine (under the engine lock) and
 * into its thread's list (thread-local). The thread frees it, at exit or on
 * its next lookup after the engine is gone; the engine only unlinks it and
 * marks it dead. The global mutex orders the two. Lock order: the global
 * mutex, then an engine lock.
 */
#include "internal.h"

#include <stdlib.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The thread's fast slot: its cache for the engine it used last. Initial-exec
 * TLS is one load from the thread pointer; the 16 bytes come out of the
 * static TLS surplus when the library is loaded with dlopen(). */
#if defined(__GNUC__)
#define US_TLS_MODEL __attribute__((tls_model("initial-exec")))
#else
#define US_TLS_MODEL
#endif

struct us_tcache us__tc_none;
_Thread_local struct us__tls_slot us__tls US_TLS_MODEL = { 0, &us__tc_none };
/* All of this thread's caches, one per engine it dirtied in. */
static _Thread_local struct us_tcache *thread_caches US_TLS_MODEL;

static pthread_mutex_t global = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void global_lock(void)
{
	us__witness_take(US_LOCK_TCACHE);
	pthread_mutex_lock(&global);
}

static void global_unlock(void)
{
	pthread_mutex_unlock(&global);
	us__witness_drop(US_LOCK_TCACHE);
}

static pthread_key_t exit_key;
static bool have_key;
static _Atomic uint32_t next_tag;
/* Whether the registration for the barrier holds (under the global mutex). */
static bool barrier_ok;

static void seg_free_chain(struct us_tcseg *s)
{
	while (s) {
		struct us_tcseg *n = s->next;

		free(s);
		s = n;
	}
}

static void tcache_free(struct us_tcache *tc)
{
	seg_free_chain(tc->cseg);
	seg_free_chain(atomic_load(&tc->spare));
	seg_free_chain(tc->pfree);
	free(tc);
}

/* Gives the unspent credit back to the granted bytes of its domain's chain.
 * Engine lock held; called by the owner, or when the owner cannot spend. */
void us__tcache_return(struct us_tcache *tc)
{
	us_domain *d = atomic_load_explicit(&tc->dom, memory_order_relaxed);
	int64_t c = atomic_load_explicit(&tc->credit, memory_order_relaxed);
	us_domain *a;

	if (d && c)
		for (a = d; a; a = a->parent)
			a->granted -= (uint64_t)c;
	atomic_store_explicit(&tc->credit, 0, memory_order_relaxed);
	atomic_store_explicit(&tc->dom, NULL, memory_order_relaxed);
	atomic_store_explicit(&tc->wb, NULL, memory_order_relaxed);
}

/*
 * Global mutex held: whether this process may issue the expedited private
 * membarrier, registering it on the first call. A forked child tries again:
 * the registration belongs to an address space. It fails on kernels before
 * 4.14 and where a seccomp filter denies the call; writers then keep their
 * fence.
 */
static bool barrier_registered(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
	static pid_t barrier_pid; /* the process it was tried in */
	pid_t pid = getpid();

	if (pid != barrier_pid) {
		barrier_pid = pid;
		barrier_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
				     0) == 0;
	}
	return barrier_ok;
#else
	return false;
#endif
}

/* Engine lock held: tc's thread fences its rewrites from now on. */
static void nofence_clear(us_engine *e, struct us_tcache *tc)
{
	if (atomic_load_explicit(&tc->nofence, memory_order_relaxed)) {
		atomic_store_explicit(&tc->nofence, NULL, memory_order_relaxed);
		e->nofence_caches--;
	}
}

/* Engine lock held: unlinks tc from its engine after draining it. */
static void tcache_detach(us_engine *e, struct us_tcache *tc)
{
	us__tcache_drain_one(e, tc);
	us__tcache_return(tc);
	/* Before e goes: another engine at e's address is not tc's. */
	nofence_clear(e, tc);
	us_list_del(&tc->link);
	atomic_store(&tc->dead, true);
}

/* Thread exit: every cache of the thread gives back its credit and work. */
static void thread_exit(void *unused)
{
	struct us_tcache *tc;

	(void)unused;
	global_lock();
	while ((tc = thread_caches)) {
		thread_caches = tc->thread_next;
		if (!atomic_load(&tc->dead)) {
			us_engine *e = tc->engine;

			us__lock(e);
			tcache_detach(e, tc);
			us__unlock(e);
		}
		tcache_free(tc);
	}
	us__tls.id = 0;
	us__tls.tc = &us__tc_none;
	global_unlock();
}

static void key_init(void)
{
	have_key = pthread_key_create(&exit_key, thread_exit) == 0;
}

struct us_tcache *us__tcache_get(us_engine *e)
{
	struct us_tcache *tc, **pp, *found = NULL;

	if (us__tls.id == e->id)
		return us__tls.tc;
	/* The hooks own all of the engine's memory; caches outlive engines. */
	if (e->have_hooks)
		return NULL;
	pthread_once(&key_once, key_init);
	if (!have_key)
		return NULL; /* without an exit hook, no cache: the locked path */
	global_lock();
	/* Free the caches of engines that are gone; look for e's. */
	for (pp = &thread_caches; (tc = *pp);) {
		if (atomic_load(&tc->dead)) {
			*pp = tc->thread_next;
			if (us__tls.tc == tc) {
				us__tls.id = 0;
				us__tls.tc = &us__tc_none;
			}
			tcache_free(tc);
			continue;
		}
		if (tc->engine_id == e->id)
			found = tc;
		pp = &tc->thread_next;
	}
	/* Aligned: two threads' caches never share a cache line. */
	if (!found && (found = aligned_alloc(_Alignof(struct us_tcache), sizeof(*found)))) {
		memset(found, 0, sizeof(*found));
		found->cseg = found->pseg = calloc(1, sizeof(struct us_tcseg));
		if (!found->cseg || pthread_setspecific(exit_key, &exit_key)) {
			tcache_free(found);
			found = NULL;
		} else {
			bool nofence = barrier_registered();

			found->engine = e;
			found->engine_id = e->id;
			do
				found->tag = atomic_fetch_add(&next_tag, 1) + 1;
			while (!found->tag);
			us__lock(e);
			us_list_add_tail(&e->tcaches, &found->link);
			/* Counted before its thread can skip a fence. */
			if (nofence) {
				atomic_store_explicit(&found->nofence, e, memory_order_relaxed);
				e->nofence_caches++;
			}
			us__unlock(e);
			found->thread_next = thread_caches;
			thread_caches = found;
		}
	}
	if (found) {
		us__tls.id = e->id;
		us__tls.tc = found;
	}
	global_unlock();
	return found;
}

/* Engine destruction: every cache of e is drained, unlinked and left dead
 * for its thread to free. The engine lock is taken here. */
void us__tcache_engine_fini(us_engine *e)
{
	global_lock();
	us__lock(e);
	while (!us_list_empty(&e->tcaches))
		tcache_detach(e, us_container_of(e->tcaches.next, struct us_tcache, link));
	us__unlock(e);
	global_unlock();
}

/* Engine lock held: d is going; caches holding its credit let it go. No
 * thread can be spending it, since d has no objects left. */
void us__tcache_forget_domain(us_engine *e, us_domain *d)
{
	struct us_list *pos;

	us_list_for_each (pos, &e->tcaches) {
		struct us_tcache *tc = us_container_of(pos, struct us_tcache, link);

		if (atomic_load_explicit(&tc->dom, memory_order_relaxed) == d)
			us__tcache_return(tc);
	}
}

/* Engine lock held: the consumer side of one queue. */
void us__tcache_drain_one(us_engine *e, struct us_tcache *tc)
{
	uint64_t tail = atomic_load_explicit(&tc->tail, memory_order_acquire);
	/* The consumer is the only writer of head_pub: a relaxed load. */
	uint64_t head = atomic_load_explicit(&tc->head_pub, memory_order_relaxed);

	if (head == tail)
		return;
	while (head != tail) {
		if (tc->cidx == US_TC_SEG) {
			struct us_tcseg *old = tc->cseg;

			tc->cseg = old->next;
			tc->cidx = 0;
			/* Back to the producer, which keeps a few. */
			old->next = atomic_load_explicit(&tc->spare, memory_order_relaxed);
			while (!atomic_compare_exchange_weak_explicit(&tc->spare, &old->next, old,
								      memory_order_release,
								      memory_order_relaxed))
				;
		}
		us__drain_buf(e, tc->cseg->slot[tc->cidx++]);
		head++;
	}
	atomic_store_explicit(&tc->head_pub, head, memory_order_release);
}

/* The queues of the caches with credit in d: all of d's queued buffers,
 * since a cache's queue holds buffers of its credit's domain only. */
void us__tcache_drain_domain(us_engine *e, us_domain *d)
{
	struct us_list *pos;

	us_list_for_each (pos, &e->tcaches) {
		struct us_tcache *tc = us_container_of(pos, struct us_tcache, link);

		if (atomic_load_explicit(&tc->dom, memory_order_relaxed) == d)
			us__tcache_drain_one(e, tc);
	}
}

void us__tcache_drain(us_engine *e)
{
	struct us_list *pos;

	us_list_for_each (pos, &e->tcaches)
		us__tcache_drain_one(e, us_container_of(pos, struct us_tcache, link));
}

/*
 * The producer side: called by the owner thread, without the engine lock,
 * after it spent the credit for b. Returns false (nothing queued) when the
 * queue is at its bound or a segment cannot be had.
 */
bool us__tcache_push(struct us_tcache *tc, us_buf *b)
{
	uint64_t tail = atomic_load_explicit(&tc->tail, memory_order_relaxed);

	if (tail - tc->head_cache >= US_TC_MAX_QUEUED) {
		tc->head_cache = atomic_load_explicit(&tc->head_pub, memory_order_acquire);
		if (tail - tc->head_cache >= US_TC_MAX_QUEUED)
			return false;
	}
	if (tc->pidx == US_TC_SEG) {
		struct us_tcseg *s = tc->pfree;

		if (!s) {
			unsigned kept = 0;

			/* Take the consumed segments back; keep a few. */
			s = atomic_exchange_explicit(&tc->spare, NULL, memory_order_acquire);
			while (s) {
				struct us_tcseg *n = s->next;

				if (kept++ < US_TC_KEEP) {
					s->next = tc->pfree;
					tc->pfree = s;
				} else {
					free(s);
				}
				s = n;
			}
			s = tc->pfree;
		}
		if (s)
			tc->pfree = s->next;
		else if (!(s = malloc(sizeof(*s))))
			return false;
		s->next = NULL;
		/* Published by the tail store below, like the entries. */
		tc->pseg->next = s;
		tc->pseg = s;
		tc->pidx = 0;
	}
	/* Marked before it is published: a mark always has an entry behind it
	 * that is queued or about to be, never one already drained. */
	atomic_store_explicit(&b->lf_tag, tc->tag, memory_order_relaxed);
	tc->pseg->slot[tc->pidx++] = b;
	atomic_store_explicit(&tc->tail, tail + 1, memory_order_release);
	return true;
}

/* The calling thread's cache for e, or NULL: its own list, read without a
 * lock (only the thread changes it). Engine ids are never reused. */
static struct us_tcache *own_cache(us_engine *e)
{
	struct us_tcache *tc;

	if (us__tls.id == e->id)
		return us__tls.tc;
	for (tc = thread_caches; tc; tc = tc->thread_next)
		if (tc->engine_id == e->id)
			return tc;
	return NULL;
}

uint64_t us__rewrite_barrier_due(us_engine *e)
{
	struct us_tcache *mine = own_cache(e);
	unsigned others = e->nofence_caches;

	/* The flushing thread's own rewrites come before its own reads. */
	if (mine && atomic_load_explicit(&mine->nofence, memory_order_relaxed) == e)
		others--;
	/* Acquire: a barrier another flusher completed covers ours too. */
	if (!others || atomic_load_explicit(&e->wb_fenced, memory_order_acquire) >= e->wb_moves)
		return 0;
	return e->wb_moves;
}

bool us__rewrite_barrier(us_engine *e, uint64_t moves)
{
	struct us_list *pos;

#if defined(__linux__) && defined(SYS_membarrier)
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
		uint64_t cur = atomic_load_explicit(&e->wb_fenced, memory_order_relaxed);

		/* Release: whoever reads it reads after the barrier. */
		while (cur < moves && !atomic_compare_exchange_weak_explicit(
					      &e->wb_fenced, &cur, moves, memory_order_release,
					      memory_order_relaxed))
			;
		return true;
	}
#else
	(void)moves;
#endif
	/* Refused after the registration went through (the kernel does not,
	 * but a seccomp filter on the command can): every writer of e, and of
	 * the caches made from now on, fences again. */
	global_lock();
	barrier_ok = false;
	us__lock_nodrain(e);
	us_list_for_each (pos, &e->tcaches)
		nofence_clear(e, us_container_of(pos, struct us_tcache, link));
	us__unlock(e);
	global_unlock();
	return false;
}

/* The engine lock, with the queues drained (internal.h "LOCKS"). */
void us__lock(us_engine *e)
{
	us__lock_nodrain(e);
	/* Whoever holds the lock sees every dirtying accounted. */
	us__tcache_drain(e);
}

void us__lock_domain(us_engine *e, us_domain *d)
{
	us__lock_nodrain(e);
	us__tcache_drain_domain(e, d);
}
