/*
 * unstable — write-back cache accounting that never OOMs on unstable data.
 *
 * SPDX-License-Identifier: MIT
 *
 * This is the umbrella header and the only one a user includes. It documents
 * the model, the threading contract and, per function, the return values and
 * error codes.
 *
 * THE MODEL
 *
 *   us_engine   the whole cache: its clock, allocator, domains and backends.
 *               Two engines in one process are independent (but for the
 *               process-wide state below).
 *   us_domain   an accounting domain, a node of a tree like a memory cgroup.
 *               Every counter of a domain covers its whole subtree; a parent's
 *               max bounds its subtree.
 *   us_backend  where data is written: user callbacks (flush, commit, sync,
 *               evict) and the commit sequence of the server.
 *   us_object   a file: belongs to one backend and one domain, holds
 *               non-overlapping buffers indexed by offset.
 *   us_buf      a range [offset, offset + length) of an object, with a state,
 *               a reference count and optional payload memory.
 *
 * BUFFER STATES
 *
 *        us_buf_dirty()            flush callback        write_done(UNSTABLE, seq)
 *   CLEAN ─────────────▶ DIRTY ─────────────────▶ WRITEBACK ───────────────▶ UNSTABLE
 *     ▲                   ▲ ▲                        │  │                       │ │
 *     │                   │ └── write_done(ERROR) ───┘  │ write_done(STABLE),   │ │
 *     │                   │     or REDIRTIED            │ or seq <= committed   │ │
 *     │                   └── us_buf_dirty(), commit_lost ──────────────────────┘ │
 *     └────────────── write_done(STABLE / LOST) ◀───┘     commit_done(seq) ───────┘
 *
 * A buffer in WRITEBACK that is dirtied again gets the REDIRTIED flag and goes
 * back to DIRTY when its write completes, whatever the result: a newer write
 * is never overtaken by an older one. A permanent error (US_WRITE_LOST) cleans
 * the buffer and records the error on the object for its sync callers.
 *
 * THREADS AND LOCKS
 *
 * Every function may be called from any thread. The engine serialises its
 * state with one internal lock; user callbacks are never called with it held,
 * so a callback may call any function of this header, including the
 * completion functions for the buffers it was handed. In polled mode no
 * function blocks. In threaded mode (us_engine_options.flusher_threads)
 * callbacks run on the flusher threads too, and only the blocking calls wait:
 * us_buf_dirty() with a NULL pause, us_object_balance_wait(), us_buf_get()
 * waiting for reclaim, us_object_sync(), us_domain_sync() and
 * us_engine_shutdown(); from inside a callback they return -EDEADLK instead,
 * on any number of threads at once (each thread marks the callbacks it runs
 * on its own stack).
 *
 * PROCESS-WIDE STATE
 *
 * What the engines of a process share, and why:
 * - a thread that dirties buffers gets a small cache per engine (its lock-free
 *   credit and queue of dirtyings), found through a thread-local slot; the
 *   caches of all threads are listed under one process-wide mutex, and a
 *   thread-exit key hands an exiting thread's credit and queue back to their
 *   engines;
 * - the first engine registers the process for the private expedited
 *   membarrier() (Linux), which lets writers that rewrite DIRTY buffers skip a
 *   fence; the registration is once per process;
 * - with jemalloc, the extent hooks of the engines' arenas (the pool and its
 *   huge pages) are set up once per process;
 * - counters that hand out engine ids and generation numbers, so that a cache
 *   never mistakes a new engine at a freed one's address for the old one.
 * None of it holds buffers, limits or statistics: those are per engine.
 *
 * ERRORS
 * Functions return 0 (or a count) on success and a negative errno on
 * failure; errno itself is never used as a channel. On failure nothing has
 * changed and no callback was called, with three exceptions said where they
 * apply: event counters (a refused charge counts in enomem and max_events);
 * the functions that return what a user callback returned; and the calls
 * that make room before they give up (us_buf_get(), us_object_reclaim()):
 * their -EAGAIN or -ENOMEM may come after they wrote back dirty data and
 * asked for commits (flush and commit callbacks called, buffers moved to
 * WRITEBACK), which is how room is made.
 * Bad arguments give -EINVAL.
 */
#ifndef UNSTABLE_UNSTABLE_H
#define UNSTABLE_UNSTABLE_H

#include <stddef.h>
#include <stdint.h>

#include <unstable/version.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define US_EXPORT __attribute__((visibility("default")))
#else
#define US_EXPORT
#endif

/* The calls a writer makes for every write (us_buf_get(), us_buf_lookup(),
 * us_buf_data(), us_buf_dirty(), us_buf_put()) go through the GOT, without
 * the PLT's extra jump (GCC's noplt; the symbol is then bound when the
 * library is loaded): a rewrite of a dirty buffer costs 1.9 ns instead of
 * 2.5 through the shared library. Other compilers call through the PLT. */
#if defined(__has_attribute)
#if __has_attribute(noplt)
#define US_HOT_CALL __attribute__((noplt))
#endif
#endif
#ifndef US_HOT_CALL
#define US_HOT_CALL
#endif

/* A limit that is not set. */
#define US_UNLIMITED UINT64_MAX

/* The largest single buffer: 1 GiB. */
#define US_BUF_MAX_BYTES ((uint64_t)1 << 30)

typedef struct us_engine us_engine;
typedef struct us_domain us_domain;
typedef struct us_backend us_backend;
typedef struct us_object us_object;
typedef struct us_buf us_buf;
typedef struct us_sync us_sync;

/* ------------------------------------------------------------------------ */
/* Version and errors                                                        */

/* The library's version, "MAJOR.MINOR.PATCH". Never NULL. */
US_EXPORT const char *us_version(void);

/* A static description of a negative errno returned by this library. */
US_EXPORT const char *us_strerror(int err);

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */

enum us_clock_kind {
	US_CLOCK_MONOTONIC = 0, /* CLOCK_MONOTONIC, the default */
	US_CLOCK_VIRTUAL = 1,	/* starts at 0, moved only by us_engine_clock_advance() */
	US_CLOCK_CUSTOM = 2,	/* the clock_fn below */
};

/* What an allocation made through the allocator hooks is for. */
enum us_alloc_kind {
	US_ALLOC_META = 0,    /* engine records: domains, objects, buffers */
	US_ALLOC_PAYLOAD = 1, /* buffer payload memory */
};

/*
 * Allocator hooks. When given, every allocation the engine makes goes
 * through them (both kinds), and neither jemalloc nor the C allocator is
 * used. alloc returns NULL on failure, which the engine reports as -ENOMEM
 * and survives. free receives the size that was allocated. The hooks may be
 * called with the engine lock held: they must not call into the engine.
 * The per-thread writer caches of the lock-free first dirtying (see
 * us_buf_dirty()) outlive engines and come from the C allocator, so an
 * engine with hooks does without them: every first dirtying takes the lock.
 */
struct us_alloc_hooks {
	void *(*alloc)(void *ctx, size_t size, enum us_alloc_kind kind);
	void (*free)(void *ctx, void *ptr, size_t size, enum us_alloc_kind kind);
	void *ctx;
};

