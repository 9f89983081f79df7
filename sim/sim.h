/*
 * unstable-sim: the engine against a simulated server and dd-like writers,
 * in virtual time (run.c, with the server of server.h), or in real time with
 * real threads and memory against the simulated server or a file
 * (realtime.c); docs/simulator.md describes both.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_SIM_H
#define US_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <unstable/unstable.h>

#define SIM_COPY_RATE (8ull << 30) /* a writer's own copying, bytes per second */

enum sim_policy {
	SIM_POLICY_UNSTABLE = 0,	 /* the library: throttling and forced commits */
	SIM_POLICY_NO_FORCED_COMMIT = 1, /* the unpatched client */
	SIM_POLICY_NAIVE = 2,		 /* by hand: no curve; when full, flush all and commit */
	/* The Linux kernel before memcg reclaim waited for writeback (the memcg
	 * seed): dirty throttling not per domain, and reclaim that finds only
	 * dirty data and data under writeback fails at once (run.c). */
	SIM_POLICY_NO_RECLAIM_WAIT = 3,
};

struct sim_backend {
	char name[64];		  /* "" for the default backend */
	uint64_t bw;		  /* bytes per second */
	uint64_t lat_ns;	  /* per request */
	uint64_t rpcs;		  /* requests in flight, at most */
	uint64_t rpc;		  /* bytes per request, at most */
	uint64_t commit_interval; /* ns */
	uint64_t commit_lat;	  /* ns: a commit's fixed time */
	uint64_t commit_bps;	  /* 0, or a commit also takes its bytes / this (B/s) */
	uint64_t journal;	  /* commit when this much is uncommitted */
};

/* A striping: a file round robin over n backends, size bytes on each in
 * turn (Lustre's stripe count and stripe size over OSTs). */
struct sim_stripe {
	int *bk; /* backend indices (see struct sim_config) */
	int n;
	uint64_t size;
};

struct sim_domain {
	char name[64];
	int parent; /* index, or -1 for the root */
	uint64_t max, high;
	uint64_t bg, dirty;	    /* bytes, or 0 */
	unsigned bg_pct, dirty_pct; /* percent, or 0 */
	/* bg=0 or 0%, dirty=0 or 0%: a ratio of 0, which the engine takes
	 * (a dirty ratio of 0 is write-through) where it refuses 0 bytes;
	 * bg_pct and dirty_pct alone could not tell 0 % from "not set". */
	bool bg_zero, dirty_zero;
};

struct sim_writer {
	int domain; /* index */
	uint64_t bytes, bs, start_ns;
	uint64_t rate; /* the writer's own speed (its copying), bytes/s; 0: SIM_COPY_RATE */
	int backend;   /* its backend's index: 0 the default (see struct sim_config) */
	int stripe;    /* 0, or 1 + the index of its striping in the config's */
};

/* Domains made by one --domain NAME,count=N: NAME-1 .. NAME-N. */
struct sim_group {
	char name[64];
	int first, n; /* indices in dom[] */
};

/*
 * The run's domains and writers, as many as memory holds: the arrays grow
 * as they are added (sim_config_domain(), sim_config_writer());
 * sim_config_free() frees them.
 */
struct sim_name_index; /* args.c: names to indices, by hash */

/*
 * Backends: index 0 is the default, backend (--backend KEY=VALUE,...),
 * index i > 0 the named bk[i - 1] (--backend NAME:KEY=VALUE,...). A
 * writer's data goes to its backend, or, striped, round robin to the
 * backends of its stripe (each backend: one simulated server).
 */
