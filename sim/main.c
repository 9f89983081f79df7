/*
 * unstable-sim: the library's demonstration and benchmark. Runs the engine
 * against a simulated server and dd-like writers in virtual time, and
 * prints the seeds' tables with their published figures beside ours.
 *
 * SPDX-License-Identifier: MIT
 *
 *   unstable-sim [--json] [--scenario NAME] [--policy unstable|no-forced-commit]
 *     [--memory SIZE] [--backend bw=RATE,lat=TIME,rpcs=N,rpc=SIZE,
 *        commit-interval=TIME,commit-lat=TIME,journal=SIZE]
 *     [--domain NAME[,parent=NAME][,max=SIZE][,high=SIZE][,bg=SIZE|PCT%]
 *        [,dirty=SIZE|PCT%]]... [--writer DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME]]...
 *     [--seed N]
 *
 * Sizes take K/M/G/T (powers of 1024), rates SIZE/s, times ns/us/ms/s. Bad
 * arguments print a message and exit 2.
 */
#include "sim.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1ull << 30)

static const char *usage =
	"usage: unstable-sim [--json] [--scenario NAME] [--policy unstable|no-forced-commit]\n"
	"  [--memory SIZE] [--backend bw=RATE,lat=TIME,rpcs=N,rpc=SIZE,commit-interval=TIME,\n"
	"     commit-lat=TIME,journal=SIZE]\n"
	"  [--domain NAME[,parent=NAME][,max=SIZE][,high=SIZE][,bg=SIZE|PCT%][,dirty=SIZE|PCT%]]...\n"
	"  [--writer DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME]]... [--seed N]\n"
	"scenarios: lustre-2 (one dd at 2x, 1x, 0.5x memcg limits of 1G..64G), seeds (all "
	"of the above)\n";

static int bad(const char *msg)
{
	fprintf(stderr, "unstable-sim: %s\n%s", msg, usage);
	return 2;
}

static void json_run(const struct sim_config *c, const struct sim_result *r)
{
	const char *pol = c->policy == SIM_POLICY_UNSTABLE ? "unstable" : "no-forced-commit";
	int i;

	for (i = 0; i < c->nwr; i++) {
		const struct sim_writer_result *w = &r->wr[i];
		const struct sim_domain *d = &c->dom[c->wr[i].domain];

		printf("{\"kind\":\"writer\",\"scenario\":\"%s\",\"policy\":\"%s\",\"domain\":\"%s\","
		       "\"limit\":%llu,\"bytes\":%llu,\"seconds\":%.3f,\"throughput\":%.0f,"
		       "\"backend_bw\":%llu,\"ratio\":%.3f,\"peak_charged\":%llu,\"enomem\":%llu,"
		       "\"max_pause_ms\":%.1f,\"p99_pause_ms\":%.1f,\"lost_bytes\":%llu}\n",
		       c->scenario, pol, d->name,
		       (unsigned long long)(d->max == UINT64_MAX ? 0 : d->max),
		       (unsigned long long)w->bytes, (double)w->done_ns / 1e9, w->throughput,
		       (unsigned long long)c->backend.bw, w->ratio,
		       (unsigned long long)r->dom[c->wr[i].domain].peak_charged,
		       (unsigned long long)w->enomem, (double)w->max_pause_ns / 1e6,
		       (double)w->p99_pause_ns / 1e6, (unsigned long long)w->lost_bytes);
	}
	for (i = 0; i < c->ndom; i++)
		printf("{\"kind\":\"domain\",\"scenario\":\"%s\",\"policy\":\"%s\",\"domain\":\"%s\","
		       "\"max\":%llu,\"peak_charged\":%llu,\"commits\":%llu,\"flushes\":%llu}\n",
		       c->scenario, pol, c->dom[i].name,
		       (unsigned long long)(c->dom[i].max == UINT64_MAX ? 0 : c->dom[i].max),
		       (unsigned long long)r->dom[i].peak_charged,
		       (unsigned long long)r->dom[i].commits,
		       (unsigned long long)r->dom[i].flushes);
	printf("{\"kind\":\"summary\",\"scenario\":\"%s\",\"policy\":\"%s\",\"jain\":%.4f,"
	       "\"wall_seconds\":%.3f,\"virtual_seconds\":%.3f,\"commits_asked\":%llu,"
	       "\"server_commits\":%llu}\n",
	       c->scenario, pol, r->jain, r->wall_seconds, (double)r->end_ns / 1e9,
	       (unsigned long long)r->commits_asked, (unsigned long long)r->server_commits);
	fflush(stdout);
}

