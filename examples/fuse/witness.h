/*
 * unstable-fuse: the lock order witness, and the helpers through which the
 * client takes and gives back every one of its locks. Included by ufuse.h,
 * after the ranks (enum ufs_lock_rank, the order in "LOCKS" there).
 *
 * SPDX-License-Identifier: MIT
 *
 * In a build with US_WITNESS (the sanitizer builds, or
 * -DUNSTABLE_WITNESS=ON), a thread that takes a lock while it holds one of
 * the same or a later rank aborts, naming both: a reversed pair is caught
 * the first time either order runs, not only when two threads happen to
 * meet in it. Without US_WITNESS the helpers are the bare pthread calls.
 *
 * It orders the client's locks among themselves only. The engine's locks,
 * taken inside us_buf_get(), us_object_sync() and the like, have a witness
 * of their own in the library (lib/witness.c). A thread's ranks here stay
 * as they are across an engine call, so that a flush or commit callback the
 * engine runs on a thread holding client locks (a writer's reclaim under
 * io_lock, an fsync under its handle's lock) is checked against them.
 *
 * A trylock that succeeds cannot deadlock: it is counted as held without
 * the check (fs.c wrlock(), ufs_read()); the blocking take that follows a
 * failed one is checked. A condition wait gives its mutex back and takes it
 * again behind the witness's back: the thread does nothing else meanwhile,
 * so the mutex stays counted as held.
 *
 * The checks are inline here; the ranks a thread holds are one
 * thread-local word, defined in witness.c (which a program built from some
 * of the client's files links too, as tests/fuse/check_cgroup.c does).
 */
#ifndef UFS_WITNESS_H
#define UFS_WITNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#ifdef US_WITNESS

#include <stdio.h>
#include <stdlib.h>

/* The ranks this thread holds, as bits (1u << rank); witness.c. */
extern _Thread_local unsigned ufs_witness_held;

static inline const char *ufs_rank_name(enum ufs_lock_rank r)
{
	switch (r) {
	case UFS_RANK_ITABLE:
		return "itable_lock";
	case UFS_RANK_HANDLE:
		return "handle lock";
	case UFS_RANK_IO:
		return "io_lock";
	case UFS_RANK_WB:
		return "wb_lock";
	case UFS_RANK_DATA:
		return "data_lock";
	case UFS_RANK_WB_MUTEX:
		return "wb_mutex";
	case UFS_RANK_NFS_NS:
		return "NFS ns_lock";
	case UFS_RANK_NFS_CHAN:
		return "NFS namespace channel lock";
	case UFS_RANK_NFS_SEND:
		return "NFS send_lock";
	case UFS_RANK_NFS:
		return "NFS lock";
	case UFS_RANK_NFS_AC:
		return "NFS ac_lock";
	case UFS_RANK_DOM:
		return "dom_lock";
	case UFS_RANK_LINKS:
		return "links_lock";
	case UFS_RANK_LOOP:
		return "request loop lock";
	}
	return "?";
}

/* Aborts, naming both locks, when the thread holds a lock of rank r or
 * later; then counts r as held. Before a blocking take. */
static inline void ufs_witness_take(enum ufs_lock_rank r)
{
	unsigned later = ufs_witness_held & ~((1u << r) - 1u);

	if (later) {
		enum ufs_lock_rank h = (enum ufs_lock_rank)(31 - __builtin_clz(later));

		fprintf(stderr,
			"unstable-fuse: lock order violated: taking the %s (rank %d) while "
			"holding the %s (rank %d)\n",
			ufs_rank_name(r), (int)r, ufs_rank_name(h), (int)h);
		abort();
	}
	ufs_witness_held |= 1u << r;
}

/* A trylock of rank r succeeded: held, whatever else is. One word cannot
 * count a rank twice, and no path takes two locks of one rank. */
static inline void ufs_witness_try(enum ufs_lock_rank r)
{
	if (ufs_witness_held & 1u << r) {
		fprintf(stderr, "unstable-fuse: the %s (rank %d) taken twice\n", ufs_rank_name(r),
			(int)r);
		abort();
	}
	ufs_witness_held |= 1u << r;
}

static inline void ufs_witness_drop(enum ufs_lock_rank r)
{
	if (!(ufs_witness_held & 1u << r)) {
		fprintf(stderr, "unstable-fuse: dropping the %s (rank %d), not held\n",
			ufs_rank_name(r), (int)r);
		abort();
	}
	ufs_witness_held &= ~(1u << r);
}

/* A condition wait on the mutex of rank r: the thread holds it. */
static inline void ufs_witness_holds(enum ufs_lock_rank r)
{
	if (!(ufs_witness_held & 1u << r)) {
		fprintf(stderr, "unstable-fuse: waiting under the %s (rank %d), not held\n",
			ufs_rank_name(r), (int)r);
		abort();
	}
}

#else

#define ufs_witness_take(r)  ((void)(r))
#define ufs_witness_try(r)   ((void)(r))
#define ufs_witness_drop(r)  ((void)(r))
#define ufs_witness_holds(r) ((void)(r))

#endif

/* The client's lock and unlock calls: each names the rank of its lock. */

static inline void ufs_mutex_lock(pthread_mutex_t *m, enum ufs_lock_rank r)
{
	ufs_witness_take(r);
	pthread_mutex_lock(m);
}

/* Whether m was taken without waiting. */
static inline bool ufs_mutex_trylock(pthread_mutex_t *m, enum ufs_lock_rank r)
{
	if (pthread_mutex_trylock(m) != 0)
		return false;
	ufs_witness_try(r);
	return true;
}

static inline void ufs_mutex_unlock(pthread_mutex_t *m, enum ufs_lock_rank r)
{
	pthread_mutex_unlock(m);
	ufs_witness_drop(r);
}

static inline void ufs_cond_wait(pthread_cond_t *c, pthread_mutex_t *m, enum ufs_lock_rank r)
{
	ufs_witness_holds(r);
	pthread_cond_wait(c, m);
}

/* The time ns from now on clock (the clock of the condition variable it
 * is a deadline for): for ufs_cond_timedwait(). */
static inline struct timespec ufs_deadline(clockid_t clock, long ns)
{
	struct timespec t;

	clock_gettime(clock, &t);
	t.tv_nsec += ns;
	while (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* pthread_cond_timedwait()'s result: ETIMEDOUT when until passed. */
static inline int ufs_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				     const struct timespec *until, enum ufs_lock_rank r)
{
	ufs_witness_holds(r);
	return pthread_cond_timedwait(c, m, until);
}

static inline void ufs_rwlock_rdlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	ufs_witness_take(r);
	pthread_rwlock_rdlock(l);
}

static inline void ufs_rwlock_wrlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	ufs_witness_take(r);
	pthread_rwlock_wrlock(l);
}

/* Whether l was taken shared without waiting. */
static inline bool ufs_rwlock_tryrdlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	if (pthread_rwlock_tryrdlock(l) != 0)
		return false;
	ufs_witness_try(r);
	return true;
}

/* Whether l was taken exclusive without waiting. */
static inline bool ufs_rwlock_trywrlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	if (pthread_rwlock_trywrlock(l) != 0)
		return false;
	ufs_witness_try(r);
	return true;
}

static inline void ufs_rwlock_unlock(pthread_rwlock_t *l, enum ufs_lock_rank r)
{
	pthread_rwlock_unlock(l);
	ufs_witness_drop(r);
}

#endif /* UFS_WITNESS_H */
