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

int sim_srv_init(struct sim_srv *s, us_engine *e, const struct sim_backend *b,
		 const struct sim_srv_writer *w, int nwr)
{
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = sim_srv_flush,
				      .sync = sim_srv_sync };
	int i;

	memset(s, 0, sizeof(*s));
	if (!e || !b || nwr < 0 || nwr > SIM_MAX_WRITERS || (nwr && !w) || !b->bw ||
	    !b->commit_interval)
		return -EINVAL;
	s->b = *b;
	s->e = e;
	s->nwr = nwr;
	s->next_periodic = b->commit_interval;
	for (i = 0; i < nwr; i++) {
		if (!w[i].bs || w[i].domain < 0 || w[i].domain >= SIM_MAX_DOMAINS)
			return -EINVAL;
		s->wr[i] = w[i];
		s->nblocks[i] = (w[i].bytes + w[i].bs - 1) / w[i].bs;
		s->gen[i] = calloc(s->nblocks[i] ? s->nblocks[i] : 1, sizeof(*s->gen[i]));
		s->blk[i] = calloc(s->nblocks[i] ? s->nblocks[i] : 1, sizeof(*s->blk[i]));
		if (!s->gen[i] || !s->blk[i])
			return -ENOMEM;
	}
	return us_backend_create(e, &ops, s, &s->bk);
}

void sim_srv_fini(struct sim_srv *s)
{
	int i;

	for (i = 0; i < SIM_MAX_WRITERS; i++) {
		free(s->gen[i]);
		free(s->blk[i]);
		s->gen[i] = NULL;
		s->blk[i] = NULL;
	}
	while (s->head < s->tail)
		free(s->q[s->head++].bufs);
	free(s->q);
	free(s->land);
	s->q = NULL;
	s->land = NULL;
	s->head = s->tail = s->cap = 0;
	s->lhead = s->ltail = s->lcap = 0;
}

int sim_srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		  uint64_t len, enum us_reason reason)
{
	struct sim_srv *s = ctx;
	uint64_t now = us_engine_now(s->e);
	int w = (int)(intptr_t)us_object_user(o);
	struct sim_srv_req *r;
	size_t i;

	(void)off;
	(void)reason;
	if (w < 0 || w >= s->nwr)
		return -EINVAL;
	if (s->tail == s->cap && s->head) {
		/* Slide the live part to the front before growing. */
		memmove(s->q, s->q + s->head, (s->tail - s->head) * sizeof(*s->q));
		s->tail -= s->head;
		s->head = 0;
	}
	if (s->tail == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		struct sim_srv_req *q = realloc(s->q, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		s->q = q;
		s->cap = cap;
	}
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

static void start_commit(struct sim_srv *s, uint64_t now)
{
	s->committing = true;
	s->commit_txn = s->txn;
	s->commit_end = now + s->b.commit_lat;
	s->uncommitted = 0;
	s->commits++;
}

int sim_srv_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct sim_srv *s = ctx;

	(void)b;
	(void)reason;
	if (s->committing)
		s->asked = true;
	else
		start_commit(s, us_engine_now(s->e));
	return 0;
}

uint64_t sim_srv_next(const struct sim_srv *s)
{
	uint64_t t = s->next_periodic;

	if (s->head < s->tail && s->q[s->head].at < t)
		t = s->q[s->head].at;
	if (s->committing && s->commit_end < t)
		t = s->commit_end;
	return t;
}

/* Remembers a block that landed, for the commit that will cover it.
 * Without memory it simply never becomes durable, and counts as lost. */
static void land_push(struct sim_srv *s, int w, uint64_t k, uint64_t txn)
{
	if (s->ltail == s->lcap && s->lhead) {
		memmove(s->land, s->land + s->lhead, (s->ltail - s->lhead) * sizeof(*s->land));
		s->ltail -= s->lhead;
		s->lhead = 0;
	}
	if (s->ltail == s->lcap) {
		size_t cap = s->lcap ? 2 * s->lcap : 1024;
		struct sim_srv_landed *l = realloc(s->land, cap * sizeof(*l));

		if (!l)
			return;
		s->land = l;
		s->lcap = cap;
	}
	s->land[s->ltail++] = (struct sim_srv_landed){ w, k, txn };
}

/* The running commit ends: the blocks whose last write it covers are
 * durable, with the checksum that write carried. */
static void end_commit(struct sim_srv *s)
{
	bool hit[SIM_MAX_DOMAINS] = { false };
	int d;

	s->committing = false;
	while (s->lhead < s->ltail && s->land[s->lhead].txn <= s->commit_txn) {
		const struct sim_srv_landed *l = &s->land[s->lhead++];
		struct sim_srv_block *b = &s->blk[l->writer][l->k];

		if (b->txn == l->txn) {
			b->durable = b->sum;
			hit[s->wr[l->writer].domain] = true;
		}
	}
	for (d = 0; d < SIM_MAX_DOMAINS; d++)
		s->dom_commits[d] += hit[d];
	if (s->commit_txn)
		us_backend_commit_done(s->bk, s->commit_txn);
}

void sim_srv_run(struct sim_srv *s, uint64_t now)
{
	while (s->head < s->tail && s->q[s->head].at <= now) {
		struct sim_srv_req *r = &s->q[s->head++];
		int w = r->writer;
		size_t i;

		s->txn++;
		for (i = 0; i < r->n; i++) {
			uint64_t k = us_buf_offset(r->bufs[i]) / s->wr[w].bs;

			if (k < s->nblocks[w]) {
				s->blk[w][k].txn = s->txn;
				s->blk[w][k].sum = r->sums[i];
				land_push(s, w, k, s->txn);
			}
			s->uncommitted += us_buf_length(r->bufs[i]);
			us_buf_write_done(r->bufs[i], US_WRITE_UNSTABLE, s->txn, 0);
		}
		free(r->bufs);
		if (s->uncommitted >= s->b.journal) {
			if (s->committing)
				s->asked = true;
			else
				start_commit(s, now);
		}
	}
	if (s->committing && s->commit_end <= now) {
		end_commit(s);
		if (s->asked) {
			s->asked = false;
			start_commit(s, now);
		}
	}
	while (now >= s->next_periodic) {
		if (!s->committing)
			start_commit(s, now);
		s->next_periodic += s->b.commit_interval;
	}
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
