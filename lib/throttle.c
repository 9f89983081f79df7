/*
 * Dirty thresholds and the smooth throttling of writers.
 *
 * SPDX-License-Identifier: MIT
 *
 * THE MODEL
 *
 * For a domain with effective limit L (its max, bounded by every ancestor's
 * headroom), background threshold bg and dirty threshold T (bytes, or
 * ratios of L: 10 % and 20 % by default), the data a writer pins is
 *
 *     pinned = dirty + writeback + unstable
 *
 * Unstable counts: data the server has not committed cannot be freed by
 * the client, so it must hold writers back like dirty data does.
 *
 *     freerun  = (bg + T) / 2       below it, a writer alone is never paused
 *     setpoint = (freerun + T) / 2  where the control loop wants pinned
 *
 * Between freerun and T a writer that dirtied n bytes pauses
 *
 *     pause = n / (bw * pos_ratio(pinned))
 *
 * where bw is its writeback context's clean-out bandwidth (wb.c) and
 *
 *     pos_ratio(p) = 1 + ((setpoint - p) / (T - setpoint))^3,  in [0, 2]
 *
 * The constraints that shape it:
 *     pos_ratio(setpoint) = 1   at the setpoint, writers dirty exactly as
 *                               fast as data is cleaned: pinned holds still;
 *     pos_ratio(T)        = 0   at the limit, the rate is 0;
 *     pos_ratio(freerun)  = 2   just past freerun, half the full-rate pause;
 *     flat around setpoint      the cube keeps small errors from causing
 *                               large rate swings, so there is no
 *                               stop-and-go oscillation.
 *
 *   pos_ratio
 *     2.0 +*
 *         |  *
 *         |    *
 *     1.0 +- - - - - *- - - - - - -         (setpoint: balanced)
 *         |             *
 *         |                *
 *     0.0 +-------+----------+---*---> pinned
 *      freerun  setpoint         T
 *
 * L is dirtyable memory (eval()): what eviction could free counts as room.
 *
 * T from a ratio has a floor: the commit pipeline (wb.c) of d's subtree,
 * the bytes its contexts write per commit latency and per write's own time
 * (counted up to one commit latency), times 4, at most 31/32 of L; bg from
 * a ratio rises with it in proportion. Unstable data waits one
 * to two commit latencies when commits run back to back, so with a 1 GiB
 * limit (T = 205 MiB) and a 50 ms commit, a writer could not pass about
 * 2 GB/s whatever the backend; the floor gives it the room (T = 992 MiB at
 * 4 GiB/s) once the first commits have been timed. The rate in the pipeline
 * is the faster of the clean-out rate and the link's (bytes written per
 * second of writes in flight): the clean-out rate alone is bounded by the
 * writer, which a small threshold holds back, which keeps the threshold
 * small.
 *
 * At or above T the writer must wait until pinned is back under T
 * (US_DIRTY_OVER_LIMIT, us_object_balance() returning -EAGAIN); the domain
 * is marked throttled and the poller writes its data back with reason
 * THROTTLE. No pause exceeds max_pause (200 ms), nor the time the writer's
 * context needs to clear its pipeline (pipeline_pause()); a writer that
 * holds nothing pinned is never stopped at the gate, only paused after it
 * dirtied (so an empty domain under a full parent, or a dirty ratio of 0,
 * cannot hold a writer for ever). Several writeback contexts under one
 * domain each get a share of its thresholds (SHARES below). A writer is held by the
 * strictest of its domain and all its ancestors: the smallest pos_ratio
 * wins, and any ancestor at its limit stops it.
 *
 * Every writer of a context is paced by the same rule: what it dirtied
 * costs bytes / (ratelimit * max(pos_ratio, 0.4)), where ratelimit is the
 * context's per-writer rate (wb.c, THE WRITERS' PACE), and moves the
 * object's pace_ns on by that much, however far that is (a max pause
 * bounds a sleep, not what a writer owes). The writer is paused once its
 * pace runs min_pause (10 ms) ahead of the clock, so a writer of 4 KiB
 * buffers sleeps every few hundred buffers rather than for microseconds
 * each time, and writers of any block size converge to the same rate.
 * Beside other writers of its context (the ratelimit under 3/4 of the
 * link's) a writer is paced below freerun too, at a position ratio of 2
 * or more (enough to refill the room under freerun in a quarter of a
 * commit latency), and held there while it owes: the room a commit frees
 * goes by pace, not to whoever comes first with the largest block. There,
 * once the ratelimit is estimated, its first dirtyings take the lock (no
 * credit, us__credit_grant()), as only the locked path paces.
 *
 * Worked example: L = 1 GiB, bg = 100 MiB, T = 200 MiB, so freerun = 150 MiB
 * and setpoint = 175 MiB. bw = 100 MiB/s. A writer that dirties 1 MiB when
 * pinned = 187.5 MiB: x = (175 - 187.5) / 25 = -0.5, pos_ratio = 1 - 0.125 =
 * 0.875, rate = 87.5 MiB/s, pause = 1 / 87.5 s = 11.4 ms. At pinned = 160
 * MiB: x = 0.6, pos_ratio = 1.216, pause = 8.2 ms.
 */
