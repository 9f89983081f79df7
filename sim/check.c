/*
 * unstable-sim: whether a run can run, before it starts. The parsers check
 * each value alone (args.c); this checks the run as a whole:
 *
 * - Each writer's bs fits under its domain's max, every ancestor's and the
 *   engine's memory: a block larger than any of them could never be charged,
 *   and the writer would end in ENOMEM at its first block.
 * - Its cost, counted at its least, is within the bounds below: a run over
 *   them would not finish in reasonable time, or not fit in memory.
 *
 * The cost (sim_cost()):
 *
 *   events  = blocks + writers + domains, blocks = sum over the writers of
 *             bytes / bs (rounded up): each block is at least one step of
 *             the simulation (a dirtying, a request, a landing), each writer
 *             and domain one to set up and tear down.
 *   memory  = blocks x SIM_BLOCK_BYTES (the server's generation and record
 *             of each block, server.h, allocated for the whole file)
 *           + resident buffers x SIM_BUF_BYTES (the engine keeps a written
 *             block's buffer until its memory is needed: per writer, the
 *             smaller of its bytes and the max of its domains and the
 *             engine, in blocks)
 *           + writers x SIM_WRITER_BYTES + domains x SIM_DOMAIN_BYTES.
 *   time    = the simulated time: the longest of each writer's start plus its
 *             bytes at its own copy rate, and of each backend's bytes at its
 *             bandwidth (and at its commits' disk speed when it has one).
 *
 * Each is a lower bound of what the run costs (the per-item figures are a
 * little below those measured), so a run refused would truly be over.
 *
 * The bounds:
 *
 *   SIM_EVENTS_MAX = 2^24 (16,777,216) events: 16 times the largest built-in
 *   run (lustre-1's 1T in 1M blocks, 1,048,576 blocks: 1.9 s of CPU) and 5
 *   times 100,000 domains with a writer of 32 blocks each; at the 2 us of
 *   CPU per block measured (100T in 1M blocks: 100M blocks in 203 s), about
 *   34 s of CPU.
 *
 *   SIM_RUN_NS_MAX = 100,000 s of simulated time (28 hours): 200 times the
 *   longest built-in run (lustre-1's 1T at 2.2 GB/s: 500 s). Simulated time
 *   costs steps even when no block moves (periodic commits, writers that
 *   retry while they wait for memory: 0.4 ms of CPU per simulated second
 *   measured for one waiting writer), so the bound holds such a writer to
 *   about 40 s of CPU; it also keeps every time far inside the 64-bit
 *   nanosecond clock.
 *
 *   Memory: half of the machine's physical memory, as --realtime's check of
 *   the payload it may hold.
 *
 * Worked example: --domain d,count=100000,max=16M --writer d,bytes=32M is
 * 3,200,000 blocks and 3,400,000 events (under 2^24); 291 MiB (3.2M blocks
 * x 28 B; 100,000 writers may hold 16M each, 1.5T, but the engine's 64G
 * holds 65,536 buffers of 1M, x 160 B; 200,000 writers and domains x 1
 * KiB); and 3,125G at the default backend's 1G/s, 3,125 s (under 100,000
 * s). --writer d,bytes=100T is 104,857,600 blocks: refused.
 *
 * SPDX-License-Identifier: MIT
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* What the server keeps per block of a writer (server.h): its generation
 * and its record. */
#define SIM_BLOCK_BYTES (sizeof(uint32_t) + sizeof(struct sim_srv_block))
/* The engine's buffer of a block, its index entry and the landing record
 * that waits for its commit: 172 B measured (4G in 4K blocks, unlimited,
 * 205 MiB resident in all). */
#define SIM_BUF_BYTES 160.0
/* A writer (its object, state, pauses and result) and a domain (the
 * engine's and the simulator's records): 1.0 to 1.2 KiB each measured
 * (20,000 of each). */
#define SIM_WRITER_BYTES 1024.0
#define SIM_DOMAIN_BYTES 1024.0

/* The bytes that writer i sends to each backend, added to per_bk[]. */
static void writer_bytes(const struct sim_config *c, int i, double *per_bk)
{
	const struct sim_writer *w = &c->wr[i];
	const struct sim_stripe *st = w->stripe ? &c->stripe[w->stripe - 1] : NULL;
	int j;

	if (!st) {
		per_bk[w->backend] += (double)w->bytes;
		return;
	}
	for (j = 0; j < st->n; j++)
		per_bk[st->bk[j]] += (double)sim_stripe_bytes(w->bytes, st->size, st->n, j);
}

/* The most writer i may keep charged: its bytes, its domains' max, the
 * engine's memory. */
