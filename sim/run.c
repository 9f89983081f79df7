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
 * commit taking commit_lat; then commit_done(its last transaction).
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
 * (only the root's thresholds, from --memory, hold the writer), and a charge
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
	us_object *o;
	uint64_t off, wait_until, done_ns, enomem;
	struct sim_pauses pauses;
	uint64_t blocked_since; /* naive: full since then */
	uint64_t progress_ns;	/* its last block's copy ended then (start: its start) */
	uint64_t max_stall, oom;
	bool gated, done, blocked;
};

/*
 * The writers waiting, by the time they act next (then by index): a binary
 * min-heap, so that a step costs the writers due, not all of them.
 */
struct wheap {
	int *v;
	size_t n;
	const struct wstate *w;
};

static bool wh_before(const struct wheap *h, int a, int b)
{
	return h->w[a].wait_until != h->w[b].wait_until ? h->w[a].wait_until < h->w[b].wait_until :
							  a < b;
}

static void wh_push(struct wheap *h, int i)
{
	size_t k = h->n++;

	while (k && wh_before(h, i, h->v[(k - 1) / 2])) {
		h->v[k] = h->v[(k - 1) / 2];
		k = (k - 1) / 2;
	}
	h->v[k] = i;
}

static int wh_pop(struct wheap *h)
{
	int top = h->v[0], last = h->v[--h->n];
	size_t k = 0;

	for (;;) {
		size_t c = 2 * k + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && wh_before(h, h->v[c + 1], h->v[c]))
			c++;
		if (!wh_before(h, h->v[c], last))
			break;
		h->v[k] = h->v[c];
		k = c;
	}
	if (h->n)
		h->v[k] = last;
	return top;
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

/* no-reclaim-wait: what holds domain d is only dirty data and data under
 * writeback, which a pre-fix memcg reclaim could neither write nor wait for. */
static bool only_writeback(const us_domain *d)
{
	struct us_domain_stats st = { .size = sizeof(st) };

	return us_domain_stats(d, &st) == 0 && !st.evictable_bytes && !st.unstable_bytes &&
	       st.dirty_bytes + st.writeback_bytes > 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
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
		    /* naive: no curve, no background writeback; no-reclaim-wait:
		     * no throttling per domain, only the root's */
		    ((c->policy == SIM_POLICY_NAIVE || c->policy == SIM_POLICY_NO_RECLAIM_WAIT) &&
		     (us_domain_set_limit(dom[i], US_LIMIT_DIRTY_RATIO, 100) ||
		      us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_RATIO, 99))) ||
		    (d->max != UINT64_MAX && us_domain_set_limit(dom[i], US_LIMIT_MAX, d->max)) ||
		    (d->high != UINT64_MAX &&
		     us_domain_set_limit(dom[i], US_LIMIT_HIGH, d->high)) ||
		    (d->bg && us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_BYTES, d->bg)) ||
		    (d->bg_pct &&
		     us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BG_RATIO, d->bg_pct)) ||
		    (d->dirty && us_domain_set_limit(dom[i], US_LIMIT_DIRTY_BYTES, d->dirty)) ||
		    (d->dirty_pct &&
		     us_domain_set_limit(dom[i], US_LIMIT_DIRTY_RATIO, d->dirty_pct))) {
			snprintf(err, len, "domain %s: the engine refused its limits", d->name);
			return -1;
		}
	}
	return 0;
}

#define FAIL(...) (snprintf(err, len, __VA_ARGS__), rc = -1)