#include "internal.h"

struct level {
	uint64_t bg, dirty, headroom;
};

struct throttle {
	double pos;		 /* smallest position ratio on the chain */
	bool bg;		 /* some domain is past its background threshold */
	bool paused;		 /* some domain is past its freerun */
	bool over;		 /* some domain is at its dirty limit */
	uint64_t margin;	 /* smallest freerun - pinned - granted on the chain */
	uint64_t below;		 /* smallest freerun - pinned of the levels under it */
	struct us_wb *wb;	 /* the writer's context, for its share; or NULL */
	us_object *obj;		 /* the writer, for its own pinned bytes; or NULL */
	us_domain *spent;	 /* topmost domain with pinned + granted past bg and
				    credit outstanding; or NULL */
	struct us_turnq *over_q; /* the waiters' queue of the first limit
				    that stops the writer (turn.c); or NULL */
};

/* Nothing found yet: no pause, no limit, the widest margin. */
#define THROTTLE_INIT                                                                    \
	{                                                                                \
		2.0, false, false, false, UINT64_MAX, UINT64_MAX, NULL, NULL, NULL, NULL \
	}

/* What the writer holds pinned: a writer that holds nothing is never held at
 * the gate. Without a writer, the context's; without either, any. */
static uint64_t own_pinned(const struct throttle *t)
{
	if (t->obj)
		return t->obj->pinned;
	if (t->wb)
		return t->wb->dirty + t->wb->writeback + t->wb->unstable;
	return 1;
}

static uint64_t ratio_of(uint64_t base, uint64_t pct)
{
	if (base == US_UNLIMITED)
		return US_UNLIMITED;
	/* base * pct / 100 without overflow for any base. */
	return base / 100 * pct + base % 100 * pct / 100;
}

/* The pinned bytes of a writeback context. */
static uint64_t wb_pinned(const struct us_wb *wb)
{
	return wb->dirty + wb->writeback + wb->unstable;
}

/*
 * Checks pinned bytes against thresholds bg < dirty (see THE MODEL) and
 * updates t. own: the pinned bytes of the writer's context; a writer whose
 * context holds nothing is never stopped at the gate (it pauses at most).
 */
static void position(struct throttle *t, uint64_t pinned, uint64_t bg, uint64_t dirty, uint64_t own,
		     struct us_turnq *q)
{
	uint64_t freerun, setpoint;
	double x, pos;

	if (pinned >= dirty) {
		t->paused = true;
		t->pos = 0;
		if (own) {
			t->over = true;
			if (!t->over_q)
				t->over_q = q;
		}
		return;
	}
	freerun = bg + (dirty - bg) / 2;
	if (pinned <= freerun) {
		if (freerun - pinned < t->below)
			t->below = freerun - pinned;
		return;
	}
	setpoint = freerun + (dirty - freerun) / 2;
	if (dirty > setpoint) {
		x = ((double)setpoint - (double)pinned) / (double)(dirty - setpoint);
		pos = 1.0 + x * x * x;
	} else {
		pos = 0.0;
	}
	if (pos < 0.0)
		pos = 0.0;
	if (pos > 2.0)
		pos = 2.0;
	if (pos < t->pos)
		t->pos = pos;
	t->paused = true;
}

/*
 * SHARES. Where other writeback contexts of a domain's subtree hold pinned
 * data too (several backends, or sibling domains under a limited parent),
 * a writer is held to its context's share of the domain's thresholds, in
 * proportion to its bandwidth among the active contexts' (bw_sum, wb.c),
 * as Linux gives each wb a share of the dirty limit by its completions:
 *
 *     share = rate / (rate + others' rates),   T_wb = max(T * share, run)
 *
 * with bg scaled alike, and the same position curve on the context's own
 * pinned bytes. A context behind a stalled backend thus fills its own share
 * only, and the others run at their speed beside it; one run
 * (max_flush_bytes) is the least any context gets, so a slow one is never
 * shut out. Shares are taken at the bandwidth samples, so between two they
 * may add up to a little more than T: the whole subtree is stopped at 1.5 T
 * whatever the shares (never at max, which charges enforce).
 */
