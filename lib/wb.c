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
	us_list_init(&wb->dirty_link);
	us_list_init(&wb->flight_link);
	us_list_init(&wb->busy_link);
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
	assert(us_list_empty(&wb->dirty_link) && us_list_empty(&wb->flight_link));
	us_list_del(&wb->busy_link);
	us_list_del(&wb->bk_link);
	us_list_del(&wb->dom_link);
	us__meta_free(o->engine, wb, sizeof(*wb));
}

/*
 * The backend's lists of contexts with dirty data and with data in flight,
 * and its count of contexts with either, kept as the counters change, so
 * that the poll visits only the contexts that have something to write and
 * counts what is in flight without a walk of every context. A context
 * with pinned data also joins the list of those whose bandwidth is
 * sampled, in the order of their samples' stamps; the poll takes it off
 * after its first idle sample. A context
 * whose dirty data comes back joins the end of the turn order.
 */
void us__wb_lists(struct us_wb *wb)
{
	us_backend *bk = wb->backend;
	bool was = !us_list_empty(&wb->dirty_link) || !us_list_empty(&wb->flight_link);

	if (wb->dirty && us_list_empty(&wb->dirty_link))
		us_list_add_tail(&bk->dirty_wbs, &wb->dirty_link);
	else if (!wb->dirty && !us_list_empty(&wb->dirty_link))
		us_list_del(&wb->dirty_link);
	if (wb->writeback && us_list_empty(&wb->flight_link))
		us_list_add_tail(&bk->flight_wbs, &wb->flight_link);
	else if (!wb->writeback && !us_list_empty(&wb->flight_link))
		us_list_del(&wb->flight_link);
	bool pinned = wb->dirty || wb->writeback || wb->unstable;

	/* Idle to busy: a new bandwidth window starts now (buf.c), so it goes
	 * to the end of the list, which stays in bw_stamp_ns order. */
	if (pinned && !wb->pinned) {
		us_list_del(&wb->busy_link);
		us_list_add_tail(&bk->busy_wbs, &wb->busy_link);
	}
	wb->pinned = pinned;
	if (was != (wb->dirty || wb->writeback)) {
		if (was)
			bk->nactive--;
		else
			bk->nactive++;
	}
}

bool us__wb_sample(us_engine *e, struct us_wb *wb, uint64_t now)
{
	uint64_t elapsed, delta;
	double sample, bw;

	if (now < wb->bw_stamp_ns + e->bw_interval_ns)
		return false;
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

	us_list_for_each (pos, &d->wbs) {
		const struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);
		uint64_t bw = us__wb_rate(wb);

		pipe += (double)bw * (double)wb->backend->commit_lat_ns / 1e9;
	}
	us_list_for_each (pos, &d->children) {
		us_domain *c = us_container_of(pos, us_domain, sibling);

		us__pipe_update(c);
		pipe += (double)c->pipe_bytes;
	}
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
