/*
 * unstable-sim: one scenario in virtual time.
 *
 * SPDX-License-Identifier: MIT
 *
 * The engine runs in polled mode on a virtual clock with accounting-only
 * buffers, against the simulated server of server.c. The server takes each
 * flush call as one request (the engine's runs are capped at the request
 * size, its bytes in flight at rpcs requests): requests go through one link
 * at bw, each answered lat later, acknowledged unstable with a transaction
 * number. It commits everything acknowledged so far every commit_interval,
 * when journal bytes are uncommitted, or when the client asks (sync), each
 * commit taking commit_lat (plus its bytes / commit_bps when given); then
 * commit_done(its last transaction). Each backend of the config is such a
 * server of its own (its own link, requests in flight, journal and
 * commits); a writer writes to its backend, or, striped, block by block
 * round robin to one object per backend of its stripe (struct layout).
 *
 * lost_bytes is measured: each time a writer dirties a block it makes a new
 * version of it (sim_srv_dirtied()); each write carries the checksum of the
 * version it was flushed with, and a commit makes the checksums of the
 * writes it covers durable. After the final sync every block a writer wrote
 * must be at the server, durably, in its last version; lost_bytes counts
 * the bytes of those that are not.
 *
 * Writers behave like dd bs=1M: each dirties its blocks in order as fast as
 * the engine lets it, and copying a block costs it bs / SIM_COPY_RATE
 * (8 GiB/s) of its own time. Under the unstable policy it honours every pause and
 * waits at the dirty limit; under no-forced-commit the engine never forces
 * commits and the writer is not throttled (the unpatched Lustre client,
 * whose kernel did not count its unstable pages as dirty). Under naive, the
 * writer is what a client writes by hand: no throttling curve and no
 * background writeback; when its cache is full it flushes everything, asks
 * for a commit and waits (the wait counts as its pause). Under
 * no-reclaim-wait the host is the Linux kernel before its memcg reclaim
 * waited for writeback (the memcg seed): dirty throttling is not per domain
 * (a domain has no thresholds of its own: the writer takes the pauses and
 * waits of the root's, 10 % and 20 % of --memory, the machine's global
 * dirty limits; they also start background writeback), and a charge
 * that finds its domain full reclaims what it can free at once; when what
 * holds the domain is only dirty data (a memcg's reclaim may not write it:
 * it wakes the flushers) and data under writeback (which it does not wait
 * for), with nothing evictable and nothing unstable (for ext3 data written
 * back is clean, and the engine frees it at the commit it forces), the
 * writer is OOM-killed: it stops, with an OOM counted.
 *
 * A writer's time ends when its last block was copied: copying a block
 * takes bs / rate, rounded up to the nanosecond, so that no writer reports
 * more than its copy rate. Its stalls are the times without progress:
 * from the end of one block's copy to the dirtying of the next, and from
 * the last progress to an ENOMEM or OOM.
 */
#define _GNU_SOURCE 1
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unstable/unstable.h>

#define MS  1000000ull
#define SEC 1000000000ull

struct wstate {
	/* What a look at the gate reads and writes first, side by side (the
	 * pauses' counts begin with the run of equal lengths): with 100,000
	 * writers hardly one is in the caches when it comes back. */
	us_object *o;	  /* the object of the block it writes next */
	us_object **objs; /* striped: one per backend of its stripe, else NULL */
	uint64_t wait_until;
	bool gated, done, blocked;
	struct sim_pauses pauses;
	uint64_t off, done_ns, enomem;
	uint64_t blocked_since; /* naive: full since then */
	uint64_t progress_ns;	/* its last block's copy ended then (start: its start) */
	uint64_t max_stall, oom;
	/* Bytes written in each window of the run (struct windows). */
	uint64_t *win;
	size_t nwin;
};

/*
 * The writers waiting, by the time they act next (then by index). Writers
 * held at their limits come and go in crowds: with --domain d,count=N,max=1M
 * --writer d,bytes=2M,bs=64K about a quarter of them are due at each step
 * that has any (5,300 at N = 20,000), most told the same pause, and the
 * queue holds a few distinct times at once (2 to 14 at N = 5,000). So it
 * holds runs, not writers: the writers pushed at one step with one time, in
 * the order they were pushed, which is the order of their index (a step
 * serves its writers so); a binary min-heap orders the runs by time. A step
 * takes the runs due and merges them by index: a look at each writer and
 * O(log runs) per run, where a heap of writers cost two O(log N) sifts per
 * writer through an array larger than the caches (a quarter of the samples
 * at N = 50,000, more with more). A step appends to the runs it opened (the
 * last WQ_OPEN of them), so a writer whose time is like no other's is a
 * run of its own: about what a heap of writers cost. (Runs as lists
 * linked through an array of next writers made each step a chain of
 * dependent loads, 13 % slower at N = 50,000 than arrays.)
 */
#define WQ_OPEN 8

struct wrun {
	uint64_t t;
	int *v; /* its writers, n of them, in room for cap */
	size_t n, cap;
};

/* A run in the heap: its time and its index in the pool. */
struct wre {
	uint64_t t;
	size_t r;
};

struct wqueue {
	struct wrun *run; /* the pool: runs queued, and free ones (n == 0) */
	size_t nrun;
	size_t *free; /* the free runs' indices, nfree of them */
	size_t nfree;
	struct wre *heap; /* the runs queued, by time */
	size_t nheap;
	size_t open[WQ_OPEN]; /* the runs this step opened, nopen of them */
	size_t nopen;
	bool nomem; /* a writer could not be queued */
	const struct wstate *w;
};

static bool wq_before(struct wre a, struct wre b)
{
	return a.t != b.t ? a.t < b.t : a.r < b.r;
}

static void wq_sift_up(struct wqueue *q, size_t k)
{
	struct wre e = q->heap[k];

	while (k && wq_before(e, q->heap[(k - 1) / 2])) {
		q->heap[k] = q->heap[(k - 1) / 2];
		k = (k - 1) / 2;
	}
	q->heap[k] = e;
}