static void position_shared(struct throttle *t, const us_domain *d, struct level l, uint64_t pinned,
			    uint64_t others)
{
	const struct us_wb *wb = t->wb;
	uint64_t mine = wb_pinned(wb), own = own_pinned(t), rate = us__wb_share_rate(wb), run, tw,
		 bw;
	bool least;
	double f;

	if (!rate)
		rate = 1;
	/* Not measured yet, beside a context that is (others' weights are
	 * rates; an unmeasured context weighs 1), or beside any other context
	 * of its own domain (where a writer at memory speed would fill the
	 * threshold in the milliseconds before the first measurement): the
	 * least share, until its completions say what it is worth. Sibling
	 * domains that start together split their parent's evenly. */
	if (rate > 1 || (others < 1024 && d != wb->domain))
		f = (double)rate / ((double)rate + (double)others);
	else
		f = 0;
	run = min_u64(l.dirty, d->engine->max_flush_bytes);
	tw = (uint64_t)((double)l.dirty * f);
	least = tw <= run;
	if (least)
		tw = run;
	bw = (uint64_t)((double)l.bg * ((double)tw / (double)l.dirty));
	/* A context's lock-free credit is bounded by its share of a domain
	 * it shares with other contexts: its writers would otherwise dirty
	 * the domain's margin at memory speed before any throttle looked.
	 * At the root (the machine's memory, shared by tenants that each have
	 * their domain's own thresholds) only a context held to its least
	 * share (one run: not measured yet, or a sliver of the link) is: an
	 * unlimited tenant's writer bounded there beside a memcg's was paced
	 * every few MiB and lost a twentieth of its rate, with 200 ms
	 * stalls. */
	if (least || d->parent)
		t->margin = min_u64(t->margin, bw > mine ? bw - mine : 0);
	position(t, mine, bw, tw, own, &t->wb->gate_q);
	if (own && pinned >= l.dirty + l.dirty / 2) {
		t->over = true;
		t->paused = true;
		t->pos = 0;
		if (!t->over_q)
			t->over_q = &((us_domain *)d)->gate_q;
	}
}

/*
 * LANDING. A domain's dirty threshold falls when its share of the machine
 * does (more domains active, its pipeline resized to its part of a
 * backend's link). A writer that dirtied up to the old one would find the
 * gate shut until its data drained below the new one: a stall of seconds,
 * and writers that came later would finish first. So writers are held to
 * a limit that rises with the threshold at once and follows it down by an
 * eighth of the way per bandwidth interval (as Linux's dirty_limit follows
 * its threshold down), never below the pinned bytes while it lands: the
 * position ratio, computed on it, slows the writer as it comes down, and
 * the gate closes only when pinned reaches it. The thresholds reported
 * (us_domain_effective_limits()) are the thresholds themselves.
 */
static uint64_t landing(us_domain *d, uint64_t dirty, uint64_t pinned)
{
	us_engine *e = d->engine;
	uint64_t now = us__now(e), target = dirty > pinned ? dirty : pinned;

	if (dirty >= d->landing || !e->bw_interval_ns) {
		d->landing = dirty;
		d->landing_ns = now;
		return dirty;
	}
	while (d->landing > target && now >= d->landing_ns + e->bw_interval_ns) {
		d->landing -= (d->landing - target + 7) / 8;
		d->landing_ns += e->bw_interval_ns;
	}
	if (d->landing <= target)
		d->landing_ns = now;
	return d->landing > dirty ? d->landing : dirty;
}

/*
 * The thresholds of d, computed from the root down in one pass: O(depth).
 * When t is given, d is also checked against them and t updated.
 *
 * They are ratios of the dirtyable memory, as Linux takes them of free and
 * reclaimable pages: on each domain of the chain, what its max leaves
 * besides the bytes that eviction could not free (charged - evictable). An
 * empty domain under a parent full of another's clean data keeps its
 * thresholds: reclaim would make the room.
 */
static struct level eval(us_domain *d, struct throttle *t)
{
	struct level l, p = { US_UNLIMITED, US_UNLIMITED, US_UNLIMITED };
	uint64_t room = US_UNLIMITED, max_eff, pinned, fixed, others = 0;

