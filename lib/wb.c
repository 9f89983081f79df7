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
	us_list_del(&wb->bk_link);
	us_list_del(&wb->dom_link);
	us__meta_free(o->engine, wb, sizeof(*wb));
}

void us__wb_sample(us_engine *e, struct us_wb *wb, uint64_t now)
{
	uint64_t elapsed, delta;
	double sample, bw;

	if (now < wb->bw_stamp_ns + e->bw_interval_ns)
		return;
	elapsed = now - wb->bw_stamp_ns;
	delta = wb->cleaned - wb->bw_cleaned;
	wb->bw_stamp_ns = now;
	wb->bw_cleaned = wb->cleaned;
	if (delta == 0 && wb->writeback == 0 && wb->unstable == 0)
		return; /* idle: nothing learnt */
	sample = (double)delta * 1e9 / (double)elapsed;
	if (elapsed >= e->bw_period_ns)
		bw = sample;
	else
		bw = ((double)wb->bw * (double)(e->bw_period_ns - elapsed) +
		      sample * (double)elapsed) /
		     (double)e->bw_period_ns;
	/* Never 0: a stalled backend is slow, not infinitely slow. */
	wb->bw = bw < 1.0 ? 1 : (uint64_t)bw;
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