/*
 * Engine options. Initialise with us_engine_options_init(), which sets size
 * to sizeof(struct us_engine_options): fields added later go at the end, and
 * an older caller's smaller struct keeps working.
 */
struct us_engine_options {
	size_t size;
	/* max of the root domain. Default: the machine's physical memory. */
	uint64_t memory_bytes;
	enum us_clock_kind clock;
	/* For US_CLOCK_CUSTOM: returns nanoseconds, never decreasing. Called
	 * with the engine lock held; it must not call into the engine. */
	uint64_t (*clock_fn)(void *ctx);
	void *clock_ctx;
	/* NULL: payloads from jemalloc arenas (or the C allocator when built
	 * without jemalloc), records from the C allocator. */
	const struct us_alloc_hooks *alloc;
	/* Domains that may own a jemalloc arena, the root included (default 8);
	 * the others share their nearest ancestor's. 0 means the default. */
	unsigned max_arenas;
	/*
	 * Threaded mode: the number of flusher threads the engine starts
	 * (each only calls us_engine_poll() when work is due or it is woken).
	 * 0, the default, is polled mode: no threads at all; the host calls
	 * us_engine_poll() itself. The threads are named "us-flusher" and
	 * block every asynchronous signal (faults stay deliverable): a signal
	 * sent to the process goes to one of the application's threads.
	 */
	unsigned flusher_threads;
	/*
	 * 1: the payload arenas' memory is advised for transparent huge pages
	 * (madvise MADV_HUGEPAGE on the extents jemalloc maps for them, 2 MiB
	 * aligned), so a pool growing into fresh memory takes a page fault per
	 * 2 MiB rather than per 4 KiB; the rest of the process keeps the
	 * system's setting. Resident memory grows by up to 2 MiB per arena
	 * (pages come whole). Without jemalloc arenas (alloc hooks, a build
	 * without jemalloc) it has no effect. 0, the default: no advice.
	 */
	unsigned hugepages;
};

/* Fills opts with the defaults. */
US_EXPORT void us_engine_options_init(struct us_engine_options *opts);

/*
 * Creates an engine. opts may be NULL for the defaults.
 * Errors: -EINVAL (bad size, unknown clock, custom clock without clock_fn,
 * incomplete hooks, memory_bytes of 0, more than 64 flusher_threads, hugepages
 * neither 0 nor 1), -ENOMEM.
 */
US_EXPORT int us_engine_create(const struct us_engine_options *opts, us_engine **out);

/*
 * Destroys the engine and everything in it. Clean unreferenced buffers are
 * evicted (the evict callback is called for each). Errors: -EINVAL (NULL),
 * -EDEADLK (inside a callback), -EBUSY when a buffer is still dirty, in
 * writeback, unstable or referenced, a callback on an object is running, or
 * a sync exists, in which case nothing is freed.
 */
US_EXPORT int us_engine_destroy(us_engine *e);

/* The engine's current time in nanoseconds (0 for a NULL engine). */
US_EXPORT uint64_t us_engine_now(us_engine *e);

/*
 * Moves a virtual clock forward by delta_ns. Errors: -EINVAL when the engine
 * does not use US_CLOCK_VIRTUAL or the clock would overflow.
 */
US_EXPORT int us_engine_clock_advance(us_engine *e, uint64_t delta_ns);

/* The root domain, created with the engine; it cannot be destroyed. */
US_EXPORT us_domain *us_engine_root(us_engine *e);

/*
 * Engine parameters, settable at runtime. Times in nanoseconds, sizes in
 * bytes, rates in bytes per second.
 */
enum us_param {
	/* Dirty data older than this is written back (default 30 s). */
	US_PARAM_DIRTY_EXPIRE_NS = 0,
	/* How often expiry is checked (default 5 s). */
	US_PARAM_WRITEBACK_INTERVAL_NS = 1,
	/* No single throttle pause is longer (default 200 ms). The
	 * memory.high delay (US_LIMIT_HIGH), capped at 2 s of its own, comes
	 * on top: a pause returned with it may reach max_pause + 2 s. */
	US_PARAM_MAX_PAUSE_NS = 2,
	/* Pauses shorter than this accumulate per object until they reach it
	 * (default 10 ms: fewer, longer sleeps; 0 returns every pause). */
	US_PARAM_MIN_PAUSE_NS = 3,
	/* The largest run handed to one flush call (default 4 MiB). */
	US_PARAM_MAX_FLUSH_BYTES = 4,
	/* Bandwidth sampling interval (default 200 ms) and averaging period
	 * (default 3 s). */
	US_PARAM_BW_INTERVAL_NS = 5,
	US_PARAM_BW_PERIOD_NS = 6,
	/* The bandwidth assumed before anything was measured (default 100 MiB/s). */
	US_PARAM_INIT_BW = 7,
	/* 1: the engine forces commits under pressure (a domain past its
	 * background threshold with unstable data a large share of its pinned
	 * bytes, or a charge that needs memory), as the Lustre change does;
	 * 0: it never does, for backends that commit quickly on their own and
	 * to reproduce the unpatched behaviour (default 1). */
	US_PARAM_FORCE_COMMIT = 8,
	/* Unstable data older than this is committed (default 30 s). */
	US_PARAM_COMMIT_INTERVAL_NS = 9,
	/* Commits in flight per backend, at most (default 4; a backend-wide
	 * sync counts for all of them). */
	US_PARAM_MAX_COMMITS = 10,
	/* A charge that waits for reclaim checks for writeback or commit
	 * progress at this interval (default 100 ms; it tries again sooner,
	 * after a commit latency of its backend) ... */
	US_PARAM_RECLAIM_WAIT_NS = 11,
	/* ... and fails with -ENOMEM after this many waits in a row without
	 * any progress while nothing that could free memory was in flight: no
	 * write and no commit of the engine's for the domain's data, none
	 * backing off to retry, no write on a backend whose in-flight cap
	 * holds the domain's dirty data back (default 16). While a write or
	 * commit is in flight the charge waits for it, however slow. */
	US_PARAM_RECLAIM_RETRIES = 12,
	/* ... or after this long without any progress at all, whatever is in
	 * flight: counted from the last completion that freed memory of the
	 * domain, for a server that never answers (default 60 s; UINT64_MAX:
	 * never). */
	US_PARAM_RECLAIM_TIMEOUT_NS = 13,
};

/* Errors: -EINVAL (NULL, unknown parameter, 0 for a time, size, rate or
 * count; MIN_PAUSE may be 0; FORCE_COMMIT is 0 or 1). */
US_EXPORT int us_engine_set_param(us_engine *e, enum us_param p, uint64_t value);
US_EXPORT int us_engine_get_param(us_engine *e, enum us_param p, uint64_t *value);