struct sim_config {
	char scenario[64];
	enum sim_policy policy;
	uint64_t memory;
	struct sim_backend backend;
	struct sim_backend *bk;
	int nbk, bk_cap;
	struct sim_stripe *stripe;
	int nstripe, stripe_cap;
	int cur_stripe; /* 0, or 1 + the striping --stripe gave the writers that follow */
	struct sim_domain *dom;
	int ndom, dom_cap;
	struct sim_writer *wr;
	int nwr, wr_cap;
	struct sim_group *grp;
	int ngrp, grp_cap;
	/* The names of domains, groups and backends, indexed as they are
	 * looked up (entries filled in directly are indexed then too). */
	struct sim_name_index *names;
	uint64_t seed;
	const char *trace;	 /* CSV time series to write, or NULL */
	uint64_t trace_every_ns; /* its sampling period (default 100 ms) */
	/* For tests: at every step, us_engine_check() (the run fails if it
	 * does) and every domain's stats, limits and every writer's bandwidth
	 * are read; the run's outcome must be the same as without. */
	bool observe;
};

struct sim_writer_result {
	/* done_ns: until its last block was copied (its copy time included). */
	uint64_t bytes, done_ns, enomem, max_pause_ns, p99_pause_ns, lost_bytes;
	/* The pauses recorded: one per block dirtied (its pause, perhaps 0),
	 * per us_object_balance() that told it to wait, per wait for memory:
	 * how often it came to the engine. */
	uint64_t pauses;
	/* The longest time without progress: between the end of one block's
	 * copy and the dirtying of the next (pauses and memory waits), or up
	 * to the ENOMEM or OOM that stopped it. Measured by the simulator. */
	uint64_t max_stall_ns;
	uint64_t oom;		  /* no-reclaim-wait: stopped as the OOM killer would */
	uint64_t ceiling;	  /* min(its share of the backend bw, its own speed) */
	double throughput, ratio; /* ratio = throughput / ceiling */
};

/* Per backend (0: the default): what it wrote, and what the engine measured
 * of it (us_backend_stats()): commit latency, write latency, link rate. */
struct sim_backend_result {
	uint64_t flush_bytes, commit_lat_ns, write_lat_ns, link_bw;
};

struct sim_domain_result {
	uint64_t peak_charged, commits, flushes, enomem;
	uint64_t max_stall_ns; /* the engine's us_domain_stats.max_stall_ns */
	bool over_max;	       /* charged passed max at some step */
};

/* Per writer and per domain of the config, allocated by the run
 * (sim_result_alloc()); sim_result_free() frees them. */
struct sim_result {
	struct sim_writer_result *wr;
	struct sim_domain_result *dom;
	struct sim_backend_result *bk; /* nbk of them: the default and the named */
	int nbk;
	uint64_t end_ns, server_commits, commits_asked;
	double jain, wall_seconds;
	/* Virtual time: the smallest Jain index over the windows of window_ns
	 * (10 max pauses) in which two writers or more wrote throughout
	 * (nwindows of them; 1 when there is none). A window in which none of
	 * them progressed has no index (all equal at zero: what it says is
	 * that they all stalled, which the stalls report) and is counted in
	 * idle_windows instead. */
	double jain_window;
	uint64_t window_ns, nwindows, idle_windows;
	/* Of the windows under 0.99: the largest difference between two of
	 * their writers' bytes, in the largest block of the window's writers
	 * (window_spread), and how many differ by more than two such blocks
	 * (unfair_windows). A window holds whole blocks: where writers
	 * progress by a few each, one block is a Jain index under 0.99. */
	double window_spread;
	uint64_t unfair_windows;
	/* Virtual time: the bytes the backend wrote (flushed) in the whole run,
	 * final sync included, and that run's length. */
	uint64_t backend_bytes, run_ns;
	/* Real time only (sim_run_realtime()). */
	uint64_t peak_rss;     /* VmHWM of the process during the run, bytes */
	uint64_t peak_charged; /* the root domain's: every payload byte charged */
	uint64_t file_bytes;   /* file backend: bytes written to the file */
	uint64_t direct_bytes; /* ... of which with O_DIRECT */
	char io_note[160];     /* file backend: how it wrote (O_DIRECT or why not) */
};