	fixed = d->c.charged - d->c.evictable;
	if (d->max != US_UNLIMITED)
		room = d->max > fixed ? d->max - fixed : 0;
	if (d->parent)
		p = eval(d->parent, t);
	l.headroom = min_u64(room, p.headroom);
	max_eff = l.headroom == US_UNLIMITED ? US_UNLIMITED : sat_add(fixed, l.headroom);
	l.bg = d->bg_bytes ? d->bg_bytes : ratio_of(max_eff, d->bg_ratio);
	l.dirty = d->dirty_bytes ? d->dirty_bytes : ratio_of(max_eff, d->dirty_ratio);
	if (max_eff != US_UNLIMITED && d->pipe_bytes && !d->dirty_bytes && d->dirty_ratio) {
		/* Room for the commit pipeline (wb.c): ratios are raised to
		 * 4 pipe_bytes, at most 7/8 of L (or of high, below which
		 * pinned data costs no penalty), and the background ratio with
		 * it in proportion; bytes, and a ratio of 0, are kept as set. */
		uint64_t base = min_u64(max_eff, d->high);
		uint64_t cap = base - base / 32;
		uint64_t floor = d->pipe_bytes > cap / 4 ? cap : 4 * d->pipe_bytes;

		if (l.dirty < floor) {
			l.dirty = floor;
			if (!d->bg_bytes && d->bg_ratio < d->dirty_ratio)
				l.bg = (uint64_t)((double)floor * (double)d->bg_ratio /
						  (double)d->dirty_ratio);
		}
	}
	l.bg = min_u64(l.bg, p.bg);
	l.dirty = min_u64(l.dirty, p.dirty);
	if (l.bg >= l.dirty)
		l.bg = l.dirty / 2;
	if (!t || l.dirty == US_UNLIMITED)
		return l;

	pinned = d->c.dirty + d->c.writeback + d->c.unstable;
	{
		uint64_t used = pinned + d->granted;

		/* Credit stops short of the background threshold, so that
		 * crossing it always takes the locked path, which wakes the
		 * flushers. */
		t->margin = min_u64(t->margin, l.bg > used ? l.bg - used : 0);
		/* Credit granted since d's last revoke would take d past its
		 * background threshold: revoke it (once per grant). */
		if (used > l.bg && d->granted && d->grant_seq != d->revoked_at && !t->spent)
			t->spent = d;
	}
	if (pinned > l.bg)
		t->bg = true;
	l.dirty = landing(d, l.dirty, pinned);
	if (t->wb) {
		/* Contexts of d that became active since the last update count
		 * at d's own level (wb.c: share_join()). */
		uint64_t sum = d->bw_sum, mine = t->wb->bw_counted;

		if (d == t->wb->domain) {
			sum = sat_add(sum, d->bw_join);
			mine = sat_add(mine, t->wb->bw_joined);
		}
		if (sum > mine)
			others = sum - mine;
	}
	if (others && l.dirty)
		position_shared(t, d, l, pinned, others);
	else
		position(t, pinned, l.bg, l.dirty, own_pinned(t), &d->gate_q);
	return l;
}

void us__domain_thresholds(const us_domain *d, uint64_t *bg, uint64_t *dirty)
{
	struct level l = eval((us_domain *)d, NULL);

	*bg = l.bg;
	*dirty = l.dirty;
}

static uint64_t full_rate_pause(us_engine *e, uint64_t bytes, double rate)
{
	double ns;

	if (rate < 1.0)
		return e->max_pause_ns;
	ns = (double)bytes * 1e9 / rate;
	return ns >= (double)e->max_pause_ns ? e->max_pause_ns : (uint64_t)ns;
}

/* What bytes cost a writer's pace at rate (bytes/s): not bounded by a
 * max pause, which bounds one sleep, not a debt. A writer of 1 MiB blocks
 * beside writers of 4 KiB ones owes each block's whole time, or it would
 * be served as often as they are with 256 times their bytes. */
static uint64_t pace_cost(uint64_t bytes, double rate)
{
	double ns = rate >= 1.0 ? (double)bytes * 1e9 / rate : 1e18;

	return ns < 1e18 ? (uint64_t)ns : (uint64_t)1e18;
}

/*
 * Move o's pace on by cost, from its last pace or from now if that is past.
 * Until its context's ratelimit is first estimated (the first sample, 200 ms
 * of dirtying), cost was taken at a guess: the link shared by the writers
 * seen so far. What a writer owes at the guess is bounded by a max pause,
 * or by the time its link takes to write one run where that is longer (a
 * debt the link itself needs that long to pay is owed whole: forgiven, a
 * writer to a link of 2 MiB/s would dirty a run more than the link takes
 * and wait for it later). Writers that start together dirty their first
 * blocks in freerun at memory speed, those of large blocks the most in a
 * round of turns: priced whole at the guess, 64 writers with 200 ms commits
 * (one in three writing 816 KiB blocks) owed up to 400 ms each when the
 * estimate came, and the last of them served went 407 ms without progress,
 * against a target of twice the commit latency; bounded, 256 ms. A debt
 * made at an estimated rate is owed whole (pace_cost()).
 */
static void pace_add(us_object *o, uint64_t now, uint64_t cost, uint64_t link)
{
	us_engine *e = o->engine;
	uint64_t cap = e->max_pause_ns;

	o->pace_ns = sat_add(o->pace_ns > now ? o->pace_ns : now, cost);
	if (o->wb->ratelimit)
		return;
	if (link && (double)e->max_flush_bytes * 1e9 / (double)link > (double)cap)
		cap = (uint64_t)((double)e->max_flush_bytes * 1e9 / (double)link);
	o->pace_ns = min_u64(o->pace_ns, now + cap);
}

