/*
 * Threaded mode: flusher threads that only call the polled core, and the
 * blocking waits of writers.
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
 * The flusher threads block every asynchronous signal: a signal sent to the
 * process is taken by one of the application's threads, never by one of
 * ours, where a handler that expects to interrupt a blocking call of the
 * application's (a FUSE loop's read(), a poll()) would wait in vain. Faults
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay deliverable.
 *
 * Callbacks are tracked per thread, by a list of frames on the thread's own
 * stack (no bound on threads or depth, no lock), so that a blocking call
 * made from inside a callback of the same engine can refuse with -EDEADLK
 * instead of waiting for work that only its own return would allow.
 */
#include "internal.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

static void thr_lock(us_engine *e)
{
	us__witness_take(US_LOCK_THREADS);
	pthread_mutex_lock(&e->thr_lock);
}

static void thr_unlock(us_engine *e)
{
	pthread_mutex_unlock(&e->thr_lock);
	us__witness_drop(US_LOCK_THREADS);
}

static void wait_until(us_engine *e, pthread_cond_t *cond, uint64_t deadline)
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

static void *flusher(void *arg)
{
	us_engine *e = arg;
	uint64_t next = 0;

	thr_lock(e);
	while (!e->stop) {
		e->kicked = false;
		thr_unlock(e);
		if (us_engine_poll(e, 0, &next) < 0)
			next = us__now(e) + e->bw_interval_ns; /* -ENOMEM: retry later */
		thr_lock(e);
		while (!e->stop && !e->kicked && us__now(e) < next)
			wait_until(e, &e->thr_cond, next);
	}
	thr_unlock(e);
	return NULL;
}

int us__threads_start(us_engine *e, unsigned n)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	unsigned i;
	int rc = 0;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->thr_cond, &ca);
	pthread_cond_init(&e->prog_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&e->thr_lock, NULL);
	if (!n)
		return 0;
	e->threads = us__meta_alloc(e, n * sizeof(*e->threads));
	if (!e->threads)
		return -ENOMEM;
	/* The threads inherit the creator's mask: block, create, restore. */
	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < n; i++) {
		if (pthread_create(&e->threads[i], NULL, flusher, e) != 0) {
			rc = -ENOMEM;
			break;
		}
		/* Named for top -H and /proc/PID/task/TID/comm; a refusal is
		 * harmless. */
		(void)pthread_setname_np(e->threads[i], "us-flusher");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	e->nthreads = i;
	if (rc)
		us__threads_stop(e);
	return rc;
}

void us__threads_stop(us_engine *e)
{
	unsigned i;

	thr_lock(e);
	e->stop = true;
	pthread_cond_broadcast(&e->thr_cond);
	pthread_cond_broadcast(&e->prog_cond);
	thr_unlock(e);
	for (i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	if (e->threads)
		us__meta_free(e, e->threads, e->nthreads * sizeof(*e->threads));
	e->threads = NULL;
	e->nthreads = 0;
}

void us__threads_fini(us_engine *e)
{
	pthread_cond_destroy(&e->thr_cond);
	pthread_cond_destroy(&e->prog_cond);
	pthread_mutex_destroy(&e->thr_lock);
}

void us__kick(us_engine *e)
{
	if (!e->nthreads)
		return; /* polled mode: nobody to wake */
	thr_lock(e);
	if (!e->kicked) {
		e->kicked = true;
		pthread_cond_signal(&e->thr_cond);
	}
	e->kick_gen++;
	if (e->prog_waiters)
		pthread_cond_broadcast(&e->prog_cond);
	thr_unlock(e);
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
	thr_lock(e);
	gen = e->kick_gen;
	e->prog_waiters++;
	while (e->kick_gen == gen && !e->stop && us__now(e) < deadline)
		wait_until(e, &e->prog_cond, deadline);
	e->prog_waiters--;
	thr_unlock(e);
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

int us_object_balance_wait(us_object *o)
{
	uint64_t pause;
	int rc;

	if (!o)
		return -EINVAL;
	/* Polled mode: nobody else would write back while we wait. */
	if (!o->engine->nthreads)
		return us_object_balance(o, NULL);
	if (us__in_callback(o->engine))
		return -EDEADLK;
	while ((rc = us_object_balance(o, &pause)) == -EAGAIN) {
		us__kick(o->engine);
		us__sleep(o->engine, pause);
	}
	return rc;
}
