/*
 * us-bench-scale: the cost of one buffer's life against the number of
 * domains and buffers resident. Prints one JSON object.
 *
 * SPDX-License-Identifier: MIT
 *
 * One cycle, on an engine with a virtual clock whose root is full of clean
 * unreferenced buffers (every new buffer evicts the globally least recently
 * used one, from any domain):
 *
 *     us_buf_get (new buffer: a charge that evicts)  -> us_buf_dirty
 *     -> us_object_flush (the backend completes it UNSTABLE at once)
 *     -> us_object_commit (the backend commits at once) -> us_buf_put
 *
 * and, every POLL_EVERY cycles, the virtual clock moves on and the engine is
 * polled (bandwidth samples, expiry, the commit policy). The backend is a
 * trivial in-process one: no I/O.
 *
 *   small  1 domain, 1,024 buffers resident
 *   large  10,000 domains under the root, 1,048,576 buffers resident
 *          (--domains, --buffers; --tiny for a quick smoke run)
 *
 * The cycles come in bursts of --burst (64) buffers, written one after the
 * other to the one object of a domain picked at random: a writer streaming a
 * file. The victims follow the same pattern (the oldest buffers are the
 * burst written longest ago), so a burst touches cold memory once, as a
 * stream does; with --burst 1 every cycle misses the caches several times
 * on a large setup (its object's index, the victim's, their domains), and
 * the figure measures the memory more than the engine.
 * Runs of --cycles cycles alternate, small then large, --rounds times; each
 * figure is the median of its runs' ns per cycle, in the thread's CPU time
 * (on a shared machine, preemption does not count). ratio = large
 * / small (target <= 1.25: the engine's cost per buffer does not grow with
 * the number of domains). --check runs us_engine_check() after the runs.
 */
#define _GNU_SOURCE 1
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unstable/unstable.h>

#define BUFSZ	   256u
#define POLL_EVERY 16
#define TICK_NS	   1000u /* virtual time per cycle */

static unsigned burst = 64;

struct bk {
	uint64_t seq;
};

struct setup {
	const char *name;
	unsigned ndomains;
	uint64_t nbuffers;
	us_engine *e;
	us_backend *b;
	struct bk bk;
	us_domain **doms;
	us_object **objs;
	uint64_t *next_off;
	uint64_t rng;
	unsigned cur; /* the domain of the current burst */
	uint64_t now;
	double *runs;
	int nruns;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "us-bench-scale: %s: %s\n", what, us_strerror(rc));
	exit(1);
}

/* The thread's CPU time: what the cycles cost, whatever else runs. */
static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int flush_unstable(void *ctx, us_object *obj, us_buf *const *bufs, size_t n,
			  uint64_t offset, uint64_t length, enum us_reason reason)
{
	struct bk *k = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)length;
	(void)reason;
	for (i = 0; i < n; i++)
		if (us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, ++k->seq, 0) < 0)
			return -5;
	return 0;
}

static int commit_now(void *ctx, us_object *obj, enum us_reason reason)
{
	struct bk *k = ctx;

	(void)reason;
	return us_object_commit_done(obj, k->seq) < 0 ? -5 : 0;
}

static int sync_now(void *ctx, us_backend *b, enum us_reason reason)
{
	struct bk *k = ctx;

	(void)reason;
	return us_backend_commit_done(b, k->seq) < 0 ? -5 : 0;
}

static uint64_t rnd(struct setup *s)
{
	/* xorshift64* */
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ull;
}

static void setup_init(struct setup *s, const char *name, unsigned ndomains, uint64_t nbuffers,
		       int rounds)
{
	struct us_engine_options opts;
	struct us_backend_ops ops;
	uint64_t per, i;
	unsigned d, room = 0;
	int rc;

	memset(s, 0, sizeof(*s));
	s->name = name;
	s->ndomains = ndomains;
	s->nbuffers = nbuffers;
	s->rng = 0x9e3779b97f4a7c15ull ^ nbuffers;
	s->runs = calloc((size_t)rounds, sizeof(double));
	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = nbuffers * BUFSZ;
	if ((rc = us_engine_create(&opts, &s->e)))
		die("us_engine_create", rc);
	memset(&ops, 0, sizeof(ops));
	ops.size = sizeof(ops);
	ops.flush = flush_unstable;
	ops.commit = commit_now;
	ops.sync = sync_now;
	if ((rc = us_backend_create(s->e, &ops, &s->bk, &s->b)))
		die("us_backend_create", rc);
	s->doms = calloc(ndomains, sizeof(*s->doms));
	s->objs = calloc(ndomains, sizeof(*s->objs));
	s->next_off = calloc(ndomains, sizeof(*s->next_off));
	if (!s->runs || !s->doms || !s->objs || !s->next_off)
		die("calloc", -12);
	for (d = 0; d < ndomains; d++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "d%u", d);
		if ((rc = us_domain_create(s->e, NULL, nm, 0, &s->doms[d])))
			die("us_domain_create", rc);
		if ((rc = us_object_create(s->b, s->doms[d], NULL, &s->objs[d])))
			die("us_object_create", rc);
	}
	/* Fill the root: every domain its share of clean unreferenced
	 * buffers, in bursts as the cycles write them, the domains taking
	 * turns (so the LRU mixes them). */
	per = nbuffers / ndomains;
	for (i = 0; i < per * ndomains; i++) {
		uint64_t j = i / burst;
		unsigned k = (unsigned)(j % ndomains);
		us_buf *b;

		if (s->next_off[k] / BUFSZ >= per) {
			/* this domain is full: the first one with room */
			while (s->next_off[room] / BUFSZ >= per)
				room++;
			k = room;
		}

		if ((rc = us_buf_get(s->objs[k], s->next_off[k], BUFSZ, 0, &b)) < 0)
			die("us_buf_get (fill)", rc);
		s->next_off[k] += BUFSZ;
		us_buf_put(b);
	}
}