/* The least position ratio a dirtying is paced at: near the dirty
 * threshold the ratio falls to 0 and the cost of any dirtying grows without
 * bound; the gate holds writers there. Every writer's cost is bounded alike
 * (2.5 times its cost at the ratelimit), whatever its block size. A block
 * is priced whole at the ratio of the moment it is dirtied, so the bound is
 * also how long one large block can hold its writer beyond its fair time:
 * at a quarter (four times), 64 writers of blocks worth a quarter of the
 * stall target at their share stalled 10 to 40 % past it (200 ms commits:
 * 550 ms against 400); at 0.4 the sweep of 60 points keeps its Jain
 * indexes, and those stalls but one (407 ms) are within target. */
#define US_POS_MIN 0.4

static void account_pause(us_domain *d, uint64_t pause)
{
	us__domain_event(d, US_EV_PAUSED, 1);
	us__domain_event(d, US_EV_PAUSE_NS, pause);
	for (; d; d = d->parent)
		if (pause > d->max_pause_seen_ns)
			d->max_pause_seen_ns = pause;
}

static int throttle(us_object *o, uint64_t bytes, uint64_t *pause_ns, bool *wake);

/* Whether o writes beside other writers of its context that the engine
 * holds (the context's ratelimit below 3/4 of its link's rate, wb.c): there
 * every dirtying of o is paced (throttle()), below freerun too. */
static bool pace_shared(const us_object *o)
{
	return (double)us__wb_ratelimit(o->wb) < 0.75 * (double)us__wb_link_rate(o->wb);
}

/*
 * The writer's pause: the throttle's, plus the memory.high penalty the
 * object's charges earned (us__high_penalty()), which is not bounded by
 * max_pause but by its own cap.
 */
int us__throttle(us_object *o, uint64_t bytes, uint64_t *pause_ns, bool *wake)
{
	int rc = throttle(o, bytes, pause_ns, wake);

	if (o->high_debt_ns) {
		*pause_ns += o->high_debt_ns;
		us__domain_event(o->domain, US_EV_HIGH_DELAY_NS, o->high_debt_ns);
		o->high_debt_ns = 0;
	}
	return rc;
}

/*
 * The finest pause worth taking: 1 ms, as a sleep, but finer near a small
 * limit against a fast server: no coarser than the time the writer's
 * context takes, at its link rate, to clean an eighth of the band between
 * the background and dirty thresholds (at least 50 us). A writer that sleeps
 * 1 ms beside a 1 GiB/s server dirties 1 MiB at each wake-up: with a 2 MiB
 * limit that is half of it in one burst, which queues at the server and
 * swings the pinned bytes across the whole band instead of holding them
 * near the setpoint (0.75 of the bandwidth instead of 0.9 at a 1 ms commit).
 */
static uint64_t pause_floor(const us_object *o, struct level l)
{
	uint64_t rate = us__wb_link_rate(o->wb);
	double ns;

	if (l.dirty == US_UNLIMITED || !rate || l.dirty <= l.bg)
		return US_MSEC;
	ns = (double)((l.dirty - l.bg) / 8) * 1e9 / (double)rate;
	if (ns >= (double)US_MSEC)
		return US_MSEC;
	return ns < (double)(US_MSEC / 20) ? US_MSEC / 20 : (uint64_t)ns;
}

/*
 * The shortest pause returned: min_pause, but no more than a sixteenth of
 * the backend's commit latency per context writing to it (at least the
 * floor above). Near a limit that commits keep free, pinned data falls by a
 * batch every commit latency: pauses of min_pause against a 20 ms commit
 * would let a writer that has the link to itself miss half of them; writers
 * that share it get their turns less often, and wake less often.
 */
static uint64_t min_pause(const us_object *o, uint64_t floor)
{
	const us_backend *bk = o->backend;
	uint64_t c = bk->commit_lat_ns / 16;

	if (!bk->commit_lat_ns)
		return o->engine->min_pause_ns;
	if (bk->nactive > 1)
		c = c > o->engine->min_pause_ns / bk->nactive ? o->engine->min_pause_ns :
								c * bk->nactive;
	return min_u64(o->engine->min_pause_ns, c < floor ? floor : c);
}

/*
 * When the commit in flight that frees o's data (the backend's sync, or
 * o's own commit) is expected to end: its start plus the commit latency;
 * 0 when none is in flight.
 */
