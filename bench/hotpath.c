/*
 * us-bench-hotpath: the cost of dirtying, against a 4 KiB memcpy measured
 * in the same run. Prints one JSON object.
 *
 * SPDX-License-Identifier: MIT
 *
 * Every figure is nanoseconds per operation in real time:
 *   ns_memcpy_4k           copying 4 KiB (the data a dirtying accounts for)
 *   ns_per_dirty_1t        us_buf_dirty() turning a CLEAN 4 KiB buffer DIRTY,
 *                          below freerun: the first write to a page
 *   ns_per_redirty_1t      us_buf_dirty() on a buffer already DIRTY, its first
 *                          dirtying accounted by a lock holder: every further
 *                          write to the page (no lock, no fence)
 *   ns_per_redirty_queued_1t  the same on a buffer this thread dirtied and no
 *                          lock holder has accounted yet (a page written twice
 *                          in a row)
 *   ns_per_dirty_2t_*      the first dirtying from two threads at once, as
 *                          aggregate time per operation, on two separate
 *                          domains and on one shared domain
 *   ns_per_redirty_2t_separate  the rewrite from two threads at once
 *   ratio_1t               ns_per_dirty_1t / ns_memcpy_4k (target <= 0.10)
 *   ratio_redirty_1t       ns_per_redirty_1t / ns_memcpy_4k (target <= 0.10)
 *   scaling_2t_separate    two threads' aggregate rate over one thread's
 *                          (target >= 1.8)
 * Each round times, on NBUF buffers, a pass of first dirtyings, a pass of
 * rewrites of the queued buffers, then (after an untimed call that takes the
 * engine lock, which accounts them) a pass of rewrites of DIRTY buffers;
 * after it, untimed, a flush to a backend that completes at once makes them
 * CLEAN again. With two threads the first and the last pass start together
 * in both (the rewrites of queued buffers follow the first pass at once),
 * and the untimed calls run only when both threads' timed passes are over.
 * A rewrite pays no fence: the flusher pays a barrier per batch instead
 * (lib/buf.c), in the untimed flush.
 * Each figure is the median over the rounds of the pass's time per
 * operation (a VM's preemptions skew a mean), and the mean is printed
 * beside it as *_mean. A pass includes the writer's occasional slow paths
 * (a credit grant every 8 MiB, a new queue segment every 510 buffers);
 * the drain that accounts the queued buffers belongs to whoever takes the
 * engine lock next, here the untimed clean-up, in a program its flushers.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unstable/unstable.h>

#define NBUF 4096
#define K4   4096u

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int flush_now(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		     uint64_t length, enum us_reason reason)
{
	size_t i;

	(void)ctx;
	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	for (i = 0; i < n; i++)
		if (us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0))
			return -1;
	return 0;
}

static int sync_now(void *ctx, us_backend *b, enum us_reason reason)
{
	(void)ctx;
	(void)b;
	(void)reason;
	return 0;
}

#define MAX_ROUNDS 100000

/*
 * The machine's own figure for two threads: a private loop of the same
 * shape as the lock-free first dirtying (read a 112-byte record, mark it,
 * append it to a private array, count bytes), with no library and nothing
 * shared. On a machine whose two CPUs share a core or a turbo budget it
 * scales less than 2x; the library cannot scale better than it.
 */
struct rec {
	uint8_t state;
	uint32_t tag;
	uint64_t pad[13];
};

struct lane {
	struct rec *recs;   /* reference lanes only */
	struct rec **slots; /* reference lanes only */
	uint64_t credit;
	us_object *o;
	us_buf *bufs[NBUF];
	double dirty_ns, redirty_ns;
	unsigned long ops;
	int nrounds;
	double *dirty_r, *redirty_r, *queued_r; /* ns per op, per round */
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "us-bench-hotpath: %s: %s\n", what, us_strerror(rc));
	exit(1);
}