int sim_run(const struct sim_config *c, struct sim_result *r, char *err, size_t len)
{
	struct us_engine_options opts;
	struct sim_srv s;
	struct sim_srv_writer *lay = NULL;
	us_engine *e = NULL;
	us_domain **dom = NULL;
	struct wstate *w = NULL;
	struct timespec t0, t1;
	uint64_t now = 0, next = 0, next_sample = 0, last_sample = 0;
	uint64_t *last_off = NULL, *last_pause = NULL;
	size_t nw = c->nwr ? (size_t)c->nwr : 1, ndue, j;
	struct wheap heap = { NULL, 0, NULL };
	int *due = NULL;
	FILE *trace = NULL;
	int i, left, rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&s, 0, sizeof(s));
	if (sim_result_alloc(r, c, err, len))
		return -1;
	lay = calloc(nw, sizeof(*lay));
	dom = calloc(c->ndom ? (size_t)c->ndom : 1, sizeof(*dom));
	w = calloc(nw, sizeof(*w));
	last_off = calloc(nw, sizeof(*last_off));
	last_pause = calloc(nw, sizeof(*last_pause));
	heap.v = calloc(nw, sizeof(*heap.v));
	heap.w = w;
	due = calloc(nw, sizeof(*due));
	if (!lay || !dom || !w || !last_off || !last_pause || !heap.v || !due) {
		FAIL("out of memory for %d writers and %d domains", c->nwr, c->ndom);
		goto out;
	}
	if (c->trace) {
		trace = fopen(c->trace, "w");
		if (!trace) {
			FAIL("cannot write %s", c->trace);
			goto out;
		}
		fprintf(trace, "time_s,kind,name,dirty,writeback,unstable,charged,bg_thresh,"
			       "dirty_thresh,rate,pause_ms\n");
	}
	for (i = 0; i < c->nwr; i++)
		lay[i] = (struct sim_srv_writer){ c->wr[i].bytes, c->wr[i].bs, c->wr[i].domain };
	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = c->memory;
	if (us_engine_create(&opts, &e)) {
		FAIL("cannot create the engine");
		goto out;
	}
	/* The client knows its link's speed: the engine's first estimate of
	 * the clean-out rate, before it has measured anything (all policies). */
	if (us_engine_set_param(e, US_PARAM_INIT_BW, c->backend.bw) ||
	    us_engine_set_param(e, US_PARAM_FORCE_COMMIT, c->policy == SIM_POLICY_UNSTABLE) ||
	    us_engine_set_param(e, US_PARAM_MAX_FLUSH_BYTES, c->backend.rpc) ||
	    sim_srv_init_domains(&s, e, &c->backend, lay, c->nwr, c->ndom) ||
	    us_backend_set_max_inflight(s.bk, c->backend.rpcs * c->backend.rpc)) {
		FAIL("cannot set up the backend");
		goto out;
	}
	if (sim_domains_create(e, c, dom, err, len)) {
		rc = -1;
		goto out;
	}
	for (i = 0; i < c->nwr; i++) {
		/* The server knows the writer by its index. */
		if (us_object_create(s.bk, dom[c->wr[i].domain], (void *)(intptr_t)i, &w[i].o)) {
			FAIL("cannot create writer %d", i);
			goto out;
		}
		w[i].wait_until = w[i].progress_ns = c->wr[i].start_ns;
		wh_push(&heap, i);
	}

	for (left = c->nwr; left;) {
		uint64_t t = UINT64_MAX;
		bool acted = false;

		/* The time series: per domain its bytes and thresholds, per
		 * writer its rate since the last sample and its last pause. */
		if (trace && now >= next_sample) {
			double dt = now > last_sample ? (double)(now - last_sample) / SEC : 0;

			for (i = 0; i < c->ndom; i++) {
				struct us_domain_stats st = { .size = sizeof(st) };
				struct us_domain_limits lim = { .size = sizeof(lim) };

				us_domain_stats(dom[i], &st);
				us_domain_effective_limits(dom[i], &lim);
				fprintf(trace, "%.3f,domain,%s,%llu,%llu,%llu,%llu,%llu,%llu,,\n",
					(double)now / SEC, c->dom[i].name,
					(unsigned long long)st.dirty_bytes,
					(unsigned long long)st.writeback_bytes,
					(unsigned long long)st.unstable_bytes,
					(unsigned long long)st.charged_bytes,
					(unsigned long long)lim.bg_thresh_bytes,
					(unsigned long long)lim.dirty_thresh_bytes);
			}
			for (i = 0; i < c->nwr; i++) {
				fprintf(trace, "%.3f,writer,%d,,,,,,,%.0f,%.3f\n",
					(double)now / SEC, i,
					dt > 0 ? (double)(w[i].off - last_off[i]) / dt : 0,
					(double)last_pause[i] / 1e6);
				last_off[i] = w[i].off;
			}
			last_sample = now;
			next_sample = now + (c->trace_every_ns ? c->trace_every_ns : 100 * MS);
		}

		sim_srv_run(&s, now);
		us_engine_poll(e, now, &next);
		/* The writers due act once each, in the order of their index. */
		for (ndue = 0; heap.n && w[heap.v[0]].wait_until <= now;)
			due[ndue++] = wh_pop(&heap);
		qsort(due, ndue, sizeof(*due), cmp_int);
		for (j = 0; j < ndue; j++) {
			struct wstate *x = &w[i = due[j]];
			const struct sim_writer *cw = &c->wr[i];
			bool throttled = c->policy == SIM_POLICY_UNSTABLE;
			uint64_t pause = 0, bs, copy;
			us_buf *b;
			int g;

			acted = true;
			if (x->gated) {
				g = us_object_balance(x->o, &pause);
				if (g == -EAGAIN) {
					x->wait_until = now + (pause ? pause : MS);
					sim_pauses_record(&x->pauses, pause);
					continue;
				}
				x->gated = false;
			}
			bs = cw->bytes - x->off < cw->bs ? cw->bytes - x->off : cw->bs;
			g = us_buf_get(x->o, x->off, bs, US_GET_NODATA | US_GET_NOWAIT, &b);
			if (g == -EAGAIN) {
				/* Waiting for memory: the whole wait is one pause. */
				if (!x->blocked) {
					x->blocked = true;
					x->blocked_since = now;
				}
				if (c->policy == SIM_POLICY_NAIVE) {
					/* Full: flush everything, commit, wait; and
					 * again at each retry. */
					us_object_flush(x->o, 0, UINT64_MAX, 0);
					us_object_commit(x->o);
				}
				us_object_reclaim(x->o, bs, &pause);
				if (c->policy == SIM_POLICY_NO_RECLAIM_WAIT) {
					/* What reclaim freed at once, then no waiting. */
					g = us_buf_get(x->o, x->off, bs,
						       US_GET_NODATA | US_GET_NOWAIT, &b);
					if (g == -EAGAIN && only_writeback(dom[cw->domain])) {
						x->oom++;
						stall_end(x, now);
						x->done = true;
						x->done_ns = now;
						left--;
						continue;
					}
				}
				if (g == -EAGAIN) {
					x->wait_until = now + (pause ? pause : MS);
					continue;
				}
			}
			if (x->blocked && g >= 0) {
				x->blocked = false;
				sim_pauses_record(&x->pauses, now - x->blocked_since);
			}
			if (g < 0) {
				x->enomem += g == -ENOMEM;
				stall_end(x, now);
				x->done = true;
				x->done_ns = now;
				left--;
				continue;
			}
			/* The writer writes the block: a new version of it. */
			sim_srv_dirtied(&s, i, x->off);
			g = us_buf_dirty(b, &pause);
			us_buf_put(b);
			x->off += bs;
			stall_end(x, now);
			/* The copy itself, at the writer's own speed: its time
			 * ends when the copy does. */
			copy = copy_ns(bs, cw->rate ? cw->rate : SIM_COPY_RATE);
			x->wait_until = x->progress_ns = now + copy;
			if (x->off >= cw->bytes) {
				x->done = true;
				x->done_ns = now + copy;
				left--;
			}
			last_pause[i] = pause;
			if (throttled) {
				sim_pauses_record(&x->pauses, pause);
				x->gated = g == US_DIRTY_OVER_LIMIT;
				x->wait_until += pause;
			}
		}
		for (j = 0; j < ndue; j++)
			if (!w[due[j]].done)
				wh_push(&heap, due[j]);
		if (acted)
			continue;
		if (heap.n)
			t = w[heap.v[0]].wait_until;
		if (sim_srv_next(&s) < t)
			t = sim_srv_next(&s);
		if (next > now && next < t)
			t = next;
		if (trace && next_sample > now && next_sample < t)
			t = next_sample;
		if (t == UINT64_MAX || t <= now)
			t = now + MS;
		now = t;
	}
	/* The writers' end: the last one's last copy. */
	r->end_ns = now;
	for (i = 0; i < c->nwr; i++)
		if (w[i].done_ns > r->end_ns)
			r->end_ns = w[i].done_ns;

	/* The final sync: everything written must reach the server, durably. */
	{
		us_sync *y;
		uint64_t sync_end = now;
		int k;

		if (us_domain_sync_start(us_engine_root(e), NULL, NULL, &y) == 0) {
			for (k = 0; k < 10000000 && us_sync_done(y) == 0; k++) {
				uint64_t t;

				sim_srv_run(&s, now);
				us_engine_poll(e, now, &next);
				sync_end = now; /* the last poll: it may have ended the sync */
				t = sim_srv_next(&s);
				if (next > now && next < t)
					t = next;
				now = t > now ? t : now + MS;
			}
			us_sync_free(y);
		}
		r->run_ns = sync_end > r->end_ns ? sync_end : r->end_ns;
	}

	for (i = 0; i < c->nwr; i++) {
		struct sim_writer_result *wr = &r->wr[i];

		wr->bytes = w[i].off;
		wr->done_ns = w[i].done_ns - c->wr[i].start_ns;
		wr->enomem = w[i].enomem;
		wr->max_pause_ns = w[i].pauses.max;
		wr->p99_pause_ns = sim_pauses_p99(&w[i].pauses);
		wr->max_stall_ns = w[i].max_stall;
		wr->oom = w[i].oom;
		/* Measured: the blocks not at the server as last written. */
		wr->lost_bytes = sim_srv_lost_bytes(&s, i, w[i].off);
		wr->throughput = wr->done_ns ? (double)wr->bytes / ((double)wr->done_ns / SEC) : 0;
		wr->ceiling = c->wr[i].rate ? c->wr[i].rate : SIM_COPY_RATE;
		/* Writers share the backend: each may expect an equal share. */
		if (c->backend.bw / (uint64_t)c->nwr < wr->ceiling)
			wr->ceiling = c->backend.bw / (uint64_t)c->nwr;
		wr->ratio = wr->throughput / (double)wr->ceiling;
	}
	sim_result_fill(r, c, dom, s.bk, s.dom_commits, s.flushes, s.cm.commits);
	{
		struct us_backend_stats bst = { .size = sizeof(bst) };

		/* The backend's part: what it wrote over the whole run. */
		if (us_backend_stats(s.bk, &bst) == 0)
			r->backend_bytes = bst.flush_bytes;
	}
	/* Charged above max at some instant: the engine's peak says it. */
	for (i = 0; i < c->ndom; i++)
		r->dom[i].over_max =
			c->dom[i].max != UINT64_MAX && r->dom[i].peak_charged > c->dom[i].max;
out:
	for (i = 0; w && i < c->nwr; i++)
		sim_pauses_free(&w[i].pauses);
	sim_srv_fini(&s);
	/* Each writer's object goes with its own buffers first: cheaper than
	 * the engine's destroy finding the oldest buffer of all domains for
	 * each of them. One still holding data stays for the engine's. */
	for (i = 0; e && w && i < c->nwr; i++)
		if (w[i].o)
			(void)us_object_destroy(w[i].o);
	/* The engine may still hold data if the sync could not finish: its
	 * memory goes with the process. */
	if (e && us_engine_destroy(e) != 0 && rc == 0)
		FAIL("the final sync left data behind");
	if (trace)
		fclose(trace);
	free(lay);
	free(dom);
	free(w);
	free(last_off);
	free(last_pause);
	free(heap.v);
	free(due);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return rc;
}
