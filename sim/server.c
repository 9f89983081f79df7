/*
 * unstable-sim: the simulated server of the virtual-time runs (see
 * server.h for what it models).
 *
 * SPDX-License-Identifier: MIT
 *
 * Memory: per writer, per block, a generation (4 bytes) and what the
 * server holds (24 bytes), allocated zeroed and touched only as the writer
 * gets there; requests and landed blocks in FIFOs that are compacted as
 * they are consumed. A commit visits only the blocks that landed since the
 * previous one.
 */
#include "server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SEC 1000000000ull

uint64_t sim_srv_checksum(int w, uint64_t k, uint32_t gen)
{
	/* splitmix64 over the three */
	uint64_t x = ((uint64_t)(uint32_t)w << 32 | gen) ^ (k * 0x9e3779b97f4a7c15ull);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x ? x : 1;
}

int sim_srv_init_domains(struct sim_srv *s, us_engine *e, const struct sim_backend *b,
			 const struct sim_srv_writer *w, int nwr, int ndom)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = sim_srv_flush,
				      .sync = sim_srv_sync };
	size_t nw;
	int i;

	memset(s, 0, sizeof(*s));
	if (!e || !b || nwr < 0 || ndom < 0 || (nwr && !w) || !b->bw || !b->commit_interval)
		return -EINVAL;
	for (i = 0; i < nwr; i++) {
		if (!w[i].bs || w[i].domain < 0)
			return -EINVAL;
		if (w[i].domain >= ndom)
			ndom = w[i].domain + 1;
	}
	s->b = *b;
	s->e = e;
	sim_commit_init(&s->cm, b, b->commit_interval);
	nw = nwr ? (size_t)nwr : 1;
	s->wr = calloc(nw, sizeof(*s->wr));
	s->nblocks = calloc(nw, sizeof(*s->nblocks));
	s->gen = calloc(nw, sizeof(*s->gen));
	s->blk = calloc(nw, sizeof(*s->blk));
	s->flushes = calloc(ndom ? (size_t)ndom : 1, sizeof(*s->flushes));
	s->dom_commits = calloc(ndom ? (size_t)ndom : 1, sizeof(*s->dom_commits));
	s->hit_gen = calloc(ndom ? (size_t)ndom : 1, sizeof(*s->hit_gen));
	if (!s->wr || !s->nblocks || !s->gen || !s->blk || !s->flushes || !s->dom_commits ||
	    !s->hit_gen)
		return -ENOMEM;
	s->ndom = ndom;
	for (i = 0; i < nwr; i++) {
		s->wr[i] = w[i];
		s->nblocks[i] = (w[i].bytes + w[i].bs - 1) / w[i].bs;
		s->gen[i] = calloc(s->nblocks[i] ? s->nblocks[i] : 1, sizeof(*s->gen[i]));
		s->blk[i] = calloc(s->nblocks[i] ? s->nblocks[i] : 1, sizeof(*s->blk[i]));
		s->nwr = i + 1; /* what sim_srv_fini() frees */
		if (!s->gen[i] || !s->blk[i])
			return -ENOMEM;
	}
	return us_backend_create(e, &ops, s, &s->bk);
}

int sim_srv_init(struct sim_srv *s, us_engine *e, const struct sim_backend *b,
		 const struct sim_srv_writer *w, int nwr)
{
	return sim_srv_init_domains(s, e, b, w, nwr, 0);
}

void sim_srv_fini(struct sim_srv *s)
{
	int i;

	for (i = 0; i < s->nwr; i++) {
		free(s->gen[i]);
		free(s->blk[i]);
	}
	free(s->wr);
	free(s->nblocks);
	free(s->gen);
	free(s->blk);
	free(s->flushes);
	free(s->dom_commits);
	free(s->hit_gen);
	s->wr = NULL;
	s->nblocks = NULL;
	s->gen = NULL;
	s->blk = NULL;
	s->flushes = s->dom_commits = s->hit_gen = NULL;
	s->nwr = s->ndom = 0;
	while (s->head < s->tail)
		free(s->q[s->head++].bufs);
	free(s->q);
	s->q = NULL;
	s->head = s->tail = s->cap = 0;
	sim_landq_free(&s->land);
}

