/*
 * unstable-sim: the library's demonstration and benchmark. Runs the engine
 * against a simulated server and dd-like writers in virtual time, and
 * prints the seeds' tables with their published figures beside ours.
 *
 * SPDX-License-Identifier: MIT
 *
 *   unstable-sim [--json] [--scenario NAME]
 *     [--policy unstable|no-forced-commit|naive|no-reclaim-wait]
 *     [--memory SIZE] [--backend [NAME:]bw=RATE,lat=TIME,rpcs=N,rpc=SIZE,
 *        commit-interval=TIME,commit-lat=TIME[+RATE],journal=SIZE]...
 *     [--stripe NAME,NAME...[,size=SIZE]|none]...
 *     [--domain NAME[,count=N][,parent=NAME][,max=SIZE][,high=SIZE][,bg=SIZE|PCT%]
 *        [,dirty=SIZE|PCT%]]...
 *     [--writer DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME][,rate=RATE][,count=N]
 *        [,backend=NAME|,stripe=NAME+NAME...[,stripe-size=SIZE]]]...
 *     [--seed N] [--trace FILE.csv] [--realtime [--backend file:PATH]]
 *   unstable-sim -h|--help|--version
 *
 * Sizes take K/M/G/T/P (powers of 1024), rates SIZE/s, times ns/us/ms/s,
 * each within its bounds (sim.h); a run as a whole stays within those of
 * check.c. Bad arguments print one line saying what is wrong and a hint,
 * and exit 2. Domains and writers: as many as the bounds of a run allow;
 * --domain NAME,count=N makes NAME-1 .. NAME-N alike, and a --writer naming
 * NAME writes in each of them (count=N on a writer: N writers each).
 * --realtime runs the same scenario with real threads and memory
 * (realtime.c) against the simulated server in real time or a file.
 */
#include "sim.h"

#include <getopt.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1ull << 30)

static const char *usage =
	"usage: unstable-sim [--json] [--scenario NAME]\n"
	"  [--policy unstable|no-forced-commit|naive|no-reclaim-wait]\n"
	"  [--memory SIZE] [--backend [NAME:]bw=RATE,lat=TIME,rpcs=N,rpc=SIZE,commit-interval=TIME,\n"
	"     commit-lat=TIME[+RATE],journal=SIZE]... [--stripe NAME,NAME...[,size=SIZE]|none]...\n"
	"  [--domain NAME[,count=N][,parent=NAME][,max=SIZE][,high=SIZE][,bg=SIZE|PCT%]\n"
	"     [,dirty=SIZE|PCT%]]...\n"
	"  [--writer DOMAIN,bytes=SIZE[,bs=SIZE][,start=TIME][,rate=RATE][,count=N]\n"
	"     [,backend=NAME|,stripe=NAME+NAME...[,stripe-size=SIZE]]]... [--seed N]\n"
	"  [--trace FILE.csv] [--realtime [--backend file:PATH]]\n"
	"       unstable-sim -h|--help|--version\n"
	"values: a decimal number, perhaps with a fraction (1.5G), and no sign, exponent, nan or\n"
	"  inf. Sizes take K, M, G, T or P (powers of 1024), at most 1P (bs= and rpc= at most 1G,\n"
	"  a stripe size 4G; --memory at least 4K); times ns, us, ms or s, at most 1h\n"
	"  (commit-interval at least 1ms); rates SIZE/s, 1K/s to 1T/s; count= 1 to 100000 (one\n"
	"  --writer makes at most 1000000 writers); rpcs= 1 to 65536; percentages 0% to 100%.\n"
	"  bg=0 and dirty=0 are ratios of 0: dirty=0 (or 0%) is write-through, each writer\n"
	"  waiting until its blocks are written back and committed.\n"
	"a run: each writer's bs at most its domains' max and --memory; and, counted at their\n"
	"  least before it starts, at most 16777216 events (blocks written, bytes/bs of each\n"
	"  writer, plus the writers and domains), 100000 s of simulated time, and half of the\n"
	"  physical memory.\n"
	"scenarios: lustre-1 (dd of 128G..1T through 512G), lustre-2 (one dd at 2x, 1x, 0.5x\n"
	"  memcg limits of 1G..64G), lustre-3 (8 memcgs of 8G, 16G each), lustre-4 (a limited\n"
	"  dd beside an unlimited one), memcg (dd of 1 GB to ext3 under 5M..2G), seeds (all\n"
	"  five); lustre-striped (1 and 8 dd striped over 1, 4 and 16 OSTs), two-backends (a\n"
	"  fast and a slow backend: separate domains, one domain, one parent)\n"
	"--backend KEY=VALUE,...: the default backend; --backend NAME:KEY=VALUE,... a named one\n"
	"  (from the built-in figures; given again, changed), each its own server with its own\n"
	"  requests in flight, journal and commits. commit-lat=5ms+500M/s: a commit takes 5 ms\n"
	"  plus its uncommitted bytes at 500M/s (an NFS COMMIT's cost); plain TIME: fixed.\n"
	"--writer ...,backend=NAME: its data goes to NAME (default: the default backend).\n"
	"--writer ...,stripe=A+B+C,stripe-size=1M: its file striped round robin over A, B, C,\n"
	"  1M on each in turn (one object per backend). --stripe A,B,C,size=1M does the same\n"
	"  for every --writer after it (until --stripe none); the stripe size is a multiple of\n"
	"  bs. Named backends and stripes are virtual time only.\n"
	"--realtime: the same run with real threads, real payload memory and real time, against\n"
	"  the simulated server, or with --backend file:PATH a file (pwrite as flush, O_DIRECT\n"
	"  when the filesystem takes it, fdatasync as commit; rpcs= and rpc= of --backend still\n"
	"  apply). Reports peak RSS beside peak charged. It runs --scenario memcg and custom\n"
	"  --domain/--writer runs whose payload fits in half of the memory; the Lustre scenarios\n"
	"  (hundreds of GiB) and --trace are virtual time only.\n"
	"--domain NAME,count=N: the N domains NAME-1 .. NAME-N with the same limits; a --writer\n"
	"  naming NAME writes in each of them (with count=N, N writers in each). Fairness between\n"
	"  many equal domains: --domain d,count=1000,max=16M --writer d,bytes=32M (Jain index\n"
	"  on the last line).\n"
	"--policy no-reclaim-wait: the Linux kernel before memcg reclaim waited for writeback\n"
	"  (the memcg seed's unpatched kernel): no dirty throttling per domain, only the machine's\n"
	"  dirty limits (10 % and 20 % of --memory), and a charge that finds its domain holding\n"
	"  only dirty data and data under writeback is OOM-killed at once (virtual time only).\n"
	"--seed N: the payload pattern of --realtime runs (checked byte for byte at the end);\n"
	"  the virtual-time model has no randomness, so its runs are the same for every seed.\n";

/* How a run is made: in virtual time, or in real time against the simulated
 * server (file NULL) or a file. */
struct mode {
	bool realtime;
	const char *file;
};

static const struct mode virtual_time = { false, NULL };

/* Every run, a scenario's too, is checked against the bounds of a run
 * first (check.c): the bounds must hold every built-in scenario. */
static int run(const struct sim_config *c, const struct mode *m, struct sim_result *r, char *err,
	       size_t len)
{
	if (sim_config_check(c, sim_phys_bytes(), err, len))
		return -1;
	if (m->realtime)
		return sim_run_realtime(c, m->file, r, err, len);
	return sim_run(c, r, err, len);
}

static const char *policy_name(enum sim_policy p)
{
	return p == SIM_POLICY_UNSTABLE	       ? "unstable" :
	       p == SIM_POLICY_NAIVE	       ? "naive" :
	       p == SIM_POLICY_NO_RECLAIM_WAIT ? "no-reclaim-wait" :
						 "no-forced-commit";
}

/* A progress line on long runs, for a person at a terminal only. */
static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
	va_list ap;

	if (!isatty(STDERR_FILENO))
		return;
	va_start(ap, fmt);
	fprintf(stderr, "\r\033[K");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, " ...");
	va_end(ap);
}