/*
 * The polled core: does all the work due at now_ns and stores in *next_ns
 * (when not NULL) the time at which it should be called again; it should
 * also be called after completions were delivered, which may make more work
 * possible. With US_CLOCK_VIRTUAL, now_ns moves the clock forward first
 * (never back); with the other clocks, now_ns is ignored.
 *
 * The work: bandwidth sampling of each writeback context; background
 * writeback for every domain over its background threshold (reason
 * THROTTLE when its writers are being paused), and expiry of dirty data
 * older than US_PARAM_DIRTY_EXPIRE_NS, checked every
 * US_PARAM_WRITEBACK_INTERVAL_NS. Flush callbacks are called from inside
 * this call, without the engine lock. Returns the number of buffers its
 * background and expiry writeback handed to flush callbacks that took them
 * (a refused run and the rest of its batch are not counted; flushes for
 * syncs, commits and reclaim are counted in the backend's stats only).
 * Errors: -EINVAL (NULL e), -ENOMEM (writeback could not start; call
 * again). Commit requests and sync steps that cannot get memory are not
 * errors: nothing is lost, and they are asked again at the next call.
 */
US_EXPORT int us_engine_poll(us_engine *e, uint64_t now_ns, uint64_t *next_ns);

/* ------------------------------------------------------------------------ */
/* Domains                                                                   */

/*
 * Creates a domain under parent (NULL: the root). name is copied, at most
 * 63 bytes, and must be unique among its siblings. A domain made directly
 * under the root gets a jemalloc arena of its own; deeper ones share their
 * ancestor's unless flags has US_DOMAIN_ARENA (either way granted while the
 * engine has fewer than max_arenas; otherwise the domain silently shares its
 * ancestor's).
 * Errors: -EINVAL (NULL name or out, empty or too long name, foreign parent,
 * unknown flag), -EEXIST (sibling with that name), -ENOMEM.
 */
#define US_DOMAIN_ARENA 0x1u
US_EXPORT int us_domain_create(us_engine *e, us_domain *parent, const char *name, unsigned flags,
			       us_domain **out);

/*
 * Destroys a domain. Errors: -EINVAL (NULL, the root), -EBUSY (it has child
 * domains, objects or charged bytes, or a sync on it is not yet freed).
 */
US_EXPORT int us_domain_destroy(us_domain *d);

US_EXPORT const char *us_domain_name(const us_domain *d);
US_EXPORT us_domain *us_domain_parent(const us_domain *d);

/*
 * Limits. Bytes limits are US_UNLIMITED when unset. The dirty thresholds are
 * set either in bytes or as a ratio in percent of the domain's effective
 * limit; setting one form clears the other, as vm.dirty_bytes and
 * vm.dirty_ratio do. Defaults: max and high unlimited, background 10 %,
 * dirty 20 % (Linux's defaults). Ratios are taken of the domain's dirtyable
 * memory, as Linux takes them of free and reclaimable pages: for the domain
 * and each ancestor, what its max leaves besides the bytes eviction could not
 * free (charged - evictable), the smallest on the chain, plus the domain's
 * own such bytes. A domain beside a sibling whose clean data fills their
 * parent keeps its thresholds: reclaim makes the room.
 *
 * A dirty threshold set as a ratio is raised, when the domain's commit
 * pipeline needs more room, to 4 times the bytes its writeback contexts
 * write per commit latency plus a write's own time (counted up to one
 * commit latency; at the faster of their clean-out rate and their link's
 * rate; all measured, us_backend_stats()), at most 31/32 of the effective
 * limit (or of high),
 * and the background ratio with it in proportion: data stays pinned from its
 * dirtying until its commit, one to two commit latencies, so a smaller
 * threshold would hold writers to a fraction of the backend's speed. Thresholds
 * set in bytes are kept as set.
 *
 * A dirty ratio of 0 is write-through: every
 * dirtying is over the limit (US_DIRTY_OVER_LIMIT) and starts writeback, and
 * the writer then waits for its own data only: the gate opens when it holds
 * nothing pinned (or its context's share is free again).
 */
enum us_limit {
	US_LIMIT_MAX = 0, /* hard limit on charged bytes, never crossed */
	/* Soft limit, like memory.high: a charge that leaves the domain above
	 * it evicts down to it, starts reclaim for the rest, and delays the
	 * charging writer (its next pause) by 2 s * min(1, (4 * over / high)^2):
	 * 80 ms at 5 % over, the 2 s cap from 25 % (lib/throttle.c). Delays
	 * owed do not add up past the cap. The delay is not bounded by
	 * US_PARAM_MAX_PAUSE_NS: the pause that returns it may exceed
	 * max_pause, by at most the 2 s cap. */
	US_LIMIT_HIGH = 1,
	US_LIMIT_DIRTY_BG_BYTES = 2,
	US_LIMIT_DIRTY_BG_RATIO = 3, /* percent, 0..100 */
	US_LIMIT_DIRTY_BYTES = 4,
	US_LIMIT_DIRTY_RATIO = 5, /* percent, 0..100 */
};

/*
 * Sets a limit at runtime. Lowering US_LIMIT_MAX below the charged bytes
 * first evicts clean unreferenced buffers of the subtree, least recently used
 * first; if pinned or referenced data keeps the domain above the new value,
 * the call fails with -EBUSY and nothing changes (memory cgroup v1
 * semantics). The root's max starts as the engine's memory_bytes and may be
 * changed like any other. Errors: -EINVAL (NULL, unknown limit, ratio over
 * 100, 0 bytes for a dirty threshold), -EBUSY.
 */
US_EXPORT int us_domain_set_limit(us_domain *d, enum us_limit which, uint64_t value);

/*
 * Reads a limit as set (US_UNLIMITED or 0 for a form that is not in use).
 * Errors: -EINVAL.
 */
US_EXPORT int us_domain_get_limit(const us_domain *d, enum us_limit which, uint64_t *value);

/*
 * The limits in force for a domain now, bounded by its ancestors.
 *   max_bytes       min(own max, for each ancestor A: charged + A's headroom)
 *   high_bytes      the same bound applied to high
 *   bg_thresh_bytes background threshold, from bytes or ratio of max_bytes,
 *                   and no higher than any ancestor's; halved when at or
 *                   above the dirty threshold (as Linux does)
 *   dirty_thresh_bytes likewise for the dirty limit; from a ratio, raised
 *                   to the commit pipeline's floor (see Limits above)
 */
struct us_domain_limits {
	size_t size;
	uint64_t max_bytes;
	uint64_t high_bytes;
	uint64_t bg_thresh_bytes;
	uint64_t dirty_thresh_bytes;
};

/* Errors: -EINVAL (NULL, out->size too small). Set out->size first. */
US_EXPORT int us_domain_effective_limits(const us_domain *d, struct us_domain_limits *out);

/* ------------------------------------------------------------------------ */
/* Backends                                                                  */

/* Why the engine calls a callback. */
enum us_reason {
	US_REASON_BACKGROUND = 0, /* over the background threshold */
	US_REASON_EXPIRY = 1,	  /* dirty data older than dirty_expire */
	US_REASON_RECLAIM = 2,	  /* a charge needs memory */
	US_REASON_SYNC = 3,	  /* a caller asked for integrity */
	US_REASON_THROTTLE = 4,	  /* writers are waiting */
	US_REASON_SHUTDOWN = 5,
	US_REASON_USER = 6, /* an explicit us_object_flush/commit call */
};

/*
 * Backend callbacks. For each: called from the thread that made the engine
 * call that triggered it, with no engine lock held; it may block (the caller
 * waits) and it may call any function of this header.
 */
