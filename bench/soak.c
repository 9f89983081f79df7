/*
 * us-bench-soak: the threaded engine with real memory, for a long time, with
 * faults on (the fault-injecting backend of tests/faultbk.[ch]: refused
 * flushes, write errors, short completions, failed commits, server
 * restarts, stalls, completions out of order from completer threads).
 *
 * Writers rewrite random 64 KiB blocks of objects spread over 4 domains and
 * 2 backends, about twice as much data as the root's max, so that eviction,
 * throttling and reclaim run all the time. Every 10 s a JSON line: writes
 * and bytes so far, peak charged of each domain against its max, resident
 * memory, ENOMEM count, and the bytes lost (known at the end: every block's
 * durable hash on the servers against its writer's last write, after the
 * faults stop and a final sync).
 *
 *   us-bench-soak [--time SECONDS] [--memory MIB] [--writers N]
 *
 * Defaults: 600 s, 256 MiB, 8 writers. Exits 1 when a byte was lost, a
 * charge crossed a max, or an ENOMEM was seen.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L
#include "faultbk.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BS    (64u << 10)
#define NDOM  4
#define NOBJ  16 /* 4 per domain; object o on backend o % 2 */
#define MAXWR 64

struct sobj {
	us_object *o;
	pthread_mutex_t lock;
	uint64_t *expect; /* hash of the last write of each block */
	uint64_t nblocks;
};

