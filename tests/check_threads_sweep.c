/*
 * Threaded mode across the parameter space: the liveness of check_liveness
 * (docs/guide.md) with the engine's flusher threads, writer threads and server
 * threads all running at once. Swept: domains 1 to 10,000, max from 1x to
 * 100x bandwidth x commit latency, commit latency 1 ms to 10 s, two
 * backends. Asserted in every run, whatever the interleaving:
 *
 *  - no writer is held at the gate (US_DIRTY_OVER_LIMIT, then
 *    us_object_balance() returning -EAGAIN) with nothing of its own pinned
 *    (its own pace may hold it, us_object_pace(): that needs no other
 *    writer to move);
 *  - no charge fails with -ENOMEM: every write and commit completes, so
 *    one is always in flight while memory is short;
 *  - no domain is charged past its max; every byte written is committed,
 *    none lost; the engine's invariants hold.
 *
 * Time is the engine's virtual clock, moved by whoever waits: writers at
 * the gate or in a charge, and each server thread when it has an event
 * ahead and no other thread moved the clock while it yielded. Several
 * threads move it at once, so the virtual rates here mean nothing and are
 * not asserted (check_liveness measures them, polled); what is asserted
 * holds for every interleaving. The reclaim timeout (a budget for a server
 * that never answers, check_liveness) is off: a server thread that the
 * scheduler keeps off the CPU while the others move the clock would
 * otherwise look like one. Run under ThreadSanitizer in CI.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define MS  1000000ull
#define SEC 1000000000ull

#define NWR   8	  /* writer threads */
#define NSRV  2	  /* backends, a server thread each */
#define NBUFS 128 /* buffers each writer dirties */

struct wr;

/* A write sent to a server: acknowledged unstable at `at`, then committed. */
struct ack {
	us_buf *b;
	struct wr *w;
	uint64_t at, len, txn;
};

/*
 * A server: serves its writes in order at bw, acknowledges each unstable
 * lat after its transfer, commits one batch at a time (clat each, covering
 * every write acknowledged when it starts; a sync asked while one runs
 * starts one more after it). Its thread makes the engine calls, never with
 * the server's lock held: the engine calls flush and sync with its own.
 */
struct srv {
	us_engine *e;
	us_backend *bk;
	uint64_t bw, lat, clat;
	pthread_mutex_t m;
	pthread_cond_t c;
	struct ack *q; /* sent, then acknowledged, then committed */
	size_t sent, acked, done, cap;
	uint64_t busy_until, txn, commit_end, commit_txn, commits;
	bool committing, asked, stop;
	pthread_t t;
};

struct wr {
	int id;
	us_engine *e;
	us_object *o;
	uint64_t total, bs;
	/* Bytes dirtied and not yet committed: raised by the writer after
	 * its us_buf_dirty(), lowered by the server after its
	 * us_backend_commit_done() returned, so never below what the engine
	 * holds pinned for the object. */
	atomic_uint_fast64_t pinned;
	uint64_t enomem, held, held_empty;
	pthread_t t;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int srv_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		     uint64_t len, enum us_reason reason)
{
	struct srv *s = ctx;
	uint64_t now = us_engine_now(s->e);
	size_t i;

	(void)off;
	(void)len;
	(void)reason;
	pthread_mutex_lock(&s->m);
	for (i = 0; i < n; i++) {
		uint64_t l = us_buf_length(bufs[i]);

		if (s->busy_until < now)
			s->busy_until = now;
		s->busy_until += l * SEC / s->bw;
		if (s->sent == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 1024;
			s->q = realloc(s->q, s->cap * sizeof(*s->q));
			tu_assert(s->q, "out of memory");
		}
		s->q[s->sent++] =
			(struct ack){ bufs[i], us_object_user(o), s->busy_until + s->lat, l, 0 };
	}
	pthread_cond_signal(&s->c);
	pthread_mutex_unlock(&s->m);
	return 0;
}