static void lane_init(struct lane *l, us_backend *bk, us_domain *d)
{
	int rc, i;

	memset(l, 0, sizeof(*l));
	l->dirty_r = calloc(MAX_ROUNDS, sizeof(double));
	l->redirty_r = calloc(MAX_ROUNDS, sizeof(double));
	l->queued_r = calloc(MAX_ROUNDS, sizeof(double));
	if (!l->dirty_r || !l->redirty_r || !l->queued_r)
		die("calloc", -12);
	if ((rc = us_object_create(bk, d, l, &l->o)))
		die("us_object_create", rc);
	for (i = 0; i < NBUF; i++)
		if ((rc = us_buf_get(l->o, (uint64_t)i * K4, K4, US_GET_NODATA, &l->bufs[i])) < 0)
			die("us_buf_get", rc);
}

static void lane_fini(struct lane *l)
{
	int i;

	us_object_flush(l->o, 0, US_UNLIMITED, 0);
	for (i = 0; i < NBUF; i++)
		us_buf_put(l->bufs[i]);
	free(l->dirty_r);
	free(l->redirty_r);
	free(l->queued_r);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double *c = malloc((size_t)n * sizeof(*c)), m;

	if (!c)
		die("malloc", -12);
	memcpy(c, v, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), cmp_double);
	m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
	free(c);
	return m;
}

/* The median over rounds of the two lanes' aggregate ns per op. */
static double median_two(const double *a, const double *b, int n)
{
	double *agg = malloc((size_t)n * sizeof(*agg)), m;
	int r;

	if (!agg)
		die("malloc", -12);
	for (r = 0; r < n; r++)
		agg[r] = 1.0 / (1.0 / a[r] + 1.0 / b[r]);
	m = median(agg, n);
	free(agg);
	return m;
}

static void ref_init(struct lane *l)
{
	memset(l, 0, sizeof(*l));
	l->recs = calloc(NBUF, sizeof(*l->recs));
	l->slots = calloc(NBUF, sizeof(*l->slots));
	l->dirty_r = calloc(MAX_ROUNDS, sizeof(double));
	l->redirty_r = calloc(MAX_ROUNDS, sizeof(double));
	if (!l->recs || !l->slots || !l->dirty_r || !l->redirty_r)
		die("calloc", -12);
}

static void ref_fini(struct lane *l)
{
	free(l->recs);
	free(l->slots);
	free(l->dirty_r);
	free(l->redirty_r);
}

static void ref_pass(struct lane *l)
{
	unsigned n = 0;
	int i;

	for (i = 0; i < NBUF; i++) {
		struct rec *r = &l->recs[i];

		if (r->state == 0 && r->tag != 7) {
			r->tag = 7;
			l->slots[n++] = r;
			l->credit -= K4;
		}
	}
	__asm__ volatile("" : : "r"(l->slots) : "memory");
}

/* One round: timed dirty pass, timed redirty pass, untimed clean-up. */
static void lane_round(struct lane *l, pthread_barrier_t *bar)
{
	uint64_t pause;
	double t0, t1, t2, t3, t4;
	int i;

	if (l->recs) {
		t0 = now_ns();
		ref_pass(l);
		t1 = now_ns();
		if (l->nrounds < MAX_ROUNDS)
			l->dirty_r[l->nrounds++] = (t1 - t0) / NBUF;
		l->dirty_ns += t1 - t0;
		l->ops += NBUF;
		if (bar)
			pthread_barrier_wait(bar);
		for (i = 0; i < NBUF; i++)
			l->recs[i].tag = 0;
		return;
	}
	t0 = now_ns();
	for (i = 0; i < NBUF; i++)
		us_buf_dirty(l->bufs[i], &pause);
	t1 = now_ns();
	for (i = 0; i < NBUF; i++)
		us_buf_dirty(l->bufs[i], &pause);
	t2 = now_ns();
	/* Whoever takes the engine lock drains every lane's lock-free
	 * dirtyings: with two threads, only when both timed passes are over,
	 * so that it is not measured. */
	if (bar)
		pthread_barrier_wait(bar);
	us_buf_state(l->bufs[0]); /* takes the lock: the buffers are DIRTY */
	if (bar)
		pthread_barrier_wait(bar);
	t3 = now_ns();
	for (i = 0; i < NBUF; i++)
		us_buf_dirty(l->bufs[i], &pause);
	t4 = now_ns();
	l->dirty_ns += t1 - t0;
	l->redirty_ns += t4 - t3;
	l->ops += NBUF;
	if (l->nrounds < MAX_ROUNDS) {
		l->dirty_r[l->nrounds] = (t1 - t0) / NBUF;
		l->queued_r[l->nrounds] = (t2 - t1) / NBUF;
		l->redirty_r[l->nrounds] = (t4 - t3) / NBUF;
		l->nrounds++;
	}
	if (bar)
		pthread_barrier_wait(bar);
	us_object_flush(l->o, 0, US_UNLIMITED, 0);
}