static void progress_done(void)
{
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\r\033[K");
}

/* The longest stall of a table's writers, and whose. */
struct worst {
	uint64_t ns;
	char who[64];
};

static void worst_note(struct worst *w, uint64_t ns, const char *who)
{
	if (ns > w->ns || !w->who[0]) {
		w->ns = ns;
		snprintf(w->who, sizeof(w->who), "%s", who);
	}
}

static void worst_print(const struct worst *w)
{
	printf("longest stall of a writer (no progress: pauses, memory waits): %.1f ms (%s)\n",
	       (double)w->ns / 1e6, w->who);
}

/* Ours faster than the seed by more than 10 %: the model is optimistic
 * there (docs/simulator.md: what it leaves out), not a match. */
static bool optimistic(double seed, double ours)
{
	return seed < 0.9 * ours;
}

/* A bad command line: the one line that says what is wrong, and where the
 * usage is (40 lines of it would bury the message); exit status 2. */
static int bad(const char *msg)
{
	fprintf(stderr, "unstable-sim: %s\ntry unstable-sim --help\n", msg);
	return 2;
}

/* Which backends the writers' data goes to (a writer's backend, or each of
 * its stripe's): c->nbk + 1 flags by backend index, or NULL without memory. */
static bool *backends_used(const struct sim_config *c)
{
	bool *used = calloc((size_t)c->nbk + 1, sizeof(*used));
	int i, k;

	for (i = 0; used && i < c->nwr; i++) {
		const struct sim_writer *w = &c->wr[i];

		if (w->stripe) {
			const struct sim_stripe *st = &c->stripe[w->stripe - 1];

			for (k = 0; k < st->n; k++)
				used[st->bk[k]] = true;
		} else {
			used[w->backend] = true;
		}
	}
	return used;
}

/* The bandwidth of the backends the writers use: the default's, or the sum
 * of those named by a writer or its striping. */
static uint64_t backend_bw(const struct sim_config *c)
{
	bool *used = backends_used(c);
	uint64_t bw = 0;
	int b;

	if (!used)
		return c->backend.bw;
	for (b = 0; b <= c->nbk; b++)
		if (used[b])
			bw += sim_config_backend(c, b)->bw;
	free(used);
	return bw ? bw : c->backend.bw;
}

/* The part of the backends' bandwidth they used over the whole run: bytes
 * they wrote / (bw x run time); 0 when not measured (real time). */
static double utilisation(const struct sim_config *c, const struct sim_result *r)
{
	uint64_t bw = backend_bw(c);

	return r->run_ns && bw ? (double)r->backend_bytes / ((double)bw * (double)r->run_ns / 1e9) :
				 0;
}

/* The name of backend index b (see struct sim_config): "default" for 0. */
static const char *backend_name(const struct sim_config *c, int b)
{
	return b ? c->bk[b - 1].name : "default";
}

/*
 * The text output's backend line: the backends the writers used, each with
 * its bandwidth (the first 16 of them, then how many more: a run may have
 * 10,000), and the part of their bandwidth used over the run.
 */
static void print_backends(const struct sim_config *c, const struct sim_result *r)
{
	bool *used = backends_used(c);
	int b, n = 0;

	for (b = 0; used && b <= c->nbk; b++)
		n += used[b];
	if (!n) {
		printf("backend: %.1f MB/s", (double)c->backend.bw / 1e6);
	} else {
		int shown = 0;

		printf("backend%s: ", n > 1 ? "s" : "");
		for (b = 0; b <= c->nbk; b++)
			if (used[b] && shown++ < 16)
				printf("%s%s %.1f MB/s", shown > 1 ? ", " : "", backend_name(c, b),
				       (double)sim_config_backend(c, b)->bw / 1e6);
		if (n > 16)
			printf(" and %d more", n - 16);
		if (n > 1)
			printf(" (%.1f MB/s in all)", (double)backend_bw(c) / 1e6);
	}
	printf("; %.1f %% used over the run (%.3f s, final sync included)\n",
	       100 * utilisation(c, r), (double)r->run_ns / 1e9);
	free(used);
}

/* The backends a writer's data goes to, as a JSON string: its backend's
 * name, or its stripe's, joined with '+'. */
static void json_writer_backends(const struct sim_config *c, const struct sim_writer *w)
{
	int k;

	printf("\"");
	if (!w->stripe) {
		printf("%s", backend_name(c, w->backend));
	} else {
		const struct sim_stripe *st = &c->stripe[w->stripe - 1];

		for (k = 0; k < st->n; k++)
			printf("%s%s", k ? "+" : "", backend_name(c, st->bk[k]));
	}
	printf("\"");
}

static void json_run(const struct sim_config *c, const struct sim_result *r, const struct mode *m)
{
	const char *pol = policy_name(c->policy);
	uint64_t bw = backend_bw(c);
	/* The same for every writer; each walk of the writers for it, once
	 * per writer, made the output quadratic (10 s at 100,000 writers). */
	double util = utilisation(c, r);
	int i;

	for (i = 0; i < c->nwr; i++) {
		const struct sim_writer_result *w = &r->wr[i];
		const struct sim_domain *d = &c->dom[c->wr[i].domain];

		printf("{\"kind\":\"writer\",\"scenario\":\"%s\",\"policy\":\"%s\",\"backend\":",
		       c->scenario, pol);
		json_writer_backends(c, &c->wr[i]);
		printf(",\"domain\":\"%s\","
		       "\"limit\":%llu,\"bytes\":%llu,\"seconds\":%.3f,\"throughput\":%.0f,"
		       "\"ceiling\":%llu,\"ratio_to_ceiling\":%.3f,\"backend_bw\":%llu,"
		       "\"backend_utilisation\":%.3f,\"peak_charged\":%llu,\"enomem\":%llu,"
		       "\"oom\":%llu,\"max_pause_ms\":%.1f,\"p99_pause_ms\":%.1f,"
		       "\"max_stall_ms\":%.1f,\"lost_bytes\":%llu}\n",
		       d->name, (unsigned long long)(d->max == UINT64_MAX ? 0 : d->max),
		       (unsigned long long)w->bytes, (double)w->done_ns / 1e9, w->throughput,
		       (unsigned long long)w->ceiling, w->ratio, (unsigned long long)bw, util,
		       (unsigned long long)r->dom[c->wr[i].domain].peak_charged,
		       (unsigned long long)w->enomem, (unsigned long long)w->oom,
		       (double)w->max_pause_ns / 1e6, (double)w->p99_pause_ns / 1e6,
		       (double)w->max_stall_ns / 1e6, (unsigned long long)w->lost_bytes);
	}
	for (i = 0; i < c->ndom; i++)
		printf("{\"kind\":\"domain\",\"scenario\":\"%s\",\"policy\":\"%s\",\"domain\":\"%s\","
		       "\"max\":%llu,\"peak_charged\":%llu,\"commits\":%llu,\"flushes\":%llu,"
		       "\"max_stall_ms\":%.1f}\n",
		       c->scenario, pol, c->dom[i].name,
		       (unsigned long long)(c->dom[i].max == UINT64_MAX ? 0 : c->dom[i].max),
		       (unsigned long long)r->dom[i].peak_charged,
		       (unsigned long long)r->dom[i].commits, (unsigned long long)r->dom[i].flushes,
		       (double)r->dom[i].max_stall_ns / 1e6);
	/* Each backend written to: its figures, and what the engine measured
	 * of it (virtual time only). */
	for (i = 0; i < r->nbk; i++) {
		const struct sim_backend_result *b = &r->bk[i];
		const struct sim_backend *k = sim_config_backend(c, i);

		if (!b->flush_bytes)
			continue;
		printf("{\"kind\":\"backend\",\"scenario\":\"%s\",\"policy\":\"%s\","
		       "\"backend\":\"%s\",\"bw\":%llu,\"lat_ms\":%.3f,\"bytes\":%llu,"
		       "\"measured_link_bw\":%llu,\"measured_write_lat_ms\":%.3f,"
		       "\"measured_commit_lat_ms\":%.3f}\n",
		       c->scenario, pol, i ? k->name : "default", (unsigned long long)k->bw,
		       (double)k->lat_ns / 1e6, (unsigned long long)b->flush_bytes,
		       (unsigned long long)b->link_bw, (double)b->write_lat_ns / 1e6,
		       (double)b->commit_lat_ns / 1e6);
	}
	printf("{\"kind\":\"summary\",\"scenario\":\"%s\",\"policy\":\"%s\",\"jain\":%.4f,"
	       "\"wall_seconds\":%.3f,\"virtual_seconds\":%.3f,\"commits_asked\":%llu,"
	       "\"server_commits\":%llu,\"backend_bw\":%llu,\"backend_utilisation\":%.3f",
	       c->scenario, pol, r->jain, r->wall_seconds, (double)r->end_ns / 1e9,
	       (unsigned long long)r->commits_asked, (unsigned long long)r->server_commits,
	       (unsigned long long)backend_bw(c), utilisation(c, r));
	if (!m->realtime)
		printf(",\"jain_window\":%.4f,\"window_s\":%.1f,\"windows\":%llu,"
		       "\"idle_windows\":%llu,\"window_spread_blocks\":%.2f,\"unfair_windows\":%llu",
		       r->jain_window, (double)r->window_ns / 1e9, (unsigned long long)r->nwindows,
		       (unsigned long long)r->idle_windows, r->window_spread,
		       (unsigned long long)r->unfair_windows);
	/* In real time virtual_seconds is the writers' real time. */
	if (m->realtime) {
		printf(",\"mode\":\"realtime\",\"backend\":\"%s\",\"peak_rss\":%llu,"
		       "\"peak_charged_total\":%llu",
		       m->file ? "file" : "sim", (unsigned long long)r->peak_rss,
		       (unsigned long long)r->peak_charged);
		if (m->file)
			printf(",\"o_direct\":\"%s\",\"file_bytes\":%llu,\"direct_bytes\":%llu,"
			       "\"io\":\"%s\"",
			       !r->direct_bytes			? "none" :
			       r->direct_bytes == r->file_bytes ? "all" :
								  "partly",
			       (unsigned long long)r->file_bytes,
			       (unsigned long long)r->direct_bytes, r->io_note);
	}
	printf("}\n");
	fflush(stdout);
}

/*
 * The seeds' servers: Lustre OSTs that take 10.4 GB/s in all (dd's GB are
 * 10^9 bytes: the 8 writers of table 3 reach 1.3 GB/s each), from writers
 * that copy at most 2.2 GB/s each (one dd of table 1), 8 RPCs of 4 MiB, a
 * commit every 5 s or when the journals (16 GiB in all: say 16 OSTs of 1
 * GiB each) fill or the client syncs, 50 ms each. Left alone, such a server
 * commits every 5 s, which is what left the unpatched client's memcg full
 * of unstable pages: 5 s of a 2.2 GB/s dd is more than a 1G or 4G limit.
 */
#define LUSTRE_DD_RATE 2200000000ull

static void lustre_backend(struct sim_config *c)
{
	c->memory = 512 * GIB;
	c->backend.bw = 10400000000ull;
	c->backend.lat_ns = 1000000;
	c->backend.rpcs = 8;
	c->backend.rpc = 4 << 20;
	c->backend.commit_interval = 5000000000ull;
	c->backend.commit_lat = 50000000;
	c->backend.journal = 16 * GIB;
}

static int one_dd(const char *scenario, enum sim_policy pol, bool json, const struct mode *m,
		  void (*backend)(struct sim_config *), const char *name, uint64_t max,
		  uint64_t bytes, uint64_t bs, struct sim_result *r, uint64_t *bw);

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
	struct worst worst = { 0, "" };
	bool marked = false;
	int t, l;

	for (t = 0; t < 3; t++) {
		for (l = 0; l < 4; l++) {
			static struct sim_result r; /* its arrays: reused by the next run */
			char name[32];
			uint64_t bw;

			snprintf(name, sizeof(name), "memcg-%uG-%gx", limits[l], times[t]);
			progress("lustre-2: %s, %u G", rows[t], limits[l]);
			if (one_dd("lustre-2", pol, json, &virtual_time, lustre_backend, name,
				   limits[l] * GIB, (uint64_t)(limits[l] * GIB * times[t]), 1 << 20,
				   &r, &bw))
				return 1;
			ours[t][l] = r.wr[0].throughput / 1e9;
			worst_note(&worst, r.wr[0].max_stall_ns, name);
			enomem[t][l] = r.wr[0].enomem ? 1 : r.wr[0].oom ? 2 : 0; /* 2: OOM */
			lost[t][l] = r.wr[0].lost_bytes;
			peak_over[t][l] =
				r.dom[0].peak_charged > limits[l] * GIB || r.dom[0].over_max;
		}
	}
	progress_done();
	if (json)
		return 0;
	printf("\nLustre table 2 (policy %s): one dd, memcg limits, GB/s as seed / ours\n",
	       policy_name(pol));
	printf("%-14s", "memcg limits");
	for (l = 0; l < 4; l++)
		printf("  %13uG", limits[l]);
	printf("\n");
	for (t = 0; t < 3; t++) {
		printf("%-14s", rows[t]);
		for (l = 0; l < 4; l++) {
			if (enomem[t][l])
				printf("  %5.1f / %6s", seed[t][l],
				       enomem[t][l] == 2 ? "OOM" : "ENOMEM");
			else {
				bool opt = optimistic(seed[t][l], ours[t][l]);

				marked |= opt;
				printf("  %5.1f / %5.2f%s", seed[t][l], ours[t][l],
				       lost[t][l] || peak_over[t][l] ? "!" :
				       opt			     ? "*" :
								       " ");
			}
		}
		printf("\n");
	}
	printf("(a dd copies at most 2.2 GB/s; ours: dd's own rate, virtual time; '!' marks lost "
	       "bytes or a crossed max)\n");
	if (marked)
		printf("('*': not a match, the seed is more than 10 %% slower: the model leaves out "
		       "the kernel's own page reclaim and its CPU cost, and grants)\n");
	worst_print(&worst);
	return 0;
}

