/*
 * us-bench-sim-scale: the simulator's cost against the number of domains.
 * Prints one JSON object.
 *
 * SPDX-License-Identifier: MIT
 *
 * For each domain count N (--domains, 10,000 and 20,000 by default) it runs
 *
 *     unstable-sim --json --domain d,count=N,max=16M --writer d,bytes=32M
 *
 * (--max and --bytes change the two sizes, --bs adds the writers' block
 * size) as a child process and reports its CPU seconds (user + system, from
 * wait4()), its peak resident set size and the virtual time it simulated;
 * then the ratios of the last run to the first. --with-100k adds 100,000
 * domains (hours of CPU at 32 MiB a writer: see docs/performance.md).
 *
 * The runs are not linear in N, whatever the code: N writers of a fixed size
 * through one link make a run N times longer in virtual time, and each writer
 * held at its limit wakes every min_pause (10 ms) of it to look at the gate,
 * so the simulated events grow as N^2. cpu_ns_per_writer_s divides the CPU
 * time by N x the virtual seconds: the cost of one writer for one second of
 * virtual time, which stays flat when every event costs the same whatever
 * the number of domains (the simulator's and the engine's work per event
 * being independent of N is what this benchmark watches).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef US_SIM_PATH
#define US_SIM_PATH "unstable-sim"
#endif

#define MAXRUNS 16

extern char **environ;

struct run {
	unsigned long domains;
	double cpu_s, virtual_s;
	long peak_rss_kib;
};

static void usage(void)
{
	fprintf(stderr, "usage: us-bench-sim-scale [--sim PATH] [--domains N,N,...] [--with-100k] "
			"[--max SIZE] [--bytes SIZE] [--bs SIZE]\n");
	exit(2);
}

/* The number after "key": in line, or -1. */
static double field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Runs the simulator on argv; fills r from its summary line and its rusage.
 * 0, or -1 with a message on stderr. */
static int run_sim(char *const *argv, struct run *r)
{
	posix_spawn_file_actions_t fa;
	char *line = NULL, *last = NULL;
	size_t cap = 0;
	struct rusage ru;
	int fds[2], status, rc;
	FILE *out;
	pid_t pid;

	if (pipe(fds)) {
		perror("pipe");
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc) {
		close(fds[0]);
		fprintf(stderr, "us-bench-sim-scale: %s: %s\n", argv[0], strerror(rc));
		return -1;
	}
	out = fdopen(fds[0], "r");
	if (!out) {
		perror("fdopen");
		close(fds[0]);
		waitpid(pid, NULL, 0);
		return -1;
	}
	/* Tens of thousands of lines: only the summary, the last, is kept. */
	while (getline(&line, &cap, out) > 0)
		if (strstr(line, "\"kind\":\"summary\"")) {
			free(last);
			last = strdup(line);
		}
	fclose(out);
	free(line);
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR) {
			perror("wait4");
			free(last);
			return -1;
		}
	if (!WIFEXITED(status) || WEXITSTATUS(status) || !last) {
		fprintf(stderr, "us-bench-sim-scale: %s failed (status %d)\n", argv[0], status);
		free(last);
		return -1;
	}
	r->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	r->peak_rss_kib = ru.ru_maxrss;
	r->virtual_s = field(last, "\"virtual_seconds\":");
	free(last);
	return 0;
}

int main(int argc, char **argv)
{
	const char *sim = US_SIM_PATH, *list = "10000,20000", *max = "16M", *bytes = "32M";
	const char *bs = NULL;
	struct run runs[MAXRUNS];
	bool with100k = false;
	int i, n = 0;
	char *p, *copy;

	for (i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--sim"))
			sim = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--domains"))
			list = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--max"))
			max = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--bytes"))
			bytes = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--bs"))
			bs = argv[++i];
		else if (!strcmp(argv[i], "--with-100k"))
			with100k = true;
		else
			usage();
	}
	copy = strdup(list);
	if (!copy)
		return 1;
	for (p = strtok(copy, ","); p && n < MAXRUNS; p = strtok(NULL, ","))
		if ((runs[n].domains = strtoul(p, NULL, 0)) > 0)
			n++;
	free(copy);
	if (with100k && n < MAXRUNS)
		runs[n++].domains = 100000;
	if (!n)
		usage();

	for (i = 0; i < n; i++) {
		char dom[96], wr[96], *args[8];

		snprintf(dom, sizeof(dom), "d,count=%lu,max=%s", runs[i].domains, max);
		snprintf(wr, sizeof(wr), "d,bytes=%s%s%s", bytes, bs ? ",bs=" : "", bs ? bs : "");
		args[0] = (char *)sim;
		args[1] = "--json";
		args[2] = "--domain";
		args[3] = dom;
		args[4] = "--writer";
		args[5] = wr;
		args[6] = NULL;
		fprintf(stderr, "us-bench-sim-scale: %s --json --domain %s --writer %s\n", sim, dom,
			wr);
		if (run_sim(args, &runs[i]))
			return 1;
	}

	printf("{\"command\": \"unstable-sim --json --domain d,count=N,max=%s --writer "
	       "d,bytes=%s%s%s\", \"runs\": [",
	       max, bytes, bs ? ",bs=" : "", bs ? bs : "");
	for (i = 0; i < n; i++)
		printf("%s{\"domains\": %lu, \"cpu_s\": %.3f, \"peak_rss_mib\": %.1f, "
		       "\"virtual_s\": %.3f, \"cpu_ns_per_writer_s\": %.0f}",
		       i ? ", " : "", runs[i].domains, runs[i].cpu_s,
		       (double)runs[i].peak_rss_kib / 1024, runs[i].virtual_s,
		       runs[i].virtual_s > 0 ?
			       runs[i].cpu_s * 1e9 / ((double)runs[i].domains * runs[i].virtual_s) :
			       0);
	printf("]");
	if (n > 1) {
		const struct run *a = &runs[0], *b = &runs[n - 1];

		printf(", \"domains_ratio\": %.3f, \"cpu_ratio\": %.3f, \"rss_ratio\": %.3f",
		       (double)b->domains / (double)a->domains,
		       a->cpu_s > 0 ? b->cpu_s / a->cpu_s : 0,
		       a->peak_rss_kib > 0 ? (double)b->peak_rss_kib / (double)a->peak_rss_kib : 0);
	}
	printf("}\n");
	return 0;
}