static size_t wq_pop_run(struct wqueue *q)
{
	size_t top = q->heap[0].r, k = 0;
	struct wre last = q->heap[--q->nheap];

	for (;;) {
		size_t c = 2 * k + 1;

		if (c >= q->nheap)
			break;
		if (c + 1 < q->nheap && wq_before(q->heap[c + 1], q->heap[c]))
			c++;
		if (!wq_before(q->heap[c], last))
			break;
		q->heap[k] = q->heap[c];
		k = c;
	}
	if (q->nheap)
		q->heap[k] = last;
	return top;
}

/* Room for nw writers in as many runs. 0, or -1 without memory. */
static int wq_init(struct wqueue *q, const struct wstate *w, size_t nw)
{
	memset(q, 0, sizeof(*q));
	q->w = w;
	q->run = calloc(nw, sizeof(*q->run));
	q->free = calloc(nw, sizeof(*q->free));
	q->heap = calloc(nw, sizeof(*q->heap));
	return q->run && q->free && q->heap ? 0 : -1;
}

static void wq_free(struct wqueue *q)
{
	size_t r;

	for (r = 0; q->run && r < q->nrun; r++)
		free(q->run[r].v);
	free(q->run);
	free(q->free);
	free(q->heap);
}

/* The step's pushes are over: its runs take no more writers. */
static void wq_close(struct wqueue *q)
{
	q->nopen = 0;
}

/*
 * Queues writer i at its wait_until unless it is done. Within a step,
 * writers are pushed in the order of their index, so a run opened by this
 * step stays in order. Without memory it is not queued, and nomem says so.
 */
static void wq_push(struct wqueue *q, int i)
{
	uint64_t t = q->w[i].wait_until;
	struct wrun *run = NULL;
	size_t k, r;

	if (q->w[i].done)
		return;
	for (k = q->nopen; k-- > 0;)
		if (q->run[q->open[k]].t == t) {
			run = &q->run[q->open[k]];
			break;
		}
	if (!run) {
		/* A run of its own: a free one (its array kept), or a new one;
		 * there are never more runs than writers. */
		r = q->nfree ? q->free[--q->nfree] : q->nrun++;
		run = &q->run[r];
		run->t = t;
		run->n = 0;
		q->heap[q->nheap] = (struct wre){ t, r };
		wq_sift_up(q, q->nheap++);
		if (q->nopen == WQ_OPEN)
			memmove(q->open, q->open + 1, (WQ_OPEN - 1) * sizeof(*q->open));
		else
			q->nopen++;
		q->open[q->nopen - 1] = r;
	}
	if (run->n == run->cap) {
		size_t cap = run->cap ? 2 * run->cap : 16;
		int *v = realloc(run->v, cap * sizeof(*v));

		if (!v) {
			q->nomem = true;
			return;
		}
		run->v = v;
		run->cap = cap;
	}
	run->v[run->n++] = i;
}

/* The earliest time a writer waits for, or UINT64_MAX. */
static uint64_t wq_next(const struct wqueue *q)
{
	return q->nheap ? q->heap[0].t : UINT64_MAX;
}

/*
 * Merges the sorted runs a[b[0] .. b[1]), a[b[1] .. b[2]), ... (k of them)
 * into one sorted run in a, by pairs (tmp: room for as many ints): O(n log
 * k). b is overwritten.
 */
static void merge_runs(int *a, int *tmp, size_t *b, size_t k)
{
	while (k > 1) {
		size_t m, nk = 0;

		for (m = 0; m < k; m += 2) {
			size_t lo = b[m], mid = b[m + 1], hi = m + 2 <= k ? b[m + 2] : mid;
			size_t x = lo, y = mid, o = lo;

			while (x < mid && y < hi)
				tmp[o++] = a[x] < a[y] ? a[x++] : a[y++];
			while (x < mid)
				tmp[o++] = a[x++];
			while (y < hi)
				tmp[o++] = a[y++];
			b[nk++] = lo;
		}
		b[nk] = b[k];
		memcpy(a + b[0], tmp + b[0], (b[k] - b[0]) * sizeof(*a));
		k = nk;
	}
}

/*
 * The writers due by now, in due[] in the order of their index (tmp: room
 * for as many, bounds for one more than there are runs); their count. The
 * clock only moves to the earliest time waited for, so they all have its
 * time; the runs of that time are merged.
 */
static size_t wq_pop_due(struct wqueue *q, uint64_t now, int *due, int *tmp, size_t *bounds)
{
	size_t n = 0, k = 0;

	while (q->nheap && q->heap[0].t <= now) {
		size_t r = wq_pop_run(q);
		struct wrun *run = &q->run[r];

		bounds[k++] = n;
		memcpy(due + n, run->v, run->n * sizeof(*due));
		n += run->n;
		run->n = 0;
		q->free[q->nfree++] = r;
	}
	if (k > 1) {
		bounds[k] = n;
		merge_runs(due, tmp, bounds, k);
	}
	return n;
}

/* Copying bs bytes at rate bytes/s: ns, rounded up. */
static uint64_t copy_ns(uint64_t bs, uint64_t rate)
{
	uint64_t ns = (uint64_t)((double)bs * SEC / (double)rate);

	while ((double)ns * (double)rate < (double)bs * SEC)
		ns++;
	return ns;
}

/* A writer made no progress from its last progress until now. */
static void stall_end(struct wstate *x, uint64_t now)
{
	if (now > x->progress_ns && now - x->progress_ns > x->max_stall)
		x->max_stall = now - x->progress_ns;
}

/*
 * Fairness over time: the run is cut into windows of 10 max pauses (2 s by
 * default), and each writer's bytes are counted in the window in which it
 * dirtied them. The Jain index of a window is taken over the writers that
 * were writing for the whole of it (started before it, done after it); the
 * result keeps the smallest over the windows with at least two of them. A
 * window in which none of them progressed is counted apart (*idle): its
 * shares are all equal, at zero.
 *
 * A block is dirtied at one instant, so a window holds whole blocks: where
 * the writers progress by a few blocks each in it (the windows in which a
 * long commit stops or starts them), one block more or less for one of
 * them is a Jain index far under 0.99 whatever the order of service. Such
 * a window is measured in blocks too: *spread is the largest difference
 * between two writers' bytes in it, in the largest block of its writers,
 * over the windows under 0.99; *unfair counts those in which that is more
 * than two blocks (a writer served in turn may have one block in the
 * window before and one in the window after its siblings' blocks).
 */