struct two {
	struct lane *lane;
	pthread_barrier_t *bar;
	int rounds;
	int cpu;
};

/* Pins the calling thread to the n-th CPU it may run on, if there is one:
 * migrations in the middle of a pass are noise. */
static void pin(int n)
{
	cpu_set_t all, one;
	int cpu, seen = 0;

	if (sched_getaffinity(0, sizeof(all), &all))
		return;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &all) || seen++ != n)
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
		return;
	}
}

static void *two_main(void *arg)
{
	struct two *t = arg;
	int r;

	pin(t->cpu);
	for (r = 0; r < t->rounds; r++) {
		pthread_barrier_wait(t->bar);
		lane_round(t->lane, t->bar);
	}
	return NULL;
}

/* Two threads in lockstep rounds; returns the aggregate ns per dirty. */
static double run_two(struct lane *a, struct lane *b, int rounds)
{
	pthread_barrier_t bar;
	struct two ta = { a, &bar, rounds, 1 }, tb = { b, &bar, rounds, 0 };
	pthread_t th;
	double rate;

	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&th, NULL, two_main, &ta);
	two_main(&tb);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&bar);
	/* Aggregate rate: the sum of both threads' rates. */
	rate = (double)a->ops / a->dirty_ns + (double)b->ops / b->dirty_ns;
	return 1.0 / rate;
}

/* The fastest of a few placements of the destination against the source:
 * two static arrays may lie a multiple of 4 KiB apart or not, as the link
 * lays them out, and a copy between such addresses is a quarter slower here
 * (4K aliasing), which would flatter every ratio. */
static double bench_memcpy(void)
{
	static const size_t place[] = { 0, 64, 256, 1024, 2048 };
	static _Alignas(4096) unsigned char mem[4 * K4];
	unsigned char *src = mem, *dst;
	double t0, best = 1e30;
	size_t p;
	int r, i;

	memset(src, 1, K4);
	for (p = 0; p < sizeof(place) / sizeof(place[0]); p++) {
		dst = mem + 2 * K4 + place[p];
		for (r = 0; r < 20; r++) {
			t0 = now_ns();
			for (i = 0; i < 20000; i++) {
				src[i & (K4 - 1)] = (unsigned char)i;
				memcpy(dst, src, K4);
				__asm__ volatile("" : : "r"(dst) : "memory");
			}
			t0 = (now_ns() - t0) / 20000;
			if (t0 < best)
				best = t0;
		}
	}
	return best;
}

