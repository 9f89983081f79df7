/*
 * A reference model of the engine's buffer state machine and accounting
 * (include/unstable/unstable.h, docs/guide.md), for the fuzzer
 * (tests/fuzz_api.c) and the fault tests: plain arrays, linear scans, no
 * cleverness, so that it is obviously right and cannot share a bug with
 * lib/.
 *
 * The model does not talk to the engine. The harness tells it what happened
 * (a buffer was created, handed to flush, completed, evicted, ...) and asks
 * it what the engine must answer (a charge fits, a destroy is busy, how many
 * buffers a commit cleans). Every rule the engine must follow is asserted
 * here: a buffer handed to flush was DIRTY, an evicted buffer was CLEAN and
 * unreferenced, a completed buffer was in WRITEBACK.
 *
 * A failed assertion calls rm_fail(), which prints the model's operation
 * number and aborts: a crash for libFuzzer, a failure for the tests.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_REFMODEL_H
#define US_REFMODEL_H

#include <stdbool.h>
#include <stdint.h>

#define RM_NDOM 8   /* domains, the root (0) included */
#define RM_NOBJ 12  /* objects */
#define RM_NBK	2   /* backends */
#define RM_NBUF 192 /* live buffers */

/* Buffer states: the values of enum us_buf_state. */
enum { RM_CLEAN = 0, RM_DIRTY = 1, RM_WRITEBACK = 2, RM_UNSTABLE = 3, RM_NSTATE = 4 };

/* Write results: the values of enum us_write_result. */
enum { RM_STABLE = 0, RM_ACK_UNSTABLE = 1, RM_ERROR = 2, RM_LOST = 3 };

struct rm_buf {
	bool used;
	int obj;
	uint64_t off, len;
	int state;
	bool redirtied;
	uint64_t seq;	/* commit seq while UNSTABLE */
	unsigned epoch; /* the backend's loss epoch when it was handed to flush */
	int refs;	/* references the harness holds */
	uint64_t uid;	/* unique over the model's life: keys the backend's store */
	uint64_t ver;	/* version of the data: bumped by each dirtying */
	uint64_t wver;	/* the version handed to the write in flight */
	bool lost;	/* its last write was declared lost: CLEAN without its data */
	void *h;	/* the harness's handle (us_buf *) */
};

struct rm_dom {
	bool used;
	int parent; /* -1 for the root */
	uint64_t max;
};

struct rm_obj {
	bool used;
	int dom, bk;
	uint64_t committed; /* highest seq reported by us_object_commit_done() */
	void *h;
};

struct rm_bk {
	uint64_t committed; /* highest seq reported by us_backend_commit_done() */
	unsigned epoch;	    /* bumped by commit_lost */
};

struct rm {
	struct rm_dom dom[RM_NDOM];
	struct rm_obj obj[RM_NOBJ];
	struct rm_bk bk[RM_NBK];
	struct rm_buf buf[RM_NBUF];
	uint64_t next_uid;
	uint64_t ops; /* steps, for messages */
};

/* Aborts with a message naming the model's step. */
void rm_fail(const struct rm *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

#define RM_ASSERT(m, cond, ...)                    \
	do {                                       \
		if (!(cond))                       \
			rm_fail((m), __VA_ARGS__); \
	} while (0)

void rm_init(struct rm *m, uint64_t root_max);

/* Domains. */
int rm_dom_add(struct rm *m, int parent, uint64_t max); /* slot or -1 */
bool rm_under(const struct rm *m, int d, int ancestor);
/* Bytes of the buffers charged to d's subtree: in one state (0..3), all
 * (-1), or clean and unreferenced (-2). */
uint64_t rm_bytes(const struct rm *m, int d, int state);
/* All of rm_bytes() at once for every domain: sums[d][0..3] per state,
 * [4] charged, [5] evictable. */
enum { RM_SUM_CHARGED = 4, RM_SUM_EVICTABLE = 5, RM_NSUM = 6 };
void rm_sums(const struct rm *m, uint64_t sums[RM_NDOM][RM_NSUM]);
/* us_domain_destroy() must say -EBUSY (children, objects, charged bytes). */
bool rm_dom_busy(const struct rm *m, int d);
/* Setting max to v: 0 when it fits after evicting, -EBUSY otherwise. */
int rm_set_max_result(const struct rm *m, int d, uint64_t v);

/* Objects. */
int rm_obj_add(struct rm *m, int dom, int bk, void *h);
/* us_object_destroy() must say -EBUSY: a buffer not clean or referenced. */
bool rm_obj_busy(const struct rm *m, int o);
int rm_obj_nbufs(const struct rm *m, int o);
int rm_obj_nstate(const struct rm *m, int o, int state);

/* Buffers. */
enum rm_get {
	RM_GET_EXISTS,	 /* the same range exists: 0, that buffer */
	RM_GET_OVERLAP,	 /* -EEXIST */
	RM_GET_FITS,	 /* 1: fits after evicting clean unreferenced data */
	RM_GET_RECLAIM,	 /* needs pinned data cleaned: -EAGAIN, -ENOMEM or 1 */
	RM_GET_HOPELESS, /* larger than what a max could ever hold: -ENOMEM */
};
enum rm_get rm_get_predict(const struct rm *m, int o, uint64_t off, uint64_t len, int *exists);
/* Whether a charge of len in o's domain fits, or could after reclaim. */
enum rm_get rm_charge_predict(const struct rm *m, int o, uint64_t len);
int rm_buf_add(struct rm *m, int o, uint64_t off, uint64_t len, void *h); /* slot */
int rm_find(const struct rm *m, const void *h);				  /* slot or -1 */
int rm_find_at(const struct rm *m, int o, uint64_t off);		  /* slot or -1 */
void rm_dirty(struct rm *m, int i);
void rm_flushed(struct rm *m, int i);	    /* handed to flush: DIRTY -> WRITEBACK */
void rm_flush_refused(struct rm *m, int i); /* the flush call failed: back to DIRTY */
/* A completion: returns the new state. */
int rm_write_done(struct rm *m, int i, int result, uint64_t seq);
void rm_evicted(struct rm *m, int i);
void rm_dropped(struct rm *m, int i);
/* us_buf_drop() must say -EBUSY. */
bool rm_drop_busy(const struct rm *m, int i);

/* Commits: the number of buffers the engine must clean or redirty. */
int rm_commit_done_bk(struct rm *m, int bk, uint64_t seq);
int rm_commit_done_obj(struct rm *m, int o, uint64_t seq);
int rm_commit_lost(struct rm *m, int bk);
/* The seq at or below which a new unstable acknowledgement of o is clean. */
uint64_t rm_committed(const struct rm *m, int o);

#endif