/* With s->m held. */
static void srv_start_commit(struct srv *s)
{
	s->committing = true;
	s->commit_txn = s->txn;
	s->commit_end = sat_add(us_engine_now(s->e), s->clat);
	s->commits++;
}

static int srv_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct srv *s = ctx;

	(void)b;
	(void)reason;
	pthread_mutex_lock(&s->m);
	if (s->committing)
		s->asked = true;
	else
		srv_start_commit(s);
	pthread_cond_signal(&s->c);
	pthread_mutex_unlock(&s->m);
	return 0;
}

/* With s->m held: the time of the server's next event, or UINT64_MAX. */
static uint64_t srv_next(const struct srv *s)
{
	uint64_t t = UINT64_MAX;

	if (s->acked < s->sent)
		t = s->q[s->acked].at;
	if (s->committing && s->commit_end < t)
		t = s->commit_end;
	return t;
}

/* With s->m held, dropped across the engine calls: ends the commit in
 * flight, and lowers its writers' pinned bytes once the engine knows. */
static void srv_end_commit(struct srv *s, struct wr **w, int nw)
{
	uint64_t txn = s->commit_txn, freed[NWR] = { 0 };
	int i;

	while (s->done < s->acked && s->q[s->done].txn <= txn) {
		freed[s->q[s->done].w->id] += s->q[s->done].len;
		s->done++;
	}
	s->committing = false;
	pthread_mutex_unlock(&s->m);
	if (txn)
		tu_assert(us_backend_commit_done(s->bk, txn) >= 0, "commit_done");
	for (i = 0; i < nw; i++)
		atomic_fetch_sub(&w[i]->pinned, freed[i]);
	pthread_mutex_lock(&s->m);
	if (s->asked) {
		s->asked = false;
		srv_start_commit(s);
	}
}

static struct wr *g_w[NWR];
static int g_nw;

static void *srv_main(void *arg)
{
	struct srv *s = arg;

	pthread_mutex_lock(&s->m);
	for (;;) {
		uint64_t now = us_engine_now(s->e), next;

		if (s->acked < s->sent && s->q[s->acked].at <= now) {
			us_buf *b = s->q[s->acked].b;
			uint64_t txn = ++s->txn;

			s->q[s->acked].txn = txn;
			s->q[s->acked].b = NULL;
			s->acked++;
			pthread_mutex_unlock(&s->m);
			tu_assert(us_buf_write_done(b, US_WRITE_UNSTABLE, txn, 0) == 0,
				  "write_done");
			pthread_mutex_lock(&s->m);
			continue;
		}
		if (s->committing && s->commit_end <= now) {
			srv_end_commit(s, g_w, g_nw);
			continue;
		}
		if (s->stop)
			break;
		next = srv_next(s);
		if (next == UINT64_MAX) {
			pthread_cond_wait(&s->c, &s->m);
			continue;
		}
		/* An event ahead: the others act first; if none of them moved
		 * the clock meanwhile, this server moves it to its event. */
		pthread_mutex_unlock(&s->m);
		sched_yield();
		sched_yield();
		if (us_engine_now(s->e) == now)
			tu_assert(us_engine_clock_advance(s->e, next - now) == 0, "advance");
		pthread_mutex_lock(&s->m);
	}
	pthread_mutex_unlock(&s->m);
	return NULL;
}

/* Waits (moving the clock) for pause_ns, 1 ms when 0. */
static void wr_wait(struct wr *w, uint64_t pause_ns)
{
	tu_assert(us_engine_clock_advance(w->e, pause_ns ? pause_ns : MS) == 0, "advance");
	sched_yield();
}

