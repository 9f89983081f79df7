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

/* The pipelines' decay list (see us__pipe_update()). */
static void decay_link(us_engine *e, us_domain *d)
{
	if (!d->pipe_decay_link.next)
		us_list_add_tail(&e->pipe_decay, &d->pipe_decay_link);
}

static void decay_unlink(us_domain *d)
{
	if (d->pipe_decay_link.next) {
		us_list_del(&d->pipe_decay_link);
		d->pipe_decay_link.next = d->pipe_decay_link.prev = NULL;
	}
}

static void bw_forget(us_domain *d, uint64_t x);

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
	us__turnq_init(&wb->gate_q);
	us_list_init(&wb->rl_writers);
	us_list_add_tail(&o->backend->wbs, &wb->bk_link);
	us_list_add_tail(&o->domain->wbs, &wb->dom_link);
	wb->bw = e->init_bw;
	wb->bw_stamp_ns = us__now(e);
	wb->rl_stamp_ns = wb->bw_stamp_ns;
	us_list_add_tail(&e->wb_samples, &wb->sample_link);
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
	bw_forget(wb->domain, wb->bw_counted);
	wb->domain->bw_join -= min_u64(wb->bw_joined, wb->domain->bw_join);
	assert(us_list_empty(&wb->dirty_link) && us_list_empty(&wb->flight_link));
	us_list_del(&wb->bk_link);
	us_list_del(&wb->dom_link);
	us_list_del(&wb->sample_link);
	/* Its pipeline leaves its domain's target: no longer sampled, the
	 * domain comes down from the next update instead. */
	if (o->domain->pipe_bytes)
		decay_link(o->engine, o->domain);
	/* Credit granted for it (tcache.c names it, never follows it) must
	 * not be spent by a context that comes at its address. */
	if (o->domain->granted)
		us__credit_revoke(o->domain);
	us__meta_free(o->engine, wb, sizeof(*wb));
}

/*
 * A write's own time in flight, its latency and transfer: the time from
 * a flush to its first completion, taken when the link was idle before
 * it (a write behind others would count their time too, which grows with
 * the queue and not with what the link needs). The least of the samples
 * of the last WLAT_WINDOW link samples or so, so that a link that slowed
 * is seen within seconds. Data spends that time in WRITEBACK before the
 * commit pipeline: pipe_own() counts it.
 */
#define WLAT_WINDOW 16

void us__wlat(us_backend *bk, uint64_t ns)
{
	if (!ns)
		ns = 1;
	if (!bk->wlat_ns || ns < bk->wlat_ns)
		bk->wlat_ns = ns;
	if (!bk->wlat_win_ns || ns < bk->wlat_win_ns)
		bk->wlat_win_ns = ns;
}

/*
 * What the writers of bk owe was priced at a guess until its link was
 * measured (init_bw, or the clean-out rate; us__wb_link_rate()): at the
 * first measures, it is priced again at the link's rate, so a writer to a
 * link faster than the guess (init_bw may be a slower backend's) is not
 * held for the time its bytes would take at the guess. Only down: a link
 * slower than thought holds its writers by its gate as it fills.
 */
static void reprice(us_engine *e, us_backend *bk, uint64_t was, uint64_t now)
{
	struct us_list *pos;

	us_list_for_each (pos, &bk->objects) {
		us_object *o = us_container_of(pos, us_object, link);
		uint64_t old = was;

		if (o->pace_ns <= now || !o->wb)
			continue;
		if (!old) {
			old = us__wb_rate(o->wb);
			if (old < e->init_bw)
				old = e->init_bw;
		}
		if (bk->wbw > old)
			o->pace_ns = now + (uint64_t)((double)(o->pace_ns - now) * (double)old /
						      (double)bk->wbw);
	}
}

/*
 * The link's rate, per backend: bytes whose write completed over the time
 * writes were in flight, at least 10 ms of it (the first write's latency
 * alone says little; but see wbw_early below), averaged with the last.
 * Unlike the clean-out rate it is not bounded by the writers' own rate, so
 * a writer held back by a small threshold does not keep the threshold
 * small; and all the contexts of a backend share it, so a context is not
 * paced by how much of the backend it got before (which would feed on
 * itself). Sampled with its contexts, every bw_interval; the first, by the
 * poll, as soon as 10 ms of writes tell it (until then the pipelines are
 * sized by init_bw).
 */