static us_engine *engine;
static us_domain *doms[NDOM + 1];
static struct fb *fbs[2];
static struct sobj objs[NOBJ];
static atomic_bool stop;
static atomic_uint_fast64_t nwrites, nenomem, over_max;
static int soak_writers = 8;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rss_bytes(void)
{
	FILE *fp = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	if (!fp)
		return 0;
	if (fscanf(fp, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(fp);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void snapshot(void *ctx, us_buf *b, void *dst)
{
	uintptr_t k = (uintptr_t)ctx;
	size_t id = (size_t)(uintptr_t)us_object_user(us_buf_object(b)) - 1;
	struct sobj *so = &objs[id * 2 + k];

	pthread_mutex_lock(&so->lock);
	memcpy(dst, us_buf_data(b), BS);
	pthread_mutex_unlock(&so->lock);
}

static void *writer(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull * ((uint64_t)(uintptr_t)arg + 1);

	while (!atomic_load(&stop)) {
		/* Objects are shared; blocks are not (block b of an object
		 * belongs to writer b % writers): each writer's last write is
		 * the one that must be durable. */
		int w = (int)(uintptr_t)arg, rc;
		struct sobj *so = &objs[fb_rand(&rng) % NOBJ];
		uint64_t blk = fb_rand(&rng) % so->nblocks, v = fb_rand(&rng), j;
		unsigned char *data;
		us_buf *b;

		blk -= blk % (uint64_t)soak_writers;
		blk += (uint64_t)w;
		if (blk >= so->nblocks)
			continue;
		rc = us_buf_get(so->o, blk * BS, BS, 0, &b);
		if (rc == -ENOMEM) {
			atomic_fetch_add(&nenomem, 1);
			continue;
		}
		if (rc < 0) {
			fprintf(stderr, "us_buf_get: %d\n", rc);
			exit(2);
		}
		data = us_buf_data(b);
		pthread_mutex_lock(&so->lock);
		for (j = 0; j < BS; j += 8) {
			v += 0x9e3779b97f4a7c15ull;
			memcpy(data + j, &v, 8);
		}
		so->expect[blk] = fb_hash(data, BS);
		pthread_mutex_unlock(&so->lock);
		rc = us_buf_dirty(b, NULL);
		if (rc < 0 || us_buf_put(b) != 0) {
			fprintf(stderr, "us_buf_dirty: %d\n", rc);
			exit(2);
		}
		us_object_balance_wait(so->o);
		atomic_fetch_add(&nwrites, 1);
	}
	return NULL;
}

static void report(double t0, bool final, uint64_t lost)
{
	int d;

	printf("{\"t\":%.0f,\"writes\":%llu,\"bytes\":%llu,\"rss\":%llu,\"enomem\":%llu,"
	       "\"lost_bytes\":%llu,\"final\":%s,\"domains\":[",
	       now_s() - t0, (unsigned long long)atomic_load(&nwrites),
	       (unsigned long long)atomic_load(&nwrites) * BS, (unsigned long long)rss_bytes(),
	       (unsigned long long)atomic_load(&nenomem), (unsigned long long)lost,
	       final ? "true" : "false");
	for (d = 0; d <= NDOM; d++) {
		struct us_domain_stats s = { .size = sizeof(s) };
		uint64_t max;

		us_domain_stats(doms[d], &s);
		us_domain_get_limit(doms[d], US_LIMIT_MAX, &max);
		if (s.peak_charged_bytes > max)
			atomic_fetch_add(&over_max, 1);
		printf("%s{\"name\":\"%s\",\"peak_charged\":%llu,\"max\":%llu,\"charged\":%llu,"
		       "\"unstable\":%llu,\"enomem\":%llu}",
		       d ? "," : "", us_domain_name(doms[d]),
		       (unsigned long long)s.peak_charged_bytes, (unsigned long long)max,
		       (unsigned long long)s.charged_bytes, (unsigned long long)s.unstable_bytes,
		       (unsigned long long)s.enomem);
	}
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct us_engine_options o;
	uint64_t seconds = 600, mib = 256, lost = 0;
	pthread_t wt[MAXWR];
	int i, k, d;
	double t0, next;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--time") && i + 1 < argc)
			seconds = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--memory") && i + 1 < argc)
			mib = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--writers") && i + 1 < argc)
			soak_writers = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--time SECONDS] [--memory MIB] [--writers N]\n",
				argv[0]);
			return 2;
		}
	}
	if (soak_writers < 1 || soak_writers > MAXWR || mib < 16) {
		fprintf(stderr, "1..%d writers, at least 16 MiB\n", MAXWR);
		return 2;
	}
	us_engine_options_init(&o);
	o.memory_bytes = mib << 20;
	o.flusher_threads = 2;
	if (us_engine_create(&o, &engine) != 0)
		return 2;
	doms[0] = us_engine_root(engine);
	for (d = 1; d <= NDOM; d++) {
		char name[8];

		snprintf(name, sizeof(name), "d%d", d);
		if (us_domain_create(engine, NULL, name, US_DOMAIN_ARENA, &doms[d]) != 0 ||
		    us_domain_set_limit(doms[d], US_LIMIT_MAX, (mib << 20) / 3) != 0)
			return 2;
	}
	for (k = 0; k < 2; k++) {
		struct fb_config c = {
			.seed = (uint64_t)k + 1,
			.refuse_pm = 5,
			.error_pm = 5,
			.short_pm = 50,
			.unstable_pm = 700,
			.commit_fail_pm = 20,
			.lost_pm = 1,
			.stall_pm = 1,
			.stall_picks = 2000,
			.threads = 2,
			.nobj = NOBJ / 2,
			.bs = BS,
			/* about twice the root's max over all objects */
			.nblocks = 2 * (mib << 20) / BS / NOBJ + 1,
			.keep_bytes = false,
			.with_commit = k == 0,
			.snapshot = snapshot,
			.snapshot_ctx = (void *)(uintptr_t)k,
		};

		fbs[k] = fb_create(engine, &c);
		if (!fbs[k])
			return 2;
	}
	for (i = 0; i < NOBJ; i++) {
		pthread_mutex_init(&objs[i].lock, NULL);
		objs[i].nblocks = 2 * (mib << 20) / BS / NOBJ + 1;
		objs[i].expect = calloc(objs[i].nblocks, sizeof(uint64_t));
		if (!objs[i].expect ||
		    us_object_create(fb_backend(fbs[i % 2]), doms[1 + i % NDOM],
				     (void *)(uintptr_t)(i / 2 + 1), &objs[i].o) != 0)
			return 2;
	}
	t0 = now_s();
	next = t0 + 10;
	for (i = 0; i < soak_writers; i++)
		pthread_create(&wt[i], NULL, writer, (void *)(uintptr_t)i);
	while (now_s() - t0 < (double)seconds) {
		nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
		if (now_s() >= next) {
			report(t0, false, 0);
			next += 10;
		}
	}
	atomic_store(&stop, true);
	for (i = 0; i < soak_writers; i++)
		pthread_join(wt[i], NULL);
	for (k = 0; k < 2; k++)
		fb_calm(fbs[k]);
	if (us_domain_sync(doms[0]) != 0)
		fprintf(stderr, "final sync failed\n");
	for (i = 0; i < NOBJ; i++) {
		uint64_t blk;

		for (blk = 0; blk < objs[i].nblocks; blk++) {
			uint64_t h = fb_durable_hash(fbs[i % 2], (size_t)i / 2, blk);

			if (objs[i].expect[blk] && h != objs[i].expect[blk])
				lost += BS;
		}
	}
	report(t0, true, lost);
	if (us_engine_shutdown(engine) != 0)
		fprintf(stderr, "shutdown failed\n");
	for (k = 0; k < 2; k++)
		fb_destroy(fbs[k]);
	return lost || atomic_load(&over_max) || atomic_load(&nenomem) ? 1 : 0;
}
