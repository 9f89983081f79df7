/*
 * unstable-sim's own logic: argument parsing and its errors, and short
 * scenarios that assert the invariants (no ENOMEM, peak charged within max,
 * no byte lost) — not the throughput targets, which belong to the
 * benchmark.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE 1 /* mkdtemp */
#include "sim.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)

START_TEST(test_sizes_times_rates)
{
	char err[128];
	uint64_t v;

	ck_assert_int_eq(sim_parse_size("4096", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(sim_parse_size("4K", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(sim_parse_size("1.5G", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 3ull << 29);
	ck_assert_int_eq(sim_parse_size("2TiB", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 2ull << 40);
	ck_assert_int_eq(sim_parse_size("4X", &v, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "suffix"));
	ck_assert_int_eq(sim_parse_size("-1", &v, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_size("", &v, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_time("5s", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 5000000000u);
	ck_assert_int_eq(sim_parse_time("20ms", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 20000000u);
	ck_assert_int_eq(sim_parse_time("3us", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 3000u);
	ck_assert_int_eq(sim_parse_time("7", &v, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_time("7h", &v, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_rate("2G/s", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(sim_parse_rate("2G", &v, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_rate("0/s", &v, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_specs)
{
	struct sim_config c;
	char err[128];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=100M/s,lat=1ms,rpcs=4,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=64M",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(c.backend.bw, 100 * MIB);
	ck_assert_uint_eq(c.backend.rpcs, 4);
	ck_assert_uint_eq(c.backend.journal, 64 * MIB);
	ck_assert_int_eq(sim_parse_backend("bw=1G/s,speed=3", &c.backend, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "speed"));
	ck_assert_int_eq(sim_parse_backend("rpcs=0", &c.backend, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("p,max=1G", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(
		sim_parse_domain("a,parent=p,max=256M,bg=10%,dirty=32M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.ndom, 2);
	ck_assert_int_eq(c.dom[1].parent, 0);
	ck_assert_uint_eq(c.dom[1].bg_pct, 10);
	ck_assert_uint_eq(c.dom[1].dirty, 32 * MIB);
	ck_assert_int_eq(sim_parse_domain("a,max=1G", &c, err, sizeof(err)), -1); /* twice */
	ck_assert_int_eq(sim_parse_domain("b,parent=nope", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("b,bg=101%", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("a,bytes=1G,bs=1M,start=2s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nwr, 1);
	ck_assert_uint_eq(c.wr[0].start_ns, 2000000000u);
	ck_assert_int_eq(sim_parse_writer("zz,bytes=1G", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("a,bs=1M", &c, err, sizeof(err)), -1); /* no bytes */
	ck_assert_int_eq(c.nwr, 1);
}
END_TEST

/* A short run of each policy: the invariants of the benchmark's table. */
START_TEST(test_short_runs)
{
	struct sim_config c;
	struct sim_result r;
	char err[128];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=200M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=1T",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("a,max=32M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("b,max=32M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=96M,bs=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("b,bytes=96M,bs=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].enomem + r.wr[1].enomem, 0);
	ck_assert_uint_eq(r.wr[0].bytes, 96 * MIB);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert_uint_le(r.dom[0].peak_charged, 32 * MIB);
	ck_assert(!r.dom[0].over_max && !r.dom[1].over_max);
	ck_assert(r.jain > 0.99);
	fprintf(stderr, "sim, unstable: %.2f and %.2f of the backend, Jain %.4f\n", r.wr[0].ratio,
		r.wr[1].ratio, r.jain);

	/* The naive client: no ENOMEM here (it commits when full), nothing
	 * lost, but stop-and-go: its longest pause is a whole reclaim wait. */
	c.policy = SIM_POLICY_NAIVE;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].enomem + r.wr[1].enomem, 0);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert(!r.dom[0].over_max && !r.dom[1].over_max);
	ck_assert_uint_ge(r.wr[0].max_pause_ns, 100000000u);
	fprintf(stderr, "sim, naive: %.2f and %.2f of the backend, max pause %.0f ms\n",
		r.wr[0].ratio, r.wr[1].ratio, r.wr[0].max_pause_ns / 1e6);

	/* The unpatched client: ENOMEM, yet nothing written is lost. */
	c.policy = SIM_POLICY_NO_FORCED_COMMIT;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_gt(r.wr[0].enomem, 0);
	ck_assert_uint_lt(r.wr[0].bytes, 96 * MIB);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert(!r.dom[0].over_max);
}
END_TEST

/* Asserts the benchmark's invariants on a result. */
static void invariants(const struct sim_config *c, const struct sim_result *r)
{
	int i;

	for (i = 0; i < c->nwr; i++) {
		ck_assert_uint_eq(r->wr[i].enomem, 0);
		ck_assert_uint_eq(r->wr[i].bytes, c->wr[i].bytes);
		ck_assert_uint_eq(r->wr[i].lost_bytes, 0);
	}
	for (i = 0; i < c->ndom; i++) {
		ck_assert(!r->dom[i].over_max);
		if (c->dom[i].max != UINT64_MAX)
			ck_assert_uint_le(r->dom[i].peak_charged, c->dom[i].max);
	}
}

/*
 * One short scenario of each kind of the seeds, scaled down 64 times (MiB
 * for GiB): one dd at 2x a limit (table 2), 8 domains side by side (table
 * 3), a limited writer beside an unlimited one (table 4), a tiny limit on a
 * slow disk (memcg). The invariants, not the throughput.
 */
START_TEST(test_seed_kinds)
{
	const uint64_t G = 16 * MIB; /* a scaled "gigabyte" */
	struct sim_config c;
	struct sim_result r;
	char err[128];
	int i;

	/* table 2 */
	sim_config_init(&c);
	c.backend.bw = 200 * MIB;
	ck_assert_int_eq(sim_parse_domain("memcg,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("memcg,bytes=32M,bs=256K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);

	/* table 3: 8 domains, fairness */
	sim_config_init(&c);
	c.backend.bw = 400 * MIB;
	for (i = 0; i < 8; i++) {
		char spec[64];

		snprintf(spec, sizeof(spec), "m%d,max=%llu", i, (unsigned long long)G / 2);
		ck_assert_int_eq(sim_parse_domain(spec, &c, err, sizeof(err)), 0);
		snprintf(spec, sizeof(spec), "m%d,bytes=%llu,bs=256K,rate=100M/s", i,
			 (unsigned long long)G);
		ck_assert_int_eq(sim_parse_writer(spec, &c, err, sizeof(err)), 0);
	}
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);
	ck_assert(r.jain > 0.99);

	/* table 4: the unlimited writer keeps its pace */
	sim_config_init(&c);
	c.backend.bw = 400 * MIB;
	ck_assert_int_eq(sim_parse_domain("B", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("A,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("B,bytes=64M,bs=256K,rate=100M/s", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_writer("A,bytes=64M,bs=256K,rate=100M/s", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);
	ck_assert(r.wr[0].ratio > 0.97);

	/* memcg: a 5M limit on a 40 MB/s disk */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=40M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=128M",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("c,max=5M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("c,bytes=64M,bs=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);
}
END_TEST

/*
 * Real time (sim_run_realtime()): real threads, payloads from the engine,
 * against the simulated server run by a thread, then a file. Short runs
 * through 8 MiB domains; the invariants only, never the time they took.
 */
static void realtime_config(struct sim_config *c, const char *writers)
{
	char err[128], spec[64];
	int i;

	sim_config_init(c);
	/* Quick commits: the run is bounded by the commits a small domain needs. */
	ck_assert_int_eq(sim_parse_backend("bw=400M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=1s,"
					   "commit-lat=2ms,journal=1G",
					   &c->backend, err, sizeof(err)),
			 0);
	c->seed = 42;
	for (i = 0; writers[i]; i++) {
		snprintf(spec, sizeof(spec), "d%d,max=8M", i);
		ck_assert_int_eq(sim_parse_domain(spec, c, err, sizeof(err)), 0);
		snprintf(spec, sizeof(spec), "d%d,bytes=%s", i,
			 writers[i] == 'a' ? "32M,bs=256K" : "16M,bs=12345");
		ck_assert_int_eq(sim_parse_writer(spec, c, err, sizeof(err)), 0);
	}
}

static void realtime_invariants(const struct sim_config *c, const struct sim_result *r)
{
	invariants(c, r);
	ck_assert_uint_gt(r->peak_rss, 0);
	ck_assert_uint_gt(r->peak_charged, 0);
	ck_assert_uint_le(r->peak_charged, (uint64_t)c->ndom * 8 * MIB);
}

START_TEST(test_realtime_sim)
{
	struct sim_config c;
	struct sim_result r;
	char err[128];

	/* Two writers in two domains: 256 KiB blocks, and odd-sized ones. */
	realtime_config(&c, "ab");
	ck_assert_int_eq(sim_run_realtime(&c, NULL, &r, err, sizeof(err)), 0);
	realtime_invariants(&c, &r);
	fprintf(stderr,
		"realtime, server: %.1f and %.1f MiB/s, peak charged %.1f MiB, RSS %.1f MiB\n",
		r.wr[0].throughput / MIB, r.wr[1].throughput / MIB, (double)r.peak_charged / MIB,
		(double)r.peak_rss / MIB);

	/* The other policies run too; the unpatched client's ENOMEM is a
	 * matter of timing here, so only nothing lost is asserted. */
	c.policy = SIM_POLICY_NAIVE;
	ck_assert_int_eq(sim_run_realtime(&c, NULL, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert(!r.dom[0].over_max && !r.dom[1].over_max);
}
END_TEST

START_TEST(test_realtime_file)
{
	struct sim_config c;
	struct sim_result r;
	char err[128], dir[] = "rt-file-XXXXXX", path[64];
	uint64_t bytes;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/data", dir);
	/* 256 KiB blocks: O_DIRECT when the filesystem takes it. */
	realtime_config(&c, "a");
	ck_assert_int_eq(sim_run_realtime(&c, path, &r, err, sizeof(err)), 0);
	realtime_invariants(&c, &r);
	ck_assert_uint_eq(r.file_bytes, 32 * MIB);
	ck_assert(r.io_note[0]);
	fprintf(stderr, "realtime, file: %.1f MiB/s, peak charged %.1f MiB, RSS %.1f MiB; %s\n",
		r.wr[0].throughput / MIB, (double)r.peak_charged / MIB, (double)r.peak_rss / MIB,
		r.io_note);
	/* Two writers, one with odd-sized blocks: the page cache for all. */
	realtime_config(&c, "ab");
	ck_assert_int_eq(sim_run_realtime(&c, path, &r, err, sizeof(err)), 0);
	realtime_invariants(&c, &r);
	bytes = c.wr[0].bytes + c.wr[1].bytes;
	ck_assert_uint_eq(r.file_bytes, bytes);
	ck_assert_uint_eq(r.direct_bytes, 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	/* An unusable path is an error, not a crash. */
	ck_assert_int_eq(sim_run_realtime(&c, "/nonexistent/dir/file", &r, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "cannot open"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim");
	TCase *tc = tcase_create("sim");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_sizes_times_rates);
	tcase_add_test(tc, test_specs);
	tcase_add_test(tc, test_short_runs);
	tcase_add_test(tc, test_seed_kinds);
	tcase_add_test(tc, test_realtime_sim);
	tcase_add_test(tc, test_realtime_file);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