bool us__link_sample(us_engine *e, us_backend *bk, uint64_t now)
{
	uint64_t busy = bk->busy_ns + (bk->writeback ? now - bk->busy_since_ns : 0);
	uint64_t dt = busy - bk->wbw_busy, dw = bk->written - bk->wbw_written;
	double r;

	if ((bk->wbw && !bk->wbw_early && now < bk->wbw_stamp_ns + e->bw_interval_ns) || !dt || !dw)
		return false;
	r = (double)dw * 1e9 / (double)dt;
	/*
	 * The first sample waits for 10 ms of writes (a write's latency
	 * weighs too much in less). But a link that beats init_bw sooner is
	 * taken at what it showed so far meanwhile (wbw_early), or its writers,
	 * paced at init_bw, would take seconds to keep it busy 10 ms (beside a
	 * slow backend that set init_bw); the sample at 10 ms replaces it.
	 */
	if (dt < 10 * US_MSEC && ((bk->wbw && !bk->wbw_early) || r <= (double)e->init_bw ||
				  (bk->wbw_early && r <= (double)bk->wbw)))
		return false;
	if (!bk->wbw || bk->wbw_early) {
		uint64_t was = bk->wbw;

		bk->wbw = (uint64_t)r;
		bk->wbw_early = dt < 10 * US_MSEC;
		reprice(e, bk, was, now);
		if (bk->wbw_early)
			return true; /* the counts go on to the sample at 10 ms */
	} else {
		bk->wbw = (uint64_t)(((double)bk->wbw + r) / 2);
	}
	bk->wbw_busy = busy;
	bk->wbw_written = bk->written;
	bk->wbw_stamp_ns = now;
	/* A window of wlat ends. */
	if (bk->wlat_left-- == 0) {
		if (bk->wlat_win_ns)
			bk->wlat_ns = bk->wlat_win_ns;
		bk->wlat_win_ns = 0;
		bk->wlat_left = WLAT_WINDOW - 1;
	}
	return true;
}

/*
 * A context that becomes active takes its share of its own domain's
 * thresholds at once (SHARES in throttle.c), not at the next pipeline
 * update: a context that starts while another of its domain writes must
 * not run on the whole of the threshold meanwhile (a writer at memory
 * speed fills it in milliseconds). Its weight is kept apart (bw_join), for
 * its domain's level only, until the next update counts it in every sum
 * of its chain (bw_own()). Ancestors' shares wait for that update: between
 * sibling domains it is their own limits that hold each.
 */
static void share_join(struct us_wb *wb)
{
	uint64_t w;

	if (wb->bw_counted || wb->bw_joined)
		return;
	w = us__wb_share_rate(wb);
	wb->bw_joined = w;
	wb->domain->bw_join = sat_add(wb->domain->bw_join, w);
}

/*
 * The backend's lists of contexts with dirty data and with data in flight,
 * and its count of contexts with either, kept as the counters change, so
 * that the poll visits only the contexts that have something to write and
 * counts what is in flight without a walk of every context. A context
 * whose dirty data comes back joins the end of the turn order.
 */
void us__wb_lists(struct us_wb *wb)
{
	us_backend *bk = wb->backend;
	bool was = !us_list_empty(&wb->dirty_link) || !us_list_empty(&wb->flight_link);

	if (wb->dirty && us_list_empty(&wb->dirty_link)) {
		us_list_add_tail(&bk->dirty_wbs, &wb->dirty_link);
		wb->turn_sent = 0;
	} else if (!wb->dirty && !us_list_empty(&wb->dirty_link))
		us_list_del(&wb->dirty_link);
	if (wb->writeback && us_list_empty(&wb->flight_link))
		us_list_add_tail(&bk->flight_wbs, &wb->flight_link);
	else if (!wb->writeback && !us_list_empty(&wb->flight_link))
		us_list_del(&wb->flight_link);
	if (was != (wb->dirty || wb->writeback)) {
		if (was) {
			bk->nactive--;
		} else {
			bk->nactive++;
			share_join(wb);
		}
	}
}