/* One writer of bytes through one domain (or the root when max is 0). */
static int one_dd(const char *scenario, enum sim_policy pol, bool json, const struct mode *m,
		  void (*backend)(struct sim_config *), const char *name, uint64_t max,
		  uint64_t bytes, uint64_t bs, struct sim_result *r, uint64_t *bw)
{
	static struct sim_config c; /* its arrays: freed by the next call */
	char err[256];

	sim_config_free(&c);
	sim_config_init(&c);
	if (sim_config_reserve(&c, 1, 1)) {
		fprintf(stderr, "unstable-sim: out of memory\n");
		return 1;
	}
	snprintf(c.scenario, sizeof(c.scenario), "%s", scenario);
	c.policy = pol;
	backend(&c);
	snprintf(c.dom[0].name, sizeof(c.dom[0].name), "%s", name);
	c.dom[0].parent = -1;
	c.dom[0].max = max ? max : UINT64_MAX;
	c.dom[0].high = UINT64_MAX;
	c.ndom = 1;
	c.wr[0].domain = 0;
	c.wr[0].bs = bs;
	c.wr[0].bytes = bytes;
	c.wr[0].rate = backend == lustre_backend ? LUSTRE_DD_RATE : 0;
	c.nwr = 1;
	if (run(&c, m, r, err, sizeof(err))) {
		fprintf(stderr, "unstable-sim: %s\n", err);
		return 1;
	}
	if (json)
		json_run(&c, r, m);
	*bw = c.backend.bw;
	return 0;
}

static const char *cell(char *buf, size_t n, const struct sim_result *r, double unit)
{
	if (r->wr[0].oom)
		snprintf(buf, n, "OOM");
	else if (r->wr[0].enomem)
		snprintf(buf, n, "ENOMEM");
	else
		snprintf(buf, n, "%.2f%s", r->wr[0].throughput / unit,
			 r->wr[0].lost_bytes || r->dom[0].over_max ? "!" : "");
	return buf;
}