static void window_add(struct wstate *x, uint64_t now, uint64_t window_ns, uint64_t bytes)
{
	size_t k = (size_t)(now / window_ns);

	if (k >= x->nwin) {
		size_t n = k + 1 > 2 * x->nwin ? k + 1 : 2 * x->nwin;
		uint64_t *v = realloc(x->win, n * sizeof(*v));

		if (!v)
			return; /* without memory the window count stays short */
		memset(v + x->nwin, 0, (n - x->nwin) * sizeof(*v));
		x->win = v;
		x->nwin = n;
	}
	x->win[k] += bytes;
}

static double windows_jain(const struct sim_config *c, const struct wstate *w, uint64_t window_ns,
			   uint64_t *nwindows, uint64_t *idle, double *spread, uint64_t *unfair)
{
	double worst = 1;
	size_t k, last = 0;
	int i;

	*nwindows = *idle = *unfair = 0;
	*spread = 0;
	for (i = 0; i < c->nwr; i++)
		if (w[i].nwin > last)
			last = w[i].nwin;
	for (k = 0; k < last; k++) {
		uint64_t lo = k * window_ns, hi = lo + window_ns;
		double sum = 0, sq = 0, lo_b = 0, hi_b = 0, bs = 0, j;
		int n = 0;

		for (i = 0; i < c->nwr; i++) {
			double b;

			if (c->wr[i].start_ns > lo || w[i].done_ns < hi)
				continue;
			b = k < w[i].nwin ? (double)w[i].win[k] : 0;
			if (!n || b < lo_b)
				lo_b = b;
			if (!n || b > hi_b)
				hi_b = b;
			if ((double)c->wr[i].bs > bs)
				bs = (double)c->wr[i].bs;
			sum += b;
			sq += b * b;
			n++;
		}
		if (n < 2)
			continue;
		(*nwindows)++;
		if (sq == 0) {
			(*idle)++;
			continue;
		}
		j = sum * sum / (n * sq);
		if (j < worst)
			worst = j;
		if (j < 0.99) {
			double blocks = (hi_b - lo_b) / (bs > 0 ? bs : 1);

			if (blocks > *spread)
				*spread = blocks;
			if (blocks > 2)
				(*unfair)++;
		}
	}
	return worst;
}

/* no-reclaim-wait: what holds domain d is only dirty data and data under
 * writeback, which a pre-fix memcg reclaim could neither write nor wait for. */
static bool only_writeback(const us_domain *d)
{
	struct us_domain_stats st = { .size = sizeof(st) };

	return us_domain_stats(d, &st) == 0 && !st.evictable_bytes && !st.unstable_bytes &&
	       st.dirty_bytes + st.writeback_bytes > 0;
}

/* The config's domains, with their limits; the same in both modes. */
int sim_domains_create(us_engine *e, const struct sim_config *c, us_domain **dom, char *err,
		       size_t len)
{
	int i;

	for (i = 0; i < c->ndom; i++) {
		const struct sim_domain *d = &c->dom[i];
		us_domain *p = d->parent >= 0 ? dom[d->parent] : NULL;

		if (us_domain_create(e, p, d->name, 0, &dom[i]) ||
		    /* naive: no curve, no background writeback */
		    (c->policy == SIM_POLICY_NAIVE &&
		     (us_domain_set_limit(dom[i], US_LIMIT_DIRTY_RATIO, 100) ||
		      us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_RATIO, 99))) ||
		    /* no-reclaim-wait: no thresholds per domain, only the
		     * root's (the machine's global dirty limits) */
		    (c->policy == SIM_POLICY_NO_RECLAIM_WAIT &&
		     (us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BYTES, US_UNLIMITED) ||
		      us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_BYTES, US_UNLIMITED))) ||
		    (d->max != UINT64_MAX && us_domain_set_limit(dom[i], US_LIMIT_MAX, d->max)) ||
		    (d->high != UINT64_MAX &&
		     us_domain_set_limit(dom[i], US_LIMIT_HIGH, d->high)) ||
		    (d->bg && us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_BYTES, d->bg)) ||
		    ((d->bg_pct || d->bg_zero) &&
		     us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_RATIO, d->bg_pct)) ||
		    (d->dirty && us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BYTES, d->dirty)) ||
		    ((d->dirty_pct || d->dirty_zero) &&
		     us_domain_set_limit(dom[i], US_LIMIT_DIRTY_RATIO, d->dirty_pct))) {
			snprintf(err, len, "domain %s: the engine refused its limits", d->name);
			return -1;
		}
	}
	return 0;
}

#define FAIL(...) (snprintf(err, len, __VA_ARGS__), rc = -1)

/* Writer i's striping, or NULL. */
static const struct sim_stripe *stripe_of(const struct sim_config *c, int i)
{
	return c->wr[i].stripe ? &c->stripe[c->wr[i].stripe - 1] : NULL;
}

/* Where the byte at off of writer i's file lives: the backend (as its
 * stripe orders them: j) and the offset in that stripe's object. */
static uint64_t stripe_map(const struct sim_stripe *st, uint64_t off, int *j)
{
	uint64_t unit = off / st->size;

	*j = (int)(unit % (uint64_t)st->n);
	return unit / (uint64_t)st->n * st->size + off % st->size;
}

/*
 * Where the writers' data lives. A component is a writer's data at one
 * backend: the whole file, or one stripe of it; writer i's are cfirst[i]
 * .. cfirst[i] + n - 1 (n: its stripes, or 1). Each server knows only its
 * own components and their domains, by its own indices: loc[component] is
 * the component's writer index at its server (the objects' user pointer),
 * gdom[b][l] the config's domain of server b's domain l. Memory and setup
 * are proportional to writers + backends + domains, not their product.
 */
struct layout {
	int *cfirst, *loc;
	int **gdom;
	int nsrv;
};

