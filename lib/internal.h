/*
 * Private definitions shared by the library's sources. Never installed.
 *
 * SPDX-License-Identifier: MIT
 *
 * INVARIANTS (checked by us_engine_check(), in tests after every operation)
 *
 *  I1. For every domain D and every counter X in {charged, clean, dirty,
 *      writeback, unstable, evictable, buffers}: D.c.X is the sum of X over
 *      the buffers of the objects charged to D's subtree.
 *  I2. For every domain: charged = clean + dirty + writeback + unstable.
 *  I3. For every domain: charged <= max, at every instant. A charge is
 *      admitted only after checking every ancestor (us__charge()).
 *  I4. A buffer is on its domain's LRU list iff it is CLEAN, unreferenced
 *      and unpinned (refs == 0 and pins == 0; b->on_lru), and then it is
 *      counted in evictable.
 *  I5. A buffer is on its object's unstable list iff it is UNSTABLE; the list
 *      is sorted by commit seq; an object is on its backend's unstable list
 *      iff its own list is not empty.
 *  I6. The buffers of an object do not overlap; the index is a valid AVL tree
 *      ordered by offset.
 *  I7. A buffer leaves DIRTY, WRITEBACK or UNSTABLE only through: a stable
 *      write, a commit covering its seq, a write the user declared lost
 *      (recorded on the object), or an explicit drop.
 *  I8. Eviction order (reclaim.c): for every domain D, D.lru_min is the
 *      smallest lru_stamp on the LRU lists of D's subtree (0 when they are
 *      all empty), and D's parent's lru_kids tree holds exactly the children
 *      C with C.lru_min != 0, each keyed by C.lru_min, and D.lru_head is
 *      D.lru.next (or NULL, before D's list first changed while empty).
 *      The globally oldest
 *      evictable buffer of any subtree is then found in O(depth log n).
 *  I9. Every writeback context is on its engine's wb_samples list exactly
 *      once, the list ordered by bw_stamp_ns: a stamp is only ever set to
 *      the engine's time now, and its context then moves to the tail.
 * I10. For every domain D, D.pipe_kids is the sum of its children's
 *      pipe_bytes; D is on its engine's pipe_decay list when its pipe_bytes
 *      was above its target at its last update, or when it lost a context
 *      or a child since (wb.c); no domain is marked for a pipeline update
 *      outside the poll that marked it.
 * I11. The engine's arena_kids list holds exactly the root's children that
 *      own an arena, in the order of the root's children list.
 * I12. Every queue of waiters (a domain's gate_q and room_q, a context's
 *      gate_q) is a balanced tree in (key, ticket) order whose first is
 *      q->first, each waiter on it naming it and marked (turn.c); a
 *      context's rl_writers holds only its own objects (wb.c).
 *
 * TRANSITIONS (who performs each)
 *
 *   from       to         function
 *   (none)     CLEAN      us_buf_get()                 buf.c
 *   CLEAN      DIRTY      us_buf_dirty() locked, or the drain of its
 *                         lock-free queueing (us__drain_buf())  state.c
 *   UNSTABLE   DIRTY      us_buf_dirty()               buf.c
 *   WRITEBACK  +REDIRTIED us_buf_dirty()               buf.c
 *   DIRTY      WRITEBACK  us_object_flush()            writeback.c
 *   WRITEBACK  DIRTY      flush callback failed        writeback.c
 *   WRITEBACK  CLEAN      us_buf_write_done(STABLE|LOST) writeback.c
 *   WRITEBACK  UNSTABLE   us_buf_write_done(UNSTABLE)  writeback.c
 *   WRITEBACK  DIRTY      us_buf_write_done(ERROR), or REDIRTIED  writeback.c
 *   UNSTABLE   CLEAN      us_backend_commit_done(), us_object_commit_done()  commit.c
 *   UNSTABLE   DIRTY      us_*_commit_lost()          commit.c
 *   CLEAN      (freed)    eviction (us__evict_*)       reclaim.c
 *   any but WRITEBACK (freed)  us_buf_drop()           buf.c
 *
 * LOCKS
 *
 * One mutex per engine (rank US_LOCK_ENGINE) guards all engine state. The
 * allocator hooks and the custom clock may be called with it held; user
 * callbacks never are. Debug builds use an error-checking mutex and assert
 * that every lock and unlock succeeds, which catches a re-entry from a hook.
 * Taking the engine lock (us__lock()) drains the writer caches' queues
 * (tcache.c), so that its holder sees every dirtying that happened before;
 * us__lock_domain() drains one domain's, us__lock_nodrain() none (see
 * tcache.c for who may use them).
 * Fork: a child process must not use an engine of its parent.
 *
 * LAYERS, bottom to top: a file uses only files of lower layers, so that a
 * reader can start at the bottom and find every name a file uses already
 * read. tests/layers.sh checks it from the symbol tables of the library's
 * objects: a use of a file of the same or a higher layer fails it.
 *
 *    1  tree.c       balanced trees: the object index, the LRU of domains,
 *                    the queues of waiters.
 *    2  alloc.c      memory: metadata, payloads, buffers, jemalloc arenas and
 *                    pools.
 *    3  witness.c    the lock order witness (builds with US_WITNESS).
 *    4  lock.c       the engine lock (without the drain), clock, generations.
 *    5  thread.c     wake-ups, waits, sleeps, callback frames.
 *    6  counters.c   a domain's counters and events; its fields' set-up;
 *                    credit revocation.
 *    7  wb.c         writeback contexts: bandwidth, pipeline, shares; the
 *                    writers' stalls.
 *    8  turn.c       the gates' queues of waiting writers.
 *    9  reclaim.c    charges, eviction and the LRU.
 *   10  state.c      the buffer state machine and its accounting, the drain
 *                    of a queued dirtying.
 *   11  tcache.c     the writer caches: lock-free credit, queues, drains;
 *                    the engine lock that drains (us__lock()).
 *   12  writeback.c  collecting runs of dirty buffers and issuing them.
 *   13  commit.c     commit completions and losses; us_object_commit().
 *   14  object.c     objects.
 *   15  throttle.c   the throttle's model: pauses, gates, pace.
 *   16  credit.c     the writer caches' lock-free credit.
 *   17  policy.c     the commit policy; issuing what was collected.
 *   18  pressure.c   reclaim beyond eviction: writing back and committing
 *                    for a charge, its waits and when it gives up;
 *                    memory.high.
 *   19  domain.c     the domain API (creation, limits, statistics), names.
 *   20  buf.c        the buffer API and the dirtying's fast paths.
 *   21  sync.c       syncs.
 *   22  poll.c       the poll: writeback turns, samples, expiry.
 *   23  check.c      us_engine_check().
 *   24  flusher.c    the flusher threads.
 *   25  engine.c     the engine's set-up, parameters and end (shutdown
 *                    included); error names.
 */
