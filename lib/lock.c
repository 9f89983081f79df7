/*
 * The engine lock and the engine's clock: the primitives every other file
 * stands on. The lock here does not drain the writer caches' queues: the
 * lock that does (us__lock(), us__lock_domain()) is the writer caches'
 * (tcache.c), above the buffer state machine whose drain it runs.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#include <time.h>

void us__lock_nodrain(us_engine *e)
{
	int rc;

	us__witness_take(US_LOCK_ENGINE);
	rc = pthread_mutex_lock(&e->lock);

	assert(rc == 0);
	(void)rc;
}

void us__unlock(us_engine *e)
{
	int rc = pthread_mutex_unlock(&e->lock);

	assert(rc == 0);
	(void)rc;
	us__witness_drop(US_LOCK_ENGINE);
}

uint64_t us__now(us_engine *e)
{
	struct timespec ts;

	switch (e->clock) {
	case US_CLOCK_VIRTUAL:
		return atomic_load_explicit(&e->vclock_ns, memory_order_acquire);
	case US_CLOCK_CUSTOM:
		return e->clock_fn(e->clock_ctx);
	case US_CLOCK_MONOTONIC:
	default:
		clock_gettime(CLOCK_MONOTONIC, &ts);
		return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
}

uint64_t us_engine_now(us_engine *e)
{
	return e ? us__now(e) : 0;
}

/* Generation numbers, never reused in the process (internal.h). */
static _Atomic uint64_t next_gen;

uint64_t us__gen_next(void)
{
	return atomic_fetch_add_explicit(&next_gen, 1, memory_order_relaxed) + 1;
}
