/*
 * Threaded mode's flusher threads: each loops on us_engine_poll(), then
 * waits until the deadline the poll returned or until kicked (thread.c
 * says when and how). One code path serves both modes: the threads add
 * nothing but the waiting.
 *
 * The flusher threads block every asynchronous signal: a signal sent to the
 * process is taken by one of the application's threads, never by one of
 * ours, where a handler that expects to interrupt a blocking call of the
 * application's (a FUSE loop's read(), a poll()) would wait in vain. Faults
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay deliverable.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <signal.h>
#include <time.h>

static void *flusher(void *arg)
{
	us_engine *e = arg;
	uint64_t next = 0;

	us__thr_lock(e);
	while (!e->stop) {
		e->kicked = false;
		us__thr_unlock(e);
		if (us_engine_poll(e, 0, &next) < 0)
			next = us__now(e) + e->bw_interval_ns; /* -ENOMEM: retry later */
		us__thr_lock(e);
		while (!e->stop && !e->kicked && us__now(e) < next)
			us__thr_wait(e, &e->thr_cond, next);
	}
	us__thr_unlock(e);
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

	us__thr_lock(e);
	e->stop = true;
	pthread_cond_broadcast(&e->thr_cond);
	pthread_cond_broadcast(&e->prog_cond);
	us__thr_unlock(e);
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