/* The seeds' servers: Lustre OSTs behind a 2.2 GB/s client (dd's GB are
 * 10^9 bytes), 8 RPCs of 4 MiB, a commit every 5 s or when the journal
 * (1 GiB here) fills or the client syncs. */
static void lustre_backend(struct sim_config *c)
{
	c->memory = 512 * GIB;
	c->backend.bw = 2200000000ull;
	c->backend.lat_ns = 1000000;
	c->backend.rpcs = 8;
	c->backend.rpc = 4 << 20;
	c->backend.commit_interval = 5000000000ull;
	c->backend.commit_lat = 50000000;
	c->backend.journal = GIB;
}

/* Lustre table 2: one dd at 2x, 1x and 0.5x memcg limits of 1G to 64G. */
static int lustre2(enum sim_policy pol, bool json)
{
	static const unsigned limits[] = { 1, 4, 16, 64 };
	static const double times[] = { 2, 1, 0.5 };
	static const double seed[3][4] = { { 1.7, 1.6, 1.8, 1.7 },
					   { 1.9, 1.9, 2.2, 2.2 },
					   { 2.3, 2.3, 2.2, 2.3 } };
	static const char *rows[] = { "2X memlimit", "1X memlimit", ".5X memlimit" };
	double ours[3][4];
	unsigned long long enomem[3][4], lost[3][4], peak_over[3][4];
	char err[256];
	int t, l;

	for (t = 0; t < 3; t++) {
		for (l = 0; l < 4; l++) {
			struct sim_config c;
			struct sim_result r;

			sim_config_init(&c);
			snprintf(c.scenario, sizeof(c.scenario), "lustre-2");
			c.policy = pol;
			lustre_backend(&c);
			snprintf(c.dom[0].name, sizeof(c.dom[0].name), "memcg-%uG-%gx", limits[l],
				 times[t]);
			c.dom[0].parent = -1;
			c.dom[0].max = limits[l] * GIB;
			c.dom[0].high = UINT64_MAX;
			c.ndom = 1;
			c.wr[0].domain = 0;
			c.wr[0].bs = 1 << 20;
			c.wr[0].bytes = (uint64_t)(limits[l] * GIB * times[t]);
			c.nwr = 1;
			if (!json)
				fprintf(stderr, "lustre-2: %s, %u G ...\r", rows[t], limits[l]);
			if (sim_run(&c, &r, err, sizeof(err))) {
				fprintf(stderr, "unstable-sim: %s\n", err);
				return 1;
			}
			if (json)
				json_run(&c, &r);
			ours[t][l] = r.wr[0].throughput / 1e9;
			enomem[t][l] = r.wr[0].enomem;
			lost[t][l] = r.wr[0].lost_bytes;
			peak_over[t][l] = r.dom[0].peak_charged > c.dom[0].max || r.dom[0].over_max;
		}
	}
	if (json)
		return 0;
	printf("\nLustre table 2 (policy %s): one dd, memcg limits, GB/s as seed / ours\n",
	       pol == SIM_POLICY_UNSTABLE ? "unstable" : "no-forced-commit");
	printf("%-14s", "memcg limits");
	for (l = 0; l < 4; l++)
		printf("  %13uG", limits[l]);
	printf("\n");
	for (t = 0; t < 3; t++) {
		printf("%-14s", rows[t]);
		for (l = 0; l < 4; l++) {
			if (enomem[t][l])
				printf("  %5.1f / ENOMEM", seed[t][l]);
			else
				printf("  %5.1f / %5.2f%s", seed[t][l], ours[t][l],
				       lost[t][l] || peak_over[t][l] ? "!" : " ");
		}
		printf("\n");
	}
	printf("(backend 2.2 GB/s; ours: dd's own rate, virtual time; '!' marks lost bytes or a "
	       "crossed max)\n");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = { { "json", no_argument, NULL, 'j' },
						  { "scenario", required_argument, NULL, 's' },
						  { "policy", required_argument, NULL, 'p' },
						  { "memory", required_argument, NULL, 'm' },
						  { "backend", required_argument, NULL, 'b' },
						  { "domain", required_argument, NULL, 'd' },
						  { "writer", required_argument, NULL, 'w' },
						  { "seed", required_argument, NULL, 'r' },
						  { "help", no_argument, NULL, 'h' },
						  { NULL, 0, NULL, 0 } };
	struct sim_config c;
	struct sim_result r;
	const char *scenario = NULL;
	bool json = false;
	char err[256];
	int opt, i;

	sim_config_init(&c);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 's':
			scenario = optarg;
			break;
		case 'p':
			if (!strcmp(optarg, "unstable"))
				c.policy = SIM_POLICY_UNSTABLE;
			else if (!strcmp(optarg, "no-forced-commit"))
				c.policy = SIM_POLICY_NO_FORCED_COMMIT;
			else if (!strcmp(optarg, "naive"))
				return bad("--policy naive is not built yet");
			else
				return bad("--policy must be unstable or no-forced-commit");
			break;
		case 'm':
			if (sim_parse_size(optarg, &c.memory, err, sizeof(err)) || !c.memory)
				return bad(c.memory ? err : "--memory must not be 0");
			break;
		case 'b':
			if (!strncmp(optarg, "file:", 5))
				return bad("--backend file: (real time) is not built yet");
			if (sim_parse_backend(optarg, &c.backend, err, sizeof(err)))
				return bad(err);
			break;
		case 'd':
			if (sim_parse_domain(optarg, &c, err, sizeof(err)))
				return bad(err);
			break;
		case 'w':
			if (sim_parse_writer(optarg, &c, err, sizeof(err)))
				return bad(err);
			break;
		case 'r': {
			char *e;

			c.seed = strtoull(optarg, &e, 10);
			if (*e || !*optarg)
				return bad("--seed must be a number");
			break;
		}
		case 'h':
			printf("%s", usage);
			return 0;
		default:
			return bad("unknown option");
		}
	}
	if (optind < argc)
		return bad("unexpected argument");
	if (scenario) {
		if (c.nwr || c.ndom)
			return bad("--scenario does not take --domain or --writer");
		if (!strcmp(scenario, "lustre-2") || !strcmp(scenario, "seeds"))
			return lustre2(c.policy, json);
		return bad("unknown or not yet built scenario");
	}
	if (!c.nwr)
		return bad("nothing to run: give --scenario, or --domain and --writer");
	if (sim_run(&c, &r, err, sizeof(err))) {
		fprintf(stderr, "unstable-sim: %s\n", err);
		return 1;
	}
	if (json) {
		json_run(&c, &r);
		return 0;
	}
	for (i = 0; i < c.nwr; i++)
		printf("writer %d (%s): %llu bytes in %.3f s, %.1f %% of the backend, peak charged "
		       "%llu, ENOMEM %llu, max pause %.1f ms, p99 %.1f ms, lost %llu bytes\n",
		       i, c.dom[c.wr[i].domain].name, (unsigned long long)r.wr[i].bytes,
		       (double)r.wr[i].done_ns / 1e9, 100 * r.wr[i].ratio,
		       (unsigned long long)r.dom[c.wr[i].domain].peak_charged,
		       (unsigned long long)r.wr[i].enomem, (double)r.wr[i].max_pause_ns / 1e6,
		       (double)r.wr[i].p99_pause_ns / 1e6, (unsigned long long)r.wr[i].lost_bytes);
	printf("Jain index %.4f; %llu commits asked, %llu server commits; %.2f s of CPU\n", r.jain,
	       (unsigned long long)r.commits_asked, (unsigned long long)r.server_commits,
	       r.wall_seconds);
	return 0;
}