/*
 * The bounds of the command line's values (args.c enforces them; --help, the
 * man page and docs/simulator.md list them). A value is a decimal number
 * with an optional fraction: no sign, no exponent, no nan or inf.
 *
 * - Sizes: at most SIM_SIZE_MAX, 1P, a thousand times the largest built-in
 *   write (lustre-1's 1T) and far below 2^53 bytes, where the simulator's
 *   doubles would start to lose bytes. --memory: at least a page.
 * - bs= and rpc=: 1 byte to 1G, a buffer and a request the engine takes in
 *   one piece. A stripe size: 1 byte to 4G (Lustre's largest), so that a
 *   row of stripes stays far inside 64 bits.
 * - Times: at most 1 h, 720 times the longest of the scenarios (their 5 s
 *   commit interval); a run's simulated time has its own bound (check.c).
 *   commit-interval: at least 1 ms, as each periodic commit is a step of
 *   the simulation, and a shorter one would outnumber the blocks.
 * - Rates: 1K/s to 1T/s. Above 1T/s (100 times the fastest scenario's 10.4
 *   GB/s) a 4K block takes under 4 ns, and the 1 ns clock rounds transfer
 *   and copy times by a quarter or more; below 1K/s a single 1M block takes
 *   17 minutes.
 * - count= of --domain and of --writer: 1 to 100,000, the most the tests
 *   run (100,000 domains); one --writer makes at most 1,000,000 writers
 *   (count= in each domain of a group). rpcs=: 1 to 65,536, the largest
 *   RPC slot table of NFS, which keeps rpcs x rpc far inside 64 bits.
 * - Percentages: whole numbers from 0 to 100.
 */
#define SIM_SIZE_MAX	 (1ull << 50)
#define SIM_MEMORY_MIN	 4096ull
#define SIM_BLOCK_MAX	 (1ull << 30)
#define SIM_STRIPE_MAX	 (4ull << 30)
#define SIM_TIME_MAX	 (3600ull * 1000000000ull)
#define SIM_INTERVAL_MIN 1000000ull
#define SIM_RATE_MIN	 1024ull
#define SIM_RATE_MAX	 (1ull << 40)
#define SIM_COUNT_MAX	 100000
#define SIM_WRITERS_MAX	 1000000
#define SIM_RPCS_MAX	 65536

/*
 * Parsing (args.c). Each returns 0, or -1 with a message in err. The value
 * parsers check their kind's bounds (sizes at most SIM_SIZE_MAX, times at
 * most SIM_TIME_MAX, rates from SIM_RATE_MIN to SIM_RATE_MAX; sim_parse_uint
 * from lo to hi); the spec parsers check each key's own and prefix the
 * message with the option, its argument and the key:
 * "--domain x,max=abc: max: 'abc' is not a number".
 */
int sim_parse_size(const char *s, uint64_t *out, char *err, size_t len);
int sim_parse_time(const char *s, uint64_t *out, char *err, size_t len);
int sim_parse_rate(const char *s, uint64_t *out, char *err, size_t len);
int sim_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err, size_t len);
/* v as a size with the largest unit that divides it ("4K", "1G", "1000")
 * in buf; buf. */
const char *sim_size_str(uint64_t v, char *buf, size_t n);
/* --memory SIZE and --seed N, into c. */
int sim_parse_memory(const char *s, struct sim_config *c, char *err, size_t len);
int sim_parse_seed(const char *s, struct sim_config *c, char *err, size_t len);
int sim_parse_backend(const char *s, struct sim_backend *b, char *err, size_t len);
int sim_parse_domain(const char *s, struct sim_config *c, char *err, size_t len);
int sim_parse_writer(const char *s, struct sim_config *c, char *err, size_t len);
/* --backend [NAME:]KEY=VALUE,...: the default backend's figures, or a named
 * backend's (a new one, from the defaults' figures, or one given before). */
int sim_parse_backend_opt(const char *s, struct sim_config *c, char *err, size_t len);
/* --stripe NAME1,NAME2,...[,size=SIZE]: the writers given after it are
 * striped so (size: 1M by default); --stripe none: no more. */