uint64_t us__commit_due(const us_object *o)
{
	const us_backend *bk = o->backend;

	if (!bk->sync_target && !o->commit_target)
		return 0;
	return (bk->sync_target ? bk->sync_issued_ns : o->commit_issued_ns) + bk->commit_lat_ns;
}

/*
 * The longest pause worth taking: the time the writer's context needs to
 * clear what it has in its pipeline (its dirty and writeback bytes at the
 * link's rate, then one commit latency), within [min_pause, max_pause]; or
 * until the commit in flight is expected to end if sooner (down to floor).
 * Near the limit the position ratio falls to 0 and the rate-based pause
 * grows without bound, but with commits the pinned bytes fall by a whole
 * batch when a commit completes: a writer paused for max_pause would sleep
 * through several commits with its share of the limit free.
 */
static uint64_t pipeline_pause(const us_object *o, uint64_t floor)
{
	const struct us_wb *wb = o->wb;
	us_engine *e = o->engine;
	uint64_t rate = us__wb_link_rate(wb);
	us_backend *bk = wb->backend;
	double ns = (double)(wb->dirty + wb->writeback) * 1e9 / (double)(rate ? rate : 1) +
		    (double)bk->commit_lat_ns;
	uint64_t now = us__now(e), end, lo;
	bool at_end = false;

	/* A commit in flight frees its batch when it ends: wake then, even
	 * sooner than min_pause (but not than the floor), so that a writer
	 * waiting at the gate is there when the batch is freed, beside the
	 * writers whose pauses end with the commit, rather than after them
	 * (one polling on a grid of its own lost every commit's room to
	 * them). One past its expected end is due any moment (the latency is
	 * an average, and a server that queued it behind another commit
	 * answers later): look again in a quarter of a commit latency, not
	 * after a whole pipeline (not at a finer grain: where a server queues
	 * commits they end long after it, and every writer at the gate would
	 * poll at that grain all the while). */
	end = us__commit_due(o);
	if (end) {
		if (end > now && (double)(end - now) < ns) {
			ns = (double)(end - now);
			at_end = true;
		} else if (end <= now && (double)(bk->commit_lat_ns / 4) < ns) {
			ns = (double)(bk->commit_lat_ns / 4);
		}
	}
	lo = at_end ? floor : min_pause(o, floor);
	if (ns < (double)lo)
		return lo;
	return ns >= (double)e->max_pause_ns ? e->max_pause_ns : (uint64_t)ns;
}

/*
 * The waiter o must let go first at a gate of its chain (turn.c): on its
 * context's queue or a domain's from its own up to the root; or NULL.
 */
static struct us_turn *gate_ahead(us_object *o, uint64_t now)
{
	uint64_t key = us__turn_key(o, now);
	struct us_turn *h = us__turn_ahead(&o->wb->gate_q, &o->gate, key, now);
	us_domain *a;

	for (a = o->domain; a && !h; a = a->parent)
		h = us__turn_ahead(&a->gate_q, &o->gate, key, now);
	return h;
}

/*
 * How long o waits when only the order holds it (ahead waits before it at
 * a gate of its chain): a floor, as ahead is due back any moment. But where
 * ahead is due already and has not come back, a quarter of the floor for
 * each waiter of its queue before o (at most a min pause). The waiters of a
 * queue are often all due at one moment (the end of the commit that freed
 * their room), and a host that looks at them in another order than the
 * queue's (by index, or as its threads wake) would see each one but the
 * first held, and again every floor until those before it went: k waiters,
 * about k^2 / 2 looks. Spaced by their ranks they come back in the queue's
 * order, about once each.
 */
static uint64_t order_pause(const us_object *o, const struct us_turn *ahead, uint64_t floor,
			    uint64_t now)
{
	uint64_t r, pause, most = min_pause(o, floor);

	if (ahead->due_ns > now)
		return floor;
	/* Past 4 min_pause / floor waiters the pause is a min pause whatever
	 * the rank: the count need not go further. */
	r = us__turn_rank(ahead->q, &o->gate, us__turn_key(o, now),
			  floor ? 4 * (most / floor) + 5 : UINT64_MAX);
	pause = min_u64((uint64_t)((double)floor / 4 * (double)(r ? r : 1)), most);
	return pause < floor ? floor : pause;
}

/*
 * Whether o's context clears what it holds in its pipeline within a min
 * pause: its dirty and writeback bytes at the link's rate, then one commit
 * latency. A waiter that finds the room it was owed taken waits for the
 * next batch, which comes within a pause it would take anyway.
 */
static bool short_cycle(const us_object *o)
{
	const struct us_wb *wb = o->wb;
	uint64_t rate = us__wb_link_rate(wb);

	if (!rate || !wb->backend->commit_lat_ns)
		return false;
	return (double)(wb->dirty + wb->writeback) * 1e9 / (double)rate +
		       (double)wb->backend->commit_lat_ns <=
	       (double)o->engine->min_pause_ns;
}