/*
 * THE WRITERS' PACE
 *
 * Every writer dirtying into a context is paused by the same rule (see
 * throttle.c): what it dirtied over the context's ratelimit times the
 * position ratio. So writers converge to equal rates whatever their block
 * sizes, and ratelimit is the rate each may have: the link's rate shared
 * among the writers that want more than they get. It is estimated at each
 * bandwidth sample from what the writers did since the last one (each
 * object that dirtied or waited is on rl_writers with its bytes and its
 * wait):
 *
 *     ratelimit = (link - free) / held
 *
 * where held counts the writers that the engine held for at least a tenth
 * of the interval (paused at their pace, at a gate, or waiting for room),
 * free is the rate of the others (writers slower than any share: they are
 * given what they take), and link is the context's part of its backend's
 * link (us__wb_link_rate()), or what its domains' max lets through if
 * that is less (pipe_bound()). It is never below link / (all writers), nor
 * above link. A fall is taken at once (a writer arrived: the others make
 * room for it from the next sample on); a rise moves half-way (a writer
 * left, or is slower than thought: the others take its share over a few
 * samples, which filters a noisy interval). An interval in which nobody
 * was held moves it half-way back to link (a writer alone).
 *
 * Worked example: link = 100 MiB/s, ratelimit = 100 MiB/s; four writers
 * are held and a fifth dirtied 10 MiB in a 200 ms interval without
 * waiting: free = 50 MiB/s, ratelimit = (100 - 50) / 4 = 12.5 MiB/s; above
 * the floor of 100 / 5 = 20 MiB/s, so 20 MiB/s.
 */
/*
 * A writer held by the engine that got less than its held siblings' mean
 * over the interval is paced a little faster from then on, one that got
 * more a little slower: its pace is multiplied by fair, moved by a quarter
 * of the way of mean / its bytes at each estimate, within [1/2, 2]. The
 * rule prices every byte alike, but a writer of large blocks, each
 * dirtied at once, meets the position ratio where its own block took it
 * (4 writers, 1 ms commits, 10 MiB: the 1 MiB writer got 0.92 of the
 * others' rate, and 0.6 in some windows); the feedback evens out what the
 * rule leaves. A writer not held (it takes less than a share), or held
 * alone, or one whose blocks are more than two thirds of what the held
 * writers dirty in an estimate (2 MiB/s links with 1 MiB blocks: one
 * comes in an interval or not), moves back half-way to 1; and so do all
 * the writers of a context where one held writer's blocks are (their mean
 * is then noise: with 10 s commits, correcting the writers of 4 KiB blocks
 * alone against it put 64 writers 2.75 blocks apart in a 2 s window, and
 * 16 and 64 writers at 2x at Jain 0.93 and 0.92 over one; at one block an
 * estimate, two slow writers of 1 MiB blocks on a 2 MiB/s link beside a
 * fast one stalled 2.1 s against 2.0). A writer of blocks larger than its
 * least held sibling's keeps its factor while the mean over its average
 * is within 1 +- half its block over the mean (its bytes about half a
 * block off the mean): where an estimate holds a few of its blocks, one
 * more or less is that far off whatever its rate (corrected there, 64
 * writers of blocks up to 800 KiB with 1 ms commits at 100x had 26 to 47
 * MB in a 2 s window for 32 MB each, 20 blocks apart). Not where all
 * blocks are alike: with a band of a whole block for every writer, 16
 * writers of 1 MiB started 50 ms apart ended together, not in order.
 * Corrections began at eight blocks an estimate before: at max =
 * bandwidth x commit latency, where the domain is at its limit most of
 * the time, the writers of large blocks (two an estimate) got 1.3 times
 * the others' rate uncorrected (64 writers with 200 ms commits: Jain 0.980
 * over the run, 0.996 now). Each writer's
 * bytes are a moving average over the estimates (a quarter of the way at
 * each), which a new writer starts at its held siblings' mean: its first
 * interval is only a part of one, and a writer taken for slow there was
 * sped past those that started before it (16 writers started 50 ms apart:
 * the first ended 580 ms after the second). A writer away for an estimate
 * or more starts again.
 *
 * Known limits: a held writer slower by its own choice (its think time
 * between writes) counts as held, gets up to 2 and pulls its siblings'
 * factors down (a reviewer measured 0.58 for three writers beside one
 * capped at 15 MB/s on a 100 MB/s link), where they stay while the rates
 * are equal; the position ratio makes up for it (the link stays as used),
 * but their pace is then lower than the ratelimit says. Correcting only
 * writers that dirty as soon as their pace lets them, and dividing the
 * factors by their mean, fixed that and kept the grid, but put 16 writers
 * started 50 ms apart out of order by 10 to 65 ms: not done. The virtual
 * time (us__wb_writer_note()) counts bytes at the ratelimit without the
 * factor: both aim at equal bytes.
 */