/* Lustre table 1: dd of 128G to 1T through 512G of client memory, no memcg. */
static int lustre1(enum sim_policy pol, bool json)
{
	static const unsigned sizes[] = { 128, 256, 512, 1024 };
	static const double unpatched[] = { 2.2, 2.2, 2.1, 2.0 },
			    patched[] = { 2.2, 2.2, 2.1, 2.0 };
	static struct sim_result r;
	struct worst worst = { 0, "" };
	char buf[4][32], who[32];
	uint64_t bw;
	int i;

	for (i = 0; i < 4; i++)
		if (progress("lustre-1: %uG", sizes[i]),
		    one_dd("lustre-1", pol, json, &virtual_time, lustre_backend, "client", 0,
			   sizes[i] * GIB, 1 << 20, &r, &bw))
			return 1;
		else {
			cell(buf[i], sizeof(buf[i]), &r, 1e9);
			snprintf(who, sizeof(who), "%uG", sizes[i]);
			worst_note(&worst, r.wr[0].max_stall_ns, who);
		}
	progress_done();
	if (json)
		return 0;
	printf("\nLustre table 1 (policy %s): dd through 512G of client memory, GB/s\n",
	       policy_name(pol));
	printf("%-16s %8s %8s %8s %8s\n", "I/O size", "128G", "256G", "512G", "1024G");
	printf("%-16s %8.1f %8.1f %8.1f %8.1f\n", "seed unpatched", unpatched[0], unpatched[1],
	       unpatched[2], unpatched[3]);
	printf("%-16s %8.1f %8.1f %8.1f %8.1f\n", "seed patched", patched[0], patched[1],
	       patched[2], patched[3]);
	printf("%-16s %8s %8s %8s %8s\n", "ours", buf[0], buf[1], buf[2], buf[3]);
	worst_print(&worst);
	return 0;
}

/* Lustre table 3: 8 memcgs of 8G, each with a dd of 16G. */
static int lustre3(enum sim_policy pol, bool json)
{
	static struct sim_config c;
	static struct sim_result r;
	struct worst worst = { 0, "" };
	char err[256];
	int i;

	sim_config_free(&c);
	sim_config_init(&c);
	if (sim_config_reserve(&c, 8, 8)) {
		fprintf(stderr, "unstable-sim: out of memory\n");
		return 1;
	}
	snprintf(c.scenario, sizeof(c.scenario), "lustre-3");
	c.policy = pol;
	lustre_backend(&c);
	for (i = 0; i < 8; i++) {
		snprintf(c.dom[i].name, sizeof(c.dom[i].name), "memcg-%d", i + 1);
		c.dom[i].parent = -1;
		c.dom[i].max = 8 * GIB;
		c.dom[i].high = UINT64_MAX;
		c.wr[i].domain = i;
		c.wr[i].bs = 1 << 20;
		c.wr[i].bytes = 16 * GIB;
		c.wr[i].rate = LUSTRE_DD_RATE;
	}
	c.ndom = c.nwr = 8;
	progress("lustre-3: 8 writers");
	if (run(&c, &virtual_time, &r, err, sizeof(err))) {
		fprintf(stderr, "unstable-sim: %s\n", err);
		return 1;
	}
	progress_done();
	if (json) {
		json_run(&c, &r, &virtual_time);
		return 0;
	}
	printf("\nLustre table 3 (policy %s): 8 memcgs of 8G, a dd of 16G in each\n",
	       policy_name(pol));
	printf("%-10s %22s %22s\n", "", "seed", "ours");
	for (i = 0; i < 8; i++) {
		char ours[48];

		if (r.wr[i].enomem || r.wr[i].oom)
			snprintf(ours, sizeof(ours), r.wr[i].oom ? "OOM" : "ENOMEM");
		else
			snprintf(ours, sizeof(ours), "%.2f s, %.2f GB/s%s", r.wr[i].done_ns / 1e9,
				 r.wr[i].throughput / 1e9,
				 r.wr[i].lost_bytes || r.dom[i].over_max ? "!" : "");
		printf("%-10s %22s %22s\n", c.dom[i].name,
		       (const char *[]){ "12.78 s, 1.3 GB/s", "12.79 s, 1.3 GB/s",
					 "12.95 s, 1.3 GB/s", "12.96 s, 1.3 GB/s",
					 "13.41 s, 1.3 GB/s", "13.54 s, 1.3 GB/s",
					 "13.58 s, 1.3 GB/s", "13.66 s, 1.3 GB/s" }[i],
		       ours);
	}
	printf("Jain index over the writers: %.4f\n", r.jain);
	for (i = 0; i < 8; i++)
		worst_note(&worst, r.wr[i].max_stall_ns, c.dom[i].name);
	worst_print(&worst);
	return 0;
}

/* Lustre table 4: a dd under a memcg limit (A) beside an unlimited one (B),
 * 128G each; B's throughput against B alone. */
static int lustre4(enum sim_policy pol, bool json)
{
	static const unsigned limits[] = { 1, 4, 16, 32, 64, 128 };
	static const double seed_a[] = { 1.3, 1.3, 1.4, 1.5, 1.8, 2.1 };
	static const double seed_b[] = { 2.2, 2.2, 2.2, 2.2, 2.2, 2.1 };
	static struct sim_config c;
	static struct sim_result r;
	char err[256];
	double solo = 0, a[6], b[6];
	bool bad_row[6], marked = false;
	struct worst worst = { 0, "" };
	int l, pass;

	for (pass = -1; pass < 6; pass++) {
		sim_config_free(&c);
		sim_config_init(&c);
		if (sim_config_reserve(&c, 2, 2)) {
			fprintf(stderr, "unstable-sim: out of memory\n");
			return 1;
		}
		snprintf(c.scenario, sizeof(c.scenario), "lustre-4");
		c.policy = pol;
		lustre_backend(&c);
		snprintf(c.dom[0].name, sizeof(c.dom[0].name), "B-unlimited");
		c.dom[0].parent = -1;
		c.dom[0].max = c.dom[0].high = UINT64_MAX;
		c.wr[0].domain = 0;
		c.wr[0].bs = 1 << 20;
		c.wr[0].bytes = 128 * GIB;
		c.wr[0].rate = LUSTRE_DD_RATE;
		c.ndom = c.nwr = 1;
		progress("lustre-4: %s", pass < 0 ? "B alone" : "A beside B");
		if (pass >= 0) {
			snprintf(c.dom[1].name, sizeof(c.dom[1].name), "A-%uG", limits[pass]);
			c.dom[1].parent = -1;
			c.dom[1].max = limits[pass] * GIB;
			c.dom[1].high = UINT64_MAX;
			c.wr[1] = c.wr[0];
			c.wr[1].domain = 1;
			c.ndom = c.nwr = 2;
		}
		if (run(&c, &virtual_time, &r, err, sizeof(err))) {
			fprintf(stderr, "unstable-sim: %s\n", err);
			return 1;
		}
		if (json)
			json_run(&c, &r, &virtual_time);
		for (l = 0; l < c.nwr; l++)
			worst_note(&worst, r.wr[l].max_stall_ns,
				   pass < 0 ? "B alone" : c.dom[c.wr[l].domain].name);
		if (pass < 0) {
			solo = r.wr[0].throughput;
			continue;
		}
		b[pass] = r.wr[0].throughput;
		a[pass] = r.wr[1].enomem ? -1 : r.wr[1].oom ? -2 : r.wr[1].throughput;
		bad_row[pass] = r.wr[0].lost_bytes || r.wr[1].lost_bytes || r.dom[1].over_max;
	}
	progress_done();
	if (json)
		return 0;
	printf("\nLustre table 4 (policy %s): dd A under a memcg limit beside dd B unlimited, "
	       "GB/s as seed / ours\n",
	       policy_name(pol));
	printf("%-10s %18s %18s %14s\n", "memlimit", "dd writer (A)", "dd writer (B)",
	       "B / B alone");
	for (l = 0; l < 6; l++) {
		char ca[24];

		if (a[l] < 0)
			snprintf(ca, sizeof(ca), "%.1f / %s", seed_a[l],
				 a[l] < -1 ? "OOM" : "ENOMEM");
		else {
			bool opt = optimistic(seed_a[l], a[l] / 1e9);

			marked |= opt;
			snprintf(ca, sizeof(ca), "%.1f / %5.2f%s", seed_a[l], a[l] / 1e9,
				 bad_row[l] ? "!" :
				 opt	    ? "*" :
					      " ");
		}
		printf("%-10u %18s %11.1f / %4.2f %13.3f\n", limits[l], ca, seed_b[l], b[l] / 1e9,
		       solo > 0 ? b[l] / solo : 0);
	}
	printf("(B alone: %.2f GB/s; rows are memcg limits in G)\n", solo / 1e9);
	if (marked)
		printf("('*': not a match, the seed is more than 10 %% slower: the model leaves out "
		       "the kernel's own page reclaim and its CPU cost, and grants)\n");
	worst_print(&worst);
	return 0;
}

