/*
 * Threaded mode's wake-ups and waits: the kicks that wake the flusher
 * threads (flusher.c), the blocking waits of writers, and the frames that
 * mark a thread inside a callback.
 *
 * SPDX-License-Identifier: MIT
 *
 * A flusher thread loops: us_engine_poll(), then wait on thr_cond until the
 * deadline poll returned, or until kicked (a completion, a writer past its
 * background threshold or at its limit, a virtual clock moved). One code
 * path serves both modes: the threads add nothing but the waiting.
 *
 * A kick sets the flag `kicked` and wakes at most one idle flusher, and
 * only if the flag was clear: a flusher clears it before it polls, so while
 * it is set a poll that starts after the kick is already due (a flusher
 * awake, or one woken for it), and that poll sees whatever the kicker did
 * before kicking. A writer past its background threshold kicks at every
 * dirtying and a completion at every buffer; waking every flusher each
 * time, which then queued on the engine lock the kicker held, cost more
 * than the write-back (on a 2-core machine, a dozen futex calls and
 * context switches per MiB written). Threads waiting for progress (a
 * charge in reclaim, a sync, a shutdown) watch kick_gen on their own
 * condition variable, woken by every kick.
 *
 * Lock order: the engine lock (US_LOCK_ENGINE) may be held when thr_lock is
 * taken (us__kick() from completions), never the reverse: a flusher drops
 * thr_lock before it polls.
 *
 * Waiting on a virtual clock never sleeps: the waiter moves the clock
 * forward by the time it would have slept, which wakes the flushers, so
 * blocking paths are testable deterministically in time (though not in the
 * interleaving of threads).
 *
 * Callbacks are tracked per thread, by a list of frames on the thread's own
 * stack (no bound on threads or depth, no lock), so that a blocking call
 * made from inside a callback of the same engine can refuse with -EDEADLK
 * instead of waiting for work that only its own return would allow.
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#include <time.h>

void us__thr_lock(us_engine *e)
{
	us__witness_take(US_LOCK_THREADS);
	pthread_mutex_lock(&e->thr_lock);
}

void us__thr_unlock(us_engine *e)
{
	pthread_mutex_unlock(&e->thr_lock);
	us__witness_drop(US_LOCK_THREADS);
}

void us__thr_wait(us_engine *e, pthread_cond_t *cond, uint64_t deadline)
{
	uint64_t now = us__now(e);
	struct timespec ts;

	if (e->clock == US_CLOCK_VIRTUAL || deadline == UINT64_MAX) {
		/* Woken by a kick or by the virtual clock moving. */
		pthread_cond_wait(cond, &e->thr_lock);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	{
		uint64_t rel = deadline > now ? deadline - now : 0;
		uint64_t ns = (uint64_t)ts.tv_nsec + rel % 1000000000u;

		ts.tv_sec += (time_t)(rel / 1000000000u + ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
	}
	pthread_cond_timedwait(cond, &e->thr_lock, &ts);
}

void us__kick(us_engine *e)
{
	if (!e->nthreads)
		return; /* polled mode: nobody to wake */
	us__thr_lock(e);
	if (!e->kicked) {
		e->kicked = true;
		pthread_cond_signal(&e->thr_cond);
	}
	e->kick_gen++;
	if (e->prog_waiters)
		pthread_cond_broadcast(&e->prog_cond);
	us__thr_unlock(e);
}

void us__obj_unbusy(us_object *o)
{
	if (--o->busy == 0 && o->engine->idle_waiters)
		us__kick(o->engine);
}

void us__wait_progress(us_engine *e, uint64_t ns)
{
	uint64_t gen, deadline;

	if (e->clock == US_CLOCK_VIRTUAL || !e->nthreads) {
		us__sleep(e, ns);
		return;
	}
	deadline = us__now(e) + ns;
	us__thr_lock(e);
	gen = e->kick_gen;
	e->prog_waiters++;
	while (e->kick_gen == gen && !e->stop && us__now(e) < deadline)
		us__thr_wait(e, &e->prog_cond, deadline);
	e->prog_waiters--;
	us__thr_unlock(e);
}

void us__sleep(us_engine *e, uint64_t ns)
{
	struct timespec ts;

	if (!ns)
		return;
	if (e->clock == US_CLOCK_VIRTUAL) {
		us_engine_clock_advance(e, ns); /* wakes the flushers */
		sched_yield();			/* and lets them run */
		return;
	}
	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* The callbacks this thread is running, innermost first (frames on its
 * stack, see us__callback_enter()). Only the thread itself reads it. */
static _Thread_local struct us__cb_frame *cb_top;

void us__cb_push(struct us__cb_frame *f, us_engine *e)
{
	f->engine = e;
	f->next = cb_top;
	cb_top = f;
}

void us__cb_pop(struct us__cb_frame *f, us_engine *e)
{
	(void)e;
	assert(cb_top == f && f->engine == e);
	cb_top = f->next;
}

bool us__in_callback(us_engine *e)
{
	const struct us__cb_frame *f;

	for (f = cb_top; f; f = f->next)
		if (f->engine == e)
			return true;
	return false;
}

int us_engine_clock_advance(us_engine *e, uint64_t delta_ns)
{
	uint64_t cur;

	if (!e || e->clock != US_CLOCK_VIRTUAL)
		return -EINVAL;
	cur = atomic_load_explicit(&e->vclock_ns, memory_order_relaxed);
	do {
		if (cur > UINT64_MAX - delta_ns)
			return -EINVAL;
	} while (!atomic_compare_exchange_weak(&e->vclock_ns, &cur, cur + delta_ns));
	us__kick(e); /* flushers wait on the virtual clock */
	return 0;
}