static void fair_update(us_object *o, double mean, double least)
{
	double f = o->fair > 0 ? o->fair : 1.0;

	/* (Only where an estimate holds one and a half of its blocks or more:
	 * counted in blocks of which one comes or not, its bytes are noise;
	 * and where blocks differ, only while mean / its average is off 1 by
	 * more than half its block / mean.) */
	if (mean > 0 && mean >= 1.5 * (double)o->rl_block) {
		double r = mean / (o->rl_avg > 1 ? o->rl_avg : 1);
		double dead = (double)o->rl_block > least ? 0.5 * (double)o->rl_block / mean : 0;

		if (r > 1.0 - dead && r < 1.0 + dead)
			return;
		r = r < 0.5 ? 0.5 : r > 2.0 ? 2.0 : r;
		f *= 1.0 + (r - 1.0) / 4;
		f = f < 0.5 ? 0.5 : f > 2.0 ? 2.0 : f;
	} else {
		f = 1.0 + (f - 1.0) / 2;
	}
	o->fair = f;
}

/*
 * About what a context's writers can move through its domains' max: a
 * byte is pinned for its write, then waits for the commit running when it
 * was written to end and for its own, so about max / (2C + L) bytes a
 * second get through, whatever the link's rate (C the backend's commit
 * latency, L its write latency; the smallest max of the chain). It is an
 * estimate, not a ceiling: the bound the tests hold the engine's
 * throughput to, which the engine passes where a commit lands just as a
 * batch is written (at 1x with 4 s and 10 s commits, 1.10 to 1.11 of it
 * in bench/contention-sweep --mults 1, 1.14 to 1.16 before this), and a
 * backend that commits more often (commits of its own) does better. The writers'
 * share is taken from it where it is below the link's rate (max under
 * about 2x link x C), and only where two writers or more share the
 * context, for whom alone the ratelimit is a share. Set 10 or 25 % above
 * it (tried), the writers' windows at 1x were 0.99 at 16 and 14 points of
 * 20 in that sweep, instead of 17. At max = link x C (1 GiB/s, 20 ms
 * commits, 16 writers of 4 KiB, 64 KiB and 640 KiB blocks) the link's 820
 * MiB/s set their pace at 51 MiB/s where the domain's room gave each 32,
 * and room, not pace, held them: the writers of large blocks took a block
 * whenever room came back, and got up to 3 times the others' rate until
 * their pace factors (fair_update()) caught up: 50 blocks apart over the
 * first 2 s window. A writer alone keeps the link's rate, which its
 * position ratio bounds (with commits that grow with their batch, 2C
 * undervalues what one writer gets through).
 */
static uint64_t pipe_bound(const struct us_wb *wb, uint64_t link)
{
	const us_backend *bk = wb->backend;
	uint64_t max = UINT64_MAX;
	const us_domain *d;
	double bound;

	if (wb->rl_nwriters < 2 || !bk->commit_lat_ns)
		return link;
	for (d = wb->domain; d; d = d->parent)
		if (d->max && d->max < max)
			max = d->max;
	if (max == UINT64_MAX)
		return link;
	bound = (double)max * 1e9 / (2.0 * (double)bk->commit_lat_ns + (double)bk->wlat_ns);
	return bound < (double)link ? (bound < 1 ? 1 : (uint64_t)bound) : link;
}