static void *wr_main(void *arg)
{
	struct wr *w = arg;
	uint64_t off;

	for (off = 0; off < w->total; off += w->bs) {
		uint64_t pause = 0;
		us_buf *b;
		int rc;

		/* The blocking charge: waits for reclaim (moving the clock). */
		while ((rc = us_buf_get(w->o, off, w->bs, US_GET_NODATA, &b)) == -ENOMEM) {
			w->enomem++; /* asserted 0; go on so the run ends */
			wr_wait(w, MS);
		}
		tu_assert(rc == 1, "writer %d: get %d", w->id, rc);
		rc = us_buf_dirty(b, &pause);
		tu_assert(rc >= 0, "writer %d: dirty %d", w->id, rc);
		tu_assert(us_buf_put(b) == 0, "put");
		atomic_fetch_add(&w->pinned, w->bs);
		if (rc == US_DIRTY_OVER_LIMIT) {
			for (;;) {
				/* Read before: only this writer raises it. Its
				 * pace too: what it owes does not grow while it
				 * is held and the clock only moves on, so a
				 * writer that owed nothing before the call is
				 * held by a gate or the order only. */
				uint64_t before = atomic_load(&w->pinned), owed = 0;

				tu_assert(us_object_pace(w->o, &owed) == 0, "pace");
				rc = us_object_balance(w->o, &pause);
				if (rc != -EAGAIN)
					break;
				w->held++;
				if (!before && !owed)
					w->held_empty++;
				wr_wait(w, pause);
			}
			tu_assert(rc == 0, "writer %d: balance %d", w->id, rc);
		} else if (pause) {
			wr_wait(w, pause);
		}
	}
	return NULL;
}

struct run {
	unsigned domains;
	uint64_t bw, clat, lat;
	double mult; /* max = mult x bw x clat, per domain */
};