int sim_parse_stripe(const char *s, struct sim_config *c, char *err, size_t len);
/* The backend of index i (0: the default). */
static inline const struct sim_backend *sim_config_backend(const struct sim_config *c, int i)
{
	return i == 0 ? &c->backend : &c->bk[i - 1];
}
/* The bytes of a file of total bytes striped over n, size at a time, that
 * its stripe j holds (its object's length). */
static inline uint64_t sim_stripe_bytes(uint64_t total, uint64_t size, int n, int j)
{
	uint64_t row = size * (uint64_t)n, rem = total % row, lo = size * (uint64_t)j;

	return total / row * size + (rem <= lo ? 0 : rem - lo < size ? rem - lo : size);
}
/* The defaults, with no domain and no writer. */
void sim_config_init(struct sim_config *c);
/* Frees c's arrays; c is empty again (sim_config_init() to reuse it). */
void sim_config_free(struct sim_config *c);
/* Room for one more domain or writer: its zeroed entry, or NULL without
 * memory. The caller fills it in, then counts it (ndom++, nwr++). */
struct sim_domain *sim_config_domain(struct sim_config *c);
struct sim_writer *sim_config_writer(struct sim_config *c);
/* Room for ndom domains and nwr writers in all, the entries past ndom and
 * nwr zeroed, for a caller that fills them in directly: 0, or -1. */
int sim_config_reserve(struct sim_config *c, int ndom, int nwr);

/* Zeroes r (freeing the arrays of a previous run: r must start zeroed) and
 * gives it an entry per writer and per domain of c: 0, or -1 with a
 * message. The runs call it. */
int sim_result_alloc(struct sim_result *r, const struct sim_config *c, char *err, size_t len);
void sim_result_free(struct sim_result *r);

/*
 * What a run costs at least (check.c, which says how each is counted):
 * its blocks (each writer's bytes / bs), its events (blocks + writers +
 * domains), the memory of the simulator and the engine, and its simulated
 * time. 0, or -1 without memory for the estimate.
 */
struct sim_cost {
	double blocks, events, memory_bytes, seconds;
};
int sim_cost(const struct sim_config *c, struct sim_cost *k);

/*
 * The bounds of a run as a whole (check.c says why): at most SIM_EVENTS_MAX
 * events, SIM_RUN_NS_MAX of simulated time, and half of physical memory.
 */
#define SIM_EVENTS_MAX (1ull << 24)
#define SIM_RUN_NS_MAX (100000ull * 1000000000ull)

/*
 * Whether c can run: each writer's bs fits under its domains' max and the
 * engine's memory, and its cost is within the bounds (phys_bytes: the
 * machine's memory, 0 for no memory bound). 0, or -1 with a message.
 */
int sim_config_check(const struct sim_config *c, uint64_t phys_bytes, char *err, size_t len);

/* This machine's physical memory in bytes, or 0 when unknown. */
uint64_t sim_phys_bytes(void);

/* The simulation (run.c): 0, or -1 with a message (setup failed). */
int sim_run(const struct sim_config *c, struct sim_result *r, char *err, size_t len);

/* Creates the config's domains with their limits (run.c; both modes). */
int sim_domains_create(us_engine *e, const struct sim_config *c, us_domain **dom, char *err,
		       size_t len);

/*
 * The same scenario in real time (realtime.c): the engine in threaded mode
 * on CLOCK_MONOTONIC, one thread per writer with payloads from the engine,
 * against the simulated server run by a thread (file_path NULL) or a file
 * (pwrite as flush, fdatasync as commit). 0, or -1 with a message.
 */
int sim_run_realtime(const struct sim_config *c, const char *file_path, struct sim_result *r,
		     char *err, size_t len);

/*
 * Whether c can run in real time on this machine: the payload it may hold
 * (each writer's bytes, bounded by its domains' max and by --memory) must
 * fit in half of the physical memory. 0, or -1 with a message.
 */
int sim_realtime_check(const struct sim_config *c, char *err, size_t len);

#endif
