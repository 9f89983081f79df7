/*
 * unstable-sim: the pieces the virtual-time server (server.c, run.c) and the
 * real-time run (realtime.c) share (common.c): a writer's pauses, the FIFOs
 * of requests and landed blocks, and the simulated server's commit rules.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_SIM_COMMON_H
#define US_SIM_COMMON_H

#include "sim.h"

/* ------------------------------------------------------------------------ */
/* A writer's pauses                                                          */

/*
 * A writer's pauses, kept as a count per length: a writer held at its limit
 * takes the same few lengths over and over (each writer of --domain
 * d,count=N,max=16M --writer d,bytes=32M takes about 2.7 N pauses, of 43 to
 * 46 lengths at N = 1,000, 64 to 66 at N = 5,000), so that a run's memory
 * grows with its writers, not with the number of pauses. Most repeat the
 * one before (95.7 % at N = 2,000: 10 ms at the gate), so the current run
 * of equal lengths is counted in the structure itself, which its writer's
 * state holds, and no other memory is touched. A run that ends is added to
 * its length's count in cnt[] (a binary search), or, of a new length, waits
 * in fresh[] until it is full; fresh[] is then sorted and merged into cnt[]
 * (a fold costs O(cap log cap + ncnt), and cap grows with ncnt: O(log) per
 * run).
 */
struct sim_pause_count {
	uint64_t ns, n;
};

struct sim_pauses {
	struct sim_pause_count run; /* the last pauses, all of one length */
	uint64_t n;		    /* pauses recorded: in run, cnt and fresh */
	uint64_t max;
	struct sim_pause_count *cnt; /* the lengths folded, ascending, each once */
	size_t ncnt;
	struct sim_pause_count *fresh; /* runs added since the last fold */
	size_t nfresh, cap;
};

/* Records one pause. Without memory only the maximum keeps counting it. */
void sim_pauses_record(struct sim_pauses *p, uint64_t ns);

/* The 99th percentile of the pauses recorded (the one at index n * 99 / 100
 * of their ascending order), or 0. */
uint64_t sim_pauses_p99(struct sim_pauses *p);

void sim_pauses_free(struct sim_pauses *p);

/* ------------------------------------------------------------------------ */
/* FIFOs                                                                      */

/*
 * Makes room for one more element of size bytes at the tail of the FIFO
 * v[head, tail) of cap elements: slides the live part to the front when
 * the tail is at the end, then, if still full, doubles cap (first: its
 * first size). Returns the array (v, or where it moved to), or NULL
 * without memory (v is still valid, perhaps slid).
 */
void *sim_fifo_room(void *v, size_t size, size_t *head, size_t *tail, size_t *cap, size_t first);

/* A block that landed, for the commit that will cover it. */
struct sim_landed {
	int writer;
	uint64_t k, txn;
};

/* The blocks that landed, in transaction order. */
struct sim_landq {
	struct sim_landed *v;
	size_t head, tail, cap;
};

/* Remembers a block that landed. Without memory the block simply never
 * becomes durable, and counts as lost. */
void sim_landq_push(struct sim_landq *q, int writer, uint64_t k, uint64_t txn);

/* The next block a commit covering transactions up to txn covers, taken
 * off the queue; NULL when there is none. */
const struct sim_landed *sim_landq_pop(struct sim_landq *q, uint64_t txn);

void sim_landq_free(struct sim_landq *q);

/* ------------------------------------------------------------------------ */
/* The simulated server's commits                                             */

/*
 * A commit covers every transaction acknowledged when it starts and lasts
 * lat, plus, with bps, the bytes it covers / bps (a disk writing them: an
 * NFS COMMIT's cost grows with the data). One starts every interval (unless one is running), when journal
 * bytes are uncommitted, or when asked; an ask while one runs starts
 * exactly one more after it.
 */
struct sim_commit {
	uint64_t lat, interval, journal; /* the backend's figures */
	uint64_t bps;			 /* its commit_bps: 0, or bytes/s */
	uint64_t txn;			 /* the last transaction acknowledged */
	uint64_t uncommitted;		 /* bytes acknowledged since a commit started */
	bool committing, asked;		 /* a commit runs; another asked after it */
	uint64_t end, covers;		 /* of the running commit: when it ends, its last txn */
	uint64_t next_periodic;
	uint64_t commits; /* commits started */
};

/* The first periodic commit is at first. */
void sim_commit_init(struct sim_commit *m, const struct sim_backend *b, uint64_t first);

/* A commit is asked for at now: it starts, or one more after the running one. */
void sim_commit_ask(struct sim_commit *m, uint64_t now);

/* bytes were acknowledged at now: a commit is asked for when journal bytes
 * are uncommitted. */
void sim_commit_acked(struct sim_commit *m, uint64_t bytes, uint64_t now);

/* Whether the running commit is over at now. */
static inline bool sim_commit_due(const struct sim_commit *m, uint64_t now)
{
	return m->committing && m->end <= now;
}

/* The running commit ends (what it covers: m->covers). */
static inline void sim_commit_end(struct sim_commit *m)
{
	m->committing = false;
}

/* After a commit ended: the one asked meanwhile starts at now. */
void sim_commit_again(struct sim_commit *m, uint64_t now);

/* The periodic commits due at now: starts one unless one runs, and moves
 * the next past now. Whether any was due. */
bool sim_commit_periodic(struct sim_commit *m, uint64_t now);

/* The next time at which a commit starts or ends by itself. */
uint64_t sim_commit_next(const struct sim_commit *m);

/* ------------------------------------------------------------------------ */
/* The result                                                                 */

/*
 * What both modes report alike, once the writers' throughput is in r: the
 * Jain index over the c->nwr writers, per domain of dom[0..c->ndom) its
 * peak charged bytes and ENOMEM count (the engine's), its commits and
 * flushes (the servers' counts), the commits the engine asked of the nbk
 * backends bk[] and the commits the servers made.
 */
void sim_result_fill(struct sim_result *r, const struct sim_config *c, us_domain *const *dom,
		     us_backend *const *bk, int nbk, const uint64_t *dom_commits,
		     const uint64_t *flushes, uint64_t server_commits);

#endif