static void layout_free(struct layout *l)
{
	int b;

	for (b = 0; l->gdom && b < l->nsrv; b++)
		free(l->gdom[b]);
	free(l->gdom);
	free(l->cfirst);
	free(l->loc);
	memset(l, 0, sizeof(*l));
}

/* Writer i's stripe j: its component's writer index at its server. */
static int comp_loc(const struct layout *l, int i, int j)
{
	return l->loc[l->cfirst[i] + j];
}

/*
 * The servers, one per backend of the config (0: the default), each with
 * its us_backend and the components it holds. The engine's first bandwidth
 * estimate and its run size are the smallest of the backends the writers
 * use (with the default backend alone: its own, as always). nwb[b]: the
 * components at backend b.
 */
static int servers_init(const struct sim_config *c, us_engine *e, struct sim_srv *srv, int nsrv,
			int *nwb, struct layout *l, char *err, size_t len)
{
	struct sim_srv_writer *lay = NULL;
	uint64_t init_bw = UINT64_MAX, rpc = UINT64_MAX;
	size_t ncomp = 0, *off = NULL, *fill = NULL;
	int *stamp = NULL, *lidx = NULL;
	int b, i, j, rc = 0;

	l->nsrv = nsrv;
	l->cfirst = calloc(c->nwr ? (size_t)c->nwr : 1, sizeof(*l->cfirst));
	l->gdom = calloc((size_t)nsrv, sizeof(*l->gdom));
	if (!l->cfirst || !l->gdom)
		return FAIL("out of memory for %d writers", c->nwr);
	for (i = 0; i < c->nwr; i++) {
		const struct sim_stripe *st = stripe_of(c, i);

		l->cfirst[i] = (int)ncomp;
		for (j = 0; j < (st ? st->n : 1); j++, ncomp++)
			nwb[st ? st->bk[j] : c->wr[i].backend]++;
	}
	for (b = 0; b < nsrv; b++)
		if (nwb[b] || (b == 0 && !c->nbk)) {
			const struct sim_backend *k = sim_config_backend(c, b);

			init_bw = k->bw < init_bw ? k->bw : init_bw;
			rpc = k->rpc < rpc ? k->rpc : rpc;
		}
	if (init_bw == UINT64_MAX) {
		init_bw = c->backend.bw;
		rpc = c->backend.rpc;
	}
	if (us_engine_set_param(e, US_PARAM_INIT_BW, init_bw) ||
	    us_engine_set_param(e, US_PARAM_FORCE_COMMIT, c->policy == SIM_POLICY_UNSTABLE) ||
	    us_engine_set_param(e, US_PARAM_MAX_FLUSH_BYTES, rpc))
		return FAIL("cannot set up the engine");
	l->loc = calloc(ncomp ? ncomp : 1, sizeof(*l->loc));
	lay = calloc(ncomp ? ncomp : 1, sizeof(*lay));
	off = calloc((size_t)nsrv + 1, sizeof(*off));
	fill = calloc((size_t)nsrv, sizeof(*fill));
	stamp = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*stamp));
	lidx = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*lidx));
	if (!l->loc || !lay || !off || !fill || !stamp || !lidx) {
		FAIL("out of memory for %d writers", c->nwr);
		goto out;
	}
	/* Each server's components side by side in lay, in writer order. */
	for (b = 0; b < nsrv; b++)
		off[b + 1] = off[b] + (size_t)nwb[b];
	for (i = 0; i < c->nwr; i++) {
		const struct sim_stripe *st = stripe_of(c, i);

		for (j = 0; j < (st ? st->n : 1); j++) {
			size_t pos;

			b = st ? st->bk[j] : c->wr[i].backend;
			pos = off[b] + fill[b]++;
			l->loc[l->cfirst[i] + j] = (int)(pos - off[b]);
			lay[pos] =
				(struct sim_srv_writer){ st ? sim_stripe_bytes(c->wr[i].bytes,
									       st->size, st->n, j) :
							      c->wr[i].bytes,
							 c->wr[i].bs, c->wr[i].domain };
		}
	}
	for (b = 0; b < nsrv && !rc; b++) {
		const struct sim_backend *k = sim_config_backend(c, b);
		size_t q;
		int nl = 0;

		/* The server's own domains, in order of first appearance. */
		l->gdom[b] = calloc(nwb[b] ? (size_t)nwb[b] : 1, sizeof(*l->gdom[b]));
		if (!l->gdom[b]) {
			FAIL("out of memory for backend %s", b ? k->name : "default");
			break;
		}
		for (q = off[b]; q < off[b + 1]; q++) {
			int d = lay[q].domain;

			if (stamp[d] != b + 1) {
				stamp[d] = b + 1;
				lidx[d] = nl;
				l->gdom[b][nl++] = d;
			}
			lay[q].domain = lidx[d];
		}
		if (sim_srv_init_domains(&srv[b], e, k, lay + off[b], nwb[b], nl) ||
		    us_backend_set_max_inflight(srv[b].bk, k->rpcs * k->rpc))
			FAIL("cannot set up backend %s", b ? k->name : "default");
	}
out:
	free(lay);
	free(off);
	free(fill);
	free(stamp);
	free(lidx);
	return rc;
}

/* The bytes of writer i's file (written bytes of it) not durable at its
 * servers as last written: over each of its stripes if striped. */
static uint64_t writer_lost(const struct sim_config *c, const struct layout *l,
			    const struct sim_srv *srv, int i, uint64_t written)
{
	const struct sim_stripe *st = stripe_of(c, i);
	uint64_t lost = 0;
	int j;

	if (!st)
		return sim_srv_lost_bytes(&srv[c->wr[i].backend], comp_loc(l, i, 0), written);
	for (j = 0; j < st->n; j++)
		lost += sim_srv_lost_bytes(&srv[st->bk[j]], comp_loc(l, i, j),
					   sim_stripe_bytes(written, st->size, st->n, j));
	return lost;
}

/* The next time at which a server has something to do. */
static uint64_t servers_next(const struct sim_srv *srv, int nsrv)
{
	uint64_t t = UINT64_MAX;
	int b;

	for (b = 0; b < nsrv; b++)
		if (sim_srv_next(&srv[b]) < t)
			t = sim_srv_next(&srv[b]);
	return t;
}