struct us_backend_ops {
	size_t size; /* sizeof(struct us_backend_ops) */
	/*
	 * Write the run bufs[0..n) of object obj: adjacent buffers in
	 * ascending offset, together [offset, offset + length), all in
	 * WRITEBACK. Report each buffer with us_buf_write_done(), now (from
	 * inside this callback) or later from any thread. The array is valid
	 * only during the call; the buffers stay valid until completed, and
	 * until the callback returns. The callback holds no reference to
	 * them through this call: us_buf_put() or us_buf_drop() on one it
	 * has no reference of its own to gets -EINVAL (to keep one past its
	 * completion, take one with us_buf_lookup()), and us_buf_drop() with
	 * one gets -EBUSY until the callback has returned.
	 * Return 0 when the write was started; a negative errno when it was
	 * not, in which case the engine puts the buffers not yet completed
	 * back to DIRTY (the data is kept). Required.
	 */
	int (*flush)(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason);
	/*
	 * Make obj's unstable data durable (NFS COMMIT, fdatasync), then
	 * report it with us_object_commit_done() or us_backend_commit_done(),
	 * now or later. Return 0 or a negative errno (nothing was started).
	 * Optional when sync is given.
	 */
	int (*commit)(void *ctx, us_object *obj, enum us_reason reason);
	/*
	 * Make everything unstable on the backend durable at once, then report
	 * it with us_backend_commit_done(). Optional.
	 */
	int (*sync)(void *ctx, us_backend *b, enum us_reason reason);
	/*
	 * Told that the clean buffer [offset, offset + length) of obj is being
	 * evicted. data is the payload (NULL for accounting-only buffers),
	 * freed by the engine when this returns. The buffer is already gone
	 * from the object's index. Optional.
	 */
	void (*evict)(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data);
};

/*
 * Creates a backend. ops is copied. Errors: -EINVAL (NULL, bad ops->size,
 * no flush, neither commit nor sync), -ENOMEM.
 */
US_EXPORT int us_backend_create(us_engine *e, const struct us_backend_ops *ops, void *ctx,
				us_backend **out);

/* Errors: -EINVAL, -EBUSY (it still has objects). */
US_EXPORT int us_backend_destroy(us_backend *b);

/*
 * Caps the bytes in WRITEBACK on this backend (default 32 MiB, Lustre's 8
 * RPCs of 4 MiB), so that a slow backend holds a bounded amount of memory in
 * flight. The engine's own writeback shares the cap fairly between the
 * writeback contexts (domains) using the backend: each may fill at most
 * cap / active contexts, but never less than a quarter of a run
 * (US_PARAM_MAX_FLUSH_BYTES, or half the cap when that is smaller; at least
 * one buffer), so one domain's slow stream never takes another's share. With
 * more contexts than shares fit in the cap they take turns, round robin, a
 * turn being one share of bytes (with so many contexts that a round of
 * quarter runs would last more than about 100 ms at the link's rate, less,
 * down to one buffer), so that each gets the same bytes over time whatever
 * their number. While every context stays within its share the
 * cap holds; a context that filled it while it was alone keeps what it has
 * in flight, and the others still get their shares (so at most twice the
 * cap, until those writes complete). A single buffer larger than the cap is
 * still written when nothing else is in flight. us_object_flush() ignores
 * the cap. Errors: -EINVAL (NULL, 0).
 */
US_EXPORT int us_backend_set_max_inflight(us_backend *b, uint64_t bytes);

/*
 * The backend reports that every write it acknowledged with a commit
 * sequence number <= seq is durable: those UNSTABLE buffers become CLEAN.
 * Sequence numbers must increase monotonically for one server instance,
 * that is between two us_backend_commit_lost() calls; after one they may
 * start again from 1 (or go on, as Lustre's transno does across restarts).
 * The engine remembers the highest seq reported since the last
 * us_backend_commit_lost(), so a write acknowledged later with a seq
 * already covered goes straight to CLEAN. Returns the number of buffers
 * cleaned. Errors: -EINVAL (NULL, seq of 0).
 */
US_EXPORT int us_backend_commit_done(us_backend *b, uint64_t seq);

/*
 * The backend lost uncommitted data (server restart, changed write
 * verifier): every UNSTABLE buffer of the backend becomes DIRTY again, to be
 * written again. The committed seqs the backend and its objects reported
 * are forgotten (us_backend_stats' last_committed_seq reads 0), so the
 * restarted server may number its writes from 1 again. A write in flight
 * across the loss is written again too: acknowledged UNSTABLE afterwards,
 * it goes back to DIRTY whatever its seq. A commit report of the old
 * server must not follow this call: the engine cannot tell
 * us_backend_commit_done() or us_object_commit_done() of the old server
 * from the new one's, and would take the old seq as covering the new
 * server's writes up to it. The host stops delivering the old server's
 * replies first (it checks the reply's verifier or connection), or reports
 * commits with us_backend_commit_done_epoch(), which refuses them.
 * Returns the number of buffers redirtied. Errors: -EINVAL.
 */
US_EXPORT int us_backend_commit_lost(us_backend *b);

/*
 * Commit reports that say which server instance made them. The epoch of a
 * backend is the number of us_backend_commit_lost() calls made on it so far
 * (0 for NULL). A host that cannot stop an old server's replies before it
 * calls us_backend_commit_lost() samples the epoch when it sends a request
 * (or when the connection it arrives on was made) and passes it with the
 * report: us_backend_commit_done_epoch() and us_object_commit_done_epoch()
 * are us_backend_commit_done() and us_object_commit_done() for a report of
 * that epoch, refused with -ESTALE, nothing changed, when
 * us_backend_commit_lost() was called since. Errors: -EINVAL (as theirs, or
 * an epoch not reached yet), -ESTALE.
 */
US_EXPORT uint64_t us_backend_epoch(const us_backend *b);
US_EXPORT int us_backend_commit_done_epoch(us_backend *b, uint64_t epoch, uint64_t seq);

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */

/*
 * Creates an object (a file) on backend b, charged to domain d (NULL: the
 * root). user is returned by us_object_user(). Errors: -EINVAL (NULL, b and
 * d of different engines), -ENOMEM.
 */
US_EXPORT int us_object_create(us_backend *b, us_domain *d, void *user, us_object **out);

/*
 * Destroys an object. Its clean unreferenced buffers are evicted (evict
 * callback). Errors: -EINVAL, -EBUSY (a buffer is dirty, in writeback,
 * unstable or referenced, a callback on the object is running, or a sync
 * on it is not yet freed).
 */
US_EXPORT int us_object_destroy(us_object *o);

US_EXPORT void *us_object_user(const us_object *o);
US_EXPORT us_domain *us_object_domain(const us_object *o);
US_EXPORT us_backend *us_object_backend(const us_object *o);

/*
 * The estimated clean-out bandwidth of o's writeback context (bytes per
 * second that left writeback and commit as CLEAN), smoothed over
 * US_PARAM_BW_PERIOD_NS; US_PARAM_INIT_BW before any measurement. 0 for NULL.
 */
US_EXPORT uint64_t us_object_bandwidth(const us_object *o);

