/*
 * unstable-sim: the pieces both modes share (see common.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_count(const void *a, const void *b)
{
	uint64_t x = ((const struct sim_pause_count *)a)->ns;
	uint64_t y = ((const struct sim_pause_count *)b)->ns;

	return x < y ? -1 : x > y;
}

/* Sorts the fresh counts and merges them into cnt[]: 0, or -1 without
 * memory (nothing changed but the order of fresh[]). */
static int pauses_fold(struct sim_pauses *p)
{
	struct sim_pause_count *m;
	size_t i = 0, j = 0, k = 0;

	if (!p->nfresh)
		return 0;
	qsort(p->fresh, p->nfresh, sizeof(*p->fresh), cmp_count);
	m = malloc((p->ncnt + p->nfresh) * sizeof(*m));
	if (!m)
		return -1;
	while (i < p->ncnt || j < p->nfresh) {
		uint64_t ns = j == p->nfresh || (i < p->ncnt && p->cnt[i].ns <= p->fresh[j].ns) ?
				      p->cnt[i].ns :
				      p->fresh[j].ns;

		m[k].ns = ns;
		m[k].n = 0;
		if (i < p->ncnt && p->cnt[i].ns == ns)
			m[k].n += p->cnt[i++].n;
		while (j < p->nfresh && p->fresh[j].ns == ns)
			m[k].n += p->fresh[j++].n;
		k++;
	}
	free(p->cnt);
	p->cnt = m;
	p->ncnt = k;
	p->nfresh = 0;
	return 0;
}

/* Adds c to the counts: in place when its length is counted already, else
 * to fresh[]. 0, or -1 without memory. */
static int pauses_add(struct sim_pauses *p, struct sim_pause_count c)
{
	size_t lo = 0, hi = p->ncnt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->cnt[mid].ns < c.ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->ncnt && p->cnt[lo].ns == c.ns) {
		p->cnt[lo].n += c.n;
		return 0;
	}
	if (p->nfresh == p->cap) {
		/* Small at first: a run may have 100,000s of writers. */
		size_t cap = p->cap < 16 ? 16 : p->cap;
		struct sim_pause_count *n;

		if (pauses_fold(p))
			return -1;
		/* Room for at least as many as there are lengths, so that a
		 * fold costs O(log cap) per count however many there are. */
		while (cap < p->ncnt)
			cap *= 2;
		if (cap != p->cap && (n = realloc(p->fresh, cap * sizeof(*n)))) {
			p->fresh = n;
			p->cap = cap;
		}
		if (p->nfresh == p->cap)
			return -1;
	}
	p->fresh[p->nfresh++] = c;
	return 0;
}

void sim_pauses_record(struct sim_pauses *p, uint64_t ns)
{
	if (ns > p->max)
		p->max = ns;
	if (p->run.n && p->run.ns == ns) {
		p->run.n++;
		p->n++;
		return;
	}
	/* Without memory the run that ended is not counted. */
	if (p->run.n && pauses_add(p, p->run))
		p->n -= p->run.n;
	p->run.ns = ns;
	p->run.n = 1;
	p->n++;
}

uint64_t sim_pauses_p99(struct sim_pauses *p)
{
	uint64_t k, seen = 0;
	size_t i = 0, j = 0;

	if (p->run.n && pauses_add(p, p->run))
		p->n -= p->run.n;
	p->run.n = 0;
	if (!p->n)
		return 0;
	k = p->n * 99 / 100;
	/* Without memory to fold, the fresh counts sorted are walked beside
	 * the others: the same order. */
	if (pauses_fold(p))
		qsort(p->fresh, p->nfresh, sizeof(*p->fresh), cmp_count);
	for (;;) {
		bool folded = j == p->nfresh || (i < p->ncnt && p->cnt[i].ns <= p->fresh[j].ns);
		struct sim_pause_count c = folded ? p->cnt[i++] : p->fresh[j++];

		seen += c.n;
		if (k < seen)
			return c.ns;
	}
}

void sim_pauses_free(struct sim_pauses *p)
{
	free(p->cnt);
	free(p->fresh);
	memset(p, 0, sizeof(*p));
}

void *sim_fifo_room(void *v, size_t size, size_t *head, size_t *tail, size_t *cap, size_t first)
{
	if (*tail == *cap && *head) {
		/* Slide the live part to the front before growing. */
		memmove(v, (char *)v + *head * size, (*tail - *head) * size);
		*tail -= *head;
		*head = 0;
	}
	if (*tail == *cap) {
		size_t n = *cap ? 2 * *cap : first;
		void *p = realloc(v, n * size);

		if (!p)
			return NULL;
		v = p;
		*cap = n;
	}
	return v;
}