static void sweep_one(const struct run *r)
{
	uint64_t max = (uint64_t)(r->mult * (double)r->bw * ((double)r->clat / SEC));
	uint64_t held = 0, commits = 0, enomem = 0;
	struct us_engine_options opts;
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = srv_flush, .sync = srv_sync };
	struct srv srv[NSRV];
	struct wr wr[NWR];
	us_domain **dom;
	us_engine *e;
	unsigned i;

	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = 1ull << 40; /* the domains' maxes bound the cache */
	opts.flusher_threads = 2;
	ck_assert_int_eq(us_engine_create(&opts, &e), 0);
	ck_assert_int_eq(us_engine_set_param(e, US_PARAM_RECLAIM_TIMEOUT_NS, UINT64_MAX), 0);
	dom = calloc(r->domains, sizeof(*dom));
	ck_assert_ptr_nonnull(dom);
	for (i = 0; i < r->domains; i++) {
		char name[16];

		snprintf(name, sizeof(name), "d%u", i);
		ck_assert_int_eq(us_domain_create(e, NULL, name, 0, &dom[i]), 0);
		ck_assert_int_eq(us_domain_set_limit(dom[i], US_LIMIT_MAX, max), 0);
	}
	memset(srv, 0, sizeof(srv));
	for (i = 0; i < NSRV; i++) {
		struct srv *s = &srv[i];

		s->e = e;
		s->bw = r->bw;
		s->lat = r->lat;
		s->clat = r->clat;
		pthread_mutex_init(&s->m, NULL);
		pthread_cond_init(&s->c, NULL);
		ck_assert_int_eq(us_backend_create(e, &ops, s, &s->bk), 0);
	}
	/* Writer k in domain k x domains / NWR: all in one domain, or each
	 * in its own among thousands of idle ones. Each writes twice its
	 * domain's max, shared among the writers of that domain. */
	memset(wr, 0, sizeof(wr));
	g_nw = NWR;
	for (i = 0; i < NWR; i++) {
		unsigned d = (unsigned)((uint64_t)i * r->domains / NWR);
		unsigned share = r->domains >= NWR ? 1 : NWR / r->domains;
		struct wr *w = &wr[i];

		w->id = (int)i;
		w->e = e;
		w->bs = 2 * max / share / NBUFS;
		w->bs = w->bs < 4 * KIB ? 4 * KIB : w->bs / (4 * KIB) * (4 * KIB);
		w->total = NBUFS * w->bs;
		atomic_init(&w->pinned, 0);
		ck_assert_int_eq(us_object_create(srv[i % NSRV].bk, dom[d], w, &w->o), 0);
		g_w[i] = w;
	}
	for (i = 0; i < NSRV; i++)
		pthread_create(&srv[i].t, NULL, srv_main, &srv[i]);
	for (i = 0; i < NWR; i++)
		pthread_create(&wr[i].t, NULL, wr_main, &wr[i]);
	for (i = 0; i < NWR; i++)
		pthread_join(wr[i].t, NULL);
	/* Everything committed: the blocking sync of each object. */
	for (i = 0; i < NWR; i++) {
		uint64_t since = 0;

		ck_assert_int_eq(us_object_sync(wr[i].o, &since), 0);
	}
	for (i = 0; i < NSRV; i++) {
		pthread_mutex_lock(&srv[i].m);
		srv[i].stop = true;
		pthread_cond_signal(&srv[i].c);
		pthread_mutex_unlock(&srv[i].m);
		pthread_join(srv[i].t, NULL);
	}
	for (i = 0; i < NSRV; i++)
		commits += srv[i].commits;
	for (i = 0; i < NWR; i++) {
		held += wr[i].held;
		enomem += wr[i].enomem;
	}
	printf("threads: %5u domains, commit %5llu ms, max %5.1fx bw x lat (%8llu KiB): "
	       "%4llu commits, %6llu gate waits, %llu ENOMEM\n",
	       r->domains, (unsigned long long)(r->clat / MS), r->mult,
	       (unsigned long long)(max / KIB), (unsigned long long)commits,
	       (unsigned long long)held, (unsigned long long)enomem);
	fflush(stdout);
	tu_check(e);
	{
		struct us_domain_stats st = tu_stats(us_engine_root(e));

		ck_assert_uint_eq(st.dirty_bytes + st.writeback_bytes + st.unstable_bytes, 0);
		ck_assert_uint_eq(st.write_lost + st.commit_lost, 0);
		ck_assert_uint_eq(st.enomem, 0);
	}
	for (i = 0; i < NSRV; i++) {
		ck_assert_uint_eq(srv[i].done, srv[i].sent); /* every write committed */
		ck_assert_uint_eq(srv[i].acked, srv[i].sent);
	}
	for (i = 0; i < NWR; i++) {
		tu_assert(wr[i].enomem == 0, "writer %u: %llu ENOMEM", i,
			  (unsigned long long)wr[i].enomem);
		tu_assert(wr[i].held_empty == 0,
			  "writer %u: held at the gate %llu times with nothing of its own pinned",
			  i, (unsigned long long)wr[i].held_empty);
		ck_assert_uint_eq(atomic_load(&wr[i].pinned), 0);
	}
	for (i = 0; i < r->domains; i++)
		tu_assert(tu_stats(dom[i]).peak_charged_bytes <= max, "domain %u past its max", i);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	for (i = 0; i < NSRV; i++) {
		free(srv[i].q);
		pthread_mutex_destroy(&srv[i].m);
		pthread_cond_destroy(&srv[i].c);
	}
	free(dom);
}

/* _i: the domain count. Each: commit latency 1 ms, 100 ms and 10 s (1
 * GiB/s, 100 MiB/s, 10 MiB/s: bw x lat 1, 10, 100 MiB), max 1x, 10x and
 * 100x bw x commit latency. */
START_TEST(test_threads_sweep)
{
	static const unsigned domains[] = { 1, 4, 100, 10000 };
	static const struct {
		uint64_t bw, clat, lat;
	} bk[] = { { GIB, MS, 50000 }, { 100 * MIB, 100 * MS, MS }, { 10 * MIB, 10 * SEC, MS } };
	static const double mult[] = { 1, 10, 100 };
	size_t j, k;

	for (j = 0; j < sizeof(bk) / sizeof(bk[0]); j++) {
		for (k = 0; k < sizeof(mult) / sizeof(mult[0]); k++) {
			struct run r = { domains[_i], bk[j].bw, bk[j].clat, bk[j].lat, mult[k] };

			sweep_one(&r);
		}
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("threads_sweep");
	TCase *tc = tcase_create("sweep");

	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_threads_sweep, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