/*
 * The throttle gate for a writer about to dirty data of o. Returns 0 when
 * the writer may go on now; -EAGAIN when o's domain, or one of its
 * ancestors, is at or above its dirty limit (or o's writeback context at its
 * share of it), when writers that waited at a gate of o's chain before it
 * have not gone yet, or when o's pace is still ahead of the clock (what was
 * dirtied into it earned a pause that has not run out yet, at least
 * US_PARAM_MIN_PAUSE_NS of it; see us_buf_dirty()): *pause_ns (when not
 * NULL) is then the time after
 * which to call again, and the next us_engine_poll() writes back for the
 * throttled domains with reason THROTTLE.
 *
 * The writer is the object: threads writing one object share its pace and
 * its place. Writers waiting at a gate go in the order of what they have
 * had, whatever order they call in: by their virtual time, which each byte
 * a writer dirtied moves on by the time that byte takes at its context's
 * per-writer rate (so equal writers go in the order they first found the
 * gate closed, none twice while another waits, and a writer of large
 * blocks as often in bytes as one of small blocks). One that does not call
 * again within a grace of the time it was given (as long again as the
 * pause, at least US_PARAM_MIN_PAUSE_NS, at most US_PARAM_MAX_PAUSE_NS)
 * loses its place (it joins anew when it comes back), so a writer that gave
 * up, or wrote its last block, holds nobody for long.
 * Errors: -EINVAL.
 */
US_EXPORT int us_object_balance(us_object *o, uint64_t *pause_ns);

/*
 * What o's writer still owes of its pace: *owed_ns (not NULL) receives the
 * time until what it dirtied has been paid for at its context's per-writer
 * rate, 0 when it owes nothing. Reads state only (it changes no pace and no
 * place). A writer whose pace is ahead may be held by us_object_balance()
 * with nothing pinned; one whose pace is due is held only by a gate or by
 * the order of the waiters, and never with nothing of its own pinned. An
 * event loop can use it to sleep past a debt instead of polling.
 * Errors: -EINVAL.
 */
US_EXPORT int us_object_pace(us_object *o, uint64_t *owed_ns);

/*
 * The blocking gate: waits (on the engine's clock: a virtual clock is
 * advanced instead of sleeping) until o's domain and its ancestors are under
 * their dirty limits. In polled mode it does not wait (nothing would write
 * back meanwhile): it is us_object_balance(o, NULL). Errors: -EINVAL,
 * -EAGAIN (polled mode, at the limit), -EDEADLK (called from inside a
 * callback of this engine, where it would wait for itself).
 */
US_EXPORT int us_object_balance_wait(us_object *o);

/*
 * Starts writeback of the DIRTY buffers of o that lie wholly inside
 * [offset, offset + length) (length US_UNLIMITED: to the end): they become
 * WRITEBACK and are handed to the flush callback in runs of adjacent
 * buffers, ascending offset, at most max_run_bytes per run (0: the engine's
 * US_PARAM_MAX_FLUSH_BYTES; a single buffer is never split). It ignores the
 * backend's in-flight cap: it is the caller's explicit request. Returns the
 * number of buffers the callback took; a run it refused, and the rest of the
 * batch after it, go back to DIRTY with backoff and are not counted.
 * Errors: -EINVAL, -ENOMEM (nothing was started).
 */
US_EXPORT int us_object_flush(us_object *o, uint64_t offset, uint64_t length,
			      uint64_t max_run_bytes);

/*
 * Asks the backend to commit o's unstable data: the commit callback, or the
 * sync callback when the backend has no commit. Returns what the callback
 * returned, or 0 without calling anything when o has nothing unstable.
 * Errors: -EINVAL.
 */
US_EXPORT int us_object_commit(us_object *o);

/*
 * The backend reports that o's writes acknowledged with seq' <= seq are
 * durable (NFS COMMIT reply): those UNSTABLE buffers of o become CLEAN, and a
 * later acknowledgement of o with such a seq goes straight to CLEAN. Returns
 * the number of buffers cleaned. Errors: -EINVAL (NULL, seq of 0).
 */
US_EXPORT int us_object_commit_done(us_object *o, uint64_t seq);
/* The same for a report of the given epoch (see us_backend_epoch()):
 * -ESTALE after a us_backend_commit_lost() of o's backend since. */
US_EXPORT int us_object_commit_done_epoch(us_object *o, uint64_t epoch, uint64_t seq);

/*
 * The backend lost o's uncommitted data, and only o's (its commit was
 * refused: an NFS COMMIT answered NFS3ERR_STALE, the file removed on the
 * server): every UNSTABLE buffer of o becomes DIRTY again, to be written
 * again, where the write's own error then decides (a write the server
 * refuses is reported US_WRITE_LOST, and its error goes to o's errseq).
 * A write of o in flight across the call is written again too:
 * acknowledged UNSTABLE afterwards, it goes back to DIRTY whatever its seq.
 * The other objects' buffers, the backend's epoch and the committed seqs
 * are left as they are: writes acknowledged afterwards carry higher seqs,
 * as for one server instance. A commit report of o sent before this call
 * must not follow it. Returns the number of buffers redirtied. Errors:
 * -EINVAL (NULL).
 */
US_EXPORT int us_object_commit_lost(us_object *o);

/*
 * Writeback errors, errseq_t style. us_object_errseq() samples the object's
 * error cursor (when a file is opened, say). us_object_check_error() stores
 * in *err the latest error recorded since *since (a negative errno), moves
 * *since forward and returns 1; or returns 0 when there was none: each caller
 * sees each new error once. Errors: -EINVAL (a NULL argument).
 */
US_EXPORT uint64_t us_object_errseq(const us_object *o);
US_EXPORT int us_object_check_error(us_object *o, uint64_t *since, int *err);

/*
 * INTEGRITY SYNC (lib/sync.c). A sync covers the data dirtied before it
 * started, of one object or of every object in a domain's subtree: it
 * writes that data back (reason US_REASON_SYNC), waits for the writes,
 * asks for the commits of what was acknowledged unstable (per object, or
 * with a backend-wide sync for a domain) and waits for them. A failed write
 * is retried with backoff; a write declared lost cleans its buffer and is
 * reported through the object's errseq (us_object_check_error()).
 *
 * Exactly: a sync started at time t waits for every buffer of its scope
 * that was not CLEAN at t (DIRTY, WRITEBACK or UNSTABLE), until that buffer
 * is CLEAN (or dropped). Its data as of t is durable then, and so is
 * whatever was written into it after t before it got clean: a buffer
 * rewritten after t while its older write was in flight goes back to DIRTY
 * when that write completes, and the sync waits for the newer write and its
 * commit too (an UNSTABLE one rewritten, or redirtied by a lost commit,
 * likewise); it never completes on the older write alone. A buffer CLEAN
 * at t and dirtied after, and a buffer created after t, do not hold it
 * back. So data dirtied after the start holds a sync back only in a buffer
 * that already held data not yet durable at t, and a buffer rewritten
 * without pause holds it back for ever (its newer data is never all
 * written).
 *
 * The non-blocking form: us_object_sync_start() / us_domain_sync_start()
 * start it and make the first step; each us_engine_poll() and each
 * us_sync_done() makes another; us_sync_done() returns 1 once done, 0
 * before; cb (when not NULL) is called once when it is done, without any
 * engine lock, from a later poll or us_sync_done() (never from the start
 * call), and may free the sync. us_sync_free() releases it, done or not
 * (an object or domain cannot be destroyed while a sync on it exists:
 * -EBUSY); it must not race with another call on the same sync.
 * Errors: -EINVAL (NULL), -ENOMEM.
 */