/* The writer's pace multiplier (wb.c fair_update()). */
static double fair_of(const us_object *o)
{
	return o->fair > 0 ? o->fair : 1.0;
}

static int throttle(us_object *o, uint64_t bytes, uint64_t *pause_ns, bool *wake)
{
	struct throttle t = THROTTLE_INIT;
	us_engine *e = o->engine;
	uint64_t bw = us__wb_link_rate(o->wb), pause, floor, owed, now = us__now(e);
	struct us_turn *ahead;
	struct level l;
	bool shared;

	t.wb = o->wb;
	t.obj = o;
	l = eval(o->domain, &t);
	/* A locked dirtying took a domain past its background threshold with
	 * credit still out: that credit must not be spent (credit.c). */
	if (t.spent)
		us__credit_revoke(t.spent);
	if (wake)
		*wake = t.bg;
	/* Under every limit, but a writer that waited before this one is due
	 * now or soon and goes first (turn.c): back then. It takes no place
	 * in the queue: it is held by the order, not by a limit, and a queue
	 * of such writers would each wait for the one before it to wake.
	 * Not below freerun on every level with a run's worth of room left
	 * there, beside other writers of its context: their pace shares that
	 * room (each dirtying is paced there too), and the queue's waiters,
	 * each back at its own time, would take it one look after the
	 * other: 64 writers with 20 ms commits at 2x left the link idle for
	 * 10 ms after one commit in three (0.83 of the bound, 0.95 now).
	 * With less room one waiter's block may be most of it, and the
	 * order holds (a context held to its least share, one run: a writer
	 * would wait past the run's time), unless the context's pipeline
	 * clears within a min pause (short_cycle()): with 1 ms commits in 2
	 * MiB, 64 writers had 0.9777 over a window and 0.52 of the bound
	 * (0.9992 and 0.64 now). */
	shared = pace_shared(o);
	if (!t.over && o->pinned &&
	    (t.paused || !shared || t.below == UINT64_MAX ||
	     (t.below < e->max_flush_bytes && !short_cycle(o))) &&
	    (ahead = gate_ahead(o, now))) {
		pause = order_pause(o, ahead, pause_floor(o, l), now);
		us__domain_event(o->domain, US_EV_OVER_LIMIT, 1);
		*pause_ns = pause;
		return -EAGAIN;
	}
	if (!t.over || !o->pinned)
		us__turn_leave(&o->gate);
	if (t.over) {
		/* Wait for about the time it takes to clean this much, or a
		 * tick; but not past the end of the commit in flight, which
		 * frees a batch (pipeline_pause()). */
		floor = pause_floor(o, l);
		pause = full_rate_pause(e, bytes ? bytes : 1, (double)bw);
		/* A link not measured yet: its first writes will say what it
		 * is worth (and the share it gets) soon; look again then, not
		 * after a time taken at init_bw. */
		if (pause < min_pause(o, floor) || !o->backend->wbw)
			pause = min_pause(o, floor);
		if (pause > e->max_pause_ns)
			pause = e->max_pause_ns;
		pause = min_u64(pause, pipeline_pause(o, floor));
		if (pause < floor) /* a wait, not a spin on the lock */
			pause = floor;
		us__turn_join(e, &o->gate, t.over_q, us__turn_key(o, now), now + pause);
		us__domain_event(o->domain, US_EV_OVER_LIMIT, 1);
		/* What it dirtied counts in its pace all the same (at a
		 * position ratio of 1): when the gate opens, writers of
		 * smaller blocks go before a writer of a large one. */
		if (bytes)
			pace_add(o, now, pace_cost(bytes, (double)us__wb_ratelimit(o->wb) * fair_of(o)),
				 bw);
		*pause_ns = pause;
		return -EAGAIN;
	}
	/* Below freerun nothing is paused for; what is owed runs out with the
	 * clock. Except beside other writers of the context: there every
	 * dirtying is paced all the same (at a position ratio of 2, t.pos as
	 * found), or the room a commit frees, when pinned dips below freerun,
	 * goes to whoever comes first with the largest block, and a writer
	 * that owes nothing would take it all while the others pay (not
	 * where nothing on the chain has a limit: t.below unset). */
	if (!t.paused && (!shared || t.below == UINT64_MAX)) {
		*pause_ns = 0;
		return 0;
	}
	floor = pause_floor(o, l); /* only where a pause may be returned */
	if (bytes) {
		/* Every writer of the context at the same pace (wb.c): what it
		 * dirtied keeps it until pace_ns, counted from its last pace
		 * or from now if that is past (time it spent away, or waiting
		 * at a gate, was paid). */
		double pos = t.pos > US_POS_MIN ? t.pos : US_POS_MIN;

		/* Under freerun (beside others), fast enough to refill the
		 * room left there in a quarter of a commit latency: after a
		 * commit freed its batch, the next batch is ready for the next
		 * commit, and each writer's part of it is its share. */
		if (!t.paused && o->backend->commit_lat_ns) {
			double fill = 4.0 * (double)t.below * 1e9 /
				      ((double)bw * (double)o->backend->commit_lat_ns);

			pos = fill > pos ? fill : pos;
		}
		pace_add(o, now,
			 pace_cost(bytes, (double)us__wb_ratelimit(o->wb) * pos * fair_of(o)), bw);
	}
	owed = o->pace_ns > now ? o->pace_ns - now : 0;
	if (owed < min_pause(o, floor)) {
		*pause_ns = 0;
		return 0;
	}
	pause = min_u64(owed, pipeline_pause(o, floor));
	/* What the pipeline cut short is forgiven to a writer alone (the
	 * pipeline is clear when it comes back). Among writers that share the
	 * context (its ratelimit below the link's rate) it is still owed (its
	 * cost was bounded when it was made, US_POS_MIN), and the writer is
	 * told so (US_DIRTY_OVER_LIMIT): it asks us_object_balance() before it
	 * dirties again, which holds it until its pace is due. So a writer of
	 * large blocks, each of which outruns the pause, is not served at
	 * every commit's end as often as one of small blocks. */
	if (!shared)
		o->pace_ns = min_u64(o->pace_ns, now + pause);
	account_pause(o->domain, pause);
	*pause_ns = pause;
	/* Beside others, a pace still ahead holds the writer whether or not
	 * it holds anything pinned (its data may all be committed while it
	 * owes a large block's time): time alone ends it. */
	if (shared && (!bytes || o->pace_ns > now + pause + min_pause(o, floor)))
		return -EAGAIN;
	return 0;
}