#ifndef US_INTERNAL_H
#define US_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <unstable/unstable.h>

#define US_NAME_MAX 63
#define US_MSEC	    1000000ull
#define US_SEC	    1000000000ull

/* The ranks of the library's locks, outermost first: a thread takes a lock
 * only while it holds locks of lower ranks. Builds with US_WITNESS check it
 * at every lock taken (witness.c). */
enum us_lock_rank {
	/* The writer caches' process-wide mutex (tcache.c): a thread's
	 * caches are made, freed and detached under it, each engine's lock
	 * taken inside. */
	US_LOCK_TCACHE = 1,
	US_LOCK_ENGINE = 2,
	/* Flusher wake-ups (thread.c): taken with or without the engine
	 * lock, never the other way round (a flusher drops it before
	 * polling). */
	US_LOCK_THREADS = 3,
};

#ifdef US_WITNESS
/* Aborts, naming both locks, when the thread holds a lock of rank r or
 * later; then counts r as held. */
void us__witness_take(enum us_lock_rank r);
void us__witness_drop(enum us_lock_rank r);
/* The ranks this thread holds, as bits (1u << rank): for tests. */
unsigned us__witness_held(void);
#else
#define us__witness_take(r) ((void)0)
#define us__witness_drop(r) ((void)0)
#endif

/* A branch the hot path does not take: its code is laid out of the way;
 * one it takes: its code follows in a straight line. */
#if defined(__GNUC__)
#define us_unlikely(x) __builtin_expect(!!(x), 0)
#define us_likely(x)   __builtin_expect(!!(x), 1)
#else
#define us_unlikely(x) (x)
#define us_likely(x)   (x)
#endif

/* An entry point whose fast path is measured in cycles starts on a 64-byte
 * line of code, so that the path is fetched and decoded as one block: with
 * the same instructions at another offset, us-bench-hotpath's rewrite of a
 * DIRTY buffer took a cycle more (3.0 ns against 2.7). */
#if defined(__GNUC__)
#define US_HOT_ENTRY __attribute__((aligned(64)))
#else
#define US_HOT_ENTRY
#endif

#define us_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ------------------------------------------------------------------------ */
/* Intrusive doubly linked list with a sentinel head.                        */

struct us_list {
	struct us_list *next, *prev;
};

static inline void us_list_init(struct us_list *h)
{
	h->next = h->prev = h;
}

static inline bool us_list_empty(const struct us_list *h)
{
	return h->next == h;
}

static inline void us_list_insert_after(struct us_list *pos, struct us_list *n)
{
	n->prev = pos;
	n->next = pos->next;
	pos->next->prev = n;
	pos->next = n;
}

static inline void us_list_add_tail(struct us_list *h, struct us_list *n)
{
	us_list_insert_after(h->prev, n);
}