typedef void (*us_sync_cb)(void *ctx, us_sync *s);
US_EXPORT int us_object_sync_start(us_object *o, us_sync_cb cb, void *ctx, us_sync **out);
US_EXPORT int us_domain_sync_start(us_domain *d, us_sync_cb cb, void *ctx, us_sync **out);
US_EXPORT int us_sync_done(us_sync *s);
US_EXPORT int us_sync_free(us_sync *s);

/*
 * The blocking forms, in threaded mode (on a virtual clock they advance
 * the clock while they wait). us_object_sync() returns 0, or the object's
 * latest writeback error if the caller has not seen it yet through *since
 * (its cursor, from us_object_errseq()), which it moves forward: two
 * callers with their own cursors each see an error once.
 * Errors: -EINVAL (NULL), -EAGAIN (polled mode, first, inside a callback
 * too: use the non-blocking form), -EDEADLK (threaded mode, inside a
 * callback), -ENOMEM.
 */
US_EXPORT int us_object_sync(us_object *o, uint64_t *since);
US_EXPORT int us_domain_sync(us_domain *d);

/*
 * Writes back and commits everything (reason US_REASON_SHUTDOWN), then
 * destroys the engine. In threaded mode it waits; in polled mode each call
 * makes a step and returns -EBUSY until everything is durable: keep polling
 * and calling it. Like any sync it waits for data that cannot be made
 * durable: a buffer rewritten without pause, a backend that refuses every
 * write (drop such buffers first). Errors: -EINVAL, -EDEADLK (inside a callback), -EBUSY,
 * and those of us_engine_destroy().
 */
US_EXPORT int us_engine_shutdown(us_engine *e);

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */

enum us_buf_state {
	US_BUF_CLEAN = 0,
	US_BUF_DIRTY = 1,
	US_BUF_WRITEBACK = 2,
	US_BUF_UNSTABLE = 3,
};

/* Flags of us_buf_get(). */
#define US_GET_NOCREATE 0x1u /* lookup only: -ENOENT when absent */
#define US_GET_NODATA	0x2u /* create without payload (accounting only) */
#define US_GET_NOWAIT	0x4u /* never wait for reclaim: -EAGAIN instead */
#define US_GET_UNINIT	0x8u /* a new payload is not zeroed: see below */

/*
 * Gets the buffer [offset, offset + length) of o with a new reference,
 * creating it CLEAN if absent. Creating charges length bytes to o's domain
 * and every ancestor; max is never crossed. A charge that would cross one
 * evicts clean unreferenced buffers of that domain's subtree, least
 * recently used first. When that cannot make room, it reclaims as
 * us_object_reclaim() does: writes back the subtree's dirty data, forces
 * commits of its unstable data, and waits for progress. In threaded mode
 * the call waits (a commit latency of o's backend at a time, between 50 us
 * and US_PARAM_MIN_PAUSE_NS; on a virtual clock the clock advances); in
 * polled mode, inside a callback, or with US_GET_NOWAIT it returns -EAGAIN
 * instead, and the caller retries after the time us_object_reclaim() gives
 * (the host keeps polling meanwhile). Room goes to the charges that waited
 * for it in the order of their writers' virtual time (see
 * us_object_balance(); equal writers in the order they came): while one of
 * o's chain that comes first waits, a charge that would fit waits too
 * (-EAGAIN without waiting), until that one is served or loses its place by
 * not coming back within a grace of its retry time (as long again as its
 * wait, between US_PARAM_MIN_PAUSE_NS and US_PARAM_MAX_PAUSE_NS); so a
 * large buffer is not passed for ever by small ones.
 * After US_PARAM_RECLAIM_RETRIES waits in a row without any progress and
 * with nothing in flight that could free memory, or after
 * US_PARAM_RECLAIM_TIMEOUT_NS without any progress at all, or
 * when the buffer is larger than a max, it fails with -ENOMEM (counted;
 * nothing evicted, nothing charged; the write-back and commits reclaim
 * started stay started). The payload of a new buffer is zeroed,
 * unless flags has US_GET_UNINIT: then it holds whatever the memory held
 * (data of buffers freed before, possibly another domain's), for a caller
 * that overwrites all of it before anyone reads it or writes it back (a
 * write of the whole buffer; zeroing it first cost a FUSE client a sixth
 * of its time per MiB).
 * Returns 1 when the buffer was created, 0 when it existed.
 * Errors: -EINVAL (NULL, length 0 or over US_BUF_MAX_BYTES, offset + length
 * overflows, unknown flag), -EEXIST (overlaps another buffer, or a buffer at
 * offset has another length), -ENOENT (US_GET_NOCREATE and absent),
 * -EAGAIN, -ENOMEM.
 */
US_EXPORT int us_buf_get(us_object *o, uint64_t offset, uint64_t length, unsigned flags,
			 us_buf **out) US_HOT_CALL;

/*
 * One step of reclaim for a charge of length bytes in o's domain, without
 * blocking (lib/policy.c). Returns 0 when the charge fits now
 * (after evicting, if need be, on the charge itself); -EAGAIN when it waits
 * for writeback or commit progress that this call started (flushes with
 * reason US_REASON_RECLAIM, commits or a sync, buffers marked
 * US_BUF_RECLAIM), or that it could not start for want of memory for its
 * own records: *retry_ns (when not NULL) receives the time after which
 * to try again, or the room would fit but an earlier charge of o's chain
 * waits for it (see us_buf_get(); *retry_ns: when that one is due);
 * -ENOMEM when nothing can make progress
 * (US_PARAM_RECLAIM_RETRIES waits in a row saw no progress while no write or
 * commit of the domain's data was in flight or backing off, nor a write on
 * a backend whose cap held the domain's dirty data back), when
 * US_PARAM_RECLAIM_TIMEOUT_NS passed without any progress at all, or when
 * length is larger than a max on the chain (counted in
 * the domain's enomem). Callbacks are called without the lock.
 * Errors: -EINVAL (NULL, length 0 or over US_BUF_MAX_BYTES).
 */
US_EXPORT int us_object_reclaim(us_object *o, uint64_t length, uint64_t *retry_ns);

/*
 * Looks up the buffer that contains offset and takes a reference.
 * Errors: -EINVAL, -ENOENT.
 */
US_EXPORT int us_buf_lookup(us_object *o, uint64_t offset, us_buf **out) US_HOT_CALL;

/*
 * Iteration in offset order: the first buffer whose offset is >= offset,
 * with a new reference. Errors: -EINVAL, -ENOENT (none).
 */
US_EXPORT int us_buf_next(us_object *o, uint64_t offset, us_buf **out);

/* Takes another reference. Errors: -EINVAL. */
US_EXPORT int us_buf_ref(us_buf *b);

/* Releases a reference. Errors: -EINVAL (NULL or no reference held; a
 * flush callback holds none through the buffers it is handed). */