/*
 * The memcg change's server: an ext3 disk of about 40 MB/s that commits
 * its journal every 5 s, on a machine of 5 GiB. The seed does not give the
 * machine's memory; its 2G row bounds it from below. Linux holds the data
 * dirty and under writeback under its dirty limit (20 % of dirtyable
 * memory by default, background 10 %: the engine's default ratios), and
 * the unpatched dd of 1 GB (1048576000 bytes) under 2G returned after 2.85
 * s, when the disk had written at most 2.85 s x 40 MB/s = 114 MB: about
 * 934 MB were still dirty or under writeback, so the limit was at least
 * that, and dirtyable memory at least 4.7 GB (4.35 GiB). 5 GiB: a dirty
 * limit of 1 GiB, background 512 MiB, which hold no-reclaim-wait's writer
 * (run.c); the library's domains are far below them.
 */
#define EXT3_MEMORY (5 * GIB)

static void ext3_backend(struct sim_config *c)
{
	c->memory = EXT3_MEMORY;
	c->backend.bw = 40000000ull;
	c->backend.lat_ns = 1000000;
	c->backend.rpcs = 8;
	c->backend.rpc = 1 << 20;
	c->backend.commit_interval = 5000000000ull;
	c->backend.commit_lat = 20000000;
	c->backend.journal = 128 << 20;
}

/*
 * Where no-reclaim-wait's outcome, OOM or not, is not the seed's unpatched
 * kernel's: the seed's dd survived 300M, the model's is OOM-killed. The
 * dirty limits (20 % of the machine's memory) do not make the difference:
 * they are above 300M, the seed's as the model's (see ext3_backend()).
 * What does is the time the unpatched kernel's reclaim took: it scanned the
 * memcg's pages, a larger part of them at each of its priorities and again
 * at each retry, before the OOM killer, and that time grows with the limit:
 * under 300M writeback cleaned some pages meanwhile, which reclaim then
 * freed; under 5M and 60M it did not. The model's reclaim takes no time, and
 * the seed gives no scanning cost per page to model it with.
 */
static const char nrw_survived_why[] =
	"the seed's unpatched dd survived, the model's is OOM-killed: the dirty limits do not "
	"hold this dd (20 % of the machine's memory, above this limit, as the seed's were: its "
	"2G dd returned with about 934 MB dirty or under writeback); the unpatched kernel "
	"survived by the time its reclaim took to scan the memcg's pages, which grows with the "
	"limit, while writeback cleaned some; the model's reclaim takes none";
static const char nrw_oom_why[] = "the seed's unpatched dd was OOM-killed, the model's survived";

/* Marks no-reclaim-wait's cell with '*' when its outcome, OOM or not, is not
 * the seed's unpatched one, and notes which way in differs[]: [0] the seed's
 * dd survived, [1] it was OOM-killed. */
static void nrw_mark(char *cell, size_t n, const char *seed, bool differs[2])
{
	bool oom = !strcmp(cell, "OOM"), seed_oom = !strcmp(seed, "OOM");

	if (oom == seed_oom)
		return;
	strncat(cell, "*", n - strlen(cell) - 1);
	differs[seed_oom] = true;
}

/* text in parentheses after "'*': ", in lines of at most 100 columns. */
static void print_star_note(const char *text)
{
	size_t col = 5, len;

	printf("('*':");
	for (; *text; text += len) {
		text += strspn(text, " ");
		len = strcspn(text, " ");
		if (col + 1 + len + 1 > 100) {
			printf("\n%.*s", (int)len, text);
			col = len;
		} else {
			printf(" %.*s", (int)len, text);
			col += 1 + len;
		}
	}
	printf(")\n");
}

/* no-reclaim-wait's outcome at one limit beside the seed's, for --json. */
static void json_nrw_seed(const char *name, const char *seed, bool oom)
{
	bool seed_oom = !strcmp(seed, "OOM");

	printf("{\"kind\":\"seed\",\"scenario\":\"memcg\",\"policy\":\"no-reclaim-wait\","
	       "\"domain\":\"%s\",\"seed_unpatched\":\"%s\",\"seed_oom\":%s,\"oom\":%s,"
	       "\"match\":%s",
	       name, seed, seed_oom ? "true" : "false", oom ? "true" : "false",
	       seed_oom == oom ? "true" : "false");
	if (seed_oom != oom) {
		printf(",\"why\":\"");
		fputs(seed_oom ? nrw_oom_why : nrw_survived_why, stdout);
		printf("\"");
	}
	printf("}\n");
}

