/*
 * unstable-sim with several backends: named backends and
 * striping on the command line, commits whose cost grows with their data
 * (commit-lat=FIXED+RATE), the names' index that keeps parsing linear, and
 * short runs: a file striped over four servers drains faster than one
 * server's bandwidth, a fast and a slow backend side by side.
 *
 * SPDX-License-Identifier: MIT
 */
#include "server.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define MS  1000000ull
#define SEC 1000000000ull

START_TEST(test_named_backends)
{
	struct sim_config c;
	char err[160];

	sim_config_init(&c);
	/* The unnamed form still sets the default backend. */
	ck_assert_int_eq(sim_parse_backend_opt("bw=100M/s,rpc=1M", &c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.backend.bw, 100 * MIB);
	ck_assert_int_eq(c.nbk, 0);
	/* Named ones start from the built-in figures, not the default's. */
	ck_assert_int_eq(sim_parse_backend_opt("ost0:bw=650M/s,journal=1G", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_backend_opt("ost1:", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nbk, 2);
	ck_assert_str_eq(c.bk[0].name, "ost0");
	ck_assert_uint_eq(c.bk[0].bw, 650 * MIB);
	ck_assert_uint_eq(c.bk[0].rpc, 4 * MIB);
	ck_assert_uint_eq(c.bk[1].bw, 1ull << 30);
	ck_assert_ptr_eq(sim_config_backend(&c, 0), &c.backend);
	ck_assert_ptr_eq(sim_config_backend(&c, 2), &c.bk[1]);
	/* Given again: changed, not added. */
	ck_assert_int_eq(sim_parse_backend_opt("ost1:lat=3ms", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nbk, 2);
	ck_assert_uint_eq(c.bk[1].lat_ns, 3 * MS);
	/* Bad names and values leave the backends as they were. */
	ck_assert_int_eq(sim_parse_backend_opt("a,b:bw=1G/s", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend_opt(":bw=1G/s", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend_opt("default:bw=1G/s", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend_opt("ost2:bw=fast", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend_opt("ost1:speed=3", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(c.nbk, 2);
	ck_assert_uint_eq(c.bk[1].lat_ns, 3 * MS);

	/* Writers pick theirs by name ("default": index 0). */
	ck_assert_int_eq(sim_parse_domain("d", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,backend=ost1,count=2", &c, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,backend=default", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nwr, 4);
	ck_assert_int_eq(c.wr[0].backend, 0);
	ck_assert_int_eq(c.wr[1].backend, 2);
	ck_assert_int_eq(c.wr[2].backend, 2);
	ck_assert_int_eq(c.wr[3].backend, 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,backend=nope", &c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "nope"));
	ck_assert_int_eq(c.nwr, 4);
	/* Real time runs one backend: it says so. */
	ck_assert_int_eq(sim_realtime_check(&c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "one backend"));
	sim_config_free(&c);
}
END_TEST

START_TEST(test_stripes)
{
	struct sim_config c;
	char err[160];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend_opt("a:", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_backend_opt("b:", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_backend_opt("c:", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("d", &c, err, sizeof(err)), 0);
	/* On a writer: stripe=A+B..., stripe-size= (1M by default). */
	ck_assert_int_eq(sim_parse_writer("d,bytes=8M,stripe=a+c", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nstripe, 1);
	ck_assert_int_eq(c.wr[0].stripe, 1);
	ck_assert_int_eq(c.stripe[0].n, 2);
	ck_assert_int_eq(c.stripe[0].bk[0], 1);
	ck_assert_int_eq(c.stripe[0].bk[1], 3);
	ck_assert_uint_eq(c.stripe[0].size, MIB);
	ck_assert_int_eq(sim_parse_writer("d,bytes=8M,bs=64K,stripe=b+a+c,stripe-size=2M", &c, err,
					  sizeof(err)),
			 0);
	ck_assert_int_eq(c.wr[1].stripe, 2);
	ck_assert_uint_eq(c.stripe[1].size, 2 * MIB);
	/* --stripe: for the writers after it, until --stripe none; a
	 * writer's own backend= wins. */
	ck_assert_int_eq(sim_parse_stripe("c,b,size=4M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=8M,count=2", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=8M,backend=a", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_stripe("none", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=8M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.nwr, 6);
	ck_assert_int_eq(c.wr[2].stripe, 3);
	ck_assert_int_eq(c.wr[3].stripe, 3);
	ck_assert_uint_eq(c.stripe[2].size, 4 * MIB);
	ck_assert_int_eq(c.stripe[2].bk[0], 3);
	ck_assert_int_eq(c.wr[4].stripe, 0);
	ck_assert_int_eq(c.wr[4].backend, 1);
	ck_assert_int_eq(c.wr[5].stripe, 0);
	ck_assert_int_eq(c.wr[5].backend, 0);
	/* Errors: unknown backend, twice, empty, size 0 or not a multiple
	 * of bs, stripe-size without stripe, both backend= and stripe=. */
	ck_assert_int_eq(sim_parse_stripe("a,zz,size=1M", &c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown backend 'zz'"));
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,stripe=a+zz", &c, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown backend 'zz'"));
	ck_assert_int_eq(sim_parse_stripe("a,a", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_stripe("size=1M", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_stripe("a,b,size=0", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_stripe("a,b,size=1M,c", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,bs=3M,stripe=a+b", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,stripe-size=2M", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("d,bytes=1M,stripe=a,backend=b", &c, err, sizeof(err)),
			 -1);
	ck_assert_int_eq(c.nwr, 6);
	ck_assert_int_eq(c.cur_stripe, 0);

	/* A stripe's share of a file: round robin, size at a time. */
	ck_assert_uint_eq(sim_stripe_bytes(10 * MIB, 2 * MIB, 2, 0), 6 * MIB);
	ck_assert_uint_eq(sim_stripe_bytes(10 * MIB, 2 * MIB, 2, 1), 4 * MIB);
	ck_assert_uint_eq(sim_stripe_bytes(MIB / 2, MIB, 4, 0), MIB / 2);
	ck_assert_uint_eq(sim_stripe_bytes(MIB / 2, MIB, 4, 3), 0);
	ck_assert_uint_eq(
		sim_stripe_bytes(9 * MIB, MIB, 4, 0) + sim_stripe_bytes(9 * MIB, MIB, 4, 1) +
			sim_stripe_bytes(9 * MIB, MIB, 4, 2) + sim_stripe_bytes(9 * MIB, MIB, 4, 3),
		9 * MIB);
	sim_config_free(&c);
}
END_TEST

START_TEST(test_commit_cost)
{
	struct sim_backend b = { 0 };
	struct sim_commit m;
	char err[160];

	/* FIXED+RATE, and the plain form (which drops a rate given before). */
	ck_assert_int_eq(sim_parse_backend("commit-lat=5ms+500M/s,rpc=1M,commit-interval=5s", &b,
					   err, sizeof(err)),
			 0);
	ck_assert_uint_eq(b.commit_lat, 5 * MS);
	ck_assert_uint_eq(b.commit_bps, 500 * MIB);
	ck_assert_int_eq(sim_parse_backend("commit-lat=20ms", &b, err, sizeof(err)), 0);
	ck_assert_uint_eq(b.commit_lat, 20 * MS);
	ck_assert_uint_eq(b.commit_bps, 0);
	ck_assert_int_eq(sim_parse_backend("commit-lat=5ms+", &b, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend("commit-lat=5ms+500M", &b, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend("commit-lat=+500M/s", &b, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_backend("commit-lat=5+500M/s", &b, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "commit-lat"));
	ck_assert_int_eq(sim_parse_backend("commit-lat=5ms+0/s", &b, err, sizeof(err)), -1);

	/* The model: fixed + uncommitted bytes / rate; plain: fixed. */
	b.commit_lat = 5 * MS;
	b.commit_bps = 500 * MIB;
	b.commit_interval = 5 * SEC;
	b.journal = 1ull << 40;
	sim_commit_init(&m, &b, 5 * SEC);
	sim_commit_acked(&m, 250 * MIB, 0);
	sim_commit_ask(&m, SEC);
	ck_assert(m.committing);
	ck_assert_uint_eq(m.end, SEC + 5 * MS + SEC / 2);
	ck_assert(!sim_commit_due(&m, SEC + SEC / 2));
	ck_assert(sim_commit_due(&m, SEC + 5 * MS + SEC / 2));
	sim_commit_end(&m);
	/* An empty commit costs the fixed part only. */
	sim_commit_ask(&m, 2 * SEC);
	ck_assert_uint_eq(m.end, 2 * SEC + 5 * MS);
	sim_commit_end(&m);
	b.commit_bps = 0;
	sim_commit_init(&m, &b, 5 * SEC);
	sim_commit_acked(&m, 250 * MIB, 0);
	sim_commit_ask(&m, SEC);
	ck_assert_uint_eq(m.end, SEC + 5 * MS);
}
END_TEST

/* The index of names: lookups find each of many domains, groups after
 * them, and entries a caller filled in directly; a failed group leaves
 * no name behind. */
START_TEST(test_names_index)
{
	struct sim_config c;
	char err[160], spec[64];
	int i;

	sim_config_init(&c);
	for (i = 0; i < 5000; i++) {
		snprintf(spec, sizeof(spec), "x%d,max=1M", i);
		ck_assert_int_eq(sim_parse_domain(spec, &c, err, sizeof(err)), 0);
	}
	ck_assert_int_eq(sim_parse_domain("g,count=3000", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("x4999", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("g-2999", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("g", &c, err, sizeof(err)), -1);
	for (i = 0; i < 5000; i += 7) {
		snprintf(spec, sizeof(spec), "x%d,bytes=1M", i);
		ck_assert_int_eq(sim_parse_writer(spec, &c, err, sizeof(err)), 0);
		ck_assert_int_eq(c.wr[c.nwr - 1].domain, i);
	}
	ck_assert_int_eq(sim_parse_writer("g-17,bytes=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.wr[c.nwr - 1].domain, 5016);
	ck_assert_int_eq(sim_parse_domain("y,parent=x123", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.dom[c.ndom - 1].parent, 123);
	/* Filled in directly, then looked up. */
	ck_assert_int_eq(sim_config_reserve(&c, c.ndom + 1, c.nwr), 0);
	snprintf(c.dom[c.ndom].name, sizeof(c.dom[c.ndom].name), "direct");
	c.dom[c.ndom].parent = -1;
	c.dom[c.ndom].max = c.dom[c.ndom].high = UINT64_MAX;
	c.ndom++;
	ck_assert_int_eq(sim_parse_writer("direct,bytes=1M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(c.wr[c.nwr - 1].domain, c.ndom - 1);
	/* A group whose names clash is refused whole. */
	ck_assert_int_eq(sim_parse_domain("x1", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_domain("dup-2", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("dup,count=3", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("dup,bytes=1M", &c, err, sizeof(err)), -1);
	ck_assert_int_eq(sim_parse_writer("dup-2,bytes=1M", &c, err, sizeof(err)), 0);
	sim_config_free(&c);
}
END_TEST

static void no_loss(const struct sim_config *c, const struct sim_result *r)
{
	int i;

	for (i = 0; i < c->nwr; i++) {
		ck_assert_uint_eq(r->wr[i].enomem, 0);
		ck_assert_uint_eq(r->wr[i].bytes, c->wr[i].bytes);
		ck_assert_uint_eq(r->wr[i].lost_bytes, 0);
	}
	for (i = 0; i < c->ndom; i++)
		ck_assert(!r->dom[i].over_max);
}

/* Four OSTs of 100 MiB/s each; one writer of 512M through a domain of 128M,
 * on one OST, then striped 1M at a time over the four. */
static void ost_config(struct sim_config *c, const char *writer)
{
	char err[160], spec[128];
	int i;

	sim_config_init(c);
	for (i = 0; i < 4; i++) {
		snprintf(spec, sizeof(spec),
			 "ost%d:bw=100M/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=1s,"
			 "commit-lat=10ms,journal=64M",
			 i);
		ck_assert_int_eq(sim_parse_backend_opt(spec, c, err, sizeof(err)), 0);
	}
	ck_assert_int_eq(sim_parse_domain("d,max=128M", c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer(writer, c, err, sizeof(err)), 0);
}

START_TEST(test_striped_run)
{
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[160];
	double one, four;

	ost_config(&c, "d,bytes=512M,backend=ost2");
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	no_loss(&c, &r);
	one = r.wr[0].throughput;
	ck_assert_double_le(one, 1.1 * 100 * MIB);
	sim_config_free(&c);

	ost_config(&c, "d,bytes=512M,stripe=ost0+ost1+ost2+ost3,stripe-size=1M");
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	no_loss(&c, &r);
	four = r.wr[0].throughput;
	/* Each OST drains its own stripe: more than one OST's bandwidth. */
	ck_assert_double_gt(four, 3 * 100 * MIB);
	ck_assert_double_le(four, 1.1 * 400 * MIB);
	/* Each OST commits its own journal. */
	ck_assert_uint_ge(r.server_commits, 4);
	fprintf(stderr, "sim striped: one OST %.0f MiB/s, four %.0f MiB/s\n", one / MIB,
		four / MIB);
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

/* A fast and a slow backend, each writer in its own domain: the fast
 * writer keeps its solo rate beside the slow one. */
START_TEST(test_two_backends_run)
{
	static const char *const base[] = {
		"fast:bw=1G/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,commit-lat=20ms,journal=1G",
		"slow:bw=50M/s,lat=5ms,rpcs=8,rpc=1M,commit-interval=5s,commit-lat=20ms,journal=1G",
	};
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[160];
	double solo[2], both[2];
	int run, i;

	for (run = 0; run < 3; run++) {
		sim_config_init(&c);
		for (i = 0; i < 2; i++)
			ck_assert_int_eq(sim_parse_backend_opt(base[i], &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_domain("F,max=64M", &c, err, sizeof(err)), 0);
		ck_assert_int_eq(sim_parse_domain("S,max=64M", &c, err, sizeof(err)), 0);
		if (run != 2)
			ck_assert_int_eq(
				sim_parse_writer("F,bytes=1G,backend=fast", &c, err, sizeof(err)),
				0);
		if (run != 1)
			ck_assert_int_eq(
				sim_parse_writer("S,bytes=128M,backend=slow", &c, err, sizeof(err)),
				0);
		ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
		no_loss(&c, &r);
		if (run == 0) {
			both[0] = r.wr[0].throughput;
			both[1] = r.wr[1].throughput;
			/* Each writer's ceiling is its own backend's. */
			ck_assert_uint_eq(r.wr[0].ceiling, 1ull << 30);
			ck_assert_uint_eq(r.wr[1].ceiling, 50 * MIB);
		} else {
			solo[run - 1] = r.wr[0].throughput;
		}
		sim_config_free(&c);
	}
	fprintf(stderr, "sim two backends: fast %.0f (alone %.0f), slow %.0f (alone %.0f) MiB/s\n",
		both[0] / MIB, solo[0] / MIB, both[1] / MIB, solo[1] / MIB);
	ck_assert_double_ge(both[0], 0.9 * solo[0]);
	ck_assert_double_ge(both[1], 0.9 * solo[1]);
	/* The slow backend does not drag the fast writer to its speed. */
	ck_assert_double_gt(both[0], 5 * both[1]);
	sim_result_free(&r);
}
END_TEST

/*
 * A striped writer's ceiling: a round robin sends each backend of its
 * stripe the same bytes, so it goes no faster than the stripe count times
 * its share of the slowest, not the sum of its shares (1.1 GiB/s here).
 */
START_TEST(test_striped_ceiling)
{
	struct sim_config c;
	struct sim_result r = { 0 };
	char err[160];

	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend_opt("f:bw=1G/s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_backend_opt("s:bw=100M/s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("d,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=16M,stripe=f+s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	no_loss(&c, &r);
	ck_assert_uint_eq(r.wr[0].ceiling, 2 * 100 * MIB);
	sim_config_free(&c);

	/* Shares: two equal backends, a striped writer over both and one more
	 * writer on the first. The stripe's slowest share is half of a's. */
	sim_config_init(&c);
	ck_assert_int_eq(sim_parse_backend_opt("a:bw=1G/s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_backend_opt("b:bw=1G/s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_domain("d,max=16M", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=16M,stripe=a+b", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_parse_writer("d,bytes=16M,backend=a", &c, err, sizeof(err)), 0);
	/* Its own speed caps it still. */
	ck_assert_int_eq(
		sim_parse_writer("d,bytes=16M,stripe=a+b,rate=100M/s", &c, err, sizeof(err)), 0);
	ck_assert_int_eq(sim_run(&c, &r, err, sizeof(err)), 0);
	no_loss(&c, &r);
	ck_assert_uint_eq(r.wr[0].ceiling, 2 * ((1ull << 30) / 3));
	ck_assert_uint_eq(r.wr[1].ceiling, (1ull << 30) / 3);
	ck_assert_uint_eq(r.wr[2].ceiling, 100 * MIB);
	sim_result_free(&r);
	sim_config_free(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sim_backends");
	TCase *tc = tcase_create("sim_backends");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_named_backends);
	tcase_add_test(tc, test_stripes);
	tcase_add_test(tc, test_commit_cost);
	tcase_add_test(tc, test_names_index);
	tcase_add_test(tc, test_striped_run);
	tcase_add_test(tc, test_two_backends_run);
	tcase_add_test(tc, test_striped_ceiling);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
