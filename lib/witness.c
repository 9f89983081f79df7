/*
 * The lock order witness: in a build with US_WITNESS (the sanitizer builds,
 * or -DUNSTABLE_WITNESS=ON), every lock of the library is taken through
 * us__witness_take(), which aborts when the thread already holds a lock of
 * the same or a later rank (enum us_lock_rank, internal.h). A reversed pair
 * is then caught the first time either order runs, not only when two
 * threads happen to meet in it.
 *
 * Each thread keeps the ranks it holds as bits of one word. A condition
 * wait gives its mutex back and takes it again without the witness: the
 * thread does nothing else meanwhile.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#ifdef US_WITNESS

#include <stdio.h>
#include <stdlib.h>

static _Thread_local unsigned held;

static const char *rank_name(enum us_lock_rank r)
{
	switch (r) {
	case US_LOCK_TCACHE:
		return "writer caches";
	case US_LOCK_ENGINE:
		return "engine";
	case US_LOCK_THREADS:
		return "flusher wake-ups";
	}
	return "?";
}

void us__witness_take(enum us_lock_rank r)
{
	unsigned later = held & ~((1u << r) - 1u);

	if (later) {
		enum us_lock_rank h = (enum us_lock_rank)(31 - __builtin_clz(later));

		fprintf(stderr,
			"unstable: lock order violated: taking the %s lock (rank %d) while "
			"holding the %s lock (rank %d)\n",
			rank_name(r), (int)r, rank_name(h), (int)h);
		abort();
	}
	held |= 1u << r;
}

void us__witness_drop(enum us_lock_rank r)
{
	if (!(held & 1u << r)) {
		fprintf(stderr, "unstable: dropping the %s lock (rank %d), not held\n",
			rank_name(r), (int)r);
		abort();
	}
	held &= ~(1u << r);
}

unsigned us__witness_held(void)
{
	return held;
}

#else

/* ISO C wants something in a translation unit. */
typedef int us__witness_unused;

#endif
