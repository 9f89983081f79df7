/*
 * unstable-sim's own logic: argument parsing and its errors, the simulated
 * server of the virtual-time runs (its commit rules and its checksum
 * accounting, driven directly with a small engine on a virtual clock), and
 * short scenarios that assert the invariants (no ENOMEM, peak charged
 * within max, no byte lost) — not the throughput targets, which belong to
 * the benchmark.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE 1 /* mkdtemp */
#include "server.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define MS  1000000ull
#define SEC 1000000000ull

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
	ck_assert_ptr_nonnull(strstr(err, "unknown unit"));
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
	/* count=: as many domains and writers as asked, past the old cap of 64. */
	ck_assert_int_eq(sim_parse_domain("g,count=1000,parent=p,max=16M", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(c.ndom, 1002);
	ck_assert_str_eq(c.dom[2].name, "g-1");
	ck_assert_str_eq(c.dom[1001].name, "g-1000");
	ck_assert_int_eq(c.dom[1001].parent, 0);
	ck_assert_uint_eq(c.dom[1001].max, 16 * MIB);
	ck_assert_int_eq(sim_parse_domain("g-7", &c, err, sizeof(err)), -1); /* taken */
	ck_assert_int_eq(sim_parse_domain("g", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("h,count=0", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("g,bytes=32M,count=2", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nwr, 2001);
	ck_assert_int_eq(c.wr[1].domain, 2);
	ck_assert_int_eq(c.wr[2].domain, 2);
	ck_assert_int_eq(c.wr[2000].domain, 1001);
	ck_assert_int_eq(sim_parse_writer("g-5,bytes=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.wr[2001].domain, 6);
	ck_assert_int_eq(sim_parse_writer("a,bytes=1M,count=-1", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(c.nwr, 2002);
	sim_config_free(&c);
	ck_assert_int_eq(c.ndom + c.nwr, 0);
}
END_TEST

/*
 * Every value the parsers refuse, and the message that says so: nan, inf,
 * negative, an exponent, out of its kind's or its key's bounds. Each spec
 * parser names its option, its argument and the key ("--domain x,max=abc:
 * max: "), so that a long command line says which of its values was wrong.
 */
START_TEST(test_bad_values)
{
	static const struct {
		char opt; /* d: --domain, w: --writer (in domain d), b: --backend, s: --stripe */
		const char *spec, *key;
	} bad[] = {
		{ 'd', "x,max=abc", "max" },
		{ 'd', "x,max=nan", "max" },
		{ 'd', "x,max=inf", "max" },
		{ 'd', "x,max=-1", "max" },
		{ 'd', "x,max=1e18", "max" },
		{ 'd', "x,max=0x10", "max" },
		{ 'd', "x,max=2P", "max" },
		{ 'd', "x,max=0", "max" },
		{ 'd', "x,max=1.", "max" },
		{ 'd', "x,max=.5G", "max" },
		{ 'd', "x,high=nan", "high" },
		{ 'd', "x,bg=nan", "bg" },
		{ 'd', "x,bg=-1%", "bg" },
		{ 'd', "x,dirty=inf", "dirty" },
		{ 'd', "x,dirty=-5%", "dirty" },
		{ 'd', "x,dirty=101%", "dirty" },
		{ 'd', "x,dirty=1.5%", "dirty" },
		{ 'd', "x,dirty=nan%", "dirty" },
		{ 'd', "x,dirty= 5%", "dirty" },
		{ 'd', "x,count=1000000", "count" },
		{ 'd', "x,count=100001", "count" },
		{ 'd', "x,count=nan", "count" },
		{ 'd', "x,count=-1", "count" },
		{ 'd', "x,count=1e3", "count" },
		{ 'd', "x,count=0", "count" },
		{ 'w', "d,bytes=nan", "bytes" },
		{ 'w', "d,bytes=1e18", "bytes" },
		{ 'w', "d,bytes=-1", "bytes" },
		{ 'w', "d,bytes=2P", "bytes" },
		{ 'w', "d,bytes=0", "bytes" },
		{ 'w', "d,bytes=1M,bs=nan", "bs" },
		{ 'w', "d,bytes=1M,bs=2G", "bs" },
		{ 'w', "d,bytes=1M,bs=0", "bs" },
		{ 'w', "d,bytes=1M,start=nans", "start" },
		{ 'w', "d,bytes=1M,start=infs", "start" },
		{ 'w', "d,bytes=1M,start=-1s", "start" },
		{ 'w', "d,bytes=1M,start=3601s", "start" },
		{ 'w', "d,bytes=1M,start=5", "start" },
		{ 'w', "d,bytes=1M,rate=nan/s", "rate" },
		{ 'w', "d,bytes=1M,rate=0/s", "rate" },
		{ 'w', "d,bytes=1M,rate=1023/s", "rate" },
		{ 'w', "d,bytes=1M,rate=2T/s", "rate" },
		{ 'w', "d,bytes=1M,count=100001", "count" },
		{ 'w', "d,bytes=1M,count=nan", "count" },
		{ 'w', "d,bytes=1M,stripe-size=nan", "stripe-size" },
		{ 'w', "d,bytes=1M,stripe-size=8G", "stripe-size" },
		{ 'b', "bw=nan/s", "bw" },
		{ 'b', "bw=inf/s", "bw" },
		{ 'b', "bw=-1G/s", "bw" },
		{ 'b', "bw=2T/s", "bw" },
		{ 'b', "bw=100/s", "bw" },
		{ 'b', "fast:bw=nan/s", "bw" },
		{ 'b', "lat=nanms", "lat" },
		{ 'b', "lat=3601s", "lat" },
		{ 'b', "rpcs=nan", "rpcs" },
		{ 'b', "rpcs=0", "rpcs" },
		{ 'b', "rpcs=-1", "rpcs" },
		{ 'b', "rpcs=65537", "rpcs" },
		{ 'b', "rpcs=18446744073709551616", "rpcs" },
		{ 'b', "rpc=nan", "rpc" },
		{ 'b', "rpc=0", "rpc" },
		{ 'b', "rpc=2G", "rpc" },
		{ 'b', "commit-interval=nans", "commit-interval" },
		{ 'b', "commit-interval=0s", "commit-interval" },
		{ 'b', "commit-interval=999us", "commit-interval" },
		{ 'b', "commit-interval=3601s", "commit-interval" },
		{ 'b', "commit-lat=nanms", "commit-lat" },
		{ 'b', "commit-lat=5ms+nan/s", "commit-lat" },
		{ 'b', "journal=nan", "journal" },
		{ 'b', "journal=-1", "journal" },
		{ 'b', "journal=2P", "journal" },
		{ 's', "a,size=nan", "size" },
		{ 's', "a,size=0", "size" },
		{ 's', "a,size=8G", "size" },
	};
	static const char *const bad_memory[] = {
		"nan", "inf", "-1", "0", "4095", "2P", "1e9", ""
	};
	static const char *const bad_seed[] = { "nan", "-1", "1.5", "18446744073709551616",
						"",    "1e3" };
	struct sim_config c;
	char err[512], want[256];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *opt = bad[i].opt == 'd' ? "--domain" :
				  bad[i].opt == 'w' ? "--writer" :
				  bad[i].opt == 'b' ? "--backend" :
						      "--stripe";
		int rc;

		sim_config_init(&c);
		ck_assert_int_eq(sim_parse_domain("d", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_backend_opt("a:bw=1G/s", &c, err, sizeof(err)), 0);
		err[0] = '\0';
		rc = bad[i].opt == 'd' ? sim_parse_domain(bad[i].spec, &c, err, sizeof(err)) :
		     bad[i].opt == 'w' ? sim_parse_writer(bad[i].spec, &c, err, sizeof(err)) :
		     bad[i].opt == 'b' ? sim_parse_backend_opt(bad[i].spec, &c, err, sizeof(err)) :
					 sim_parse_stripe(bad[i].spec, &c, err, sizeof(err));
		snprintf(want, sizeof(want), "%s %s: %s: ", opt, bad[i].spec, bad[i].key);
		if (rc != -1 || strncmp(err, want, strlen(want)))
			ck_abort_msg("%s %s: rc %d, message '%s', not '%s...'", opt, bad[i].spec,
				     rc, err, want);
		/* Nothing was added: a refused domain or writer is not there. */
		ck_assert_int_eq(c.ndom, 1);
		ck_assert_int_eq(c.nwr, 0);
		sim_config_free(&c);
	}
	sim_config_init(&c);
	for (i = 0; i < sizeof(bad_memory) / sizeof(bad_memory[0]); i++) {
		ck_assert_int_eq(sim_parse_memory(bad_memory[i], &c, err, sizeof(err)), -1);
		ck_assert_ptr_nonnull(strstr(err, "--memory: "));
		ck_assert_uint_eq(c.memory, 64ull << 30);
	}
	for (i = 0; i < sizeof(bad_seed) / sizeof(bad_seed[0]); i++) {
		ck_assert_int_eq(sim_parse_seed(bad_seed[i], &c, err, sizeof(err)), -1);
		ck_assert_ptr_nonnull(strstr(err, "--seed: "));
		ck_assert_uint_eq(c.seed, 1);
	}
	/* What the messages say, on a few. */
	ck_assert_int_eq(sim_parse_domain("x,max=abc", &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "--domain x,max=abc: max: 'abc' is not a number");
	ck_assert_int_eq(sim_parse_domain("x,max=nan", &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "--domain x,max=nan: max: 'nan' is not a finite number");
	ck_assert_int_eq(sim_parse_domain("x,max=-1", &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "--domain x,max=-1: max: '-1' is negative");
	ck_assert_int_eq(sim_parse_domain("x,count=1000000", &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err,
			 "--domain x,count=1000000: count: '1000000' is out of range: 1 to 100000");
	ck_assert_int_eq(sim_parse_memory("2P", &c, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "--memory: '2P' is more than 1P");
	sim_config_free(&c);

	/* The unit parsers alone: their kind's bounds. */
	{
		uint64_t v;

		ck_assert_int_eq(sim_parse_size("nan", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_size("inf", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_size("1e3", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_size("1025T", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_time("nans", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_time("3601s", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_rate("nan/s", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_rate("1023/s", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_rate("1025G/s", &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_uint("7x", 0, 9, &v, err, sizeof(err)), -1);
		ck_assert_int_eq(sim_parse_uint("10", 0, 9, &v, err, sizeof(err)), -1);
	}
}
END_TEST

/* The bounds themselves are values: each is taken, as are the forms. */
START_TEST(test_bounds_taken)
{
	struct sim_config c;
	char err[512];
	uint64_t v;

	ck_assert_int_eq(sim_parse_size("1P", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, SIM_SIZE_MAX);
	ck_assert_int_eq(sim_parse_size("1024T", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, SIM_SIZE_MAX);
	ck_assert_int_eq(sim_parse_size("4KiB", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(sim_parse_size("0", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(sim_parse_time("3600s", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, SIM_TIME_MAX);
	ck_assert_int_eq(sim_parse_time("0.5ms", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 500000);
	ck_assert_int_eq(sim_parse_rate("1K/s", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, SIM_RATE_MIN);
	ck_assert_int_eq(sim_parse_rate("1T/s", &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, SIM_RATE_MAX);
	ck_assert_int_eq(
		sim_parse_uint("18446744073709551615", 0, UINT64_MAX, &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, UINT64_MAX);

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_memory("4K", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.memory, SIM_MEMORY_MIN);
	ck_assert_int_eq(sim_parse_memory("1P", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_seed("18446744073709551615", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.seed, UINT64_MAX);
	ck_assert_int_eq(sim_parse_backend("bw=1T/s,lat=0ns,rpcs=65536,rpc=1G,commit-interval=1ms,"
					   "commit-lat=3600s+1K/s,journal=0",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(c.backend.rpcs, SIM_RPCS_MAX);
	ck_assert_uint_eq(c.backend.commit_interval, SIM_INTERVAL_MIN);
	ck_assert_int_eq(sim_parse_domain("d,max=1P,high=1,bg=0%,dirty=100%", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("g,count=100000,max=1", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.ndom, 1 + SIM_COUNT_MAX);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1P,bs=1G,start=3600s,rate=1T/s,count=100000", &c,
					  err, sizeof(err)),
			 0);
	ck_assert_int_eq(c.nwr, SIM_COUNT_MAX);
	/* 10 writers in each of 100,000 domains: 1,000,000, at most at once. */
	ck_assert_int_eq(sim_parse_writer("g,bytes=1,count=10", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("g,bytes=1,count=11", &c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "at most 1000000"));
	sim_config_free(&c);
}
END_TEST

static void invariants(const struct sim_config *c, const struct sim_result *r);

/*
 * bg=0 and dirty=0 are ratios of 0, as 0% is: the engine takes no threshold
 * of 0 bytes, and a dirty ratio of 0 is its write-through (a commit per
 * block, here), where "not set" would have left the default 20 %.
 */
START_TEST(test_zero_thresholds)
{
	struct us_engine_options opts;
	struct sim_config c;
	struct sim_result r = { 0 };
	us_engine *e;
	us_domain *dom[4];
	uint64_t v;
	char err[256];
	int i;

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("a,dirty=0", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("b,dirty=0%,bg=0", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("c,dirty=10%,bg=0%", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("d,dirty=0,dirty=32M", &c, err, sizeof(err)), 0);
	ck_assert(c.dom[0].dirty_zero && c.dom[1].dirty_zero && !c.dom[2].dirty_zero);
	ck_assert(!c.dom[0].bg_zero && c.dom[1].bg_zero && c.dom[2].bg_zero);
	/* The last one given stays, as on the engine. */
	ck_assert(!c.dom[3].dirty_zero);
	ck_assert_uint_eq(c.dom[3].dirty, 32 * MIB);

	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	ck_assert_int_eq(us_engine_create(&opts, &e), 0);
	ck_assert_int_eq(sim_domains_create(e, &c, dom, err, sizeof(err)), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(us_domain_get_limit(dom[i], US_LIMIT_DIRTY_RATIO, &v), 0);
		ck_assert_uint_eq(v, 0);
		ck_assert_int_eq(us_domain_get_limit(dom[i], US_LIMIT_DIRTY_BYTES, &v), 0);
		ck_assert_uint_eq(v, 0);
	}
	ck_assert_int_eq(us_domain_get_limit(dom[1], US_LIMIT_DIRTY_BG_RATIO, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(us_domain_get_limit(dom[2], US_LIMIT_DIRTY_RATIO, &v), 0);
	ck_assert_uint_eq(v, 10);
	ck_assert_int_eq(us_domain_get_limit(dom[3], US_LIMIT_DIRTY_BYTES, &v), 0);
	ck_assert_uint_eq(v, 32 * MIB);
	for (i = 3; i >= 0; i--)
		ck_assert_int_eq(us_domain_destroy(dom[i]), 0);
	ck_assert_int_eq(us_engine_destroy(e), 0);
	sim_config_free(&c);

	/* Write-through: every block of 16 is written back and committed
	 * before the next is dirtied, nothing lost. */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("a,max=16M,dirty=0", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);
	ck_assert_uint_ge(r.server_commits, 16);
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

/* A config of the shape of a scenario: n writers of bytes in their own
 * domains of max (0: unlimited), on the default backend given. */
static void shape(struct sim_config *c, const char *backend, uint64_t memory, int n,
		  const char *writer)
{
	char err[256], spec[64];
	int i;

	sim_config_init(c);
	c->memory = memory;
	if (backend)
		ck_assert_int_eq(sim_parse_backend(backend, &c->backend, err, sizeof(err)), 0);
	for (i = 0; i < n; i++) {
		snprintf(spec, sizeof(spec), "d%d", i);
		ck_assert_int_eq(sim_parse_domain(spec, c, err, sizeof(err)), 0);
		snprintf(spec, sizeof(spec), "d%d,%s", i, writer);
		ck_assert_int_eq(sim_parse_writer(spec, c, err, sizeof(err)), 0);
	}
}

static void check_ok(const struct sim_config *c, const char *what)
{
	struct sim_cost k;
	char err[512];

	ck_assert_int_eq(sim_cost(c, &k), 0);
	fprintf(stderr, "sim cost, %s: %.0f blocks, %.0f events, %.1f MiB, %.0f s\n", what,
		k.blocks, k.events, k.memory_bytes / MIB, k.seconds);
	if (sim_config_check(c, 4ull << 30, err, sizeof(err)))
		ck_abort_msg("%s refused: %s", what, err);
}

/*
 * A run as a whole (check.c): a writer's bs must fit under every max above
 * it and the memory; its cost must be within the bounds. The largest runs
 * of the built-in scenarios, and 100,000 domains writing twice their 16M,
 * pass on a machine of 4 GiB; what would not finish, or not fit, does not.
 */
START_TEST(test_run_check)
{
	struct sim_config c;
	struct sim_cost k;
	char err[512];

	/* bs over a max: the domain's, an ancestor's, the engine's memory. */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("p,max=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("a,parent=p,max=4M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("b,max=8M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=8M,bs=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=8M,bs=2M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "writer 1 (domain a): bs=2M is more than max=1M of domain p: no "
			      "block of it could ever be charged");
	c.nwr = 1;
	ck_assert_int_eq(sim_parse_writer("b,bytes=8M,bs=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "max=8M of domain b"));
	c.nwr = 1;
	c.memory = 512 << 10;
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "--memory 512K"));
	sim_config_free(&c);

	/* Too many blocks: 100T in 1M blocks; 16T is 2^24 + 2 events. */
	shape(&c, NULL, 64ull << 30, 1, "bytes=100T");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "104857600 blocks"));
	sim_config_free(&c);
	shape(&c, NULL, 64ull << 30, 1, "bytes=16T");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	sim_config_free(&c);
	shape(&c, NULL, 64ull << 30, 1, "bytes=16T,bs=2M");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), 0);
	sim_config_free(&c);

	/* Too long: 1G at 1K/s; or at a writer's own 1K/s; or after its start. */
	shape(&c, "bw=1K/s", 64ull << 30, 1, "bytes=1G");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "1048576 s of simulated time"));
	sim_config_free(&c);
	shape(&c, NULL, 64ull << 30, 1, "bytes=1G,rate=1K/s");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	sim_config_free(&c);
	shape(&c, "bw=1K/s,commit-lat=1ms+1T/s", 64ull << 30, 1, "bytes=64M");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), 0);
	sim_config_free(&c);
	shape(&c, "commit-lat=1ms+1K/s", 64ull << 30, 1, "bytes=1G");
	ck_assert_int_eq(sim_config_check(&c, 0, err, sizeof(err)), -1);
	sim_config_free(&c);

	/* Too large: 4G in 4K blocks is 1M blocks, 1M buffers kept. */
	shape(&c, NULL, 64ull << 30, 1, "bytes=4G,bs=4K");
	ck_assert_int_eq(sim_cost(&c, &k), 0);
	ck_assert_double_eq(k.blocks, 1 << 20);
	ck_assert_double_ge(k.memory_bytes, 180.0 * MIB);
	ck_assert_int_eq(sim_config_check(&c, 256 * MIB, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "more than half of this machine's 0.2 GiB"));
	ck_assert_int_eq(sim_config_check(&c, 1ull << 30, err, sizeof(err)), 0);
	sim_config_free(&c);

	/* The scenarios' largest runs (sim/main.c): lustre-1's 1T, lustre-3's
	 * eight, lustre-4's two of 128G, memcg's 1000M in 64K blocks,
	 * lustre-striped's eight over 16 OSTs, two-backends. */
	{
		static const char lustre[] = "bw=10400000000/s,lat=1ms,rpcs=8,rpc=4M,"
					     "commit-interval=5s,commit-lat=50ms,journal=16G";
		char spec[128], list[200] = "";
		int i;

		shape(&c, lustre, 512ull << 30, 1, "bytes=1T,rate=2200000000/s");
		check_ok(&c, "lustre-1 1T");
		sim_config_free(&c);
		shape(&c, lustre, 512ull << 30, 8, "bytes=16G,rate=2200000000/s");
		for (i = 0; i < 8; i++)
			c.dom[i].max = 8ull << 30;
		check_ok(&c, "lustre-3");
		sim_config_free(&c);
		shape(&c, lustre, 512ull << 30, 2, "bytes=128G,rate=2200000000/s");
		check_ok(&c, "lustre-4");
		sim_config_free(&c);
		shape(&c, "bw=40000000/s,rpc=1M,journal=128M", 4ull << 30, 1,
		      "bytes=1048576000,bs=64K");
		check_ok(&c, "memcg");
		sim_config_free(&c);

		sim_config_init(&c);
		c.memory = 512ull << 30;
		for (i = 0; i < 16; i++) {
			snprintf(spec, sizeof(spec),
				 "ost%d:bw=650000000/s,lat=1ms,rpcs=8,rpc=4M,commit-interval=5s,"
				 "commit-lat=50ms,journal=1G",
				 i);
			ck_assert_int_eq(sim_parse_backend_opt(spec, &c, err, sizeof(err)), 0);
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sost%d",
				 i ? "," : "", i);
		}
		strcat(list, ",size=1M");
		ck_assert_int_eq(sim_parse_stripe(list, &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_domain("memcg,count=8,max=1G", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(
			sim_parse_writer("memcg,bytes=16G,rate=2200000000/s", &c, err, sizeof(err)),
			0);
		check_ok(&c, "lustre-striped 8 x 16 OSTs");
		sim_config_free(&c);

		sim_config_init(&c);
		c.memory = 4ull << 30;
		ck_assert_int_eq(sim_parse_backend_opt("fast:bw=1G/s", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_backend_opt("slow:bw=100M/s", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_domain("FS,max=512M", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_writer("FS,bytes=4G,backend=fast", &c, err, sizeof(err)),
				 0);
		ck_assert_int_eq(sim_parse_writer("FS,bytes=1G,backend=slow", &c, err, sizeof(err)),
				 0);
		check_ok(&c, "two-backends");
		sim_config_free(&c);
	}

	/* Many domains writing twice their max: 20,000, and 100,000. */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("d,count=20000,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=32M", &c, err, sizeof(err)), 0);
	check_ok(&c, "20,000 domains");
	sim_config_free(&c);
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("d,count=100000,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=32M", &c, err, sizeof(err)), 0);
	check_ok(&c, "100,000 domains");
	ck_assert_int_eq(sim_cost(&c, &k), 0);
	ck_assert_double_eq(k.events, 3400000);
	sim_config_free(&c);
}
END_TEST

/*
 * The server alone (server.c), with a small engine in polled mode on a
 * virtual clock: writers of 1 MiB blocks in the root domain of a 1 GiB
 * engine, far below every threshold, and the engine's own expiry of dirty
 * and unstable data pushed past the tests' horizon, so that the engine
 * starts nothing on its own (the tests check it asked for no commit) and
 * every write and commit is the test's doing or the server's.
 */
struct rig {
	us_engine *e;
	struct sim_srv s;
	us_object *o[2];
	uint64_t now;
};

static void rig_init(struct rig *g, const struct sim_backend *b, int nwr, uint64_t bytes)
{
	struct us_engine_options opts;
	struct sim_srv_writer w[2];
	int i;

	memset(g, 0, sizeof(*g));
	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	opts.memory_bytes = 1ull << 30;
	ck_assert_int_eq(us_engine_create(&opts, &g->e), 0);
	ck_assert_int_eq(us_engine_set_param(g->e, US_PARAM_DIRTY_EXPIRE_NS, 1000 * SEC), 0);
	ck_assert_int_eq(us_engine_set_param(g->e, US_PARAM_COMMIT_INTERVAL_NS, 1000 * SEC), 0);
	for (i = 0; i < nwr; i++)
		w[i] = (struct sim_srv_writer){ .bytes = bytes, .bs = MIB, .domain = 0 };
	ck_assert_int_eq(sim_srv_init(&g->s, g->e, b, w, nwr), 0);
	for (i = 0; i < nwr; i++)
		ck_assert_int_eq(us_object_create(g->s.bk, NULL, (void *)(intptr_t)i, &g->o[i]), 0);
}

/* A backend of 1 GiB/s, 1 ms per request; commits as the test says. */
static struct sim_backend rig_backend(uint64_t interval, uint64_t lat, uint64_t journal)
{
	return (struct sim_backend){ .bw = 1ull << 30,
				     .lat_ns = MS,
				     .rpcs = 8,
				     .rpc = 4 * MIB,
				     .commit_interval = interval,
				     .commit_lat = lat,
				     .journal = journal };
}

/* Moves the clock to t, through every event of the server on the way. */
static void rig_to(struct rig *g, uint64_t t)
{
	for (;;) {
		uint64_t n = sim_srv_next(&g->s);

		if (n > t)
			break;
		g->now = n > g->now ? n : g->now;
		us_engine_poll(g->e, g->now, NULL);
		sim_srv_run(&g->s, g->now);
		us_engine_poll(g->e, g->now, NULL);
	}
	g->now = t > g->now ? t : g->now;
	us_engine_poll(g->e, g->now, NULL);
	sim_srv_run(&g->s, g->now);
	us_engine_poll(g->e, g->now, NULL);
}

/* Writer w writes its block k (a new version of it). */
static void rig_write(struct rig *g, int w, uint64_t k)
{
	uint64_t len = g->s.wr[w].bytes - k * MIB < MIB ? g->s.wr[w].bytes - k * MIB : MIB;
	uint64_t pause = 0;
	us_buf *b;

	ck_assert_int_ge(us_buf_get(g->o[w], k * MIB, len, US_GET_NODATA | US_GET_NOWAIT, &b), 0);
	sim_srv_dirtied(&g->s, w, k * MIB);
	ck_assert_int_eq(us_buf_dirty(b, &pause), 0);
	ck_assert_int_eq(us_buf_put(b), 0);
}

/* Writes back writer w's block k now: one request. */
static void rig_flush(struct rig *g, int w, uint64_t k)
{
	ck_assert_int_eq(us_object_flush(g->o[w], k * MIB, MIB, 0), 1);
}

static int rig_state(struct rig *g, int w, uint64_t k)
{
	us_buf *b;
	int st;

	ck_assert_int_eq(us_buf_lookup(g->o[w], k * MIB, &b), 0);
	st = us_buf_state(b);
	ck_assert_int_eq(us_buf_put(b), 0);
	return st;
}

static uint64_t rig_engine_syncs(struct rig *g)
{
	struct us_backend_stats bs = { .size = sizeof(bs) };

	ck_assert_int_eq(us_backend_stats(g->s.bk, &bs), 0);
	return bs.commit_calls + bs.sync_calls;
}

/* The final sync: everything written reaches the server, durably. */
static void rig_fini(struct rig *g)
{
	us_sync *y;
	int i, n;

	ck_assert_int_eq(us_domain_sync_start(us_engine_root(g->e), NULL, NULL, &y), 0);
	for (n = 0; us_sync_done(y) == 0; n++) {
		uint64_t next = UINT64_MAX, t;

		ck_assert_int_lt(n, 100000);
		us_engine_poll(g->e, g->now, &next);
		t = sim_srv_next(&g->s);
		if (next > g->now && next < t)
			t = next;
		rig_to(g, t > g->now ? t : g->now + MS);
	}
	ck_assert_int_eq(us_sync_free(y), 0);
	for (i = 0; i < g->s.nwr; i++)
		ck_assert_uint_eq(sim_srv_lost_bytes(&g->s, i, 0), 0);
	ck_assert_int_eq(us_engine_destroy(g->e), 0);
	sim_srv_fini(&g->s);
}

/* (a) With nothing else to trigger one, a commit every commit_interval,
 * each lasting commit_lat and then reported to the engine. */
START_TEST(test_srv_periodic)
{
	struct sim_backend b = rig_backend(1 * SEC, 10 * MS, 1ull << 40);
	struct rig g;
	uint64_t i;

	rig_init(&g, &b, 1, 8 * MIB);
	ck_assert_uint_eq(sim_srv_next(&g.s), 1 * SEC);
	/* Something to commit: written and acknowledged, not durable. */
	rig_write(&g, 0, 0);
	rig_flush(&g, 0, 0);
	rig_to(&g, 10 * MS);
	ck_assert_uint_eq(g.s.cm.txn, 1);
	ck_assert_int_eq(rig_state(&g, 0, 0), US_BUF_UNSTABLE);
	ck_assert(!sim_srv_block_durable(&g.s, 0, 0));
	for (i = 1; i <= 10; i++) {
		rig_to(&g, i * SEC - 1);
		ck_assert_uint_eq(g.s.cm.commits, i - 1);
		rig_to(&g, i * SEC);
		ck_assert_uint_eq(g.s.cm.commits, i);
		ck_assert(g.s.cm.committing);
		ck_assert_uint_eq(sim_srv_next(&g.s), i * SEC + 10 * MS);
		rig_to(&g, i * SEC + 10 * MS - 1);
		ck_assert(g.s.cm.committing);
		if (i == 1)
			ck_assert_int_eq(rig_state(&g, 0, 0), US_BUF_UNSTABLE);
		rig_to(&g, i * SEC + 10 * MS);
		ck_assert(!g.s.cm.committing);
		ck_assert_int_eq(rig_state(&g, 0, 0), US_BUF_CLEAN);
		ck_assert(sim_srv_block_durable(&g.s, 0, 0));
	}
	/* A clock that jumps over several intervals gives one commit, not a
	 * burst, and the next one stays on the grid. */
	g.now = 13 * SEC + 500 * MS;
	us_engine_poll(g.e, g.now, NULL);
	sim_srv_run(&g.s, g.now);
	ck_assert_uint_eq(g.s.cm.commits, 11);
	ck_assert_uint_eq(sim_srv_next(&g.s), 13 * SEC + 510 * MS);
	rig_to(&g, 13 * SEC + 510 * MS);
	ck_assert_uint_eq(sim_srv_next(&g.s), 14 * SEC);
	ck_assert_uint_eq(rig_engine_syncs(&g), 0);
	rig_fini(&g);
}
END_TEST

/* (b) A commit starts when journal bytes are uncommitted, not before. */
START_TEST(test_srv_journal_full)
{
	struct sim_backend b = rig_backend(100 * SEC, 20 * MS, 4 * MIB);
	struct rig g;
	uint64_t k, txn;

	rig_init(&g, &b, 1, 8 * MIB);
	for (k = 0; k < 3; k++) {
		rig_write(&g, 0, k);
		rig_flush(&g, 0, k);
	}
	rig_to(&g, 1 * SEC);
	ck_assert_uint_eq(g.s.cm.txn, 3);
	ck_assert_uint_eq(g.s.cm.uncommitted, 3 * MIB);
	ck_assert_uint_eq(g.s.cm.commits, 0);
	ck_assert(!g.s.cm.committing);
	/* The fourth MiB fills the journal the instant it lands. */
	rig_write(&g, 0, 3);
	rig_flush(&g, 0, 3);
	txn = g.s.q[g.s.head].at;
	rig_to(&g, txn - 1);
	ck_assert_uint_eq(g.s.cm.commits, 0);
	rig_to(&g, txn);
	ck_assert_uint_eq(g.s.cm.commits, 1);
	ck_assert(g.s.cm.committing);
	ck_assert_uint_eq(g.s.cm.covers, 4);
	ck_assert_uint_eq(g.s.cm.uncommitted, 0);
	rig_to(&g, txn + 20 * MS);
	ck_assert(!g.s.cm.committing);
	for (k = 0; k < 4; k++) {
		ck_assert_int_eq(rig_state(&g, 0, k), US_BUF_CLEAN);
		ck_assert(sim_srv_block_durable(&g.s, 0, k));
	}
	/* Less than a journal since: nothing more. */
	rig_write(&g, 0, 4);
	rig_flush(&g, 0, 4);
	rig_to(&g, 50 * SEC);
	ck_assert_uint_eq(g.s.cm.commits, 1);
	ck_assert_uint_eq(rig_engine_syncs(&g), 0);
	rig_fini(&g);
}
END_TEST

/* (c) Syncs while a commit runs give exactly one more commit after it. */
START_TEST(test_srv_sync_in_flight)
{
	struct sim_backend b = rig_backend(100 * SEC, 50 * MS, 1ull << 40);
	struct rig g;

	rig_init(&g, &b, 1, 8 * MIB);
	rig_to(&g, 1 * SEC);
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_USER), 0);
	ck_assert_uint_eq(g.s.cm.commits, 1);
	ck_assert_uint_eq(g.s.cm.end, 1 * SEC + 50 * MS);
	rig_to(&g, 1 * SEC + 10 * MS);
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_USER), 0);
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_SYNC), 0);
	rig_to(&g, 1 * SEC + 20 * MS);
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_RECLAIM), 0);
	ck_assert_uint_eq(g.s.cm.commits, 1);
	/* The second starts when the first ends ... */
	rig_to(&g, 1 * SEC + 50 * MS);
	ck_assert_uint_eq(g.s.cm.commits, 2);
	ck_assert(g.s.cm.committing);
	ck_assert_uint_eq(g.s.cm.end, 1 * SEC + 100 * MS);
	/* ... and nothing follows it. */
	rig_to(&g, 1 * SEC + 100 * MS);
	ck_assert(!g.s.cm.committing);
	rig_to(&g, 99 * SEC);
	ck_assert_uint_eq(g.s.cm.commits, 2);
	/* A sync with none running starts one at once, and only one. */
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_USER), 0);
	ck_assert_uint_eq(g.s.cm.commits, 3);
	rig_to(&g, 99 * SEC + 500 * MS);
	ck_assert_uint_eq(g.s.cm.commits, 3);
	rig_fini(&g);
}
END_TEST

/* (d) A commit covers the writes acknowledged before it started; those
 * acknowledged while it runs wait for the next one, a new version of a
 * block it covered an older write of included. */
START_TEST(test_srv_commit_covers)
{
	struct sim_backend b = rig_backend(100 * SEC, 50 * MS, 1ull << 40);
	struct rig g;

	rig_init(&g, &b, 2, 8 * MIB);
	rig_write(&g, 0, 0);
	rig_flush(&g, 0, 0);
	rig_write(&g, 0, 1);
	rig_flush(&g, 0, 1);
	rig_to(&g, 1 * SEC);
	ck_assert_uint_eq(g.s.cm.txn, 2);
	ck_assert_int_eq(rig_state(&g, 0, 0), US_BUF_UNSTABLE);
	/* The commit starts covering txns 1 and 2; while it runs, writer 1's
	 * block and a new version of writer 0's block 1 land (3 and 4). */
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_USER), 0);
	ck_assert_uint_eq(g.s.cm.covers, 2);
	rig_write(&g, 1, 0);
	rig_flush(&g, 1, 0);
	rig_write(&g, 0, 1);
	rig_flush(&g, 0, 1);
	rig_to(&g, 1 * SEC + 10 * MS);
	ck_assert_uint_eq(g.s.cm.txn, 4);
	ck_assert(g.s.cm.committing);
	ck_assert_int_eq(rig_state(&g, 1, 0), US_BUF_UNSTABLE);
	ck_assert_int_eq(rig_state(&g, 0, 1), US_BUF_UNSTABLE);
	rig_to(&g, 1 * SEC + 50 * MS);
	ck_assert(!g.s.cm.committing);
	ck_assert_int_eq(rig_state(&g, 0, 0), US_BUF_CLEAN);
	ck_assert(sim_srv_block_durable(&g.s, 0, 0));
	ck_assert_int_eq(rig_state(&g, 1, 0), US_BUF_UNSTABLE);
	ck_assert(!sim_srv_block_durable(&g.s, 1, 0));
	ck_assert_int_eq(rig_state(&g, 0, 1), US_BUF_UNSTABLE);
	ck_assert(!sim_srv_block_durable(&g.s, 0, 1));
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 0), MIB);
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 1, 0), MIB);
	/* Until the next commit, however long. */
	rig_to(&g, 99 * SEC);
	ck_assert(!sim_srv_block_durable(&g.s, 1, 0));
	ck_assert(!sim_srv_block_durable(&g.s, 0, 1));
	ck_assert_int_eq(rig_state(&g, 1, 0), US_BUF_UNSTABLE);
	rig_to(&g, 100 * SEC + 50 * MS);
	ck_assert_uint_eq(g.s.cm.commits, 2);
	ck_assert(sim_srv_block_durable(&g.s, 1, 0));
	ck_assert(sim_srv_block_durable(&g.s, 0, 1));
	ck_assert_int_eq(rig_state(&g, 1, 0), US_BUF_CLEAN);
	ck_assert_int_eq(rig_state(&g, 0, 1), US_BUF_CLEAN);
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 0) + sim_srv_lost_bytes(&g.s, 1, 0), 0);
	ck_assert_uint_eq(rig_engine_syncs(&g), 0);
	rig_fini(&g);
}
END_TEST

/*
 * (e) The checksum accounting. Writer 0 of 5.5 MiB: block 0 flushed and
 * committed (not lost); block 1 rewritten after its write landed, block 2
 * rewritten while its write was in flight, neither flushed again (lost,
 * though a commit covered their older writes); block 3 flushed, not
 * committed (lost); block 4 never flushed (lost); block 5, half a MiB,
 * rewritten in flight and flushed again before the commit (not lost).
 */
START_TEST(test_srv_checksums)
{
	struct sim_backend b = rig_backend(100 * SEC, 50 * MS, 1ull << 40);
	struct rig g;
	uint64_t k;

	rig_init(&g, &b, 1, 5 * MIB + MIB / 2);
	ck_assert_uint_ne(sim_srv_checksum(0, 1, 1), sim_srv_checksum(0, 1, 2));
	ck_assert_uint_ne(sim_srv_checksum(0, 1, 1), sim_srv_checksum(1, 1, 1));
	ck_assert_uint_ne(sim_srv_checksum(0, 1, 1), sim_srv_checksum(0, 2, 1));
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 0), 0); /* nothing written */
	/* Blocks the writer says it wrote and the server never heard of. */
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 2 * MIB), 2 * MIB);
	for (k = 0; k < 6; k++)
		rig_write(&g, 0, k);
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 0), 5 * MIB + MIB / 2);
	rig_flush(&g, 0, 0);
	rig_flush(&g, 0, 1);
	rig_to(&g, 1 * SEC);
	rig_write(&g, 0, 1); /* UNSTABLE: dirty again */
	ck_assert_int_eq(rig_state(&g, 0, 1), US_BUF_DIRTY);
	rig_flush(&g, 0, 2);
	rig_flush(&g, 0, 5);
	rig_write(&g, 0, 2); /* in WRITEBACK: redirtied */
	rig_write(&g, 0, 5);
	ck_assert_int_eq(rig_state(&g, 0, 2), US_BUF_WRITEBACK);
	rig_to(&g, 2 * SEC);
	ck_assert_int_eq(rig_state(&g, 0, 2), US_BUF_DIRTY);
	rig_flush(&g, 0, 5);
	rig_to(&g, 3 * SEC);
	ck_assert_uint_eq(g.s.cm.txn, 5);
	ck_assert_int_eq(sim_srv_sync(&g.s, g.s.bk, US_REASON_USER), 0);
	rig_flush(&g, 0, 3); /* lands during the commit */
	rig_to(&g, 4 * SEC);
	ck_assert_uint_eq(g.s.cm.txn, 6);
	ck_assert_uint_eq(g.s.cm.commits, 1);
	ck_assert(sim_srv_block_durable(&g.s, 0, 0));
	ck_assert(!sim_srv_block_durable(&g.s, 0, 1));
	ck_assert(!sim_srv_block_durable(&g.s, 0, 2));
	ck_assert(!sim_srv_block_durable(&g.s, 0, 3));
	ck_assert(!sim_srv_block_durable(&g.s, 0, 4));
	ck_assert(sim_srv_block_durable(&g.s, 0, 5));
	/* The commit did cover the older writes of blocks 1 and 2. */
	ck_assert_uint_eq(g.s.blk[0][1].durable, sim_srv_checksum(0, 1, 1));
	ck_assert_uint_eq(g.s.blk[0][2].durable, sim_srv_checksum(0, 2, 1));
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 0), 4 * MIB);
	ck_assert_uint_eq(sim_srv_lost_bytes(&g.s, 0, 5 * MIB + MIB / 2), 4 * MIB);
	/* The final sync writes and commits what is left: nothing lost. */
	ck_assert_uint_eq(rig_engine_syncs(&g), 0);
	rig_fini(&g);
}
END_TEST

/* A short run of each policy: the invariants of the benchmark's table. */
START_TEST(test_short_runs)
{
	struct sim_config c;
	struct sim_result r = { 0 };
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
	fprintf(stderr, "sim, unstable: %.2f and %.2f of their ceiling, Jain %.4f\n", r.wr[0].ratio,
		r.wr[1].ratio, r.jain);

	/* The naive client: no ENOMEM here (it commits when full), nothing
	 * lost, but stop-and-go: its longest pause is a whole reclaim wait. */
	c.policy = SIM_POLICY_NAIVE;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].enomem + r.wr[1].enomem, 0);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert(!r.dom[0].over_max && !r.dom[1].over_max);
	ck_assert_uint_ge(r.wr[0].max_pause_ns, 100000000u);
	fprintf(stderr, "sim, naive: %.2f and %.2f of their ceiling, max pause %.0f ms\n",
		r.wr[0].ratio, r.wr[1].ratio, r.wr[0].max_pause_ns / 1e6);

	/* The unpatched client: ENOMEM, yet nothing written is lost. */
	c.policy = SIM_POLICY_NO_FORCED_COMMIT;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_gt(r.wr[0].enomem, 0);
	ck_assert_uint_lt(r.wr[0].bytes, 96 * MIB);
	ck_assert_uint_eq(r.wr[0].lost_bytes + r.wr[1].lost_bytes, 0);
	ck_assert(!r.dom[0].over_max);
	sim_result_free(&r);
	sim_config_free(&c);
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

/* The memcg table's setup (sim/main.c): a 40 MB/s ext3 disk on a machine
 * of 5 GiB (dirty limits: background 512 MiB, dirty 1 GiB), one dd of 1 GB
 * in 64 KiB buffers under limit. */
static void memcg_setup(struct sim_config *c, const char *limit, enum sim_policy pol)
{
	char err[128], spec[32];

	sim_config_init(c);
	c->memory = 5ull << 30;
	c->policy = pol;
	ck_assert_int_eq(sim_parse_backend("bw=40000000/s,lat=1ms,rpcs=8,rpc=1M,"
					   "commit-interval=5s,commit-lat=20ms,journal=128M",
					   &c->backend, err, sizeof(err)),
			 0);
	snprintf(spec, sizeof(spec), "a,max=%s", limit);
	ck_assert_int_eq(sim_parse_domain(spec, c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=1048576000,bs=64K", c, err, sizeof(err)), 0);
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
	struct sim_result r = { 0 };
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
	sim_config_free(&c);
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
	sim_config_free(&c);
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
	sim_config_free(&c);
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=40M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=128M",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("c,max=5M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("c,bytes=64M,bs=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	invariants(&c, &r);
	sim_config_free(&c);

	/* memcg, the whole table: the library survives every limit, as the
	 * seed's patched kernel did (its unpatched one: test_no_reclaim_wait) */
	for (i = 0; i < 4; i++) {
		static const char *limits[] = { "5M", "60M", "300M", "2G" };

		memcg_setup(&c, limits[i], SIM_POLICY_UNSTABLE);
		ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
		ck_assert_uint_eq(r.wr[0].oom, 0);
		invariants(&c, &r);
		sim_config_free(&c);
	}
	sim_result_free(&r);
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
	struct sim_result r = { 0 };
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
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

START_TEST(test_realtime_file)
{
	struct sim_config c;
	struct sim_result r = { 0 };
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
	sim_config_free(&c);
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
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

/* A writer's time ends when its last block was copied: a one-block write
 * reports its real rate, and no writer reports more than its copy rate. */
START_TEST(test_copy_time)
{
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[128];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("a", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=64K,bs=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].bytes, 64 << 10);
	/* 64 KiB at 8 GiB/s: 7629.39 ns, rounded up. */
	ck_assert_uint_eq(r.wr[0].done_ns, 7630);
	ck_assert(r.wr[0].throughput > 0.99 * SIM_COPY_RATE);
	ck_assert(r.wr[0].throughput <= SIM_COPY_RATE);
	ck_assert_uint_ge(r.end_ns, r.wr[0].done_ns);
	sim_config_free(&c);

	/* Many blocks, unthrottled (2 GiB of room): at most the copy rate,
	 * whatever the rounding of each block's copy. */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_domain("a", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=64M,bs=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=10M,bs=1M,rate=300M/s", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].bytes, 64 * MIB);
	ck_assert(r.wr[0].throughput <= SIM_COPY_RATE);
	ck_assert(r.wr[1].throughput > 0 && r.wr[1].throughput <= 300.0 * MIB);
	fprintf(stderr, "sim, copy rate: one block %.0f, 64 MiB %.0f, 10 MiB at 300M/s %.0f B/s\n",
		(double)(64 << 10) / 7630e-9, r.wr[0].throughput, r.wr[1].throughput);
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* A writer's pauses, counted per length: the same 99th percentile and
 * maximum as a sort of all of them, and memory for the lengths, not for
 * the pauses. */
START_TEST(test_pauses_p99)
{
	static const unsigned sizes[] = { 1, 2, 15, 16, 17, 99, 100, 101, 1000, 4097, 30000 };
	uint64_t *ref = malloc(30000 * sizeof(*ref)), rng = 88172645463325252ull;
	unsigned s, kind, i;

	ck_assert_ptr_nonnull(ref);
	for (kind = 0; kind < 3; kind++)
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct sim_pauses p = { 0 };
			uint64_t max = 0;

			for (i = 0; i < sizes[s]; i++) {
				rng ^= rng << 13;
				rng ^= rng >> 7;
				rng ^= rng << 17;
				/* 40 lengths; every one its own; mostly 10 ms with a tail */
				ref[i] = kind == 0	? (rng % 40) * MS :
					 kind == 1	? rng % (200 * MS) :
					 rng % 100 < 97 ? 10 * MS :
							  10 * MS + rng % (190 * MS);
				max = ref[i] > max ? ref[i] : max;
				sim_pauses_record(&p, ref[i]);
			}
			qsort(ref, sizes[s], sizeof(*ref), cmp_u64);
			ck_assert_uint_eq(sim_pauses_p99(&p), ref[sizes[s] * 99 / 100]);
			ck_assert_uint_eq(p.max, max);
			/* Recording goes on after a percentile was taken. */
			sim_pauses_record(&p, 0);
			ck_assert_uint_eq(p.n, sizes[s] + 1);
			if (kind == 0) {
				ck_assert_uint_le(p.ncnt, 40);
				ck_assert_uint_le(p.cap, 64);
			}
			sim_pauses_free(&p);
		}
	{
		struct sim_pauses p = { 0 };

		ck_assert_uint_eq(sim_pauses_p99(&p), 0);
		sim_pauses_free(&p);
	}
	free(ref);
}
END_TEST

/* The longest time without progress, per writer: a wait of at least the
 * server's latency (the domain holds one block, the next waits until the
 * first is written, committed and evicted: the throttling pause and the
 * wait for memory together). */
START_TEST(test_max_stall)
{
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[128];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=1G/s,lat=200ms,rpcs=8,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=1G",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("a,max=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=128K,bs=64K", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].bytes, 128 << 10);
	ck_assert_uint_eq(r.wr[0].enomem + r.wr[0].lost_bytes, 0);
	ck_assert_uint_ge(r.wr[0].max_stall_ns, 200 * MS);
	ck_assert_uint_ge(r.wr[0].max_stall_ns, r.wr[0].max_pause_ns);
	ck_assert_uint_le(r.wr[0].max_stall_ns, r.wr[0].done_ns);
	fprintf(stderr, "sim, max stall: %.1f ms (max pause %.1f ms) in %.1f ms\n",
		r.wr[0].max_stall_ns / 1e6, r.wr[0].max_pause_ns / 1e6, r.wr[0].done_ns / 1e6);

	/* A wait that ends in ENOMEM counts: the unpatched client (no forced
	 * commit, not throttled) is never paused, yet it stalls before its
	 * ENOMEM. */
	sim_config_free(&c);
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend("bw=200M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,"
					   "commit-lat=20ms,journal=1T",
					   &c.backend, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_domain("a,max=32M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("a,bytes=96M,bs=1M", &c, err, sizeof(err)), 0);
	c.policy = SIM_POLICY_NO_FORCED_COMMIT;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_gt(r.wr[0].enomem, 0);
	ck_assert_uint_eq(r.wr[0].max_pause_ns, 0);
	ck_assert_uint_gt(r.wr[0].max_stall_ns, 0);
	fprintf(stderr, "sim, stall ending in ENOMEM: %.1f ms\n", r.wr[0].max_stall_ns / 1e6);
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

/*
 * --policy no-reclaim-wait, the memcg seed's unpatched kernel, at each limit
 * of the memcg table: OOM-killed under 5M and 60M, as in the seed, and under
 * 300M, where the seed's dd survived (its kernel's reclaim took time to scan
 * the memcg, the model's takes none: docs/simulator.md); not under 2G, where
 * the copy fits and the machine's dirty limits hold the writer: it pauses,
 * and runs below its copy rate. The writer is held by the root's thresholds
 * and not its domain's: on a machine of 1 GiB (a dirty limit of 205 MiB)
 * they hold it under 300M too, and it survives.
 */
START_TEST(test_no_reclaim_wait)
{
	static const char *limits[] = { "5M", "60M", "300M", "2G" };
	static const bool oom[] = { true, true, true, false };
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[128];
	int i;

	for (i = 0; i < 4; i++) {
		memcg_setup(&c, limits[i], SIM_POLICY_NO_RECLAIM_WAIT);
		ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
		ck_assert_uint_eq(r.wr[0].lost_bytes, 0);
		ck_assert_uint_eq(r.wr[0].enomem, 0);
		ck_assert(!r.dom[0].over_max);
		ck_assert_uint_eq(r.wr[0].oom, oom[i]);
		if (oom[i])
			ck_assert_uint_le(r.wr[0].bytes, c.dom[0].max);
		else
			ck_assert_uint_eq(r.wr[0].bytes, c.wr[0].bytes);
		fprintf(stderr, "sim, no-reclaim-wait under %s: %s, %.1f MB/s, max pause %.1f ms\n",
			limits[i], r.wr[0].oom ? "OOM" : "survived", r.wr[0].throughput / 1e6,
			r.wr[0].max_pause_ns / 1e6);
		sim_config_free(&c);
	}
	/* 2G: held by the dirty limits (1 GiB), not at the copy rate. */
	ck_assert_uint_gt(r.wr[0].max_pause_ns, 0);
	ck_assert(r.wr[0].throughput < 1e9);
	ck_assert(r.wr[0].throughput > 40e6);

	/* A machine of 1 GiB: the dirty limits hold the writer under 300M. */
	memcg_setup(&c, "300M", SIM_POLICY_NO_RECLAIM_WAIT);
	c.memory = 1ull << 30;
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.wr[0].oom + r.wr[0].enomem + r.wr[0].lost_bytes, 0);
	ck_assert_uint_eq(r.wr[0].bytes, c.wr[0].bytes);
	ck_assert_uint_le(r.dom[0].peak_charged, c.dom[0].max);
	sim_config_free(&c);
	sim_result_free(&r);
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
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_bounds_taken);
	tcase_add_test(tc, test_zero_thresholds);
	tcase_add_test(tc, test_run_check);
	tcase_add_test(tc, test_srv_periodic);
	tcase_add_test(tc, test_srv_journal_full);
	tcase_add_test(tc, test_srv_sync_in_flight);
	tcase_add_test(tc, test_srv_commit_covers);
	tcase_add_test(tc, test_srv_checksums);
	tcase_add_test(tc, test_short_runs);
	tcase_add_test(tc, test_seed_kinds);
	tcase_add_test(tc, test_realtime_sim);
	tcase_add_test(tc, test_realtime_file);
	tcase_add_test(tc, test_copy_time);
	tcase_add_test(tc, test_pauses_p99);
	tcase_add_test(tc, test_max_stall);
	tcase_add_test(tc, test_no_reclaim_wait);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