int sim_srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		  uint64_t len, enum us_reason reason)
{
	struct sim_srv *s = ctx;
	uint64_t now = us_engine_now(s->e);
	int w = (int)(intptr_t)us_object_user(o);
	struct sim_srv_req *r, *q;
	size_t i;

	(void)off;
	(void)reason;
	if (w < 0 || w >= s->nwr)
		return -EINVAL;
	q = sim_fifo_room(s->q, sizeof(*s->q), &s->head, &s->tail, &s->cap, 1024);
	if (!q)
		return -ENOMEM;
	s->q = q;
	r = &s->q[s->tail];
	/* One allocation: the buffers, then their checksums. */
	r->bufs = malloc(n * (sizeof(*r->bufs) + sizeof(*r->sums)));
	if (!r->bufs)
		return -ENOMEM;
	memcpy(r->bufs, bufs, n * sizeof(*bufs));
	r->sums = (uint64_t *)(void *)(r->bufs + n);
	for (i = 0; i < n; i++) {
		uint64_t k = us_buf_offset(bufs[i]) / s->wr[w].bs;

		/* What the request carries: the data as it is now. */
		r->sums[i] = k < s->nblocks[w] ? sim_srv_checksum(w, k, s->gen[w][k]) : 0;
	}
	r->n = n;
	r->writer = w;
	if (s->busy_until < now)
		s->busy_until = now;
	s->busy_until += (uint64_t)((double)len * SEC / (double)s->b.bw);
	r->at = s->busy_until + s->b.lat_ns;
	s->tail++;
	s->flushes[s->wr[w].domain]++;
	return 0;
}

int sim_srv_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct sim_srv *s = ctx;

	(void)b;
	(void)reason;
	sim_commit_ask(&s->cm, us_engine_now(s->e));
	return 0;
}

uint64_t sim_srv_next(const struct sim_srv *s)
{
	uint64_t t = sim_commit_next(&s->cm);

	if (s->head < s->tail && s->q[s->head].at < t)
		t = s->q[s->head].at;
	return t;
}

/* The running commit ends: the blocks whose last write it covers are
 * durable, with the checksum that write carried. */
static void end_commit(struct sim_srv *s)
{
	const struct sim_landed *l;
	uint64_t gen = s->cm.commits; /* this commit's number: never 0 */

	sim_commit_end(&s->cm);
	while ((l = sim_landq_pop(&s->land, s->cm.covers))) {
		struct sim_srv_block *b = &s->blk[l->writer][l->k];

		if (b->txn == l->txn) {
			int d = s->wr[l->writer].domain;

			b->durable = b->sum;
			/* Each domain counts the commit once. */
			if (s->hit_gen[d] != gen) {
				s->hit_gen[d] = gen;
				s->dom_commits[d]++;
			}
		}
	}
	if (s->cm.covers)
		us_backend_commit_done(s->bk, s->cm.covers);
}

void sim_srv_run(struct sim_srv *s, uint64_t now)
{
	while (s->head < s->tail && s->q[s->head].at <= now) {
		struct sim_srv_req *r = &s->q[s->head++];
		int w = r->writer;
		uint64_t txn = ++s->cm.txn;
		size_t i;

		for (i = 0; i < r->n; i++) {
			uint64_t k = us_buf_offset(r->bufs[i]) / s->wr[w].bs;

			if (k < s->nblocks[w]) {
				s->blk[w][k].txn = txn;
				s->blk[w][k].sum = r->sums[i];
				sim_landq_push(&s->land, w, k, txn);
			}
			s->cm.uncommitted += us_buf_length(r->bufs[i]);
			us_buf_write_done(r->bufs[i], US_WRITE_UNSTABLE, txn, 0);
		}
		free(r->bufs);
		sim_commit_acked(&s->cm, 0, now); /* counted as each buffer landed */
	}
	if (sim_commit_due(&s->cm, now)) {
		end_commit(s);
		sim_commit_again(&s->cm, now);
	}
	sim_commit_periodic(&s->cm, now);
}

bool sim_srv_block_durable(const struct sim_srv *s, int w, uint64_t k)
{
	if (w < 0 || w >= s->nwr || k >= s->nblocks[w])
		return false;
	return s->blk[w][k].durable == sim_srv_checksum(w, k, s->gen[w][k]);
}

uint64_t sim_srv_lost_bytes(const struct sim_srv *s, int w, uint64_t written)
{
	uint64_t k, lost = 0, bs = s->wr[w].bs, bytes = s->wr[w].bytes;

	for (k = 0; k < s->nblocks[w]; k++) {
		const uint32_t g = s->gen[w][k];

		if ((g || k * bs < written) && (!g || !sim_srv_block_durable(s, w, k)))
			lost += bytes - k * bs < bs ? bytes - k * bs : bs;
	}
	return lost;
}