int us_object_pace(us_object *o, uint64_t *owed_ns)
{
	uint64_t now;

	if (!o || !owed_ns)
		return -EINVAL;
	us__lock(o->engine);
	now = us__now(o->engine);
	*owed_ns = o->pace_ns > now ? o->pace_ns - now : 0;
	us__unlock(o->engine);
	return 0;
}

int us_object_balance(us_object *o, uint64_t *pause_ns)
{
	uint64_t pause = 0, high;
	bool wake = false;
	int rc;

	if (!o)
		return -EINVAL;
	us__lock(o->engine);
	/* Nothing dirtied: the gate at the limit, the writers ahead of it, and
	 * its own pace can hold the writer. */
	high = o->high_debt_ns;
	rc = us__throttle(o, 0, &pause, &wake);
	/* Its pace, not only a gate, can hold it: what it dirtied keeps it a
	 * while yet (a memory.high delay alone is returned with 0). A writer
	 * alone on its context that holds nothing pinned is not held: it
	 * takes the pause after its next dirtying instead (beside others,
	 * throttle() holds it by its pace all the same). */
	if (rc == 0 && pause > high && o->pinned)
		rc = -EAGAIN;
	if (pause || us__stalling(o))
		us__stall_note(o, false, pause);
	if (wake)
		us__kick(o->engine);
	us__unlock(o->engine);
	if (pause_ns)
		*pause_ns = pause;
	return rc;
}

int us_object_balance_wait(us_object *o)
{
	uint64_t pause;
	int rc;

	if (!o)
		return -EINVAL;
	/* Polled mode: nobody else would write back while we wait. */
	if (!o->engine->nthreads)
		return us_object_balance(o, NULL);
	if (us__in_callback(o->engine))
		return -EDEADLK;
	while ((rc = us_object_balance(o, &pause)) == -EAGAIN) {
		us__kick(o->engine);
		us__sleep(o->engine, pause);
	}
	return rc;
}

void us__throttle_margins(us_domain *d, struct us_wb *wb, struct us_margins *m)
{
	struct throttle t = THROTTLE_INIT;

	t.wb = wb;
	eval(d, &t);
	m->margin = t.margin;
	m->below = t.below;
	m->spent = t.spent;
}

bool us__pace_shared(const us_object *o)
{
	return pace_shared(o);
}

int us__wb_reason(struct us_wb *wb)
{
	struct throttle t = THROTTLE_INIT;
	us_domain *a;

	for (a = wb->domain; a; a = a->parent)
		if (a->reclaiming)
			return US_REASON_RECLAIM;

	t.wb = wb;
	eval(wb->domain, &t);
	if (t.paused)
		return US_REASON_THROTTLE;
	if (t.bg)
		return US_REASON_BACKGROUND;
	return -1;
}