/* Linux memcg: dd of 1000 MiB under 5M, 60M, 300M and 2G limits (ext3). */
static int memcg(enum sim_policy pol, bool json, const struct mode *m)
{
	static const uint64_t limits[] = { 5ull << 20, 60ull << 20, 300ull << 20, 2 * GIB };
	static const char *names[] = { "5M", "60M", "300M", "2G" };
	static const double seed[] = { 37.5, 34.6, 42.7, 312 };
	/* The unpatched kernel (ext3): dd OOM-killed at 5M and 60M. */
	static const char *seed_unpatched[] = { "OOM", "OOM", "51.8", "368.0" };
	static struct sim_result r;
	char buf[4][32], unp[4][32], charged[4][16], rss[4][16], note[sizeof(r.io_note)] = "";
	/* The unpatched row of the model: virtual time, text only (the JSON
	 * is the policy asked for alone). */
	bool unpatched = !json && !m->realtime && pol != SIM_POLICY_NO_RECLAIM_WAIT;
	bool differs[2] = { false, false }; /* no-reclaim-wait against the seed (nrw_mark()) */
	struct worst worst = { 0, "" };
	uint64_t bw;
	int i;

	for (i = 0; i < 4; i++)
		/* 64 KiB buffers: the kernel dirties pages, not dd's 1 MiB blocks,
		 * and a 5M limit holds a single 1 MiB block of dirty data. */
		if (progress("memcg: %s", names[i]),
		    one_dd("memcg", pol, json, m, ext3_backend, names[i], limits[i], 1048576000ull,
			   64 << 10, &r, &bw))
			return 1;
		else {
			cell(buf[i], sizeof(buf[i]), &r, 1e6);
			if (pol == SIM_POLICY_NO_RECLAIM_WAIT && json)
				json_nrw_seed(names[i], seed_unpatched[i], r.wr[0].oom > 0);
			else if (pol == SIM_POLICY_NO_RECLAIM_WAIT)
				nrw_mark(buf[i], sizeof(buf[i]), seed_unpatched[i], differs);
			snprintf(charged[i], sizeof(charged[i]), "%.1f",
				 (double)r.dom[0].peak_charged / (1 << 20));
			snprintf(rss[i], sizeof(rss[i]), "%.1f", (double)r.peak_rss / (1 << 20));
			snprintf(note, sizeof(note), "%s", r.io_note);
			worst_note(&worst, r.wr[0].max_stall_ns, names[i]);
		}
	for (i = 0; unpatched && i < 4; i++)
		if (progress("memcg: %s, no-reclaim-wait", names[i]),
		    one_dd("memcg", SIM_POLICY_NO_RECLAIM_WAIT, false, m, ext3_backend, names[i],
			   limits[i], 1048576000ull, 64 << 10, &r, &bw))
			return 1;
		else {
			cell(unp[i], sizeof(unp[i]), &r, 1e6);
			nrw_mark(unp[i], sizeof(unp[i]), seed_unpatched[i], differs);
		}
	progress_done();
	if (json)
		return 0;
	printf("\nLinux memcg (policy %s): dd of 1 GB to ext3 under a limit, MB/s "
	       "(seed unpatched: OOM-killed at 5M and 60M, not at 300M and 2G)\n",
	       policy_name(pol));
	printf("%-16s %8s %8s %8s %8s\n", "limit", names[0], names[1], names[2], names[3]);
	printf("%-16s %8.1f %8.1f %8.1f %8.1f\n", "seed patched", seed[0], seed[1], seed[2],
	       seed[3]);
	printf("%-16s %8s %8s %8s %8s\n", "seed unpatched", seed_unpatched[0], seed_unpatched[1],
	       seed_unpatched[2], seed_unpatched[3]);
	printf("%-16s %8s %8s %8s %8s\n", "ours", buf[0], buf[1], buf[2], buf[3]);
	if (unpatched)
		printf("%-16s %8s %8s %8s %8s\n", "no-reclaim-wait", unp[0], unp[1], unp[2],
		       unp[3]);
	if (!m->realtime) {
		printf("(backend 40 MB/s; ours: dd's own rate, virtual time; a 2G limit holds the "
		       "whole copy in memory%s)\n",
		       unpatched ?
			       "; no-reclaim-wait: the unpatched kernel's reclaim, docs/simulator.md" :
			       "");
		if (unpatched || pol == SIM_POLICY_NO_RECLAIM_WAIT)
			printf("(no-reclaim-wait: held by the machine's dirty limits, %llu GiB "
			       "of memory: background %llu MiB, dirty %llu MiB)\n",
			       EXT3_MEMORY / GIB, EXT3_MEMORY / 10 >> 20, EXT3_MEMORY / 5 >> 20);
		if (differs[0])
			print_star_note(nrw_survived_why);
		if (differs[1])
			print_star_note(nrw_oom_why);
		worst_print(&worst);
		return 0;
	}
	printf("%-16s %8s %8s %8s %8s\n", "peak charged MiB", charged[0], charged[1], charged[2],
	       charged[3]);
	printf("%-16s %8s %8s %8s %8s\n", "peak RSS MiB", rss[0], rss[1], rss[2], rss[3]);
	if (m->file)
		printf("(real time, file %s: %s; ours: dd's own rate; a 2G limit holds the whole "
		       "copy in memory)\n",
		       m->file, note);
	else
		printf("(real time, simulated server of 40 MB/s; ours: dd's own rate; a 2G limit "
		       "holds the whole copy in memory)\n");
	return 0;
}

/*
 * A config made from command-line specs, as a user would give them
 * (kinds: 'b' --backend, 's' --stripe, 'd' --domain, 'w' --writer): 0, or 1
 * with the message printed.
 */
static int build(struct sim_config *c, const char *scenario, const char *const *specs)
{
	char err[256];
	int rc = 0;

	sim_config_free(c);
	sim_config_init(c);
	snprintf(c->scenario, sizeof(c->scenario), "%s", scenario);
	for (; *specs && !rc; specs++) {
		const char *v = *specs + 2;

		switch (**specs) {
		case 'b':
			rc = sim_parse_backend_opt(v, c, err, sizeof(err));
			break;
		case 's':
			rc = sim_parse_stripe(v, c, err, sizeof(err));
			break;
		case 'd':
			rc = sim_parse_domain(v, c, err, sizeof(err));
			break;
		default:
			rc = sim_parse_writer(v, c, err, sizeof(err));
			break;
		}
	}
	if (rc)
		fprintf(stderr, "unstable-sim: %s: %s\n", scenario, err);
	return rc ? 1 : 0;
}

/*
 * Lustre striping: a file striped round robin over OSTs (1 MiB at a time),
 * each OST its own server (650 MB/s: the seeds' 10.4 GB/s over 16 OSTs;
 * 8 RPCs of 4 MiB in flight, its own journal of 1 GiB and its own commits),
 * one dd (2.2 GB/s at most) or eight, each in a memcg of 1G writing 16G,
 * over 1, 4 and 16 OSTs.
 */
static int lustre_striped(enum sim_policy pol, bool json)
{
	static const int osts[] = { 1, 4, 16 }, writers[] = { 1, 8 };
	static struct sim_config c;
	static struct sim_result r;
	char spec[40][224], list[200], err[256];
	const char *specs[42];
	double per[2][3], agg[2][3];
	bool bad_run[2][3];
	int wi, oi, i, n;

	for (wi = 0; wi < 2; wi++)
		for (oi = 0; oi < 3; oi++) {
			double lo = 0, sum = 0;

			n = 0;
			list[0] = 0;
			for (i = 0; i < osts[oi]; i++) {
				snprintf(spec[n], sizeof(spec[n]),
					 "b:ost%d:bw=650000000/s,lat=1ms,rpcs=8,rpc=4M,"
					 "commit-interval=5s,commit-lat=50ms,journal=1G",
					 i);
				specs[n] = spec[n];
				n++;
				snprintf(list + strlen(list), sizeof(list) - strlen(list),
					 "%sost%d", i ? "," : "", i);
			}
			snprintf(spec[n], sizeof(spec[n]), "s:%s,size=1M", list);
			specs[n] = spec[n];
			n++;
			specs[n++] = "d:memcg,count=8,max=1G";
			snprintf(spec[n], sizeof(spec[n]), "w:%s,bytes=16G,rate=2200000000/s",
				 writers[wi] == 8 ? "memcg" : "memcg-1");
			specs[n] = spec[n];
			n++;
			specs[n] = NULL;
			if (build(&c, "lustre-striped", specs))
				return 1;
			c.policy = pol;
			c.memory = 512 * GIB;
			progress("lustre-striped: %d writers over %d OSTs", writers[wi], osts[oi]);
			if (run(&c, &virtual_time, &r, err, sizeof(err))) {
				fprintf(stderr, "unstable-sim: %s\n", err);
				return 1;
			}
			if (json)
				json_run(&c, &r, &virtual_time);
			bad_run[wi][oi] = false;
			for (i = 0; i < c.nwr; i++) {
				sum += r.wr[i].throughput;
				lo = !i || r.wr[i].throughput < lo ? r.wr[i].throughput : lo;
				bad_run[wi][oi] |= r.wr[i].enomem || r.wr[i].lost_bytes ||
						   r.dom[c.wr[i].domain].over_max;
			}
			per[wi][oi] = lo;
			agg[wi][oi] = sum;
		}
	progress_done();
	if (json)
		return 0;
	printf("\nLustre striping (policy %s): dd of 16G in a memcg of 1G each, striped 1M at a "
	       "time over OSTs of 650 MB/s, GB/s\n",
	       policy_name(pol));
	printf("%-8s %5s %16s %10s %14s %8s\n", "writers", "OSTs", "per writer (min)", "aggregate",
	       "OSTs' bw", "agg/bw");
	for (wi = 0; wi < 2; wi++)
		for (oi = 0; oi < 3; oi++)
			printf("%-8d %5d %15.2f%s %10.2f %14.2f %8.2f\n", writers[wi], osts[oi],
			       per[wi][oi] / 1e9, bad_run[wi][oi] ? "!" : " ", agg[wi][oi] / 1e9,
			       osts[oi] * 0.65, agg[wi][oi] / (osts[oi] * 0.65e9));
	printf("(a dd copies at most 2.2 GB/s; each OST its own server: 8 x 4 MiB in flight, "
	       "its own journal and commits; '!' marks ENOMEM, lost bytes or a crossed max)\n");
	return 0;
}

/*
 * Two backends, a fast one (1 GiB/s) and a slow one (100 MiB/s): writer F
 * (4G) on the fast one, writer S (1G) on the slow one, in their own
 * domains of 256M, in one domain of 512M, or in two unlimited children of
 * one parent of 512M; each writer's rate beside its rate alone in the same
 * setup.
 */