void sim_landq_push(struct sim_landq *q, int writer, uint64_t k, uint64_t txn)
{
	struct sim_landed *v =
		sim_fifo_room(q->v, sizeof(*q->v), &q->head, &q->tail, &q->cap, 1024);

	if (!v)
		return;
	q->v = v;
	q->v[q->tail++] = (struct sim_landed){ writer, k, txn };
}

const struct sim_landed *sim_landq_pop(struct sim_landq *q, uint64_t txn)
{
	if (q->head < q->tail && q->v[q->head].txn <= txn)
		return &q->v[q->head++];
	return NULL;
}

void sim_landq_free(struct sim_landq *q)
{
	free(q->v);
	memset(q, 0, sizeof(*q));
}

void sim_commit_init(struct sim_commit *m, const struct sim_backend *b, uint64_t first)
{
	memset(m, 0, sizeof(*m));
	m->lat = b->commit_lat;
	m->bps = b->commit_bps;
	m->interval = b->commit_interval;
	m->journal = b->journal;
	m->next_periodic = first;
}

static void commit_start(struct sim_commit *m, uint64_t now)
{
	m->committing = true;
	m->covers = m->txn;
	m->end = now + m->lat;
	if (m->bps)
		m->end += (uint64_t)((double)m->uncommitted * 1e9 / (double)m->bps);
	m->uncommitted = 0;
	m->commits++;
}

void sim_commit_ask(struct sim_commit *m, uint64_t now)
{
	if (m->committing)
		m->asked = true;
	else
		commit_start(m, now);
}

void sim_commit_acked(struct sim_commit *m, uint64_t bytes, uint64_t now)
{
	m->uncommitted += bytes;
	if (m->uncommitted >= m->journal)
		sim_commit_ask(m, now);
}

void sim_commit_again(struct sim_commit *m, uint64_t now)
{
	if (m->asked) {
		m->asked = false;
		commit_start(m, now);
	}
}

bool sim_commit_periodic(struct sim_commit *m, uint64_t now)
{
	if (now < m->next_periodic)
		return false;
	if (!m->committing)
		commit_start(m, now);
	while (m->next_periodic <= now)
		m->next_periodic += m->interval;
	return true;
}

uint64_t sim_commit_next(const struct sim_commit *m)
{
	uint64_t t = m->next_periodic;

	if (m->committing && m->end < t)
		t = m->end;
	return t;
}

int sim_result_alloc(struct sim_result *r, const struct sim_config *c, char *err, size_t len)
{
	sim_result_free(r);
	r->wr = calloc(c->nwr ? (size_t)c->nwr : 1, sizeof(*r->wr));
	r->dom = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*r->dom));
	r->bk = calloc((size_t)c->nbk + 1, sizeof(*r->bk));
	r->nbk = c->nbk + 1;
	if (!r->wr || !r->dom || !r->bk) {
		sim_result_free(r);
		snprintf(err, len, "out of memory for %d writers and %d domains", c->nwr, c->ndom);
		return -1;
	}
	return 0;
}

void sim_result_free(struct sim_result *r)
{
	free(r->wr);
	free(r->dom);
	free(r->bk);
	memset(r, 0, sizeof(*r));
}

void sim_result_fill(struct sim_result *r, const struct sim_config *c, us_domain *const *dom,
		     us_backend *const *bk, int nbk, const uint64_t *dom_commits,
		     const uint64_t *flushes, uint64_t server_commits)
{
	double sum = 0, sq = 0;
	int i;

	for (i = 0; i < c->nwr; i++) {
		sum += r->wr[i].throughput;
		sq += r->wr[i].throughput * r->wr[i].throughput;
	}
	r->jain = sq > 0 ? sum * sum / (c->nwr * sq) : 1;
	for (i = 0; i < c->ndom; i++) {
		struct us_domain_stats st = { .size = sizeof(st) };

		us_domain_stats(dom[i], &st);
		r->dom[i].peak_charged = st.peak_charged_bytes;
		r->dom[i].enomem = st.enomem;
		r->dom[i].max_stall_ns = st.max_stall_ns;
		r->dom[i].commits = dom_commits[i];
		r->dom[i].flushes = flushes[i];
	}
	r->commits_asked = 0;
	for (i = 0; i < nbk; i++) {
		struct us_backend_stats bs = { .size = sizeof(bs) };

		us_backend_stats(bk[i], &bs);
		r->commits_asked += bs.commit_calls + bs.sync_calls;
	}
	r->server_commits = server_commits;
}