/* The servers' events due by now, seen by the engine at now: its clock
 * is moved there first, or a write or commit answered at now would be
 * stamped with the time of the step before (its latency cut short, the
 * link's busy time too). */
static void servers_run(us_engine *e, struct sim_srv *srv, int nsrv, uint64_t now)
{
	uint64_t cur = us_engine_now(e);
	int b;

	if (now > cur)
		us_engine_clock_advance(e, now - cur);

	for (b = 0; b < nsrv; b++)
		sim_srv_run(&srv[b], now);
}

/*
 * Writer i's ceiling: the smaller of its own speed and what its backends
 * let it write, an equal share of each (its bandwidth over the writers'
 * data there, nwb). A striped writer sends each of its n backends the same
 * bytes in turn (round robin), so it goes no faster than n times its share
 * of the slowest: a stripe over a 1 GiB/s and a 100 MiB/s backend that
 * nothing else uses writes 200 MiB/s at most, not their 1.1 GiB/s sum.
 */
static uint64_t writer_ceiling(const struct sim_config *c, const int *nwb, int i)
{
	const struct sim_stripe *st = stripe_of(c, i);
	uint64_t own = c->wr[i].rate ? c->wr[i].rate : SIM_COPY_RATE, slowest = UINT64_MAX;
	int j, n = st ? st->n : 1;

	for (j = 0; j < n; j++) {
		int b = st ? st->bk[j] : c->wr[i].backend;
		uint64_t share = sim_config_backend(c, b)->bw / (uint64_t)nwb[b];

		slowest = share < slowest ? share : slowest;
	}
	/* min(own, slowest x n), without overflowing the product */
	return slowest > own / (uint64_t)n ? own : slowest * (uint64_t)n;
}

/* What a user may look at during a run (sim_config.observe); -1 when the
 * engine's invariants do not hold, with the message in msg. */
static int observe(const struct sim_config *c, us_engine *e, us_domain **dom,
		   const struct wstate *w, char *msg, size_t len)
{
	int i;

	for (i = 0; i < c->ndom; i++) {
		struct us_domain_stats st = { .size = sizeof(st) };
		struct us_domain_limits lim = { .size = sizeof(lim) };

		us_domain_stats(dom[i], &st);
		us_domain_effective_limits(dom[i], &lim);
	}
	for (i = 0; i < c->nwr; i++)
		if (w[i].o)
			(void)us_object_bandwidth(w[i].o);
	return us_engine_check(e, msg, len) ? -1 : 0;
}

/*
 * What the steps of sim_run() share: the config and the result, the
 * engine with its servers, domains and writers, the queue of the writers
 * waiting, the trace's state and the clock of the loop.
 */
struct run {
	const struct sim_config *c;
	struct sim_result *r;
	char *err;
	size_t len;
	struct sim_srv *srv;
	struct layout lay;
	int nsrv, *nwb;
	us_backend **bks;
	uint64_t *flushes, *dom_commits;
	us_engine *e;
	us_domain **dom;
	struct wstate *w;
	uint64_t now, next; /* the clock; the engine's next event */
	uint64_t next_sample, last_sample;
	uint64_t *last_off, *last_pause; /* per writer, for the trace */
	size_t nw;			 /* the writers' arrays' length: at least 1 */
	struct wqueue queue;
	int *due, *tmp; /* the writers due at a step, and wq_pop_due()'s scratch */
	size_t *bounds;
	FILE *trace;
	int left; /* the writers not done yet */
};

/* Each writer names a backend and a stripe of the config, its stripe over
 * known backends in units of a multiple of its bs: checked before anything
 * is set up, since the servers' layout relies on it. */
static int run_check_writers(const struct sim_config *c, char *err, size_t len)
{
	size_t j;
	int i;

	for (i = 0; i < c->nwr; i++) {
		const struct sim_writer *cw = &c->wr[i];
		const struct sim_stripe *st;

		if (cw->backend < 0 || cw->backend > c->nbk || cw->stripe < 0 ||
		    cw->stripe > c->nstripe) {
			snprintf(err, len, "writer %d: no such backend or stripe", i);
			return -1;
		}
		st = stripe_of(c, i);
		for (j = 0; st && j < (size_t)st->n; j++)
			if (st->bk[j] < 0 || st->bk[j] > c->nbk || !st->size || st->size % cw->bs) {
				snprintf(err, len,
					 "writer %d: a stripe over known backends, of a size that "
					 "is a multiple of bs, is needed",
					 i);
				return -1;
			}
	}
	return 0;
}

/* The run's arrays, the trace file with its header and the engine on its
 * virtual clock: all a run needs before its servers and writers exist. */
static int run_alloc(struct run *s)
{
	const struct sim_config *c = s->c;
	struct us_engine_options opts;
	size_t nw = s->nw;
	char *err = s->err;
	size_t len = s->len;
	int rc = 0;

	s->srv = calloc((size_t)s->nsrv, sizeof(*s->srv));
	s->nwb = calloc((size_t)s->nsrv, sizeof(*s->nwb));
	s->bks = calloc((size_t)s->nsrv, sizeof(*s->bks));
	s->flushes = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*s->flushes));
	s->dom_commits = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*s->dom_commits));
	s->dom = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*s->dom));
	s->w = calloc(nw, sizeof(*s->w));
	s->last_off = calloc(nw, sizeof(*s->last_off));
	s->last_pause = calloc(nw, sizeof(*s->last_pause));
	s->due = calloc(nw, sizeof(*s->due));
	s->tmp = calloc(nw, sizeof(*s->tmp));
	s->bounds = calloc(nw + 1, sizeof(*s->bounds));
	if (wq_init(&s->queue, s->w, nw) || !s->srv || !s->nwb || !s->bks || !s->flushes ||
	    !s->dom_commits || !s->dom || !s->w || !s->last_off || !s->last_pause || !s->due ||
	    !s->tmp || !s->bounds)
		return FAIL("out of memory for %d writers and %d domains", c->nwr, c->ndom);
	if (c->trace) {
		s->trace = fopen(c->trace, "w");
		if (!s->trace)
			return FAIL("cannot write %s", c->trace);
		fprintf(s->trace, "time_s,kind,name,dirty,writeback,unstable,charged,bg_thresh,"
				  "dirty_thresh,rate,pause_ms\n");
	}
	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = c->memory;
	if (us_engine_create(&opts, &s->e))
		return FAIL("cannot create the engine");
	{
		uint64_t max_pause = 0;

		us_engine_get_param(s->e, US_PARAM_MAX_PAUSE_NS, &max_pause);
		s->r->window_ns = 10 * (max_pause ? max_pause : 200 * MS);
	}
	return rc;
}