int main(int argc, char **argv)
{
	struct us_backend_ops ops = { .size = sizeof(ops), .flush = flush_now, .sync = sync_now };
	struct us_engine_options opts;
	static struct lane l1, la, lb, sa, sb, r1, ra, rb;
	us_engine *e;
	us_backend *bk;
	us_domain *d1, *d2, *ds;
	int rounds = argc > 1 ? atoi(argv[1]) : 1000, rc, n;
	double memcpy_ns, one, redirty, queued, two_sep, two_shared, two_sep_mean, two_shared_mean;
	double ref_one, ref_two;

	if (rounds <= 0 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: us-bench-hotpath [ROUNDS (1..%d)]\n", MAX_ROUNDS);
		return 2;
	}
	us_engine_options_init(&opts);
	opts.memory_bytes = 64ull << 30; /* thresholds far away: below freerun */
	if ((rc = us_engine_create(&opts, &e)) || (rc = us_backend_create(e, &ops, NULL, &bk)) ||
	    (rc = us_domain_create(e, NULL, "one", 0, &d1)) ||
	    (rc = us_domain_create(e, NULL, "two", 0, &d2)) ||
	    (rc = us_domain_create(e, NULL, "shared", 0, &ds)))
		die("setup", rc);

	pin(0);
	memcpy_ns = bench_memcpy();
	lane_init(&l1, bk, d1);
	lane_round(&l1, NULL); /* warm up */
	l1.dirty_ns = l1.redirty_ns = 0;
	l1.ops = 0;
	l1.nrounds = 0;
	for (rc = 0; rc < rounds; rc++)
		lane_round(&l1, NULL);
	n = l1.nrounds;
	one = median(l1.dirty_r, n);
	redirty = median(l1.redirty_r, n);
	queued = median(l1.queued_r, n);

	lane_init(&la, bk, d1);
	lane_init(&lb, bk, d2);
	two_sep_mean = run_two(&la, &lb, rounds);
	two_sep = median_two(la.dirty_r, lb.dirty_r, n);
	lane_init(&sa, bk, ds);
	lane_init(&sb, bk, ds);
	two_shared_mean = run_two(&sa, &sb, rounds);
	two_shared = median_two(sa.dirty_r, sb.dirty_r, n);

	ref_init(&r1);
	for (rc = 0; rc < rounds; rc++)
		lane_round(&r1, NULL);
	ref_init(&ra);
	ref_init(&rb);
	run_two(&ra, &rb, rounds);
	ref_one = median(r1.dirty_r, n);
	ref_two = median_two(ra.dirty_r, rb.dirty_r, n);

	printf("{\"bench\":\"hotpath\",\"version\":\"%s\",\"buffers\":%d,\"rounds\":%d,"
	       "\"statistic\":\"median over rounds\","
	       "\"ns_memcpy_4k\":%.2f,\"ns_per_dirty_1t\":%.2f,\"ns_per_redirty_1t\":%.2f,"
	       "\"ns_per_redirty_queued_1t\":%.2f,"
	       "\"ns_per_dirty_2t_separate\":%.2f,\"ns_per_dirty_2t_shared\":%.2f,"
	       "\"ns_per_redirty_2t_separate\":%.2f,"
	       "\"ratio_1t\":%.3f,\"ratio_redirty_1t\":%.3f,\"scaling_2t_separate\":%.2f,"
	       "\"scaling_2t_shared\":%.2f,"
	       "\"ns_per_dirty_1t_mean\":%.2f,\"ns_per_dirty_2t_separate_mean\":%.2f,"
	       "\"ns_per_dirty_2t_shared_mean\":%.2f,"
	       "\"ns_ref_1t\":%.2f,\"ns_ref_2t\":%.2f,\"machine_scaling_2t\":%.2f,"
	       "\"scaling_2t_separate_of_machine\":%.2f}\n",
	       us_version(), NBUF, n, memcpy_ns, one, redirty, queued, two_sep, two_shared,
	       median_two(la.redirty_r, lb.redirty_r, n), one / memcpy_ns, redirty / memcpy_ns,
	       one / two_sep, one / two_shared, l1.dirty_ns / (double)l1.ops, two_sep_mean,
	       two_shared_mean, ref_one, ref_two, ref_one / ref_two,
	       (one / two_sep) / (ref_one / ref_two));

	ref_fini(&r1);
	ref_fini(&ra);
	ref_fini(&rb);
	lane_fini(&l1);
	lane_fini(&la);
	lane_fini(&lb);
	lane_fini(&sa);
	lane_fini(&sb);
	if ((rc = us_engine_destroy(e)))
		die("us_engine_destroy", rc);
	return 0;
}