US_EXPORT int us_buf_put(us_buf *b) US_HOT_CALL;

/*
 * Marks the buffer dirty (the caller holds a reference), after the caller
 * wrote its data. CLEAN and UNSTABLE become DIRTY; WRITEBACK gets the
 * REDIRTIED flag; DIRTY stays.
 *
 * Then it throttles the writer, smoothly (see lib/throttle.c). With
 * pause_ns not NULL (the non-blocking form, for event loops) *pause_ns
 * receives the time the caller should pause before dirtying more. With
 * pause_ns NULL in threaded mode (the blocking form), the call itself
 * pauses, and at the dirty limit waits until the domain is back under it;
 * on a virtual clock it advances the clock instead of sleeping. It must not
 * block inside a callback: there, when it would take the locked path (a
 * first dirtying without the thread's credit, a buffer not DIRTY), it
 * returns -EDEADLK instead, without dirtying the buffer; a rewrite of a
 * DIRTY buffer or a first dirtying covered by credit succeeds. In polled
 * mode a NULL pause_ns just discards the pause.
 *
 * pinned = dirty + writeback + unstable is compared, for the domain and
 * each ancestor, with freerun = (background + dirty threshold) / 2 and the
 * dirty threshold: below freerun the pause is 0 for a writer alone in its
 * writeback context (beside others it is paced at twice the rate or more,
 * and held while it owes an earlier pause); between them it is the
 * bytes newly dirtied over the allowed rate, accumulated per object until
 * US_PARAM_MIN_PAUSE_NS. The allowed rate is the same for every writer of a
 * writeback context: the context's per-writer rate limit (its bandwidth
 * divided among the writers dirtying into it, as they are measured to
 * share it) scaled by a position ratio that falls to 0 at the limit. So
 * writers of one context converge to equal rates whatever their block
 * size; the writer is the object (threads writing one object share its
 * pace), and a pause the caller did not take is still owed at its next
 * us_object_balance(). The pause comes once it reaches
 * US_PARAM_MIN_PAUSE_NS, or less (a sixteenth of the commit latency, and
 * near a small limit the time to clean an eighth of the band between the
 * thresholds, down to 50 us); it is never above US_PARAM_MAX_PAUSE_NS (and
 * no longer than the writer's context needs to
 * clear its pipeline: its dirty and writeback bytes at the link's rate plus
 * a commit latency, or until the commit in flight ends). Where several
 * writeback contexts of a domain's subtree hold pinned data (several
 * backends, or sibling domains under a limited parent), each is held to its
 * share of the thresholds, in proportion to its measured bandwidth and at
 * least one run of US_PARAM_MAX_FLUSH_BYTES: a stalled backend fills its
 * own share, not the domain; shares are taken at bandwidth samples, so the
 * subtree may pass its dirty limit between two (up to 1.5 times it, never
 * its max). A writer that holds nothing pinned itself is never stopped at
 * the gate (US_DIRTY_OVER_LIMIT, us_object_balance() returning -EAGAIN):
 * it dirties, then waits for its own data. The data is
 * already written when the call comes, so it is always accounted: pinned
 * passes the dirty limit by at most the buffers that writers were dirtying
 * at the same instant, one each.
 *
 * Cost: below the background threshold the first dirtying of a buffer
 * takes no lock and no atomic read-modify-write: the calling thread spends
 * credit its cache was granted and queues the buffer for the next holder
 * of the engine lock. Each thread that dirties gets such a cache per engine
 * (4 KiB, and up to 64 KiB of spare queue segments; a queue holds at most
 * 65536 buffers, 512 KiB, between two drains), given back when the thread
 * exits. Rewriting a dirty buffer takes no lock and no fence: a flusher
 * that writes back data another thread may have rewritten so issues
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) first, once per batch, so
 * that it cannot miss the new data (the process registers for it on its
 * first cache). Where the kernel refuses it (before Linux 4.14, a seccomp
 * filter), a rewrite costs one memory fence instead.
 *
 * Returns 0; or US_DIRTY_OVER_LIMIT when a domain is at or above its dirty
 * limit, or when the writer shares its context with others and is further
 * ahead of its pace than the pause returned (the pause was cut short to
 * wake it when a commit ends): the caller must then wait until
 * us_object_balance() returns 0 before dirtying more (*pause_ns holds the
 * first wait). Errors: -EINVAL
 * (NULL, no reference held).
 */
#define US_DIRTY_OVER_LIMIT 1
US_EXPORT int us_buf_dirty(us_buf *b, uint64_t *pause_ns) US_HOT_CALL;

/*
 * Drops the buffer (truncate): it leaves the object and its bytes are
 * uncharged, whatever data it held — an explicit user decision. It consumes
 * the caller's reference, which must be the only one. Errors: -EINVAL
 * (NULL, no reference held: a flush callback holds none through the
 * buffers it is handed), -EBUSY (in WRITEBACK, other references, or inside
 * a flush callback it was handed to, until that returns).
 */
US_EXPORT int us_buf_drop(us_buf *b);

/* How a write ended, for us_buf_write_done(). */
enum us_write_result {
	US_WRITE_STABLE = 0,   /* durable: the buffer becomes CLEAN */
	US_WRITE_UNSTABLE = 1, /* acknowledged with a commit seq: UNSTABLE */
	US_WRITE_ERROR = 2,    /* transient error: DIRTY again, data kept */
	US_WRITE_LOST = 3,     /* permanent error: CLEAN, error recorded on the object */
};

/*
 * Completes the write of a buffer in WRITEBACK. seq: the commit sequence
 * number for US_WRITE_UNSTABLE (>= 1), ignored otherwise. err: a negative
 * errno for US_WRITE_ERROR and US_WRITE_LOST (-EIO if 0), ignored otherwise.
 * A buffer flagged REDIRTIED goes to DIRTY whatever the result. An unstable
 * write whose seq the backend or object has already reported committed goes straight to CLEAN, and one acknowledged UNSTABLE after the backend's
 * us_backend_commit_lost() (the server that acknowledged it restarted) goes
 * back to DIRTY. May be called from any thread, inside the flush callback or
 * later. Errors: -EINVAL (NULL, unknown result, seq of 0 for UNSTABLE, err
 * positive), -EALREADY (the buffer is not in WRITEBACK).
 */
US_EXPORT int us_buf_write_done(us_buf *b, enum us_write_result result, uint64_t seq, int err);

/* Accessors: call them while holding a reference or inside a callback that
 * was handed the buffer. us_buf_data(), us_buf_offset(), us_buf_length()
 * and us_buf_object() read without locking (what they read never changes);
 * us_buf_state(), us_buf_flags() and us_buf_commit_seq() take the engine
 * lock, so not from an allocator hook or a custom clock. */
US_EXPORT void *us_buf_data(const us_buf *b) US_HOT_CALL; /* NULL without payload */
US_EXPORT uint64_t us_buf_offset(const us_buf *b);
US_EXPORT uint64_t us_buf_length(const us_buf *b);
US_EXPORT us_object *us_buf_object(const us_buf *b);
/* The state, or a negative errno (-EINVAL for NULL). */
US_EXPORT int us_buf_state(const us_buf *b);
#define US_BUF_REDIRTIED 0x1u /* dirtied again while in writeback */
#define US_BUF_ERROR	 0x2u /* its last write failed */
#define US_BUF_RECLAIM	 0x4u /* written back or committed for reclaim: evicted first */
US_EXPORT unsigned us_buf_flags(const us_buf *b);
/* The commit seq of an UNSTABLE buffer, 0 otherwise. */
US_EXPORT uint64_t us_buf_commit_seq(const us_buf *b);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