static void ratelimit_update(struct us_wb *wb, uint64_t now)
{
	uint64_t link = pipe_bound(wb, us__wb_link_rate(wb)), rl = us__wb_ratelimit(wb);
	uint64_t dt = now - wb->rl_stamp_ns, n = 0, held = 0;
	double free = 0, target = (double)link, mean = 0, held_avg = 0, block = 0, least = 0, seed;
	struct us_list *p;

	wb->rl_samples++;
	/* The held writers' mean, over those with an average already: a
	 * writer's first interval is a part of one (it started within it). */
	us_list_for_each (p, &wb->rl_writers) {
		us_object *o = us_container_of(p, us_object, rl_link);

		o->rl_sample = wb->rl_samples;
		if (o->rl_avg <= 0)
			continue;
		o->rl_avg += ((double)o->rl_bytes - o->rl_avg) / 4;
		if (o->rl_wait_ns >= dt / 10 || o->stall_wait_ns) {
			held++;
			held_avg += o->rl_avg;
			if (o->rl_block && (!least || (double)o->rl_block < least))
				least = (double)o->rl_block;
			if ((double)o->rl_block > block)
				block = (double)o->rl_block;
		}
	}
	if (held >= 2)
		mean = held_avg / (double)held;
	/* A new writer starts at that mean in any case; the corrections
	 * wait until it holds one and a half blocks of every held writer. */
	seed = mean;
	if (mean < 1.5 * block)
		mean = 0;
	held = 0;
	while (!us_list_empty(&wb->rl_writers)) {
		p = wb->rl_writers.next;
		us_object *o = us_container_of(p, us_object, rl_link);

		n++;
		/* Held: it waited a tenth of the interval, or it is waiting
		 * now (its wait is noted when it comes back, in the next). */
		if (o->rl_avg <= 0) {
			/* New: it starts at its held siblings' mean, and as it
			 * is paced (not faster for its first part interval). */
			o->rl_avg = seed > 0 ? seed : (double)o->rl_bytes;
			fair_update(o, 0, 0);
			if (o->rl_wait_ns >= dt / 10 || o->stall_wait_ns)
				held++;
			else
				free += (double)o->rl_bytes;
		} else if (o->rl_wait_ns >= dt / 10 || o->stall_wait_ns) {
			held++;
			fair_update(o, mean, least);
		} else {
			free += (double)o->rl_bytes;
			fair_update(o, 0, 0);
		}
		/* Its largest block, as it writes now: one that dirtied
		 * smaller ones this interval halves it toward them (a writer
		 * that wrote 1 MiB once must not hold its context's
		 * corrections off for good). */
		if (o->rl_sblock)
			o->rl_block = o->rl_sblock > o->rl_block / 2 ? (o->rl_sblock > o->rl_block ?
									 o->rl_sblock :
									 o->rl_block) :
								   o->rl_block / 2;
		o->rl_sblock = 0;
		us_list_del(p);
		o->rl_bytes = o->rl_wait_ns = 0;
	}
	wb->rl_nwriters = 0;
	wb->rl_stamp_ns = now;
	if (held && dt) {
		target = ((double)link - free * 1e9 / (double)dt) / (double)held;
		if (target < (double)link / (double)n)
			target = (double)link / (double)n;
	}
	if (target > (double)rl)
		target = ((double)rl + target) / 2;
	if (target > (double)link)
		target = (double)link;
	wb->ratelimit = target < 1 ? 1 : (uint64_t)target;
}

void us__wb_writer_note(us_object *o, uint64_t bytes, uint64_t wait_ns)
{
	if (bytes) {
		uint64_t now = us__now(o->engine), rl = us__wb_ratelimit(o->wb);

		o->vtime_ns = sat_add(o->vtime_ns > now ? o->vtime_ns : now,
				      (uint64_t)((double)bytes * 1e9 / (double)(rl ? rl : 1)));
		o->wb->dirtied_ns = now;
		/* Back after a pause that took its share (bw_own()): it
		 * counts again at once. */
		share_join(o->wb);
	}
	if (us_list_empty(&o->rl_link)) {
		/* Away for an estimate or more: its correction starts again
		 * (what it got before says nothing of now). */
		if (o->wb->rl_samples > o->rl_sample + 1) {
			o->fair = o->rl_avg = 0;
			o->rl_block = o->rl_sblock = 0;
		}
		us_list_add_tail(&o->wb->rl_writers, &o->rl_link);
		o->wb->rl_nwriters++;
	}
	o->rl_bytes += bytes;
	if (bytes > o->rl_block)
		o->rl_block = bytes;
	if (bytes > o->rl_sblock)
		o->rl_sblock = bytes;
	o->rl_wait_ns += wait_ns;
}