static int two_backends(enum sim_policy pol, bool json)
{
	enum { NSETUP = 5 };
	static const char *const setups[NSETUP] = { "separate domains", "one domain", "one parent",
						    "burst, one domain", "burst, 1000:1" };
	static const char *const doms[NSETUP][3] = {
		{ "d:F,max=256M", "d:S,max=256M", NULL },
		{ "d:FS,max=512M", NULL, NULL },
		{ "d:P,max=512M", "d:F,parent=P", "d:S,parent=P" },
		{ "d:FS,max=128M", NULL, NULL },
		{ "d:FS,max=200M", NULL, NULL },
	};
	/* The last two: a slow writer that would dirty its whole file at
	 * memory speed before its backend's speed is known, beside a fast
	 * writer in one domain (2 GiB/s against 5 MiB/s and 2 MiB/s). */
	static const char *const bks[NSETUP][2] = {
		{ "b:fast:bw=1G/s,lat=1ms,rpcs=8,rpc=1M,commit-interval=5s,commit-lat=20ms,journal=1G",
		  "b:slow:bw=100M/s,lat=5ms,rpcs=8,rpc=1M,commit-interval=5s,commit-lat=20ms,"
		  "journal=1G" },
		{ NULL, NULL },
		{ NULL, NULL },
		{ "b:fast:bw=2G/s", "b:slow:bw=5M/s" },
		{ "b:fast:bw=2G/s,commit-lat=10ms", "b:slow:bw=2M/s,commit-lat=10ms" },
	};
	static const char *const wrs[NSETUP][2] = {
		{ "w:F,bytes=4G,backend=fast", "w:S,bytes=1G,backend=slow" },
		{ "w:FS,bytes=4G,backend=fast", "w:FS,bytes=1G,backend=slow" },
		{ "w:F,bytes=4G,backend=fast", "w:S,bytes=1G,backend=slow" },
		{ "w:FS,bytes=8G,backend=fast", "w:FS,bytes=64M,backend=slow" },
		{ "w:FS,bytes=8G,backend=fast", "w:FS,bytes=256M,backend=slow" },
	};
	static struct sim_config c;
	static struct sim_result r;
	double rate[NSETUP][3][2]; /* setup, run (both, F alone, S alone), writer */
	char err[256];
	int st, run_, i;

	for (st = 0; st < NSETUP; st++)
		for (run_ = 0; run_ < 3; run_++) {
			const char *const *bk = bks[st][0] ? bks[st] : bks[0];
			const char *specs[8];
			int n = 0, k;

			specs[n++] = bk[0];
			specs[n++] = bk[1];
			for (k = 0; k < 3 && doms[st][k]; k++)
				specs[n++] = doms[st][k];
			if (run_ != 2)
				specs[n++] = wrs[st][0];
			if (run_ != 1)
				specs[n++] = wrs[st][1];
			specs[n] = NULL;
			if (build(&c, "two-backends", specs))
				return 1;
			c.policy = pol;
			c.memory = 4 * GIB;
			progress("two-backends: %s", setups[st]);
			if (run(&c, &virtual_time, &r, err, sizeof(err))) {
				fprintf(stderr, "unstable-sim: %s\n", err);
				return 1;
			}
			if (json)
				json_run(&c, &r, &virtual_time);
			rate[st][run_][0] = rate[st][run_][1] = 0;
			for (i = 0; i < c.nwr; i++)
				rate[st][run_][c.wr[i].backend == 2] =
					r.wr[i].enomem ? -1 : r.wr[i].throughput;
		}
	progress_done();
	if (json)
		return 0;
	printf("\nTwo backends (policy %s): writer F (4G) to a 1 GiB/s backend beside writer S "
	       "(1G) to a 100 MiB/s one, MB/s\n",
	       policy_name(pol));
	printf("%-18s %9s %9s %7s %9s %9s %7s\n", "setup", "F", "F alone", "F/alone", "S",
	       "S alone", "S/alone");
	for (st = 0; st < NSETUP; st++) {
		printf("%-18s", setups[st]);
		for (i = 0; i < 2; i++) {
			double both = rate[st][0][i], solo = rate[st][1 + i][i];

			if (both < 0 || solo < 0)
				printf(" %9s %9s %7s", both < 0 ? "ENOMEM" : "-",
				       solo < 0 ? "ENOMEM" : "-", "-");
			else
				printf(" %9.1f %9.1f %7.2f", both / 1e6, solo / 1e6,
				       solo > 0 ? both / solo : 0);
		}
		printf("\n");
	}
	printf("(separate: F and S in domains of 256M each; one domain: both in one of 512M; one "
	       "parent: unlimited children of a parent of 512M; burst: F of 8G to 2 GiB/s beside S "
	       "of 64M to 5 MiB/s in one domain of 128M, and of 256M to 2 MiB/s with 10 ms commits in "
	       "200M)\n");
	return 0;
}

/* What the command line asks for: the run's config (static in main(), so
 * that what it holds stays reachable), how it runs, and the scenario and
 * output chosen. */
struct cli {
	struct sim_config *c;
	struct mode m;
	const char *scenario;
	bool json;
};

/* Options go on being read: what take_option() and parse_args() answer
 * when main() must not return yet. */
#define CLI_GO_ON (-1)

/* --policy NAME: the config's policy, or an error naming the four. */
static int parse_policy(const char *arg, struct sim_config *c)
{
	char err[1024];

	if (!strcmp(arg, "unstable"))
		c->policy = SIM_POLICY_UNSTABLE;
	else if (!strcmp(arg, "no-forced-commit"))
		c->policy = SIM_POLICY_NO_FORCED_COMMIT;
	else if (!strcmp(arg, "naive"))
		c->policy = SIM_POLICY_NAIVE;
	else if (!strcmp(arg, "no-reclaim-wait"))
		c->policy = SIM_POLICY_NO_RECLAIM_WAIT;
	else {
		snprintf(err, sizeof(err),
			 "--policy: '%s' is not unstable, no-forced-commit, naive or "
			 "no-reclaim-wait",
			 arg);
		return bad(err);
	}
	return CLI_GO_ON;
}

/*
 * An option getopt did not take: a long option is argv[optind - 1]:
 * unknown (optopt 0), or one that takes no argument given one (optopt its
 * value). A short one is optopt, perhaps inside a group like -xh, where
 * argv[optind - 1] is the argument before.
 */
static int bad_option(char **argv)
{
	const char *a = argv[optind - 1], *eq = strchr(a, '=');
	bool lng = !strncmp(a, "--", 2);
	char err[1024];

	if (lng && optopt && eq)
		snprintf(err, sizeof(err), "%.*s takes no argument", (int)(eq - a), a);
	else if (lng && !optopt)
		snprintf(err, sizeof(err), "unknown option '%s'", a);
	else
		snprintf(err, sizeof(err), "unknown option '-%c'", optopt);
	return bad(err);
}

/* One option getopt_long() read (opt, its argument in optarg) into the
 * command line's choices: CLI_GO_ON, or main()'s exit code after --help,
 * --version or an error. */