/*
 * Payload memory stays resident: the pages of evicted or freed payloads are
 * kept in their jemalloc arena (no decay) and reused by the next buffer
 * without a page fault, so a domain at its max holds about its max, not
 * more. The engine gives them back to the system only when a domain's max is
 * lowered (us_domain_set_limit()), when the pages kept by all the arenas plus
 * the root's charge would exceed the root's max by an eighth (checked after
 * eviction, at most once per reclaim wait), and on us_domain_purge().
 *
 * us_domain_purge() returns the unused pages of the jemalloc arena that
 * serves d to the system at once, so that resident memory falls to what is
 * charged. Returns 0, also when the engine does not use jemalloc arenas.
 * Errors: -EINVAL.
 */
US_EXPORT int us_domain_purge(us_domain *d);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */

/* Per domain; every figure covers the domain's whole subtree. */
struct us_domain_stats {
	size_t size; /* sizeof(struct us_domain_stats), set by the caller */
	/* Bytes now. charged = clean + dirty + writeback + unstable. */
	uint64_t charged_bytes;
	uint64_t clean_bytes;
	uint64_t dirty_bytes;
	uint64_t writeback_bytes;
	uint64_t unstable_bytes;
	uint64_t evictable_bytes; /* clean and unreferenced */
	uint64_t peak_charged_bytes;
	uint64_t peak_pinned_bytes; /* highest dirty + writeback + unstable */
	uint64_t buffers;
	/* Event counts since creation. */
	uint64_t charges;   /* buffers created */
	uint64_t uncharges; /* buffers freed: evicted or dropped */
	uint64_t evictions;
	uint64_t evicted_bytes;
	uint64_t drops;
	uint64_t dropped_bytes; /* bytes of the dropped buffers, whatever their state */
	uint64_t enomem;	/* charges refused */
	uint64_t max_events;	/* charges that hit this domain's max */
	uint64_t high_events;	/* charges that left it above high */
	uint64_t dirtied;	/* CLEAN/UNSTABLE -> DIRTY by the user */
	uint64_t redirtied;	/* dirtied while in WRITEBACK */
	uint64_t writeback_started;
	uint64_t written_stable;
	uint64_t written_unstable;
	uint64_t write_errors; /* transient: redirtied */
	uint64_t write_lost;   /* permanent */
	uint64_t committed;    /* UNSTABLE -> CLEAN (or straight to CLEAN) */
	uint64_t commit_lost;  /* UNSTABLE -> DIRTY by commit_lost */
	/* Throttling of writers of objects charged to this subtree. */
	uint64_t paused;       /* non-zero pauses returned */
	uint64_t pause_ns;     /* their total */
	uint64_t max_pause_ns; /* the longest */
	uint64_t over_limit;   /* calls that found a dirty limit reached */
	/* Buffers the engine's own writeback handed to flush, by trigger. */
	uint64_t bg_flushed;	  /* background and throttle */
	uint64_t expired_flushed; /* expiry */
	/* Charges that waited for writeback or commits (us_object_reclaim()). */
	uint64_t reclaims;
	/* memory.high delays given to writers of this domain's objects. */
	uint64_t high_delay_ns;
	/* Fields added after the first release. */
	/*
	 * The longest stall of a writer: the longest continuous time a writer
	 * of one of the subtree's objects made no progress, from the first
	 * wait after a dirtying or a charge went through to the next one that
	 * did (or to its -ENOMEM). It adds up, as one stall, the throttle
	 * pauses (max_pause_ns counts each alone), the waits at the gate (a
	 * dirty limit reached: us_object_balance() returning -EAGAIN, and the
	 * blocking forms' waits) and a charge's waits for reclaim, each
	 * counted up to the time the writer came back and at most as long as
	 * the engine told it to wait. Kept per object: two writers of one
	 * object count as one. Updated while the stall lasts, so one not over
	 * yet shows as far as it went.
	 */
	uint64_t max_stall_ns;
};

/* Errors: -EINVAL (NULL, st->size neither the first release's, which ends
 * before max_stall_ns and is filled that far, nor at least this one's). */
US_EXPORT int us_domain_stats(const us_domain *d, struct us_domain_stats *st);

struct us_backend_stats {
	size_t size;
	uint64_t objects;
	uint64_t dirty_bytes;
	uint64_t writeback_bytes;
	uint64_t unstable_bytes;
	uint64_t flush_calls;
	uint64_t flush_bytes;
	uint64_t flush_failed; /* flush callback returned an error */
	uint64_t commit_calls;
	uint64_t sync_calls;
	uint64_t commit_done; /* us_backend/object_commit_done calls */
	uint64_t commit_lost; /* us_backend_commit_lost calls */
	uint64_t last_committed_seq;
	uint64_t commit_failed; /* commit or sync callbacks that returned an error */
	/* (commit_calls + sync_calls) per GiB of flush_bytes, rounded: the
	 * cost the commit policy puts on the server. */
	uint64_t commits_per_gib;
	/* What the engine has measured of the server, as its thresholds and
	 * pipelines use it (0: not yet): the running average of a commit's
	 * latency; the least recent time from a flush to its completion with
	 * no write queued before it (a write's latency and transfer); the
	 * link's rate, in bytes per second of writes in flight. */
	uint64_t commit_lat_ns;
	uint64_t write_lat_ns;
	uint64_t link_bw;
};

/* Errors: -EINVAL (NULL, st->size neither the first release's, which ends
 * before commit_lat_ns and is filled that far, nor at least this one's). */
US_EXPORT int us_backend_stats(const us_backend *b, struct us_backend_stats *st);

/*
 * Writes the domain's statistics as text, one "key value" line each, in the
 * style of cgroup memory.stat, into buf (at most len bytes, NUL included):
 * every field of struct us_domain_stats, in its order (keys without the
 * _bytes suffix for the byte counts of the first group: charged, clean,
 * ..., buffers), with the effective limits (max, high, bg_thresh,
 * dirty_thresh) after buffers.
 * Returns the length the whole text needs, without the NUL, like snprintf;
 * buf may be NULL when len is 0. Errors: -EINVAL.
 */
US_EXPORT int us_domain_stat_text(const us_domain *d, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Debugging                                                                 */

/*
 * Recomputes every domain's counters from the buffers and checks the
 * invariants (counters, charged <= max, list membership, index order). Slow:
 * for tests and debugging, with no other thread using the engine (a writer
 * between its lock-free dirtying's two stores makes the credit check fail
 * spuriously). Returns 0 when everything holds, -EUCLEAN
 * otherwise with a description of the first violation in msg (at most len
 * bytes; msg may be NULL). Errors: -EINVAL.
 */
US_EXPORT int us_engine_check(us_engine *e, char *msg, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* UNSTABLE_UNSTABLE_H */