uint64_t us__wb_ratelimit(const struct us_wb *wb)
{
	uint64_t link = us__wb_link_rate(wb);

	/* Before the first estimate, the link shared by the writers seen so
	 * far: 64 writers that start together must not each dirty at the
	 * link's rate until the first sample (200 ms) and meet at the gate,
	 * where the largest blocks take the most per turn. */
	if (!wb->ratelimit)
		return wb->rl_nwriters > 1 ? link / wb->rl_nwriters : link;
	return wb->ratelimit < link ? wb->ratelimit : link;
}

bool us__wb_sample(us_engine *e, struct us_wb *wb, uint64_t now)
{
	uint64_t elapsed, delta;
	double sample, bw;

	if (now < wb->bw_stamp_ns + e->bw_interval_ns)
		return false;
	us__link_sample(e, wb->backend, now);
	ratelimit_update(wb, now);
	elapsed = now - wb->bw_stamp_ns;
	delta = wb->cleaned - wb->bw_cleaned;
	wb->bw_stamp_ns = now;
	wb->bw_cleaned = wb->cleaned;
	if (delta)
		wb->bw_measured = true;
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
 * A context's weight in the shares of its domains' thresholds: its rate,
 * once a sample saw it clean data; before, its part of its backend's link
 * if that was measured (a fast context whose writers pause between bursts
 * may go idle before each sample); else 1 byte per second, as Linux's
 * writeout fraction starts at 0. So a context whose backend has not
 * completed a write yet gets the least share (one run: throttle.c) until
 * its completions say what it is worth, and is still seen by the others.
 */
uint64_t us__wb_share_rate(const struct us_wb *wb)
{
	if (wb->bw_measured)
		return us__wb_rate(wb);
	if (wb->backend->wbw) {
		uint64_t r = us__wb_link_rate(wb);

		return r > 1 ? r : 2;
	}
	return 1;
}

/*
 * The rate a context's data goes out at, for its pipeline and for pacing its
 * writers: its part of the link's rate once measured (the link's divided
 * among the contexts writing to it), else of the clean-out rate. Commits clean in batches, so over a
 * 200 ms sample the clean-out rate swings between 0 and many times the
 * link's; the link's does not, and bounds it in the long run.
 */
uint64_t us__wb_link_rate(const struct us_wb *wb)
{
	const us_backend *bk = wb->backend;
	uint64_t n = bk->nactive > 1 ? bk->nactive : 1;

	/* Its part of the link while several contexts write to it (dirty
	 * data or writes in flight): their turns share it (poll.c). Before
	 * the link is measured, the clean-out rate (init_bw at first) is
	 * shared alike. */
	uint64_t r = bk->wbw;

	/* Not below init_bw until measured: the clean-out rate of writers
	 * that the thresholds hold back (at their first sample) is their
	 * rate, not the link's, and would pace them at it. */
	if (!r) {
		r = us__wb_rate(wb);
		if (r < bk->engine->init_bw)
			r = bk->engine->init_bw;
	}
	return r / n;
}

/*
 * The commit latency a backend's pipelines are sized by: the running
 * average once a commit has completed; before, the age of the first one
 * asked (at most US_COMMIT_TIMEOUT), since commits take at least that
 * long. With 4 s commits the thresholds would otherwise stay at their
 * ratios for the first 4 s, and the writers stop after a second's worth.
 */
uint64_t us__commit_lat_floor(const us_backend *bk)
{
	uint64_t now;

	if (bk->commit_lat_ns || !bk->commit_first_ns)
		return bk->commit_lat_ns;
	now = us__now(bk->engine);
	return now - bk->commit_first_ns < US_COMMIT_TIMEOUT ? now - bk->commit_first_ns :
							       US_COMMIT_TIMEOUT;
}

void us__commit_latency(us_backend *bk, uint64_t ns)
{
	struct us_list *pos;

	/* The pipeline is recomputed at the next bandwidth sample; but the
	 * backend's first commit gives it its first latency at once (a walk of
	 * the tree, once per backend), so a writer is not held for 200 ms. */
	if (!bk->commit_lat_ns) {
		bk->commit_lat_ns = ns ? ns : 1;
		bk->pipe_lat_ns = bk->commit_lat_ns;
		us__pipe_update(bk->engine->root);
		return;
	}
	bk->commit_lat_ns = (3 * bk->commit_lat_ns + ns) / 4;
	if (bk->commit_lat_ns < bk->pipe_lat_ns)
		bk->pipe_lat_ns = bk->commit_lat_ns;
	/*
	 * Nor when it doubles since: the first commits, of little data or
	 * answered by a commit the server already had under way, are quick,
	 * and the pipelines sized by them would hold the writers to a tenth
	 * of the link until the next sample. Only the chains of bk's contexts
	 * are resized (growth applies at once; nothing decays here), and only
	 * when the latency has doubled from its lowest since the last time:
	 * a handful of times in a backend's life.
	 */
	if (bk->commit_lat_ns / 2 < bk->pipe_lat_ns)
		return;
	bk->pipe_lat_ns = bk->commit_lat_ns;
	us_list_for_each (pos, &bk->wbs)
		us__pipe_mark(us_container_of(pos, struct us_wb, bk_link)->domain);
	us__pipe_update_chains(bk->engine);
}

/*
 * The bytes d's subtree holds in its commit pipelines: for each writeback
 * context, the faster of its bandwidth estimate and its last sample, times
 * its backend's commit latency. Data written at rate r stays unstable for
 * one to two commit latencies C when commits run back to back, so a
 * threshold below about 2 r C stops the writers whatever the backend's
 * speed; throttle.c raises ratio thresholds to keep room for it.
 *
 * Each domain keeps the sum of its children's figures (pipe_kids), so that
 * a poll that sampled recomputes only the chains of the contexts it sampled
 * and of the domains still coming down (engine->pipe_decay), each by one
 * step (us__pipe_mark(), us__pipe_update_marked()): O(depth) per domain due,
 * not the whole tree. A domain that is neither keeps its figure, which a
 * step would not change (the commit latencies it depends on count at its
 * contexts' next sample, within bw_interval).
 */
static double pipe_own(const us_domain *d)
{
	struct us_list *pos;
	double pipe = 0;

	us_list_for_each (pos, &d->wbs) {
		const struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);

		uint64_t c = us__commit_lat_floor(wb->backend), w = wb->backend->wlat_ns;

		pipe += (double)us__wb_link_rate(wb) * (double)(c + (w < c ? w : c)) / 1e9;
	}
	return pipe;
}