/* The writers' objects, each at its backend (striped: one at each backend
 * of its stripe), and each writer queued for its start. */
static int run_writers_create(struct run *s)
{
	const struct sim_config *c = s->c;
	struct wstate *w = s->w;
	char *err = s->err;
	size_t len = s->len, j;
	int i, rc = 0;

	for (i = 0; i < c->nwr; i++) {
		const struct sim_stripe *st = stripe_of(c, i);

		/* The server knows the writer by its index; a striped writer
		 * has an object at each backend of its stripe. */
		if (st) {
			w[i].objs = calloc((size_t)st->n, sizeof(*w[i].objs));
			for (j = 0; w[i].objs && j < (size_t)st->n; j++)
				if (us_object_create(s->srv[st->bk[j]].bk, s->dom[c->wr[i].domain],
						     (void *)(intptr_t)comp_loc(&s->lay, i, (int)j),
						     &w[i].objs[j]))
					break;
			if (!w[i].objs || j < (size_t)st->n)
				return FAIL("cannot create writer %d", i);
			w[i].o = w[i].objs[0];
		} else if (us_object_create(s->srv[c->wr[i].backend].bk, s->dom[c->wr[i].domain],
					    (void *)(intptr_t)comp_loc(&s->lay, i, 0), &w[i].o)) {
			return FAIL("cannot create writer %d", i);
		}
		w[i].wait_until = w[i].progress_ns = c->wr[i].start_ns;
		wq_push(&s->queue, i);
	}
	wq_close(&s->queue);
	if (s->queue.nomem)
		return FAIL("out of memory for %d writers", c->nwr);
	return rc;
}

/*
 * The time series: per domain its bytes and thresholds, per writer its
 * rate since the last sample and its last pause. Nothing changes between
 * two steps, so the samples due since the last step read the state as it
 * is now, before this step's events: the trace never adds a step of its
 * own (an extra poll would change what happens).
 */
static void run_trace(struct run *s)
{
	const struct sim_config *c = s->c;
	int i;

	while (s->trace && s->now >= s->next_sample) {
		uint64_t ts = s->next_sample;
		double dt = ts > s->last_sample ? (double)(ts - s->last_sample) / SEC : 0;

		for (i = 0; i < c->ndom; i++) {
			struct us_domain_stats st = { .size = sizeof(st) };
			struct us_domain_limits lim = { .size = sizeof(lim) };

			us_domain_stats(s->dom[i], &st);
			us_domain_effective_limits(s->dom[i], &lim);
			fprintf(s->trace, "%.3f,domain,%s,%llu,%llu,%llu,%llu,%llu,%llu,,\n",
				(double)ts / SEC, c->dom[i].name,
				(unsigned long long)st.dirty_bytes,
				(unsigned long long)st.writeback_bytes,
				(unsigned long long)st.unstable_bytes,
				(unsigned long long)st.charged_bytes,
				(unsigned long long)lim.bg_thresh_bytes,
				(unsigned long long)lim.dirty_thresh_bytes);
		}
		for (i = 0; i < c->nwr; i++) {
			fprintf(s->trace, "%.3f,writer,%d,,,,,,,%.0f,%.3f\n", (double)ts / SEC, i,
				dt > 0 ? (double)(s->w[i].off - s->last_off[i]) / dt : 0,
				(double)s->last_pause[i] / 1e6);
			s->last_off[i] = s->w[i].off;
		}
		s->last_sample = ts;
		s->next_sample = ts + (c->trace_every_ns ? c->trace_every_ns : 100 * MS);
	}
}

/* A writer stops at now, done (out of memory, OOM-killed): its stall up to
 * now counts, and the loop has one writer less to wait for. */
static void writer_stop(struct run *s, struct wstate *x)
{
	stall_end(x, s->now);
	x->done = true;
	x->done_ns = s->now;
	s->left--;
}

/*
 * Writer i found no memory for its block (at ooff of object x->o, bs
 * bytes): the whole wait is one pause. Naive flushes and commits
 * everything first; no-reclaim-wait takes what reclaim freed at once, and
 * is OOM-killed when its domain holds only dirty data and writeback. True
 * when the writer is done for this step (waiting, or killed); else *g and
 * *b are what the last us_buf_get() answered.
 */
static bool writer_full(struct run *s, int i, uint64_t ooff, uint64_t bs, int *g, us_buf **b,
			uint64_t *pause)
{
	const struct sim_config *c = s->c;
	const struct sim_stripe *st = stripe_of(c, i);
	struct wstate *x = &s->w[i];

	if (!x->blocked) {
		x->blocked = true;
		x->blocked_since = s->now;
	}
	if (c->policy == SIM_POLICY_NAIVE) {
		/* Full: flush everything, commit, wait; and again at each
		 * retry (every stripe). */
		int q;

		for (q = 0; q < (st ? st->n : 1); q++) {
			us_object *o = st ? x->objs[q] : x->o;

			us_object_flush(o, 0, UINT64_MAX, 0);
			us_object_commit(o);
		}
	}
	us_object_reclaim(x->o, bs, pause);
	if (c->policy == SIM_POLICY_NO_RECLAIM_WAIT) {
		/* What reclaim freed at once, then no waiting. */
		*g = us_buf_get(x->o, ooff, bs, US_GET_NODATA | US_GET_NOWAIT, b);
		if (*g == -EAGAIN && only_writeback(s->dom[c->wr[i].domain])) {
			x->oom++;
			writer_stop(s, x);
			return true;
		}
	}
	if (*g == -EAGAIN) {
		x->wait_until = s->now + (*pause ? *pause : MS);
		return true;
	}
	return false;
}