static inline void us_list_del(struct us_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

#define us_list_for_each(pos, head) for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

/* ------------------------------------------------------------------------ */
/* Intrusive AVL tree keyed by a uint64_t (tree.c).                          */

struct us_tnode {
	struct us_tnode *left, *right;
	uint64_t key;
	int32_t height;
	uint32_t mark;	/* 1 when marked (a DIRTY buffer) */
	uint64_t marks; /* marked nodes in this subtree */
};

/* Inserts n (its key must not be in the tree); returns the new root. */
struct us_tnode *us__tree_insert(struct us_tnode *root, struct us_tnode *n);
/* Removes the node with key; returns the new root. */
struct us_tnode *us__tree_remove(struct us_tnode *root, uint64_t key);
/* The node with the largest key <= key, or NULL. */
struct us_tnode *us__tree_find_le(struct us_tnode *root, uint64_t key);
/* The node with the smallest key >= key, or NULL. */
struct us_tnode *us__tree_find_ge(struct us_tnode *root, uint64_t key);
/* Sets the mark of the node with key (which must exist): O(log n). */
void us__tree_set_mark(struct us_tnode *root, uint64_t key, bool mark);
/* The marked node with the smallest key >= key, or NULL: O(log n). */
struct us_tnode *us__tree_find_ge_marked(struct us_tnode *root, uint64_t key);
/* Checks order, balance and mark counts; returns the node count or -1. */
int64_t us__tree_check(const struct us_tnode *root);
/* The same tree ordered by a relation instead of the key alone (keys may then
 * repeat; before() must be a strict total order of the nodes): */
typedef bool (*us_tree_before)(const struct us_tnode *a, const struct us_tnode *b);
/* Inserts n after every node not after it; returns the new root. */
struct us_tnode *us__tree_insert_by(struct us_tnode *root, struct us_tnode *n,
				    us_tree_before before);
/* Removes n (which must be in the tree); returns the new root. */
struct us_tnode *us__tree_remove_by(struct us_tnode *root, struct us_tnode *n,
				    us_tree_before before);
/* The first node in order, or NULL: O(log n). */
struct us_tnode *us__tree_first(struct us_tnode *root);
/* us__tree_check() by before(). */
int64_t us__tree_check_by(const struct us_tnode *root, us_tree_before before);

/*
 * A writer's place in a queue of waiters (turn.c): q is the queue it waits
 * in (NULL: none), node.key its writer's pace when it joined (the queue's
 * order), ticket its engine-wide arrival number (among equal keys), due_ns
 * the time it was told to come back, grace_ns how long past it its place is
 * kept.
 */
struct us_turn {
	struct us_tnode node;
	struct us_turnq *q;
	uint64_t ticket, due_ns, grace_ns;
};

/* A queue of waiters: their places in a tree by (key, ticket), each marked
 * (a subtree's marks count its waiters), and the first of them (NULL: none). */
struct us_turnq {
	struct us_tnode *root;
	struct us_turn *first;
};

static inline void us__turnq_init(struct us_turnq *q)
{
	q->root = NULL;
	q->first = NULL;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

/* Byte counters of a domain's subtree (I1). */
struct us_counters {
	uint64_t charged;
	uint64_t clean;
	uint64_t dirty;
	uint64_t writeback;
	uint64_t unstable;
	uint64_t evictable;
	uint64_t buffers;
};

enum us_event {
	US_EV_CHARGES,
	US_EV_UNCHARGES,
	US_EV_EVICTIONS,
	US_EV_EVICTED_BYTES,
	US_EV_DROPS,
	US_EV_DROPPED_BYTES,
	US_EV_ENOMEM,
	US_EV_MAX_EVENTS,
	US_EV_HIGH_EVENTS,
	US_EV_DIRTIED,
	US_EV_REDIRTIED,
	US_EV_WRITEBACK_STARTED,
	US_EV_WRITTEN_STABLE,
	US_EV_WRITTEN_UNSTABLE,
	US_EV_WRITE_ERRORS,
	US_EV_WRITE_LOST,
	US_EV_COMMITTED,
	US_EV_COMMIT_LOST,
	US_EV_PAUSED,
	US_EV_PAUSE_NS,
	US_EV_OVER_LIMIT,
	US_EV_BG_FLUSHED,
	US_EV_EXPIRED_FLUSHED,
	US_EV_RECLAIMS,
	US_EV_HIGH_DELAY_NS,
	US_EV__COUNT,
};

struct us_domain {
	us_engine *engine;
	us_domain *parent;
	_Atomic uint64_t credit_gen;
	struct us_list children;
	struct us_list sibling;
	us_domain *name_next; /* the chain of the engine's name table (domain.c) */
	char name[US_NAME_MAX + 1];
	unsigned depth;
	uint64_t nchildren;
	uint64_t nobjects;

	/* Limits as set. A dirty threshold uses bytes when non-zero, else ratio. */
	uint64_t max;
	uint64_t high;
	uint64_t bg_bytes, bg_ratio;
	uint64_t dirty_bytes, dirty_ratio;

	struct us_counters c;
	uint64_t peak_charged;
	uint64_t peak_pinned;
	/* Bytes the subtree's commit pipelines hold at their measured rates
	 * (wb.c); raises ratio thresholds (throttle.c). */
	uint64_t pipe_bytes;
	/* The weights (us__wb_share_rate()) of the subtree's active writeback
	 * contexts (wb.c: bw_own()), its children's part (bw_kids), updated
	 * with the pipelines: the base of each context's share of the dirty
	 * limits (throttle.c); and those of its own contexts that became
	 * active since (bw_join, wb.c: share_join()). */
	uint64_t bw_sum, bw_kids, bw_join;
	/* The dirty threshold its writers are held to (throttle.c: landing()):
	 * the threshold itself, or, after it fell, a limit that follows it
	 * down by an eighth of the way per bandwidth interval; and the time
	 * it last moved. */
	uint64_t landing, landing_ns;
	/* The sum of the children's pipe_bytes (I10), and the chains a poll
	 * recomputes: marked domains, each on its parent's pipe_marked_kids. */
	uint64_t pipe_kids;
	bool pipe_marked;
	us_domain *pipe_next, *pipe_marked_kids;
	/* engine->pipe_decay while pipe_bytes is above its target (I10);
	 * next is NULL when not linked. */
	struct us_list pipe_decay_link;
	uint64_t ev
		[US_EV__COUNT]; /* Clean unreferenced buffers of this domain alone, oldest first. */
	struct us_list lru;
	/* Eviction order of the subtree (I8, reclaim.c): its oldest stamp, its
	 * node in the parent's lru_kids (keyed by lru_min while non-zero), and
	 * the children with evictable buffers, by their lru_min. */
	uint64_t lru_min;
	struct us_tnode lru_node;
	struct us_tnode *lru_kids;
	struct us_list *lru_head; /* lru.next when lru_min was last set */
	/* Writeback contexts of this domain alone (us_wb.dom_link). */
	struct us_list wbs;
	/* Writers waiting, by virtual time (turn.c): at this domain's dirty
	 * threshold (gate_q), and for room under its max (room_q). */
	struct us_turnq gate_q, room_q;
	/*
	 * granted: the lock-free credit outstanding in the whole subtree, held
	 * by writer caches (tcache.c), spent or not, until drained into pinned;
	 * grants keep pinned + granted below every background threshold on the
	 * chain (throttle.c). credit_gen: renewed to take the credit of this
	 * domain's caches away (limits moved); read by writers without the
	 * lock. Generations are unique in the process (us__gen_next()), so that
	 * a cache still naming a freed domain never matches a new one that
	 * took its address.
	 */
	uint64_t granted;
	/* Grants in the subtree, ever, and their number at the last revoke of
	 * this domain: a revoke is due once per grant, not once per check. */
	uint64_t grant_seq, revoked_at;
	uint64_t max_pause_seen_ns;
	uint64_t max_stall_seen_ns; /* the longest stall of a writer (us__stall_note()) */
	/* Reclaim (pressure.c): bytes of the subtree that left the pinned
	 * states or were freed, ever (progress), and the state of the charge
	 * waiting on this domain's max. */
	uint64_t progress;
	uint64_t reclaim_seen, reclaim_last_ns, reclaim_stalls;
	uint64_t reclaim_progress_ns; /* its last progress while reclaiming */
	bool reclaiming;
	uint64_t nsyncs; /* domain syncs running on it */
	/* jemalloc arena serving this domain's payloads (inherited unless own). */
	unsigned arena;
	bool has_arena;
	bool own_arena;
	struct us_list arena_link; /* engine->arena_kids, if a child of the root that owns one */

	/* Scratch for the checker. */
	struct us_counters chk;
};

/*
 * A writeback context: one per (backend, domain) pair, made when the first
 * object of the pair is created and freed with the last. It owns the list of
 * the pair's dirty objects, oldest dirtied first, so that writeback for one
 * domain never waits behind another domain's queue, and the pair's
 * clean-out bandwidth estimate, which sets the throttled writers' rate.
 */
struct us_wb {
	/* First what a writer's check at the gate reads of its context
	 * (throttle.c; wb.c: its rates and shares; turn.c), side by side: with
	 * 100,000 contexts hardly one is in the caches when its writer comes
	 * back, and each line read is a miss. Two or three lines, not the five
	 * they took spread over the struct. */
	us_backend *backend;
	us_domain *domain;
	uint64_t dirty, writeback, unstable;
	uint64_t bw_counted;	/* its weight in its domains' bw_sum, 0: not in it */
	uint64_t bw_joined;	/* its part of domain->bw_join, 0: none */
	bool bw_measured;	/* a sample saw it clean data (its bw is its own) */
	uint64_t bw;		/* estimated bytes per second */
	uint64_t bw_last;	/* the last sample alone, bytes per second */
	struct us_turnq gate_q; /* writers waiting at its share (turn.c) */
	/* The pace of each of its writers (wb.c: us__wb_ratelimit()): bytes
	 * per second at a position ratio of 1, 0 before the first estimate;
	 * the time of the last estimate, and the objects that dirtied or
	 * waited since (us_object.rl_link), rl_nwriters of them. */
	uint64_t ratelimit, rl_stamp_ns;
	struct us_list rl_writers;
	uint64_t rl_nwriters;
	uint64_t rl_samples; /* estimates made */

	struct us_list bk_link;	   /* backend->wbs */
	struct us_list dom_link;   /* domain->wbs */
	struct us_list dirty_objs; /* us_object.dirty_link, by dirtied_when */
	/* backend->dirty_wbs while dirty (in turn order, poll.c), and
	 * backend->flight_wbs while writeback (us__wb_lists()). */
	struct us_list dirty_link, flight_link;
	uint64_t turn_sent;  /* bytes sent in its current turn (poll.c) */
	uint64_t dirtied_ns; /* a writer last dirtied into it then (wb.c) */
	uint64_t nobjects;
	uint64_t cleaned;	    /* bytes that left WRITEBACK/UNSTABLE as CLEAN, ever */
	uint64_t bw_stamp_ns;	    /* last sample */
	uint64_t bw_cleaned;	    /* cleaned at the last sample */
	uint64_t chk[5];	    /* scratch for the checker */
	struct us_list sample_link; /* engine->wb_samples, by bw_stamp_ns (I9) */
};

struct us_backend {
	us_engine *engine;
	struct us_list link;
	struct us_list wbs;
	/* Contexts with dirty data, in the order they take their turns
	 * (poll.c), and those with data in flight; nactive counts the contexts
	 * with either (us__wb_lists()). */
	struct us_list dirty_wbs, flight_wbs;
	uint64_t nactive;
	uint64_t max_inflight;
	uint64_t flushed_by_reason[US_REASON_USER + 1];
	struct us_backend_ops ops;
	void *ctx;
	struct us_list objects;
	struct us_list unstable_objs;
	uint64_t committed_seq;
	uint32_t epoch; /* bumped by every commit_lost */
	uint64_t nobjects;
	uint64_t dirty, writeback, unstable;
	uint64_t flush_calls, flush_bytes, flush_failed, commit_calls, sync_calls;
	uint64_t commit_failed;
	/* Commits the engine asked for (policy.c): a backend-wide sync in
	 * flight until committed_seq reaches sync_target; per-object commits
	 * counted in commits_busy; a failed one waits until retry_ns. */
	uint64_t max_seq;     /* highest seq acknowledged */
	uint64_t sync_target; /* 0: no sync in flight */
	uint64_t sync_issued_ns;
	/* Commits' latency, running average (0: none yet); when the first
	 * commit was asked, until one completes (wb.c: us__commit_lat_floor());
	 * the latency its pipelines were last resized at outside a bandwidth
	 * sample (wb.c). */
	uint64_t commit_lat_ns, commit_first_ns, pipe_lat_ns;
	uint64_t commits_busy;
	uint64_t commit_retry_ns, commit_backoff_ns;
	uint64_t commit_done_calls, commit_lost_calls;
	/* The link (wb.c): bytes whose write completed, ever, and the time
	 * writes were in flight, ever (busy_since: when the current stretch
	 * began), at the last sample, and their rate (bytes per second of
	 * writes in flight; 0: not measured yet). */
	uint64_t written, busy_ns, busy_since_ns;
	uint64_t wbw, wbw_written, wbw_busy, wbw_stamp_ns;
	/* A write's time in flight with no queue before it (wb.c: us__wlat()):
	 * the least of this window's and the last's (0: none yet), the
	 * window's least so far, its link samples left; wlat_armed: the link
	 * went busy at busy_since_ns and no write has completed since. */
	uint64_t wlat_ns, wlat_win_ns;
	unsigned wlat_left;
	bool wlat_armed;
	bool wbw_early; /* wbw is what less than 10 ms of writes showed */
};

struct us_object {
	/* First what its writer's check at the gate reads (throttle.c,
	 * us__stall_note(), us__wb_writer_note(), turn.c), side by side as in
	 * struct us_wb: four or five lines, not seven. */
	us_engine *engine;
	us_backend *backend;
	us_domain *domain;
	struct us_wb *wb;
	uint64_t pinned; /* bytes in DIRTY, WRITEBACK or UNSTABLE */
	/* The time until which what its writer dirtied holds it (throttle.c);
	 * 0 or past: nothing owed. */
	uint64_t pace_ns;
	uint64_t high_debt_ns;	/* memory.high delay not yet returned */
	uint64_t commit_target; /* 0: no commit of the engine's in flight */
	uint64_t commit_issued_ns;
	/* The stall of o's writer (us__stall_note()): the waits it served so
	 * far without progress, and the wait it was last handed (0: none)
	 * at stall_mark_ns. */
	uint64_t stall_acc_ns, stall_wait_ns, stall_mark_ns;
	/* On wb->rl_writers while it dirtied or waited since the context's
	 * last pace estimate: the bytes it dirtied and the time it waited. */
	struct us_list rl_link;
	uint64_t rl_bytes, rl_wait_ns;
	/* What its pace is multiplied by (0: 1), moved at each estimate
	 * toward the rate its held siblings got (wb.c ratelimit_update()). */
	double fair;
	double rl_avg;	    /* its bytes per estimate, a moving average */
	uint64_t rl_block;  /* the most it dirtied at once (wb.c: halved toward rl_sblock) */
	uint64_t rl_sblock; /* ... in the current interval */
	uint64_t rl_sample; /* the context's estimate it was last counted in */
	/* Its writer's virtual time: each byte it dirtied moves it on by the
	 * time that byte takes at its context's ratelimit, from now if it is
	 * behind (wb.c); its place among waiters (turn.c). */
	uint64_t vtime_ns;
	/* Its writer's places among the waiters (turn.c): at a dirty
	 * threshold's gate, and for room under a max. */
	struct us_turn gate, room;

	void *user;
	struct us_list dirty_link;    /* wb->dirty_objs while ndirty > 0 */
	struct us_list link;	      /* backend->objects */
	struct us_list unstable_link; /* backend->unstable_objs */
	struct us_tnode *root;	      /* buffers by offset */
	struct us_list unstable;      /* UNSTABLE buffers by seq */
	uint64_t nbufs;
	uint64_t nlru;	 /* buffers on an LRU (clean, unreferenced) */
	uint64_t ndirty; /* buffers in DIRTY */
	uint64_t dirtied_when_ns;
	uint64_t committed_seq;
	uint64_t unstable_since_ns;    /* when its unstable list last became non-empty */
	uint64_t retry_ns, backoff_ns; /* after a failed write: not before retry_ns */
	uint64_t busy;		       /* callbacks running on this object */
	uint64_t errseq;
	int err;
	/* Bumped by every us_object_commit_lost(): a write issued before one
	 * and acknowledged UNSTABLE after it is written again (us_buf.epoch
	 * holds the sum of the backend's epoch and this at its issue). */
	uint32_t loss_epoch;
};

struct us_buf {
	/* First, together: what the lock-free paths of us_buf_dirty() read.
	 * A rewrite of a DIRTY buffer reads engine, refs and state, the first
	 * 16 bytes, which an allocation aligned to 16 keeps in one cache line;
	 * the first dirtying adds obj, lf_tag and length. refs (the user's
	 * references) and state are written under the engine lock, and read
	 * without it by those paths: hence atomic. */
	us_engine *engine; /* obj->engine, one load nearer for a rewrite */
	_Atomic uint32_t refs;
	_Atomic uint8_t state;
	uint8_t flags;
	bool on_lru;
	bool attached; /* in its object's index */
	us_object *obj;
	/* The tag of the last writer cache that queued it lock-free, cleared
	 * when an entry for it is drained (tcache.c); 0: none queued. */
	_Atomic uint32_t lf_tag;
	uint32_t length;
	struct us_tnode node; /* node.key is the offset */
	struct us_list link;  /* domain LRU, object unstable list, or a private list */
	void *data;
	uint64_t seq;
	uint64_t lru_stamp;
	/* pins: the engine's own holds (a flush callback running on it,
	 * writeback.c), under the lock only; never a user's reference, so
	 * that a put or drop without one is refused and frees nothing. */
	uint32_t pins;
	uint32_t wb_gen; /* the collection that put it in WRITEBACK */
	uint32_t epoch;	 /* its backend's loss epoch + its object's when it was written */
	int err;
	/* The engine's dirty count when its oldest data not yet durable was
	 * dirtied (sync.c). */
	uint64_t dirty_seq;
};

/*
 * A writer cache (tcache.c): one per (thread, engine) pair that dirtied
 * lock-free. Owner: the thread; consumer of its queue: the lock holder.
 */
#define US_TC_SEG	 510	    /* entries per queue segment (4 KiB) */
#define US_TC_MAX_QUEUED (1u << 16) /* bound on undrained entries */
#define US_TC_KEEP	 16	    /* spare segments a cache keeps */

struct us_tcseg {
	us_buf *slot[US_TC_SEG];
	struct us_tcseg *next;
};

struct us_tcache {
	/* Owner side, written without the lock. */
	_Atomic(us_domain *) dom; /* the domain its credit is for, or NULL */
	/* The writeback context it is for (of dom; compared, never followed):
	 * a context's share of dom's thresholds bounds its credit. */
	_Atomic(const struct us_wb *) wb;
	_Atomic int64_t credit;	  /* unspent bytes, counted in dom's granted */
	uint64_t gen;		  /* dom->credit_gen when granted */
	uint32_t tag;		  /* unique, non-zero: us_buf.lf_tag */
	unsigned pidx;
	_Atomic uint64_t tail; /* entries queued, ever (release) */
	struct us_tcseg *pseg; /* producer's segment */
	uint64_t head_cache;   /* the owner's copy of head_pub */
	/* Its engine while its thread may rewrite that engine's buffers
	 * without a fence (the engine's flushers issue the barrier: tcache.c),
	 * else NULL. Written under the engine lock, read by the owner. */
	_Atomic(us_engine *) nofence;
	struct us_tcseg *pfree; /* the owner's spare segments */
	/* Consumer side, under the engine lock. */
	_Alignas(64) _Atomic uint64_t head_pub; /* entries drained, ever (release) */
	struct us_tcseg *cseg;
	unsigned cidx;
	/* Consumed segments on their way back to the producer (a stack the
	 * consumer pushes to and the producer takes whole). */
	_Atomic(struct us_tcseg *) spare;
	/* Lifetime. */
	us_engine *engine;
	uint64_t engine_id;
	struct us_list link;	       /* engine->tcaches, under the engine lock */
	struct us_tcache *thread_next; /* the owner thread's caches */
	atomic_bool dead;	       /* its engine is gone */
};

/* The thread's cache for the engine it dirtied in last (tcache.c). */
struct us__tls_slot {
	uint64_t id;	       /* engine id; 0: none */
	struct us_tcache *tc; /* &us__tc_none when none, never NULL */
};
/* A thread's cache before it has one: no credit, no domain, tag 0, nofence
 * NULL, so every fast path of us_buf_dirty() fails on it without a test of
 * its own. Never written. */
extern struct us_tcache us__tc_none;
#if defined(__GNUC__)
extern _Thread_local struct us__tls_slot us__tls __attribute__((tls_model("initial-exec")));
#else
extern _Thread_local struct us__tls_slot us__tls;
#endif

struct us_engine {
	pthread_mutex_t lock;
	enum us_clock_kind clock;
	uint64_t (*clock_fn)(void *ctx);
	void *clock_ctx;
	_Atomic uint64_t vclock_ns;
	bool have_hooks;
	struct us_alloc_hooks hooks;
	unsigned max_arenas;
	unsigned narenas;
	bool hugepages; /* the arenas' memory advised MADV_HUGEPAGE (alloc.c) */
	us_domain *root;
	/* The root's children that own an arena (us_domain.arena_link), in the
	 * order of its children: the arenas a purge after eviction looks at
	 * (reclaim.c), found without a walk of all the children (I11). */
	struct us_list arena_kids;
	/* Every domain but the root by (parent, name), so creating one checks
	 * its siblings' names in O(1) however many it has (domain.c). */
	us_domain **names;
	size_t names_size, ndomains; /* buckets (a power of 2, or 0); domains in it */
	struct us_list backends;
	/* LRU stamps: ordinary ones count up from 2^62, those of buffers
	 * written back for reclaim count down from it (evicted first). */
	uint64_t lru_tick, lru_low;
	/* Parameters (enum us_param). */
	uint64_t dirty_expire_ns, writeback_interval_ns, max_pause_ns, min_pause_ns;
	uint64_t max_flush_bytes, bw_interval_ns, bw_period_ns, init_bw;
	uint64_t force_commit, commit_interval_ns, max_commits;
	unsigned idle_waiters; /* threads waiting for objects to be idle (shutdown) */
	uint64_t reclaim_wait_ns, reclaim_retries, reclaim_timeout_ns;
	/* Domains whose pipe_bytes is still coming down (wb.c). */
	struct us_list pipe_decay;
	/* Writeback contexts by the time of their next bandwidth sample
	 * (us_wb.sample_link), so a poll samples only those due (poll.c). */
	struct us_list wb_samples;
	/* The next walk that expires reclaim marks (policy.c). */
	uint64_t reclaim_expiry_ns;
	uint64_t next_purge_ns; /* arenas purged after eviction, not before */
	uint64_t next_expiry_ns;
	uint64_t expire_cutoff_ns; /* dirty before it: expired (when expiring) */
	bool expiring;
	uint32_t wb_gen;
	/* Writer caches (struct us_tcache.link), drained by every lock. */
	struct us_list tcaches;
	/* Rewrites without a fence (tcache.c): the caches whose thread makes
	 * them, the collections that moved buffers to WRITEBACK, ever, and
	 * how many of those a completed barrier covers. */
	unsigned nofence_caches;
	uint64_t wb_moves;
	_Atomic uint64_t wb_fenced;
	/* Syncs running (sync.c), the count of CLEAN -> DIRTY transitions,
	 * and the sync of a polled shutdown. */
	struct us_list syncs;
	uint64_t dirty_seq;
	struct us_sync *shutdown;
	uint64_t id;	       /* unique for the process's lifetime (tcache.c) */
	uint64_t turn_tickets; /* waiters' arrival numbers, ever (turn.c) */

	/* Threaded mode (thread.c), under thr_lock (US_LOCK_THREADS): idle
	 * flushers wait on thr_cond, threads waiting for progress (a charge
	 * in reclaim, a sync, a shutdown) on prog_cond. */
	pthread_mutex_t thr_lock;
	pthread_cond_t thr_cond, prog_cond;
	pthread_t *threads;
	unsigned nthreads;
	unsigned prog_waiters; /* threads waiting on prog_cond */
	bool stop, kicked;
	uint64_t kick_gen; /* kicks, ever: waiters for progress watch it */
};

/* ------------------------------------------------------------------------ */
/* Internal functions                                                        */

void us__lock(us_engine *e);
/*
 * The lock without the drain: for what pinned + granted decides alone, and
 * for bookkeeping that reads no buffer a writer may have queued (a queued
 * buffer is referenced by its writer until drained).
 */
void us__lock_nodrain(us_engine *e);
/* The lock, with the queues of d's writers drained (not d's subtree): for
 * what looks at d's own buffers only. */
void us__lock_domain(us_engine *e, us_domain *d);
void us__unlock(us_engine *e);
uint64_t us__now(us_engine *e);

/* alloc.c */
/* Frees b and its payload. */
void us__buf_free(us_engine *e, us_buf *b);
void *us__meta_alloc(us_engine *e, size_t size); /* zeroed */
void us__names_fini(us_engine *e);		 /* frees the domain name table (domain.c) */
void us__meta_free(us_engine *e, void *p, size_t size);
/* Zeroed when zero is true. */
void *us__payload_alloc(us_engine *e, const us_domain *d, size_t size, bool zero);
void us__payload_free(us_engine *e, void *p, size_t size);
bool us__arena_create(us_engine *e, unsigned *ind);
void us__arena_destroy(us_engine *e, unsigned ind);
void us__arena_purge(us_engine *e, unsigned ind);
/* Bytes of freed pages the arenas keep resident (their dirty pages, from
 * fresh statistics); UINT64_MAX when jemalloc keeps no statistics. */
uint64_t us__arenas_dirty(const unsigned *ind, unsigned n);

/* domain.c */
/* A new domain's fields (zeroed memory; name fits US_NAME_MAX): the root's
 * when parent is NULL. Links it nowhere. */
void us__domain_init(us_domain *d, us_engine *e, us_domain *parent, const char *name,
		     uint64_t max);
void us__domain_add(us_domain *d, size_t field, int64_t delta);
/* A charge waits on d's max (pressure.c), or d is over its high
 * (throttle.c): d is marked reclaiming from now, its progress counted from
 * here, no stall yet. Unmarked when the charge is done or gave up, or a
 * while after its last attempt (policy.c). */
void us__reclaim_mark(us_domain *d, uint64_t now);
void us__reclaim_unmark(us_domain *d);
/* Whether d is top or under it. */
static inline bool us__under(const us_domain *d, const us_domain *top)
{
	for (; d; d = d->parent)
		if (d == top)
			return true;
	return false;
}

/* Reclaim progress: n bytes of d's subtree freed or no longer pinned. */
static inline void us__domain_progress(us_domain *d, uint64_t n)
{
	for (; d; d = d->parent)
		d->progress += n;
}
void us__domain_event(us_domain *d, enum us_event ev, uint64_t n);
/*
 * Under the lock: the writer of o was handed a wait of wait ns (a throttle
 * pause, a gate's, a reclaim retry; 0: none), after progress when progress
 * (its dirtying or charge went through, or it gave up with -ENOMEM). A
 * stall runs from the first wait after progress to the next progress; it
 * adds up the waits served, each counted up to the time the writer came
 * back and at most as long as it was told to wait, and is recorded in
 * max_stall of o's domain and its ancestors as it grows.
 */
void us__stall_note(us_object *o, bool progress, uint64_t wait);
static inline bool us__stalling(const us_object *o)
{
	return o->stall_acc_ns || o->stall_wait_ns;
}
/* us__reclaim() with the stall of o's writer noted (pressure.c). */
int us__reclaim_step(us_object *o, uint64_t len, uint64_t *retry_ns);

/* state.c: state changes with their accounting. Called with the lock held. */
void us__buf_set_state(us_buf *b, enum us_buf_state to);
/* The state change of a write into b; the bytes it pins anew. */
uint64_t us__buf_dirtying(us_buf *b);
void us__buf_lru_update(us_buf *b);
void us__buf_unstable_unlink(us_buf *b);
void us__buf_unstable_link(us_buf *b, uint64_t seq);
void us__obj_record_error(us_object *o, int err);
/* A write of o failed: its dirty data waits 100 ms, doubling to 5 s. */
void us__obj_backoff(us_object *o);

/* wb's bw_stamp_ns was just set to now: it goes to the tail of the
 * sampling order (I9). */
static inline void us__wb_restamped(us_engine *e, struct us_wb *wb)
{
	us_list_del(&wb->sample_link);
	us_list_add_tail(&e->wb_samples, &wb->sample_link);
}

/* wb.c: writeback contexts and bandwidth. */
int us__wb_attach(us_object *o);
void us__wb_detach(us_object *o);
/* After wb's dirty or writeback bytes changed: its place on its backend's
 * lists of contexts with dirty data and with data in flight. O(1). */
void us__wb_lists(struct us_wb *wb);
bool us__wb_sample(us_engine *e, struct us_wb *wb, uint64_t now);
void us__commit_latency(us_backend *bk, uint64_t ns);
/* The latency o's pipelines are sized by: the average, or before a commit
 * completed the age of the first. */
uint64_t us__commit_lat_floor(const us_backend *bk);
/* A write that found the link idle took ns from flush to completion. */
void us__wlat(us_backend *bk, uint64_t ns);
/* A commit not answered in this long is given up on (policy.c). */
#define US_COMMIT_TIMEOUT (30 * US_SEC)
uint64_t us__wb_rate(const struct us_wb *wb);
/* Its weight in the shares of its domains' thresholds (wb.c, SHARES in
 * throttle.c): its rate once measured, 1 before. */
uint64_t us__wb_share_rate(const struct us_wb *wb);
uint64_t us__wb_link_rate(const struct us_wb *wb);
/* The rate each writer of wb may dirty at, at a position ratio of 1. */
uint64_t us__wb_ratelimit(const struct us_wb *wb);
/* o's writer dirtied bytes, or waited wait_ns, for the pace estimate. */
void us__wb_writer_note(us_object *o, uint64_t bytes, uint64_t wait_ns);
/* Samples bk's link rate when due; returns whether it did. */
bool us__link_sample(us_engine *e, us_backend *bk, uint64_t now);
void us__pipe_update(us_domain *d);
/* Marks d's chain for us__pipe_update_marked(), which recomputes the
 * pipelines of the marked domains only (both under the lock, in one go). */
void us__pipe_mark(us_domain *d);
void us__pipe_update_marked(us_engine *e);
/* The same for the marked chains only, the decaying domains left alone. */
void us__pipe_update_chains(us_engine *e);
/* The pipeline target of d: its own contexts' plus pipe_kids. */
double us__pipe_target(const us_domain *d);
/* d goes: its parent's sum and the decay list forget it. */
void us__pipe_forget(us_domain *d);

/* throttle.c */
/* The thresholds of d now (domain.c). */
void us__domain_thresholds(const us_domain *d, uint64_t *bg, uint64_t *dirty);
/* The pause for a writer of o that dirtied bytes; -EAGAIN at the limit. */
int us__throttle(us_object *o, uint64_t bytes, uint64_t *pause_ns, bool *wake);
/* When the commit in flight that frees o's data is expected to end; 0: none. */
uint64_t us__commit_due(const us_object *o);
/* turn.c: waiters served in the order of their writers' virtual time. Under
 * the lock. key: max(o->vtime_ns, now) (us__turn_key()). */
/* t waits in q (joins in key order unless it waits there already) and will
 * be back at due_ns. */
void us__turn_join(us_engine *e, struct us_turn *t, struct us_turnq *q, uint64_t key,
		   uint64_t due_ns);
void us__turn_leave(struct us_turn *t);
/* The live waiter of q that t (of key key, if it is not queued) must let go
 * first, or NULL (q's stale heads are dropped on the way). */
struct us_turn *us__turn_ahead(struct us_turnq *q, const struct us_turn *t, uint64_t key,
			       uint64_t now);
/* q's tree is in order and balanced, and q->first is its first waiter. */
bool us__turnq_valid(const struct us_turnq *q);
/* How many waiters of q come before t: before its place if it waits in q,
 * else those of a key not above key; limit if that many or more. O(log n),
 * less where the count passes limit high in the tree. */
uint64_t us__turn_rank(const struct us_turnq *q, const struct us_turn *t, uint64_t key,
		       uint64_t limit);
static inline uint64_t us__turn_key(const us_object *o, uint64_t now)
{
	return o->vtime_ns > now ? o->vtime_ns : now;
}

/* tcache.c: writer caches. us__tcache_get() takes the engine lock itself:
 * call it without. The others, but push, need the lock. */
struct us_tcache *us__tcache_get(us_engine *e);
bool us__tcache_push(struct us_tcache *tc, us_buf *b);
void us__tcache_drain(us_engine *e);
void us__tcache_drain_one(us_engine *e, struct us_tcache *tc);
void us__tcache_drain_domain(us_engine *e, us_domain *d);
void us__tcache_return(struct us_tcache *tc);
void us__tcache_forget_domain(us_engine *e, us_domain *d);
void us__tcache_engine_fini(us_engine *e);
/*
 * The flusher's half of the rewrites without a fence (tcache.c, buf.c).
 * Under the engine lock, after buffers were moved to WRITEBACK: the count
 * of collections a barrier must cover before a callback reads their data,
 * or 0 when none is needed. Then, without the lock, the barrier; false if
 * the kernel refused it (the fence is back on for e's writers).
 */
uint64_t us__rewrite_barrier_due(us_engine *e);
bool us__rewrite_barrier(us_engine *e, uint64_t moves);
/* state.c: applies one queued lock-free dirtying. */
void us__drain_buf(us_engine *e, us_buf *b);

/* policy.c: the commit policy (called by the poll, lock held; it drops the
 * lock around the callbacks). */
void us__commit_policy(us_engine *e, uint64_t now);
struct us_commit_req;
bool us__want_commit(us_engine *e, us_object *o, bool prefer_sync, enum us_reason reason,
		     struct us_commit_req **list, uint64_t now);
void us__commit_issue(us_engine *e, struct us_commit_req *list);
/* commit.c, without the lock: asks bk to commit o (its sync callback when
 * o is NULL or bk has no commit callback), marked as inside a callback. */
int us__commit_call(us_backend *bk, us_object *o, enum us_reason reason);

/* A running sync: its scope, the sequence number of its start, and the
 * bytes of its scope it still waits for, by state, which state.c keeps
 * counted as buffers move (us__sync_account()). */
struct us_sync {
	us_engine *e;
	us_object *o; /* the scope: o, or d's subtree when o is NULL */
	us_domain *d;
	uint64_t seq;
	enum us_reason reason;
	us_sync_cb cb;
	void *ctx;
	bool done, notified;
	struct us_list link; /* e->syncs */
	uint64_t nwait[4];   /* bytes it waits for, by state */
};

/* Whether o is in s's scope. */
static inline bool us__sync_in_scope(const us_sync *s, const us_object *o)
{
	return s->o ? s->o == o : us__under(o->domain, s->d);
}

/* sync.c: steps every running sync (poll; lock held, dropped around the
 * callbacks). */
void us__sync_poll(us_engine *e);
/* Starts a sync of o, or of d's subtree (o NULL), for reason; cb called
 * when it ends (us_object_sync_start()). */
int us__sync_start(us_engine *e, us_object *o, us_domain *d, enum us_reason reason,
		   us_sync_cb cb, void *ctx, us_sync **out);
/* Threaded mode: waits until s ends, then gives its result. */
int us__sync_wait(us_engine *e, us_sync *s);
bool us__sync_counts_ok(us_engine *e);
/* state.c: a buffer changes state: the syncs waiting for it count it
 * (account()). */
void us__sync_account(us_buf *b, enum us_buf_state from, enum us_buf_state to);
/* state.c: o's commit in flight ends once no unstable buffer it covers is
 * left. */
void us__commit_retire(us_object *o);
/* pressure.c: reclaim beyond eviction for a charge of len. */
int us__reclaim(us_object *o, uint64_t len, uint64_t *retry_ns);

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The next wait after a failed write or commit callback: 100 ms, doubling
 * up to 5 s (cur 0: the first failure). */
static inline uint64_t us__backoff_next(uint64_t cur)
{
	return cur ? min_u64(2 * cur, 5 * US_SEC) : 100 * US_MSEC;
}

/* a + b, or UINT64_MAX when it would overflow: times with "never" in them. */
static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* A generation number never handed out before in this process (lock.c). */
uint64_t us__gen_next(void);

/* credit.c: grants tc lock-free credit in o's domain when the chain is below
 * freerun. Needs only pinned + granted, which a drain does not change: the
 * lock need not have drained. Returns whether tc holds credit for o now. */
bool us__credit_grant(struct us_tcache *tc, us_object *o);
/* credit.c: after a charge, which shrinks the headroom of every domain
 * under the charged ancestors: revokes credit that no longer fits its
 * thresholds. */
void us__credit_police(us_engine *e);
/* pressure.c: a charge by o left a domain above high: evict, reclaim,
 * delay o. */
void us__high_penalty(us_object *o, struct us_list *victims);
/* counters.c: makes the credit of d's subtree unspendable (its caches give
 * it back). */
void us__credit_revoke(us_domain *d);

/* throttle.c: what the model says of d's chain for a writer of wb (or of
 * any context, wb NULL), for the credit: the smallest margin to a
 * background threshold (bg - pinned - granted; UINT64_MAX: no limit), the
 * smallest bg - pinned of the levels under another context's share
 * (UINT64_MAX: none), and the topmost domain whose pinned + granted passed
 * its threshold with credit out (NULL: none). */
struct us_margins {
	uint64_t margin, below;
	us_domain *spent;
};
void us__throttle_margins(us_domain *d, struct us_wb *wb, struct us_margins *m);
/* Whether o's writers are paced beside others of their context (the
 * engine holds them, their ratelimit estimated). */
bool us__pace_shared(const us_object *o);
/* Why wb's data should be written back now (THROTTLE when its writers are
 * paused, BACKGROUND when over a background threshold), or -1. */
int us__wb_reason(struct us_wb *wb);

/* writeback.c */
/* A batch of buffers collected for writeback under the lock. */
struct us_batch {
	us_object *obj;
	us_buf **bufs;
	size_t n, cap;
	uint64_t max_run;
	uint32_t gen;
	enum us_reason reason;
	uint64_t untaken; /* set by us__flush_issue: buffers back to DIRTY unsent */
};
/* Under the lock: collects o's dirty buffers in [start, end) up to budget
 * bytes (at least one buffer when force), marking them WRITEBACK. */
int us__flush_collect(us_object *o, uint64_t start, uint64_t end, uint64_t budget, bool force,
		      struct us_batch *bt, uint64_t *bytes);
/* Without the lock: hands the runs to flush; frees the batch. Returns the
 * number of buffers that failed (not started, or completed with an error
 * inside the callback). */
uint64_t us__flush_issue(us_engine *e, struct us_batch *bt);

/* policy.c, after the batch it carries: runs of buffers collected under the
 * lock, issued after it. */
struct us_flush_req {
	struct us_batch bt;
	struct us_flush_req *next;
};
/* Under the lock: a request for a run of o's dirty buffers, within the room
 * left in its backend's in-flight cap (one buffer whatever the cap when
 * nothing is in flight), its reason set, in *out for the caller to link.
 * Returns the buffers taken; 0 when none (no room, nothing to take, or the
 * batch could not be allocated); -ENOMEM when the request itself could not
 * be. */
int us__flush_request(us_object *o, enum us_reason reason, struct us_flush_req **out);
/* Without the lock: issues the flushes, then the commits; empties both. */
void us__issue(us_engine *e, struct us_flush_req **flushes, struct us_commit_req **commits);

/* flusher.c: the flusher threads, started with the engine (their
 * condition variables and mutex too, with n = 0), stopped and joined. */
int us__threads_start(us_engine *e, unsigned n);
void us__threads_stop(us_engine *e);
void us__threads_fini(us_engine *e);

/* thread.c */
/* The flushers' wake-up mutex (rank US_LOCK_THREADS), and a wait on one of
 * its condition variables until deadline (on the engine's clock) or a
 * signal. */
void us__thr_lock(us_engine *e);
void us__thr_unlock(us_engine *e);
void us__thr_wait(us_engine *e, pthread_cond_t *cond, uint64_t deadline);
/* Wakes the flusher threads (no-op in polled mode). Call without the lock. */
void us__kick(us_engine *e);
/* Under the lock: drops one busy count of o; the last one kicks the
 * idle_waiters (a shutdown waiting for callbacks still returning). */
void us__obj_unbusy(us_object *o);
/* Waits ns on the engine's clock (advances a virtual clock). */
void us__sleep(us_engine *e, uint64_t ns);
/* Waits up to ns for progress (a kick: a completion, a commit); on a
 * virtual clock, or without flushers, it is us__sleep(). */
void us__wait_progress(us_engine *e, uint64_t ns);
/*
 * Marks the current thread as running a callback of e, or not: a frame on
 * the caller's stack, pushed on the thread's own list of the callbacks it
 * is running (any number of threads, any depth, several engines; no lock).
 * us__callback_enter() declares the frame, so us__callback_exit() must be
 * called in the same block, after the callback returned.
 */
struct us__cb_frame {
	us_engine *engine;
	struct us__cb_frame *next;
};
void us__cb_push(struct us__cb_frame *f, us_engine *e);
void us__cb_pop(struct us__cb_frame *f, us_engine *e);
#define us__callback_enter(e)              \
	struct us__cb_frame us__cb_frame_; \
	us__cb_push(&us__cb_frame_, (e))
#define us__callback_exit(e) us__cb_pop(&us__cb_frame_, (e))
bool us__in_callback(us_engine *e);

/* reclaim.c */
/* Could a charge of len bytes to d fit after evicting all it may? */
bool us__charge_possible(const us_domain *d, uint64_t len);
/* The charge waiting for room that o's must let go first, or NULL. */
struct us_turn *us__room_ahead(us_object *o, uint64_t now);
/* Could o's charge of len fit, and is it its turn (no charge waiting for
 * room before it)? */
bool us__charge_turn(us_object *o, uint64_t len);
/* Counts a refused charge (max events, ENOMEM); returns -ENOMEM. */
int us__charge_refused(us_domain *d, uint64_t len);
/* Admits a charge of len bytes to d: evicts into victims as needed. */
int us__charge(us_domain *d, uint64_t len, struct us_list *victims);
/* Evicts from d's subtree until its charged bytes are <= target. */
int us__evict_to(us_domain *d, uint64_t target, struct us_list *victims);
/* d's LRU list changed: restores I8 from d up (O(depth log n), and O(1)
 * when d's oldest stamp did not move). */
void us__lru_fix(us_domain *d);
/* Under the lock: takes clean b, off the LRU, out of its object's index
 * and its domain's charge (an eviction or a drop). */
void us__buf_uncharge(us_buf *b);
/* Detaches a clean unreferenced buffer and uncharges it; onto victims. */
void us__buf_detach(us_buf *b, struct us_list *victims);
/* Without the lock: tells the evict callbacks, frees. Takes and drops it. */
void us__victims_release(us_engine *e, struct us_list *victims);
/* The same, then purges the arenas that served them (a max was lowered). */
void us__victims_release_purge(us_engine *e, struct us_list *victims);

#define US_COUNTER(field) offsetof(struct us_counters, field)

#endif /* US_INTERNAL_H */