/*
 * The rates of d's own active contexts, each recorded as counted: the base
 * of the contexts' shares of the thresholds (throttle.c). Active: writes in
 * flight, its unstable data being committed, or dirty data a writer added
 * within two bandwidth intervals. Unstable data left waiting (its writers
 * gone quiet) takes no share, nor does dirty data nobody adds to and
 * nothing writes back (under the background threshold, waiting to
 * expire): a fast context whose writer finished would otherwise keep its
 * whole share of the domain from the slow writers still at work. Kept with
 * the pipelines, as a sum of d's own and its children's (bw_kids).
 */
static uint64_t bw_own(us_domain *d)
{
	struct us_list *pos;
	uint64_t sum = 0;

	d->bw_join = 0;
	us_list_for_each (pos, &d->wbs) {
		struct us_wb *wb = us_container_of(pos, struct us_wb, dom_link);
		bool active =
			wb->writeback ||
			(wb->unstable && (wb->backend->sync_target || wb->backend->commits_busy)) ||
			(wb->dirty && us__now(d->engine) < sat_add(wb->dirtied_ns,
								   2 * d->engine->bw_interval_ns));

		wb->bw_counted = active ? us__wb_share_rate(wb) : 0;
		wb->bw_joined = 0;
		sum = sat_add(sum, wb->bw_counted);
	}
	return sum;
}

/* Takes x out of d's bw_sum and its ancestors' (a context or a child gone). */
static void bw_forget(us_domain *d, uint64_t x)
{
	for (; d; d = d->parent) {
		d->bw_sum -= min_u64(x, d->bw_sum);
		if (d->parent)
			d->parent->bw_kids -= min_u64(x, d->parent->bw_kids);
	}
}