/*
 * Writer i acts once at now: past its gate if it was over its limit, it
 * takes memory for its next block (or waits for it, or stops), dirties
 * it, and copies it at its own speed; under the throttled policies it
 * then honours the pause the engine told it.
 */
static void writer_act(struct run *s, int i)
{
	const struct sim_config *c = s->c;
	struct wstate *x = &s->w[i];
	const struct sim_writer *cw = &c->wr[i];
	const struct sim_stripe *st = stripe_of(c, i);
	/* no-reclaim-wait: held by the root's thresholds only */
	bool throttled =
		c->policy == SIM_POLICY_UNSTABLE || c->policy == SIM_POLICY_NO_RECLAIM_WAIT;
	uint64_t pause = 0, bs, copy, ooff = x->off, now = s->now;
	us_buf *b;
	int g, sj = 0;

	/* Striped: the block goes to its stripe's object. */
	if (st) {
		ooff = stripe_map(st, x->off, &sj);
		x->o = x->objs[sj];
	}
	if (x->gated) {
		g = us_object_balance(x->o, &pause);
		if (g == -EAGAIN) {
			x->wait_until = now + (pause ? pause : MS);
			sim_pauses_record(&x->pauses, pause);
			return;
		}
		x->gated = false;
	}
	bs = cw->bytes - x->off < cw->bs ? cw->bytes - x->off : cw->bs;
	g = us_buf_get(x->o, ooff, bs, US_GET_NODATA | US_GET_NOWAIT, &b);
	if (g == -EAGAIN && writer_full(s, i, ooff, bs, &g, &b, &pause))
		return;
	if (x->blocked && g >= 0) {
		x->blocked = false;
		sim_pauses_record(&x->pauses, now - x->blocked_since);
	}
	if (g < 0) {
		x->enomem += g == -ENOMEM;
		writer_stop(s, x);
		return;
	}
	/* The writer writes the block: a new version of it. */
	sim_srv_dirtied(&s->srv[st ? st->bk[sj] : cw->backend], comp_loc(&s->lay, i, sj), ooff);
	g = us_buf_dirty(b, &pause);
	us_buf_put(b);
	x->off += bs;
	window_add(x, now, s->r->window_ns, bs);
	stall_end(x, now);
	/* The copy itself, at the writer's own speed: its time ends when the
	 * copy does. */
	copy = copy_ns(bs, cw->rate ? cw->rate : SIM_COPY_RATE);
	x->wait_until = x->progress_ns = now + copy;
	if (x->off >= cw->bytes) {
		x->done = true;
		x->done_ns = now + copy;
		s->left--;
	}
	s->last_pause[i] = pause;
	if (throttled) {
		sim_pauses_record(&x->pauses, pause);
		x->gated = g == US_DIRTY_OVER_LIMIT;
		x->wait_until += pause;
	}
}

/*
 * The loop of the run, one step at a time until every writer is done: the
 * trace's samples, the servers' and the engine's events due, then the
 * writers due; a step in which no writer acted moves the clock to the
 * next event of the queue, the servers or the engine.
 */
static int run_loop(struct run *s)
{
	const struct sim_config *c = s->c;
	char *err = s->err, msg[256];
	size_t len = s->len, ndue, j;
	int rc = 0;

	for (s->left = c->nwr; s->left;) {
		uint64_t t = UINT64_MAX;
		bool acted = false;

		run_trace(s);
		if (c->observe && observe(c, s->e, s->dom, s->w, msg, sizeof(msg)) < 0)
			return FAIL("at %.6f s, invariant: %s", (double)s->now / SEC, msg);
		servers_run(s->e, s->srv, s->nsrv, s->now);
		us_engine_poll(s->e, s->now, &s->next);
		/* The writers due act once each, in the order of their index. */
		ndue = wq_pop_due(&s->queue, s->now, s->due, s->tmp, s->bounds);
		/* Each goes back to the queue once done with (nothing reads the
		 * queue meanwhile, and the order of the pushes is the same):
		 * its state is still in the caches then, and not after the
		 * others' (a look at 25,000 writers' states again cost 4 % of a
		 * run of 100,000 domains). */
		for (j = 0; j < ndue; wq_push(&s->queue, s->due[j]), j++) {
			acted = true;
			writer_act(s, s->due[j]);
		}
		wq_close(&s->queue);
		if (s->queue.nomem)
			return FAIL("out of memory for %d writers", c->nwr);
		if (acted)
			continue;
		t = wq_next(&s->queue);
		if (servers_next(s->srv, s->nsrv) < t)
			t = servers_next(s->srv, s->nsrv);
		if (s->next > s->now && s->next < t)
			t = s->next;
		if (t == UINT64_MAX || t <= s->now)
			t = s->now + MS;
		s->now = t;
	}
	return rc;
}

/* The writers' end (the last one's last copy), then the final sync:
 * everything written must reach the server, durably, and the run lasts
 * until it has. */
static void run_final_sync(struct run *s)
{
	struct sim_result *r = s->r;
	us_sync *y;
	uint64_t sync_end = s->now;
	int i, k;

	r->end_ns = s->now;
	for (i = 0; i < s->c->nwr; i++)
		if (s->w[i].done_ns > r->end_ns)
			r->end_ns = s->w[i].done_ns;

	if (us_domain_sync_start(us_engine_root(s->e), NULL, NULL, &y) == 0) {
		for (k = 0; k < 10000000 && us_sync_done(y) == 0; k++) {
			uint64_t t;

			servers_run(s->e, s->srv, s->nsrv, s->now);
			us_engine_poll(s->e, s->now, &s->next);
			sync_end = s->now; /* the last poll: it may have ended the sync */
			t = servers_next(s->srv, s->nsrv);
			if (s->next > s->now && s->next < t)
				t = s->next;
			s->now = t > s->now ? t : s->now + MS;
		}
		us_sync_free(y);
	}
	r->run_ns = sync_end > r->end_ns ? sync_end : r->end_ns;
}