static void cycle(struct setup *s, uint64_t i)
{
	unsigned k;
	us_object *o;
	uint64_t off, pause;
	us_buf *b;
	int rc;

	if (i % burst == 0)
		s->cur = s->ndomains > 1 ? (unsigned)(rnd(s) % s->ndomains) : 0;
	k = s->cur;
	o = s->objs[k];
	off = s->next_off[k];
	s->next_off[k] += BUFSZ;
	if ((rc = us_buf_get(o, off, BUFSZ, 0, &b)) < 0)
		die("us_buf_get", rc);
	if ((rc = us_buf_dirty(b, &pause)) < 0)
		die("us_buf_dirty", rc);
	if ((rc = us_object_flush(o, off, BUFSZ, 0)) < 0)
		die("us_object_flush", rc);
	if ((rc = us_object_commit(o)) < 0)
		die("us_object_commit", rc);
	if ((rc = us_buf_put(b)) < 0)
		die("us_buf_put", rc);
	if (i % POLL_EVERY == POLL_EVERY - 1) {
		s->now += POLL_EVERY * TICK_NS;
		if ((rc = us_engine_poll(s->e, s->now, NULL)) < 0)
			die("us_engine_poll", rc);
	}
}

static void run(struct setup *s, uint64_t cycles)
{
	double t0, t1;
	uint64_t i;

	t0 = now_ns();
	for (i = 0; i < cycles; i++)
		cycle(s, i);
	t1 = now_ns();
	s->runs[s->nruns++] = (t1 - t0) / (double)cycles;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void check(struct setup *s)
{
	char msg[256];
	int rc = us_engine_check(s->e, msg, sizeof(msg));

	if (rc)
		fprintf(stderr, "us-bench-scale: %s: invariant: %s\n", s->name, msg);
	if (rc)
		exit(1);
}

static void setup_fini(struct setup *s)
{
	unsigned d;
	int rc;

	for (d = 0; d < s->ndomains; d++)
		if ((rc = us_object_destroy(s->objs[d])))
			die("us_object_destroy", rc);
	if ((rc = us_engine_destroy(s->e)))
		die("us_engine_destroy", rc);
	free(s->doms);
	free(s->objs);
	free(s->next_off);
	free(s->runs);
}

static void usage(void)
{
	fprintf(stderr, "usage: us-bench-scale [--tiny] [--domains N] [--buffers N] "
			"[--cycles N] [--rounds N] [--burst N] [--check] [--only small|large]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned domains = 10000;
	uint64_t buffers = 1u << 20, cycles = 200000;
	int rounds = 5, r, i;
	bool verify = false;
	const char *only = NULL;
	struct setup small, large;
	double ms, ml;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tiny")) {
			domains = 16;
			buffers = 4096;
			cycles = 2000;
			rounds = 1;
			verify = true;
		} else if (!strcmp(argv[i], "--check")) {
			verify = true;
		} else if (i + 1 < argc && !strcmp(argv[i], "--domains")) {
			domains = (unsigned)strtoul(argv[++i], NULL, 0);
		} else if (i + 1 < argc && !strcmp(argv[i], "--buffers")) {
			buffers = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && !strcmp(argv[i], "--cycles")) {
			cycles = strtoull(argv[++i], NULL, 0);
		} else if (i + 1 < argc && !strcmp(argv[i], "--only")) {
			only = argv[++i]; /* for a profiler: "small" or "large" */
		} else if (i + 1 < argc && !strcmp(argv[i], "--burst")) {
			burst = (unsigned)strtoul(argv[++i], NULL, 0);
		} else if (i + 1 < argc && !strcmp(argv[i], "--rounds")) {
			rounds = atoi(argv[++i]);
		} else {
			usage();
		}
	}
	if (!domains || buffers < domains || !cycles || rounds < 1 || !burst)
		usage();

	setup_init(&small, "small", 1, 1024, rounds);
	setup_init(&large, "large", domains, buffers, rounds);
	/* Warm both up once, untimed. */
	run(&small, cycles / 4 + 1);
	run(&large, cycles / 4 + 1);
	small.nruns = large.nruns = 0;
	for (r = 0; r < rounds; r++) {
		if (!only || !strcmp(only, "small"))
			run(&small, cycles);
		if (!only || !strcmp(only, "large"))
			run(&large, cycles);
	}
	if (only) {
		struct setup *x = strcmp(only, "small") ? &large : &small;

		printf("{\"%s\": {\"ns_per_cycle\": %.1f}}\n", x->name, median(x->runs, x->nruns));
		return 0;
	}
	if (verify) {
		check(&small);
		check(&large);
	}
	ms = median(small.runs, small.nruns);
	ml = median(large.runs, large.nruns);
	printf("{\"small\": {\"ns_per_cycle\": %.1f, \"domains\": %u, \"buffers\": %llu}, "
	       "\"large\": {\"ns_per_cycle\": %.1f, \"domains\": %u, \"buffers\": %llu}, "
	       "\"ratio\": %.3f}\n",
	       ms, small.ndomains, (unsigned long long)small.nbuffers, ml, large.ndomains,
	       (unsigned long long)large.nbuffers, ml / ms);
	setup_fini(&small);
	setup_fini(&large);
	return 0;
}
