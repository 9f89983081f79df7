/*
 * Writeback contexts and their bandwidth estimate.
 *
 * SPDX-License-Identifier: MIT
 *
 * BANDWIDTH
 *
 * The rate a throttled writer may dirty at is the rate its writeback
 * context cleans data: bytes that leave WRITEBACK or UNSTABLE as CLEAN, so
 * that a backend that writes fast but commits slowly is seen as slow, which
 * it is for memory. Every bw_interval (200 ms) the poller samples the bytes
 * cleaned since the last sample over the time elapsed and folds the sample
 * into a running average over bw_period (3 s), weighting it by its duration:
 *
 *     bw' = (bw * (period - elapsed) + sample * elapsed) / period
 *
 * so that one slow or fast interval moves the estimate by elapsed / period
 * of the difference (a 200 ms sample by 1/15). An interval in which the
 * context had nothing in flight and cleaned nothing says nothing about the
 * backend and is skipped: an idle context keeps its estimate.
 *
 * The commit pipeline (us__pipe_update) uses the faster of the average and
 * the last sample (us__wb_rate): a writer speeding up is not held to the
 * average of slower times. An idle sample forgets the last one.
 *
 * Worked example: bw = 100 MiB/s, a 200 ms sample in which 30 MiB were
 * cleaned (150 MiB/s): bw' = (100 * 2.8 + 150 * 0.2) / 3 = 103.3 MiB/s.
 */
#include "internal.h"

int us__wb_attach(us_object *o)
{
	us_engine *e = o->engine;
	struct us_list *pos;
	struct us_wb *wb;

	us_list_for_each (pos, &o->domain->wbs) {
		wb = us_container_of(pos, struct us_wb, dom_link);
		if (wb->backend == o->backend) {
			wb->nobjects++;
			o->wb = wb;
			return 0;
		}
	}
	wb = us__meta_alloc(e, sizeof(*wb));
	if (!wb)
		return -ENOMEM;
	wb->backend = o->backend;
	wb->domain = o->domain;
	us_list_init(&wb->dirty_objs);
	us_list_add_tail(&o->backend->wbs, &wb->bk_link);
	us_list_add_tail(&o->domain->wbs, &wb->dom_link);
	wb->bw = e->init_bw;
	wb->bw_stamp_ns = us__now(e);
	wb->nobjects = 1;
	o->wb = wb;
	return 0;
}

void us__wb_detach(us_object *o)
{
	struct us_wb *wb = o->wb;

	o->wb = NULL;
	if (--wb->nobjects)
		return;
	assert(us_list_empty(&wb->dirty_objs) && !wb->dirty && !wb->writeback && !wb->unstable);
	for (us_domain *a = wb->domain; a; a = a->parent)
		a->bw_sum -= min_u64(wb->bw_counted, a->bw_sum);
	us_list_del(&wb->bk_link);
	us_list_del(&wb->dom_link);
	us__meta_free(o->engine, wb, sizeof(*wb));
}

/*
 * The link's rate, per backend: bytes whose write completed over the time
 * writes were in flight, at least 10 ms of it (the first write's latency
 * alone says little), averaged with the last. Unlike the clean-out rate it
 * is not bounded by the writers' own rate, so a writer held back by a small
 * threshold does not keep the threshold small; and all the contexts of a
 * backend share it, so a context is not paced by how much of the backend it
 * got before (which would feed on itself). Sampled every bw_interval, and as
 * soon as it can be before the first.
 */
static bool link_sample(us_engine *e, us_backend *bk, uint64_t now)
{
	uint64_t busy = bk->busy_ns + (bk->writeback ? now - bk->busy_since_ns : 0);
	uint64_t dt = busy - bk->wbw_busy, dw = bk->written - bk->wbw_written;
	double r;

	if ((bk->wbw && now < bk->wbw_stamp_ns + e->bw_interval_ns) || dt < 10 * US_MSEC || !dw)
		return false;
	r = (double)dw * 1e9 / (double)dt;
	bk->wbw = bk->wbw ? (uint64_t)(((double)bk->wbw + r) / 2) : (uint64_t)r;
	bk->wbw_busy = busy;
	bk->wbw_written = bk->written;
	bk->wbw_stamp_ns = now;
	return true;
}