/* Each writer's figures: its bytes, time, pauses and stalls, the bytes it
 * lost (measured at the servers), and its throughput against its ceiling. */
static void run_writer_results(struct run *s)
{
	const struct sim_config *c = s->c;
	struct wstate *w = s->w;
	int i;

	for (i = 0; i < c->nwr; i++) {
		struct sim_writer_result *wr = &s->r->wr[i];

		wr->bytes = w[i].off;
		wr->done_ns = w[i].done_ns - c->wr[i].start_ns;
		wr->enomem = w[i].enomem;
		wr->max_pause_ns = w[i].pauses.max;
		wr->p99_pause_ns = sim_pauses_p99(&w[i].pauses);
		wr->pauses = w[i].pauses.n;
		wr->max_stall_ns = w[i].max_stall;
		wr->oom = w[i].oom;
		/* Measured: the blocks not at the server as last written. */
		wr->lost_bytes = writer_lost(c, &s->lay, s->srv, i, w[i].off);
		wr->throughput = wr->done_ns ? (double)wr->bytes / ((double)wr->done_ns / SEC) : 0;
		/* Writers share a backend: each may expect an equal share. */
		wr->ceiling = writer_ceiling(c, s->nwb, i);
		wr->ratio = wr->throughput / (double)wr->ceiling;
	}
}

/* The domains' and the backends' figures: the servers' flushes and commits
 * summed per domain of the config, the fairness over time, what each
 * backend wrote, and the domains charged above their max. */
static void run_results(struct run *s)
{
	const struct sim_config *c = s->c;
	struct sim_result *r = s->r;
	uint64_t server_commits = 0;
	size_t j;
	int i;

	run_writer_results(s);
	for (j = 0; j < (size_t)s->nsrv; j++) {
		s->bks[j] = s->srv[j].bk;
		server_commits += s->srv[j].cm.commits;
		for (i = 0; i < s->srv[j].ndom; i++) {
			s->flushes[s->lay.gdom[j][i]] += s->srv[j].flushes[i];
			s->dom_commits[s->lay.gdom[j][i]] += s->srv[j].dom_commits[i];
		}
	}
	sim_result_fill(r, c, s->dom, s->bks, s->nsrv, s->dom_commits, s->flushes, server_commits);
	r->jain_window = windows_jain(c, s->w, r->window_ns, &r->nwindows, &r->idle_windows,
				       &r->window_spread, &r->unfair_windows);
	/* The backends' part: what they wrote over the whole run. */
	r->backend_bytes = 0;
	for (j = 0; j < (size_t)s->nsrv; j++) {
		struct us_backend_stats bst = { .size = sizeof(bst) };

		if (us_backend_stats(s->srv[j].bk, &bst) == 0) {
			r->backend_bytes += bst.flush_bytes;
			if ((int)j < r->nbk)
				r->bk[j] = (struct sim_backend_result){ bst.flush_bytes,
									bst.commit_lat_ns,
									bst.write_lat_ns,
									bst.link_bw };
		}
	}
	/* Charged above max at some instant: the engine's peak says it. */
	for (i = 0; i < c->ndom; i++)
		r->dom[i].over_max =
			c->dom[i].max != UINT64_MAX && r->dom[i].peak_charged > c->dom[i].max;
}

/* Everything the run set up goes, whether it finished or not; rc is the
 * run's so far, and becomes -1 if the engine still held data at the end. */
static int run_free(struct run *s, int rc)
{
	const struct sim_config *c = s->c;
	struct wstate *w = s->w;
	char *err = s->err;
	size_t len = s->len, j;
	int i;

	for (i = 0; w && i < c->nwr; i++) {
		sim_pauses_free(&w[i].pauses);
		free(w[i].win);
	}
	for (j = 0; s->srv && j < (size_t)s->nsrv; j++)
		sim_srv_fini(&s->srv[j]);
	/* Each writer's object goes with its own buffers first: cheaper than
	 * the engine's destroy finding the oldest buffer of all domains for
	 * each of them. One still holding data stays for the engine's. */
	for (i = 0; s->e && w && i < c->nwr; i++) {
		const struct sim_stripe *st = stripe_of(c, i);

		if (w[i].objs) {
			for (j = 0; j < (size_t)st->n; j++)
				if (w[i].objs[j])
					(void)us_object_destroy(w[i].objs[j]);
			free(w[i].objs);
		} else if (w[i].o)
			(void)us_object_destroy(w[i].o);
	}
	/* The engine may still hold data if the sync could not finish: its
	 * memory goes with the process. */
	if (s->e && us_engine_destroy(s->e) != 0 && rc == 0)
		FAIL("the final sync left data behind");
	if (s->trace)
		fclose(s->trace);
	free(s->srv);
	layout_free(&s->lay);
	free(s->nwb);
	free(s->bks);
	free(s->flushes);
	free(s->dom_commits);
	free(s->dom);
	free(w);
	free(s->last_off);
	free(s->last_pause);
	wq_free(&s->queue);
	free(s->due);
	free(s->tmp);
	free(s->bounds);
	return rc;
}

int sim_run(const struct sim_config *c, struct sim_result *r, char *err, size_t len)
{
	struct run s = { .c = c, .r = r, .err = err, .len = len, .nsrv = 1 + c->nbk };
	struct timespec t0, t1;
	int rc;

	s.nw = c->nwr ? (size_t)c->nwr : 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sim_result_alloc(r, c, err, len))
		return -1;
	if (run_check_writers(c, err, len))
		return -1;
	rc = run_alloc(&s);
	/* The client knows its link's speed: the engine's first estimate of
	 * the clean-out rate, before it has measured anything (all policies). */
	if (!rc)
		rc = servers_init(c, s.e, s.srv, s.nsrv, s.nwb, &s.lay, err, len) ? -1 : 0;
	if (!rc)
		rc = sim_domains_create(s.e, c, s.dom, err, len) ? -1 : 0;
	if (!rc)
		rc = run_writers_create(&s);
	if (!rc)
		rc = run_loop(&s);
	if (!rc) {
		run_final_sync(&s);
		run_results(&s);
	}
	rc = run_free(&s, rc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return rc;
}