double us__pipe_target(const us_domain *d)
{
	return pipe_own(d) + (double)d->pipe_kids;
}

static void pipe_set(us_domain *d, double pipe)
{
	us_engine *e = d->engine;
	double target = pipe;

	/* Up at once, down by an eighth of the difference per update: a
	 * threshold that dropped under the writers' feet would stop them. */
	if (pipe < (double)d->pipe_bytes) {
		pipe = (double)d->pipe_bytes - ((double)d->pipe_bytes - pipe) / 8;
		/* Thresholds may fall: credit granted against them goes. */
		if (d->granted)
			us__credit_revoke(d);
	}
	d->pipe_bytes = pipe >= 1.8e19 ? UINT64_MAX : (uint64_t)pipe;
	if ((double)d->pipe_bytes > target)
		decay_link(e, d);
	else
		decay_unlink(d);
}

void us__pipe_forget(us_domain *d)
{
	d->parent->pipe_kids -= d->pipe_bytes;
	d->parent->bw_kids -= min_u64(d->bw_sum, d->parent->bw_kids);
	bw_forget(d->parent, d->bw_sum);
	decay_unlink(d);
	/* Its parent's target fell: it comes down from the next update. */
	if (d->pipe_bytes)
		decay_link(d->engine, d->parent);
}

void us__pipe_update(us_domain *d)
{
	struct us_list *pos;
	uint64_t kids = 0, bw = 0;

	us_list_for_each (pos, &d->children) {
		us_domain *c = us_container_of(pos, us_domain, sibling);

		us__pipe_update(c);
		kids += c->pipe_bytes;
		bw = sat_add(bw, c->bw_sum);
	}
	d->pipe_kids = kids;
	d->bw_kids = bw;
	d->bw_sum = sat_add(bw_own(d), bw);
	pipe_set(d, pipe_own(d) + (double)kids);
}

void us__pipe_mark(us_domain *d)
{
	for (; d && !d->pipe_marked; d = d->parent) {
		d->pipe_marked = true;
		if (d->parent) {
			d->pipe_next = d->parent->pipe_marked_kids;
			d->parent->pipe_marked_kids = d;
		}
	}
}

static void pipe_update_marked(us_domain *d)
{
	while (d->pipe_marked_kids) {
		us_domain *c = d->pipe_marked_kids;
		uint64_t old = c->pipe_bytes, old_bw = c->bw_sum;

		d->pipe_marked_kids = c->pipe_next;
		c->pipe_next = NULL;
		pipe_update_marked(c);
		d->pipe_kids += c->pipe_bytes - old; /* modulo 2^64, like the sum */
		d->bw_kids += c->bw_sum - old_bw;
	}
	d->pipe_marked = false;
	d->bw_sum = sat_add(bw_own(d), d->bw_kids);
	pipe_set(d, pipe_own(d) + (double)d->pipe_kids);
}

void us__pipe_update_chains(us_engine *e)
{
	if (e->root->pipe_marked)
		pipe_update_marked(e->root);
}

void us__pipe_update_marked(us_engine *e)
{
	struct us_list *pos;

	us_list_for_each (pos, &e->pipe_decay)
		us__pipe_mark(us_container_of(pos, us_domain, pipe_decay_link));
	us__pipe_update_chains(e);
}

void us__stall_note(us_object *o, bool progress, uint64_t wait)
{
	uint64_t now = us__now(o->engine);
	us_domain *a;

	if (o->stall_wait_ns) {
		uint64_t served = now > o->stall_mark_ns ? now - o->stall_mark_ns : 0;

		o->stall_acc_ns = sat_add(o->stall_acc_ns, min_u64(served, o->stall_wait_ns));
		us__wb_writer_note(o, 0, min_u64(served, o->stall_wait_ns));
		o->stall_wait_ns = 0;
		for (a = o->domain; a; a = a->parent)
			if (o->stall_acc_ns > a->max_stall_seen_ns)
				a->max_stall_seen_ns = o->stall_acc_ns;
	}
	if (progress)
		o->stall_acc_ns = 0;
	if (wait) {
		o->stall_wait_ns = wait;
		o->stall_mark_ns = now;
	}
}
