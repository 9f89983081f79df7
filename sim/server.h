/*
 * unstable-sim: the simulated server of the virtual-time runs (server.c).
 *
 * SPDX-License-Identifier: MIT
 *
 * It is the backend of one engine (it creates the us_backend) and it runs
 * on the engine's clock, driven by its host: the flush and sync callbacks
 * queue work, sim_srv_run() does what is due at a time, sim_srv_next()
 * says when that is. Nothing in it reads a wall clock.
 *
 * - A flush call is one request. Requests go through one link at bw:
 *   busy_until += length / bw, and each is answered lat after its transfer
 *   (busy_until + lat), acknowledged unstable with the next transaction
 *   number.
 * - A commit covers every transaction acknowledged when it starts and lasts
 *   commit_lat (plus its bytes / commit_bps when given); then the blocks
 *   whose last write it covers are durable and the engine gets
 *   commit_done(its last transaction). A commit starts
 *   every commit_interval (unless one is running), when journal bytes are
 *   uncommitted, or when the engine asks (sync); a request for a commit
 *   while one runs starts exactly one more after it.
 *
 * Checksums. The objects of the engine are the writers' (of a striped
 * writer, each stripe at its server is one): an object's user pointer is
 * its writer's index at this server, (void *)(intptr_t)i, and writer i's data
 * is laid out in blocks of bs bytes (buffer at offset o: block o / bs).
 * Each time a writer dirties a block it bumps the block's generation
 * (sim_srv_dirtied()); a flush request carries, per buffer, the checksum of
 * (writer, block, generation) at the moment the flush callback is called.
 * When it lands the block remembers that checksum and transaction; a commit
 * copies the checksum of each block whose last write it covers into the
 * block's durable checksum. At the end, a block is lost when its durable
 * checksum is not the one of the writer's last generation: rewritten after
 * its last flush, or flushed and never committed, or never flushed.
 */
#ifndef US_SIM_SERVER_H
#define US_SIM_SERVER_H

#include "common.h"

/* A writer's data, as the server lays it out. */
struct sim_srv_writer {
	uint64_t bytes, bs; /* its size and block size */
	int domain;	    /* index of its domain, < the server's ndom */
};

/* What the server holds of one block. */
struct sim_srv_block {
	uint64_t txn;	  /* the transaction of its last write that landed, 0: none */
	uint64_t sum;	  /* the checksum that write carried */
	uint64_t durable; /* the checksum a commit last made durable, 0: none */
};

/* A request in flight: one flush call. */
struct sim_srv_req {
	us_buf **bufs;
	uint64_t *sums; /* per buffer: the checksum it carries */
	size_t n;
	uint64_t at; /* when it is answered */
	int writer;
};

struct sim_srv {
	struct sim_backend b;
	us_engine *e;
	us_backend *bk;
	int nwr, ndom;
	/* Per writer (nwr of each). */
	struct sim_srv_writer *wr;
	uint64_t *nblocks;
	uint32_t **gen;		    /* the writer's side: per block */
	struct sim_srv_block **blk; /* the server's side */

	struct sim_srv_req *q; /* FIFO */
	size_t head, tail, cap;
	struct sim_landq land;

	uint64_t busy_until;
	struct sim_commit cm; /* its transactions and commits */

	/* Counts (commits started: cm.commits), per domain (ndom of each). */
	uint64_t *flushes;     /* flush calls */
	uint64_t *dom_commits; /* commits that made its data durable */
	uint64_t *hit_gen;     /* end_commit(): the commit that last hit it */
};

/*
 * Sets s up as the server of engine e, with backend b's figures and nwr
 * writers laid out as w says (their domains: 0 .. ndom - 1, ndom taken as
 * the highest domain of a writer + 1 when smaller), and creates its
 * us_backend (s->bk: flush and sync callbacks, ctx s). The first periodic
 * commit is at commit_interval. 0, or a negative errno (nothing to undo
 * but sim_srv_fini()).
 */
int sim_srv_init(struct sim_srv *s, us_engine *e, const struct sim_backend *b,
		 const struct sim_srv_writer *w, int nwr);
int sim_srv_init_domains(struct sim_srv *s, us_engine *e, const struct sim_backend *b,
			 const struct sim_srv_writer *w, int nwr, int ndom);

/* Frees the server's memory (the us_backend goes with its engine). */
void sim_srv_fini(struct sim_srv *s);

/* The callbacks, as us_backend_ops has them (ctx: the struct sim_srv). */
int sim_srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		  uint64_t len, enum us_reason reason);
int sim_srv_sync(void *ctx, us_backend *b, enum us_reason reason);

/* Writer w dirtied the block at byte offset off: a new generation. */
static inline void sim_srv_dirtied(struct sim_srv *s, int w, uint64_t off)
{
	uint64_t k = off / s->wr[w].bs;

	if (k < s->nblocks[w])
		s->gen[w][k]++;
}

/* The next time at which sim_srv_run() has something to do. */
uint64_t sim_srv_next(const struct sim_srv *s);

/*
 * Does everything due at now: answers the requests due (unstable, with
 * increasing transaction numbers; a commit starts when journal bytes are
 * uncommitted), ends the running commit when due (commit_done), starts
 * the periodic ones.
 */
void sim_srv_run(struct sim_srv *s, uint64_t now);

/* The checksum of writer w's block k at generation gen (never 0). */
uint64_t sim_srv_checksum(int w, uint64_t k, uint32_t gen);

/* Whether writer w's block k is durable at the server as last written. */
bool sim_srv_block_durable(const struct sim_srv *s, int w, uint64_t k);

/*
 * The bytes of the blocks writer w wrote that are not durable at the
 * server as last written (after the final sync: lost). The blocks it wrote:
 * those it made a version of, and every block of [0, written) (the writer's
 * own count; 0 when it has none): one of those the server never heard of
 * counts as lost too.
 */
uint64_t sim_srv_lost_bytes(const struct sim_srv *s, int w, uint64_t written);

#endif
