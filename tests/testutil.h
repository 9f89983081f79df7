/*
 * A test backend and helpers shared by the Check tests.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_TESTUTIL_H
#define US_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <unstable/unstable.h>

/* What the test backend's flush callback does with the buffers it is given. */
enum tb_mode {
	TB_HOLD = 0,	 /* keep them in WRITEBACK, recorded in pending[] */
	TB_STABLE = 1,	 /* complete them at once, stable */
	TB_UNSTABLE = 2, /* complete them at once, unstable with the next seq */
	TB_FAIL = 3,	 /* refuse the write: return -EIO */
};

#define TB_MAX_PENDING 4096
#define TB_MAX_RUNS    256

struct tb_run {
	us_object *obj;
	uint64_t offset, length;
	size_t n;
	enum us_reason reason;
	uint64_t when_ns;
};

struct tb {
	us_engine *engine;
	us_backend *backend;
	enum tb_mode mode;
	uint64_t next_seq;
	/* Buffers handed over and not completed (TB_HOLD). */
	us_buf *pending[TB_MAX_PENDING];
	size_t npending;
	/* The first TB_MAX_RUNS runs handed to flush. */
	struct tb_run runs[TB_MAX_RUNS];
	size_t nruns;
	uint64_t flushes, flushed_bytes, commits, syncs, evictions, evicted_bytes;
	/* Called for each eviction when set. */
	void (*on_evict)(struct tb *t, us_object *o, uint64_t offset, uint64_t length);
	void *user;
};

/* Creates the backend in e; with_commit / with_sync choose the callbacks. */
void tb_init(struct tb *t, us_engine *e, bool with_commit, bool with_sync);

/* Completes pending[i] (removing it) with the given result. */
int tb_complete(struct tb *t, size_t i, enum us_write_result r, uint64_t seq, int err);

/* Completes every pending buffer as stable. */
void tb_complete_all(struct tb *t);

/*
 * A simulated server in virtual time: each lane serves the runs handed to
 * it in order at bw bytes per second, and acknowledges each buffer as
 * stable lat_ns after its bytes went through. Objects listed as slow go to
 * lane 1, everything else to lane 0.
 */
struct tsim_done {
	us_buf *b;
	uint64_t at_ns;
};

struct tsim_lane {
	uint64_t bw, lat_ns, busy_until_ns;
	struct tsim_done *q;
	size_t head, tail, cap;
};

struct tsim {
	us_engine *engine;
	us_backend *backend;
	struct tsim_lane lane[2];
	us_object *slow[4];
	uint64_t completed_bytes, flushes, max_writeback;
	uint64_t reasons[US_REASON_USER + 1];
};

void tsim_init(struct tsim *s, us_engine *e, uint64_t bw, uint64_t lat_ns);
void tsim_fini(struct tsim *s);
/* The time of the next completion, or UINT64_MAX. */
uint64_t tsim_next(const struct tsim *s);
/* Delivers every completion due at now_ns. */
void tsim_deliver(struct tsim *s, uint64_t now_ns);

/* A sync callback that does nothing, for backends that only need one. */
int tu_sync_ok(void *ctx, us_backend *b, enum us_reason reason);

/* An engine with a virtual clock and the given root max. */
us_engine *tu_engine(uint64_t memory_bytes);

/*
 * An assertion that costs nothing when it holds. Check's ck_assert_* write a
 * message to the runner for every assertion that passes; loops that verify
 * thousands of figures per step use this instead.
 */
#define tu_assert(cond, ...)                       \
	do {                                       \
		if (!(cond))                       \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

/* Asserts that the engine's invariants hold. */
#define tu_check(e)                                                          \
	do {                                                                 \
		char tu_msg_[512];                                           \
		int tu_rc_ = us_engine_check((e), tu_msg_, sizeof(tu_msg_)); \
		tu_assert(tu_rc_ == 0, "invariant: %s", tu_msg_);            \
	} while (0)

/* Reads a domain's stats. */
struct us_domain_stats tu_stats(us_domain *d);

/* Runs a suite; returns the process exit code. */
int tu_run(Suite *s);

#endif
