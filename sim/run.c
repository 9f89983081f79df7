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
 * for a commit and waits (the wait counts as its pause).
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
	bool gated, done, blocked;
};

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
	struct sim_srv_writer lay[SIM_MAX_WRITERS];
	us_engine *e = NULL;
	us_domain *dom[SIM_MAX_DOMAINS];
	struct wstate w[SIM_MAX_WRITERS];
	struct timespec t0, t1;
	uint64_t now = 0, next = 0, next_sample = 0, last_sample = 0;
	uint64_t last_off[SIM_MAX_WRITERS] = { 0 }, last_pause[SIM_MAX_WRITERS] = { 0 };
	FILE *trace = NULL;
	int i, left, rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(r, 0, sizeof(*r));
	if (c->trace) {
		trace = fopen(c->trace, "w");
		if (!trace) {
			snprintf(err, len, "cannot write %s", c->trace);
			return -1;
		}
		fprintf(trace, "time_s,kind,name,dirty,writeback,unstable,charged,bg_thresh,"
			       "dirty_thresh,rate,pause_ms\n");
	}
	memset(&s, 0, sizeof(s));
	memset(w, 0, sizeof(w));
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
	    sim_srv_init(&s, e, &c->backend, lay, c->nwr) ||
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
		w[i].wait_until = c->wr[i].start_ns;
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
		for (i = 0; i < c->nwr; i++) {
			struct wstate *x = &w[i];
			const struct sim_writer *cw = &c->wr[i];
			bool throttled = c->policy == SIM_POLICY_UNSTABLE;
			uint64_t pause = 0, bs;
			us_buf *b;
			int g;

			if (x->done)
				continue;
			if (now < x->wait_until) {
				if (x->wait_until < t)
					t = x->wait_until;
				continue;
			}
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
				x->wait_until = now + (pause ? pause : MS);
				continue;
			}
			if (x->blocked && g >= 0) {
				x->blocked = false;
				sim_pauses_record(&x->pauses, now - x->blocked_since);
			}
			if (g < 0) {
				x->enomem += g == -ENOMEM;
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
			/* The copy itself, at the writer's own speed. */
			x->wait_until =
				now + (uint64_t)((double)bs * SEC /
						 (double)(cw->rate ? cw->rate : SIM_COPY_RATE));
			if (x->off >= cw->bytes) {
				x->done = true;
				x->done_ns = now;
				left--;
			}
			last_pause[i] = pause;
			if (throttled) {
				sim_pauses_record(&x->pauses, pause);
				x->gated = g == US_DIRTY_OVER_LIMIT;
				x->wait_until += pause;
			}
		}
		for (i = 0; i < c->ndom; i++) {
			struct us_domain_stats st = { .size = sizeof(st) };

			us_domain_stats(dom[i], &st);
			if (c->dom[i].max != UINT64_MAX && st.charged_bytes > c->dom[i].max)
				r->dom[i].over_max = true;
		}
		if (acted)
			continue;
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
	r->end_ns = now;

	/* The final sync: everything written must reach the server, durably. */
	{
		us_sync *y;
		int k;

		if (us_domain_sync_start(us_engine_root(e), NULL, NULL, &y) == 0) {
			for (k = 0; k < 10000000 && us_sync_done(y) == 0; k++) {
				uint64_t t;

				sim_srv_run(&s, now);
				us_engine_poll(e, now, &next);
				t = sim_srv_next(&s);
				if (next > now && next < t)
					t = next;
				now = t > now ? t : now + MS;
			}
			us_sync_free(y);
		}
	}

	for (i = 0; i < c->nwr; i++) {
		struct sim_writer_result *wr = &r->wr[i];

		wr->bytes = w[i].off;
		wr->done_ns = w[i].done_ns - c->wr[i].start_ns;
		wr->enomem = w[i].enomem;
		wr->max_pause_ns = w[i].pauses.max;
		wr->p99_pause_ns = sim_pauses_p99(&w[i].pauses);
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
out:
	for (i = 0; i < c->nwr; i++)
		sim_pauses_free(&w[i].pauses);
	sim_srv_fini(&s);
	/* The engine may still hold data if the sync could not finish: its
	 * memory goes with the process. */
	if (e && us_engine_destroy(e) != 0 && rc == 0)
		FAIL("the final sync left data behind");
	if (trace)
		fclose(trace);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->wall_seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	return rc;
}