bool us__wb_sample(us_engine *e, struct us_wb *wb, uint64_t now)
{
	uint64_t elapsed, delta;
	double sample, bw;

	bool link = link_sample(e, wb->backend, now);

	if (now < wb->bw_stamp_ns + e->bw_interval_ns)
		return link;
	elapsed = now - wb->bw_stamp_ns;
	delta = wb->cleaned - wb->bw_cleaned;
	wb->bw_stamp_ns = now;
	wb->bw_cleaned = wb->cleaned;
	if (delta == 0 && wb->writeback == 0 && wb->unstable == 0) {
		wb->bw_last = 0; /* idle: nothing learnt, and no burst to keep */
		return true;
	}
	sample = (double)delta * 1e9 / (double)elapsed;
	wb->bw_last = sample < 1.0 ? 1 : (uint64_t)sample;
	if (elapsed >= e->bw_period_ns)
		bw = sample;
	else
		bw = ((double)wb->bw * (double)(e->bw_period_ns - elapsed) +
		      sample * (double)elapsed) /
		     (double)e->bw_period_ns;
	/* Never 0: a stalled backend is slow, not infinitely slow. */
	wb->bw = bw < 1.0 ? 1 : (uint64_t)bw;
	return true;
}

/*
 * The clean-out rate the pipeline uses: the running average, unless the last
 * sample saw the context clean faster (a writer ramping up must not be held
 * to the average of slower times).
 */
uint64_t us__wb_rate(const struct us_wb *wb)
{
	return wb->bw > wb->bw_last ? wb->bw : wb->bw_last;
}

/*
 * The rate data goes out at, for the pipeline and for pacing writers: the
 * link's once measured, else the clean-out rate. Commits clean in batches,
 * so over a 200 ms sample the clean-out rate swings between 0 and many
 * times the link's; the link's does not, and bounds it in the long run.
 */
uint64_t us__wb_link_rate(const struct us_wb *wb)
{
	return wb->backend->wbw ? wb->backend->wbw : us__wb_rate(wb);
}

void us__commit_latency(us_backend *bk, uint64_t ns)
{
	/* The pipeline is recomputed at the next bandwidth sample; but the
	 * backend's first commit gives it its first latency at once (a walk of
	 * the tree, once per backend), so a writer is not held for 200 ms. */
	if (bk->commit_lat_ns) {
		bk->commit_lat_ns = (3 * bk->commit_lat_ns + ns) / 4;
		return;
	}
	bk->commit_lat_ns = ns ? ns : 1;
	us__pipe_update(bk->engine->root);
}

/*
 * The bytes d's subtree holds in its commit pipelines: for each writeback
 * context, the faster of its bandwidth estimate and its last sample, times
 * its backend's commit latency. Data written at rate r stays unstable for
 * one to two commit latencies C when commits run back to back, so a
 * threshold below about 2 r C stops the writers whatever the backend's
 * speed; throttle.c raises ratio thresholds to keep room for it.
 */
void us__pipe_update(us_domain *d)
{
	struct us_list *pos;
	double pipe = 0;
	uint64_t sum = 0;

	us_list_for_each (pos, &d->wbs) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);
		uint64_t bw = us__wb_rate(wb);

		pipe += (double)us__wb_link_rate(wb) * (double)wb->backend->commit_lat_ns / 1e9;
		/* Active: writing, or its unstable data being committed; unstable
		 * data left waiting (its writers gone quiet) takes no share. */
		wb->bw_counted = wb->dirty || wb->writeback ||
						 (wb->unstable && (wb->backend->sync_target ||
								   wb->backend->commits_busy)) ?
					 bw :
					 0;
		sum = sat_add(sum, wb->bw_counted);
	}
	us_list_for_each (pos, &d->children) {
		us_domain *c = us_container_of(pos, us_domain, sibling);

		us__pipe_update(c);
		pipe += (double)c->pipe_bytes;
		sum = sat_add(sum, c->bw_sum);
	}
	d->bw_sum = sum;
	/* Up at once, down by an eighth of the difference per update: a
	 * threshold that dropped under the writers' feet would stop them. */
	if (pipe < (double)d->pipe_bytes) {
		pipe = (double)d->pipe_bytes - ((double)d->pipe_bytes - pipe) / 8;
		/* Thresholds may fall: credit granted against them goes. */
		if (d->granted)
			us__credit_revoke(d);
	}
	d->pipe_bytes = pipe >= 1.8e19 ? UINT64_MAX : (uint64_t)pipe;
}

uint64_t us_object_bandwidth(const us_object *o)
{
	uint64_t bw;

	if (!o)
		return 0;
	us__lock(o->engine);
	bw = o->wb->bw;
	us__unlock(o->engine);
	return bw;
}