static int take_option(int opt, char **argv, struct cli *a)
{
	struct sim_config *c = a->c;
	char err[1024];

	switch (opt) {
	case 'j':
		a->json = true;
		break;
	case 's':
		a->scenario = optarg;
		break;
	case 'p':
		return parse_policy(optarg, c);
	case 'm':
		if (sim_parse_memory(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 'b':
		if (!strncmp(optarg, "file:", 5)) {
			if (!optarg[5])
				return bad("--backend file:PATH needs a path");
			a->m.file = optarg + 5;
			break;
		}
		if (sim_parse_backend_opt(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 'S':
		if (sim_parse_stripe(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 'd':
		if (sim_parse_domain(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 'w':
		if (sim_parse_writer(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 'r':
		if (sim_parse_seed(optarg, c, err, sizeof(err)))
			return bad(err);
		break;
	case 't':
		c->trace = optarg;
		break;
	case 'R':
		a->m.realtime = true;
		break;
	case 'h':
		printf("%s", usage);
		return 0;
	case 'V':
		printf("unstable-sim %s\n", us_version());
		return 0;
	case ':':
		snprintf(err, sizeof(err), "%s requires an argument", argv[optind - 1]);
		return bad(err);
	default:
		return bad_option(argv);
	}
	return CLI_GO_ON;
}

/* The command line, read option by option, then what no single option can
 * check: no arguments left over, and the options real time does not take.
 * CLI_GO_ON, or main()'s exit code. */
static int parse_args(int argc, char **argv, struct cli *a)
{
	static const struct option longopts[] = { { "json", no_argument, NULL, 'j' },
						  { "scenario", required_argument, NULL, 's' },
						  { "policy", required_argument, NULL, 'p' },
						  { "memory", required_argument, NULL, 'm' },
						  { "backend", required_argument, NULL, 'b' },
						  { "stripe", required_argument, NULL, 'S' },
						  { "domain", required_argument, NULL, 'd' },
						  { "writer", required_argument, NULL, 'w' },
						  { "seed", required_argument, NULL, 'r' },
						  { "trace", required_argument, NULL, 't' },
						  { "realtime", no_argument, NULL, 'R' },
						  { "help", no_argument, NULL, 'h' },
						  { "version", no_argument, NULL, 'V' },
						  { NULL, 0, NULL, 0 } };
	char err[1024];
	int opt, rc;

	/* getopt's own messages off (opterr), and a missing argument told
	 * apart from an unknown option (the leading ':'): each error is one
	 * line of ours, naming the option. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1)
		if ((rc = take_option(opt, argv, a)) != CLI_GO_ON)
			return rc;
	if (optind < argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s'", argv[optind]);
		return bad(err);
	}
	if (a->m.file && !a->m.realtime)
		return bad("--backend file:PATH runs in real time: add --realtime");
	if (a->m.realtime && a->c->policy == SIM_POLICY_NO_RECLAIM_WAIT)
		return bad(
			"--policy no-reclaim-wait is for virtual time only, not with --realtime");
	if (a->m.realtime && a->c->trace)
		return bad("--trace is for virtual time only, not with --realtime");
	if (a->m.realtime && a->scenario && strcmp(a->scenario, "memcg"))
		return bad("--realtime runs --scenario memcg or custom --domain/--writer runs; "
			   "the Lustre scenarios move hundreds of GiB: run them in virtual time");
	return CLI_GO_ON;
}

/* --scenario NAME: the built-in scenario, with the policy given (and for
 * memcg the mode); its exit code. */
static int run_scenario(const struct cli *a)
{
	const struct sim_config *c = a->c;
	const char *scenario = a->scenario;
	bool json = a->json;
	char err[1024];

	if (c->nwr || c->ndom || c->trace || c->nbk || c->nstripe)
		return bad("--scenario does not take --domain, --writer, --trace, named "
			   "backends or --stripe");
	if (!strcmp(scenario, "lustre-1"))
		return lustre1(c->policy, json);
	if (!strcmp(scenario, "lustre-2"))
		return lustre2(c->policy, json);
	if (!strcmp(scenario, "lustre-3"))
		return lustre3(c->policy, json);
	if (!strcmp(scenario, "lustre-4"))
		return lustre4(c->policy, json);
	if (!strcmp(scenario, "memcg"))
		return memcg(c->policy, json, &a->m);
	if (!strcmp(scenario, "lustre-striped"))
		return lustre_striped(c->policy, json);
	if (!strcmp(scenario, "two-backends"))
		return two_backends(c->policy, json);
	if (!strcmp(scenario, "seeds"))
		return lustre1(c->policy, json) || lustre2(c->policy, json) ||
		       lustre3(c->policy, json) || lustre4(c->policy, json) ||
		       memcg(c->policy, json, &virtual_time);
	snprintf(err, sizeof(err),
		 "--scenario: '%s' is not lustre-1 .. lustre-4, memcg, seeds, lustre-striped "
		 "or two-backends",
		 scenario);
	return bad(err);
}

/* A custom run's text report: a line per writer, the real-time figures or
 * the backends', the Jain index and the run's cost, and the fairness over
 * time. */
static void print_run(const struct sim_config *c, const struct sim_result *r, const struct mode *m)
{
	int i;

	for (i = 0; i < c->nwr; i++)
		printf("writer %d (%s): %llu bytes in %.3f s, %.1f MB/s, %.1f %% of its ceiling "
		       "(%.1f MB/s: its copy rate or its share of the backend), peak charged "
		       "%llu, ENOMEM %llu, OOM %llu, max pause %.1f ms, p99 %.1f ms, max stall "
		       "%.1f ms, lost %llu bytes\n",
		       i, c->dom[c->wr[i].domain].name, (unsigned long long)r->wr[i].bytes,
		       (double)r->wr[i].done_ns / 1e9, r->wr[i].throughput / 1e6,
		       100 * r->wr[i].ratio, (double)r->wr[i].ceiling / 1e6,
		       (unsigned long long)r->dom[c->wr[i].domain].peak_charged,
		       (unsigned long long)r->wr[i].enomem, (unsigned long long)r->wr[i].oom,
		       (double)r->wr[i].max_pause_ns / 1e6, (double)r->wr[i].p99_pause_ns / 1e6,
		       (double)r->wr[i].max_stall_ns / 1e6,
		       (unsigned long long)r->wr[i].lost_bytes);
	if (m->realtime) {
		uint64_t bytes = 0;

		for (i = 0; i < c->nwr; i++)
			bytes += r->wr[i].bytes;
		printf("real time, %s: %.1f MiB/s in all; peak RSS %.1f MiB beside peak charged "
		       "%.1f MiB\n",
		       m->file ? "file backend" : "simulated server",
		       r->end_ns ? (double)bytes / (1 << 20) / ((double)r->end_ns / 1e9) : 0,
		       (double)r->peak_rss / (1 << 20), (double)r->peak_charged / (1 << 20));
		if (m->file)
			printf("file %s: %s\n", m->file, r->io_note);
	}
	if (!m->realtime)
		print_backends(c, r);
	printf("Jain index %.4f; %llu commits asked, %llu server commits; %.2f s %s\n", r->jain,
	       (unsigned long long)r->commits_asked, (unsigned long long)r->server_commits,
	       r->wall_seconds, m->realtime ? "in all" : "of CPU");
	if (!m->realtime && r->nwindows)
		printf("Jain index over %.1f s windows: %.4f at worst (%llu windows with two "
		       "writers or more throughout, %llu of them without progress for any)\n",
		       (double)r->window_ns / 1e9, r->jain_window, (unsigned long long)r->nwindows,
		       (unsigned long long)r->idle_windows);
	if (!m->realtime && r->window_spread > 0)
		printf("Windows under 0.99: their writers' bytes %.2f blocks apart at most "
		       "(%llu more than two)\n",
		       r->window_spread, (unsigned long long)r->unfair_windows);
}

int main(int argc, char **argv)
{
	/* Static: what they hold stays reachable until the process exits. */
	static struct sim_config c;
	static struct sim_result r;
	struct cli a = { &c, { false, NULL }, NULL, false };
	char err[1024];
	int rc;

	sim_config_init(&c);
	if ((rc = parse_args(argc, argv, &a)) != CLI_GO_ON)
		return rc;
	if (a.scenario)
		return run_scenario(&a);
	if (!c.nwr)
		return bad("nothing to run: give --scenario, or --domain and --writer");
	if (sim_config_check(&c, sim_phys_bytes(), err, sizeof(err)))
		return bad(err);
	if (a.m.realtime && sim_realtime_check(&c, err, sizeof(err)))
		return bad(err);
	if (run(&c, &a.m, &r, err, sizeof(err))) {
		fprintf(stderr, "unstable-sim: %s\n", err);
		return 1;
	}
	if (a.json) {
		json_run(&c, &r, &a.m);
		return 0;
	}
	print_run(&c, &r, &a.m);
	return 0;
}