static uint64_t writer_hold(const struct sim_config *c, int i)
{
	uint64_t h = c->wr[i].bytes < c->memory ? c->wr[i].bytes : c->memory;
	int d;

	for (d = c->wr[i].domain; d >= 0; d = c->dom[d].parent)
		if (c->dom[d].max < h)
			h = c->dom[d].max;
	return h;
}

int sim_cost(const struct sim_config *c, struct sim_cost *k)
{
	double *per_bk = calloc((size_t)c->nbk + 1, sizeof(*per_bk));
	double blocks = 0, resident = 0, hold = 0, t = 0;
	int i, b;

	if (!per_bk)
		return -1;
	for (i = 0; i < c->nwr; i++) {
		const struct sim_writer *w = &c->wr[i];
		uint64_t rate = w->rate ? w->rate : SIM_COPY_RATE, h = writer_hold(c, i);
		double own = (double)w->start_ns / 1e9 + (double)w->bytes / (double)rate;

		blocks += (double)((w->bytes + w->bs - 1) / w->bs);
		resident += (double)((h + w->bs - 1) / w->bs);
		hold += (double)h;
		t = own > t ? own : t;
		writer_bytes(c, i, per_bk);
	}
	/* The engine holds no more than its memory, whatever each may. */
	if (hold > (double)c->memory)
		resident *= (double)c->memory / hold;
	for (b = 0; b <= c->nbk; b++) {
		const struct sim_backend *bk = sim_config_backend(c, b);
		double link = per_bk[b] / (double)bk->bw;
		double disk = bk->commit_bps ? per_bk[b] / (double)bk->commit_bps : 0;

		t = link > t ? link : t;
		t = disk > t ? disk : t;
	}
	free(per_bk);
	k->blocks = blocks;
	k->events = blocks + c->nwr + c->ndom;
	k->memory_bytes = blocks * (double)SIM_BLOCK_BYTES + resident * SIM_BUF_BYTES +
			  c->nwr * SIM_WRITER_BYTES + c->ndom * SIM_DOMAIN_BYTES;
	k->seconds = t;
	return 0;
}

/* Writer i's bs over a max it must fit under: 0, or -1 with a message. */
static int check_bs(const struct sim_config *c, int i, char *err, size_t len)
{
	const struct sim_writer *w = &c->wr[i];
	char a[32], b[32];
	int d;

	if (w->bs > c->memory) {
		snprintf(err, len,
			 "writer %d (domain %s): bs=%s is more than the engine's memory (--memory "
			 "%s): no block of it could ever be charged",
			 i, c->dom[w->domain].name, sim_size_str(w->bs, a, sizeof(a)),
			 sim_size_str(c->memory, b, sizeof(b)));
		return -1;
	}
	for (d = w->domain; d >= 0; d = c->dom[d].parent)
		if (w->bs > c->dom[d].max) {
			snprintf(
				err, len,
				"writer %d (domain %s): bs=%s is more than max=%s of domain %s: no "
				"block of it could ever be charged",
				i, c->dom[w->domain].name, sim_size_str(w->bs, a, sizeof(a)),
				sim_size_str(c->dom[d].max, b, sizeof(b)), c->dom[d].name);
			return -1;
		}
	return 0;
}

uint64_t sim_phys_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

int sim_config_check(const struct sim_config *c, uint64_t phys_bytes, char *err, size_t len)
{
	struct sim_cost k;
	int i;

	for (i = 0; i < c->nwr; i++)
		if (check_bs(c, i, err, len))
			return -1;
	if (sim_cost(c, &k)) {
		snprintf(err, len, "out of memory for the run's estimate");
		return -1;
	}
	if (k.events > (double)SIM_EVENTS_MAX) {
		snprintf(err, len,
			 "this run is %.0f blocks and %.0f events at least (%d writers, %d "
			 "domains), more than the %llu that finish in reasonable time: write fewer "
			 "bytes, or larger blocks (bs=)",
			 k.blocks, k.events, c->nwr, c->ndom, (unsigned long long)SIM_EVENTS_MAX);
		return -1;
	}
	if (k.seconds > (double)SIM_RUN_NS_MAX / 1e9) {
		snprintf(err, len,
			 "this run lasts %.0f s of simulated time at least, more than the %.0f s "
			 "that finish in reasonable time: write fewer bytes, or to faster "
			 "backends and writers",
			 k.seconds, (double)SIM_RUN_NS_MAX / 1e9);
		return -1;
	}
	if (phys_bytes && k.memory_bytes > (double)phys_bytes / 2) {
		snprintf(err, len,
			 "this run needs %.1f GiB of memory at least (%.0f blocks, %d writers, %d "
			 "domains), more than half of this machine's %.1f GiB",
			 k.memory_bytes / (1 << 30), k.blocks, c->nwr, c->ndom,
			 (double)phys_bytes / (1 << 30));
		return -1;
	}
	return 0;
}
