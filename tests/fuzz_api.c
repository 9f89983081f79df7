/*
 * us-fuzz-api: a libFuzzer harness for the whole public API, checked against
 * the reference model (tests/refmodel.[ch]).
 *
 * The input is decoded into a sequence of operations (one opcode byte, then
 * its argument bytes; past the end every byte reads as 0): create and
 * destroy domains, objects and buffers, dirty, flush, write completions
 * (stable, unstable with sequence numbers, transient errors, lost), commit
 * done per backend and per object, commit lost, limit and parameter
 * changes, drops, reclaim, syncs, and polls with steps of the virtual clock.
 * The test backend's flush callback can hold writes, complete them inside
 * the callback, refuse them, or complete part of a run and then refuse the
 * rest; its commit callbacks can succeed, fail or report the commit at
 * once.
 *
 * After every operation (and on entry of every callback, for the limits):
 *  - us_engine_check() holds (counters recomputed, lists, index);
 *  - every buffer's state, REDIRTIED flag and commit seq equal the model's;
 *  - every domain's charged, clean, dirty, writeback and unstable bytes
 *    equal the model's sums over its subtree, and charged <= max;
 *  - the backends' writes in flight are exactly the model's WRITEBACK
 *    buffers: no buffer is in two states, none is forgotten;
 *  - nothing is lost: each dirtying gives the buffer's data a new version
 *    (written into its payload when it has one), the backend stores the
 *    versions it made durable (a stable write, a commit covering an
 *    unstable one), and every CLEAN buffer, and every buffer evicted, has
 *    its latest version durable — unless its last write was declared lost
 *    (US_WRITE_LOST), which the object then reports. A durable version
 *    never goes backwards: an older write never lands after a newer one.
 *
 * Allocation failures: an input that holds the byte OP_ARM
 * anywhere runs its engine on allocator hooks (the others keep the per-thread
 * writer caches, which hooks turn off), and the opcode OP_ARM arms the hooks
 * to fail the Nth next allocation (of either kind, or only META or only
 * PAYLOAD) during the next few operations. A call that sees the failure must
 * return -ENOMEM, call no callback and leave everything as the model has it
 * (the model is not told of the call); one that succeeds anyway (it did not
 * need the allocation) updates the model as usual. us_engine_poll(),
 * us_sync_done() and a sync's first step defer what they could not allocate
 * for (the state matches the model whatever they did), and the next call,
 * made at once without the failure, must succeed. At the end every
 * allocation must have been freed, with the size and kind it was made with.
 *
 * Built with clang as the libFuzzer target us-fuzz-api, and with any
 * compiler as us-fuzz-replay (tests/fuzz_replay.c), which runs the corpus
 * as a regression test.
 *
 * SPDX-License-Identifier: MIT
 */
#include "refmodel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unstable/unstable.h>

#define K4	4096u
#define MAXOPS	3000
#define NUID	(MAXOPS + 8)
#define NPEND	RM_NBUF
#define NUNST	1024
#define ROOTMAX (64 * K4)
/* The opcode byte that arms an allocation failure. Every byte value was an
 * opcode already; 239 (23 mod 24, a second object creation) was the rarest
 * in the corpus. */
#define OP_ARM 239u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the flush callback does. */
enum fmode { F_HOLD, F_STABLE, F_UNSTABLE, F_REFUSE, F_PARTIAL, F_ERROR, F_NMODES };
/* What the commit and sync callbacks do. */
enum cmode { C_OK, C_FAIL, C_NOW, C_NMODES };

struct pend {
	us_buf *b;
	uint64_t uid, ver;
	unsigned epoch;
};

/* An unstable write the server holds: durable once a commit covers it. */
struct unst {
	uint64_t uid, ver, seq;
	int obj;
};

struct fbk {
	int idx;
	us_backend *b;
	enum fmode fmode;
	enum cmode cmode;
	struct pend pend[NPEND];
	int npend;
	struct unst unst[NUNST];
	int nunst;
	uint64_t next_seq;
	unsigned epoch;
	uint64_t committed; /* the server's view: reported committed */
	uint64_t obj_committed[RM_NOBJ];
};

/* The allocator hooks: count, check sizes, fail the armed allocation. */
struct hk {
	uint64_t calls[2];  /* per kind */
	uint64_t live;	    /* allocations not freed yet */
	bool armed;	    /* a failure is armed */
	int kind;	    /* the kind it waits for, or -1 for both */
	unsigned left;	    /* allocations of that kind before it fires */
	unsigned window;    /* operations left before it is disarmed */
	bool fired;	    /* it fired during the current operation */
	uint64_t nfired;    /* failures that fired in this input */
	uint64_t nsurvived; /* armed windows that ran out without firing */
};

struct fz {
	const uint8_t *p;
	size_t n, i;
	us_engine *e;
	struct rm m;
	us_domain *dom[RM_NDOM];
	us_object *obj[RM_NOBJ];
	struct fbk bk[RM_NBK];
	uint64_t durable[NUID]; /* the latest durable version per buffer uid */
	/* Buffers handed to flush during the current call (not counting a
	 * sync's), and whether a flush call was refused (the rest of its batch
	 * then waits without a call), and how many of those it gave back
	 * (refused): the engine counts only the ones it took. */
	int handed, putback;
	bool refused;
	us_sync *sync;
	int sync_obj, sync_dom; /* what the sync is on (-1: none) */
	unsigned dom_gen;
	struct hk hk;
	uint64_t ncb; /* callbacks called */
	/* Objects whose last charge or reclaim was told to wait for room
	 * (-EAGAIN) and that have not charged since: room goes to waiters in
	 * arrival order, so a charge that fits may wait while another object
	 * waits (the model does not predict when a waiter's turn goes stale,
	 * only that nobody waits behind nobody). */
	bool room_wait[RM_NOBJ];
};

/* Whether an object other than o waits for room. */
static bool other_waits(const struct fz *f, int o)
{
	int i;

	for (i = 0; i < RM_NOBJ; i++)
		if (i != o && f->room_wait[i])
			return true;
	return false;
}

static struct fz *F;

/* Injected failures that fired, over every input run in this process. */
extern uint64_t us_fuzz_oom_fired; /* read by fuzz_replay.c */
uint64_t us_fuzz_oom_fired;

/* ------------------------------------------------------------------------ */
/* Input                                                                     */

static unsigned u8(struct fz *f)
{
	return f->i < f->n ? f->p[f->i++] : 0;
}

static bool dom_used(const struct fz *f, int i)
{
	return f->m.dom[i].used;
}

static bool subdom_used(const struct fz *f, int i)
{
	return i && f->m.dom[i].used;
}

static bool obj_used(const struct fz *f, int i)
{
	return f->m.obj[i].used;
}

static bool buf_used(const struct fz *f, int i)
{
	return f->m.buf[i].used;
}

/* One of the slots among n for which used() holds, chosen by a byte; -1 if
 * none. */
static int pick(struct fz *f, int n, bool (*used)(const struct fz *, int))
{
	int k = (int)u8(f), i, j;

	for (j = 0; j < n; j++) {
		i = (k + j) % n;
		if (used(f, i))
			return i;
	}
	return -1;
}

static int pick_dom(struct fz *f, bool root_ok)
{
	return pick(f, RM_NDOM, root_ok ? dom_used : subdom_used);
}

static int pick_obj(struct fz *f)
{
	return pick(f, RM_NOBJ, obj_used);
}

static int pick_buf(struct fz *f)
{
	return pick(f, RM_NBUF, buf_used);
}

#define CHECK(cond, ...) RM_ASSERT(&f->m, cond, __VA_ARGS__)

/* ------------------------------------------------------------------------ */
/* Allocator hooks                                                           */

/* Each allocation carries its size and kind, checked when it is freed. */
#define HK_HDR 16

static void *hk_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	struct fz *f = ctx;
	struct hk *h = &f->hk;
	unsigned char *p;
	uint64_t tag[2] = { size, kind };

	CHECK(kind == US_ALLOC_META || kind == US_ALLOC_PAYLOAD, "allocation of kind %d", kind);
	h->calls[kind]++;
	if (h->armed && (h->kind < 0 || h->kind == (int)kind) && --h->left == 0) {
		h->armed = false;
		h->fired = true;
		h->nfired++;
		us_fuzz_oom_fired++;
		return NULL;
	}
	p = malloc(HK_HDR + (size ? size : 1));
	CHECK(p != NULL, "out of memory");
	memcpy(p, tag, sizeof(tag));
	h->live++;
	return p + HK_HDR;
}

static void hk_free(void *ctx, void *ptr, size_t size, enum us_alloc_kind kind)
{
	struct fz *f = ctx;
	unsigned char *p;
	uint64_t tag[2];

	if (!ptr)
		return;
	p = (unsigned char *)ptr - HK_HDR;
	memcpy(tag, p, sizeof(tag));
	CHECK(tag[0] == size && tag[1] == (uint64_t)kind,
	      "freed with size %zu kind %d, allocated with size %llu kind %llu", size, kind,
	      (unsigned long long)tag[0], (unsigned long long)tag[1]);
	CHECK(f->hk.live > 0, "more frees than allocations");
	f->hk.live--;
	free(p);
}

/* Whether the armed failure fired during the current operation. */
static bool fired(const struct fz *f)
{
	return f->hk.fired;
}

/* After an operation: a failure that fired, or whose window ran out, is
 * disarmed. */
static void hk_step(struct fz *f)
{
	struct hk *h = &f->hk;

	h->fired = false;
	if (h->armed && --h->window == 0) {
		h->armed = false;
		h->nsurvived++;
	}
}

/* ------------------------------------------------------------------------ */
/* Durability: the server's store                                            */

static void make_durable(struct fz *f, uint64_t uid, uint64_t ver)
{
	CHECK(uid < NUID, "uid out of range");
	CHECK(ver >= f->durable[uid], "buffer uid %llu: version %llu made durable after %llu",
	      (unsigned long long)uid, (unsigned long long)ver,
	      (unsigned long long)f->durable[uid]);
	f->durable[uid] = ver;
}

/* A newer write of the same buffer supersedes what the server held. */
static void supersede(struct fbk *k, uint64_t uid)
{
	int j;

	for (j = 0; j < k->nunst;) {
		if (k->unst[j].uid == uid)
			k->unst[j] = k->unst[--k->nunst];
		else
			j++;
	}
}

static void server_commit(struct fz *f, struct fbk *k, int obj, uint64_t seq)
{
	int j;

	for (j = 0; j < k->nunst;) {
		struct unst *u = &k->unst[j];

		if (u->seq <= seq && (obj < 0 || u->obj == obj)) {
			make_durable(f, u->uid, u->ver);
			*u = k->unst[--k->nunst];
		} else {
			j++;
		}
	}
}

static bool data_ok(const struct fz *f, const struct rm_buf *b)
{
	return b->lost || f->durable[b->uid] == b->ver;
}

/* ------------------------------------------------------------------------ */
/* Verification                                                              */

static void verify_limits(struct fz *f)
{
	int d;

	for (d = 0; d < RM_NDOM; d++) {
		struct us_domain_stats s = { .size = sizeof(s) };
		uint64_t max;

		if (!f->m.dom[d].used)
			continue;
		CHECK(us_domain_stats(f->dom[d], &s) == 0, "stats");
		CHECK(us_domain_get_limit(f->dom[d], US_LIMIT_MAX, &max) == 0, "get_limit");
		CHECK(s.charged_bytes <= max, "domain %d charged %llu above max %llu", d,
		      (unsigned long long)s.charged_bytes, (unsigned long long)max);
	}
}

static void verify(struct fz *f)
{
	char msg[512];
	int i, d, k, rc;
	int nwb[RM_NBK] = { 0 };
	uint64_t sums[RM_NDOM][RM_NSUM];

	rc = us_engine_check(f->e, msg, sizeof(msg));
	CHECK(rc == 0, "us_engine_check: %s", msg);
	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *b = &f->m.buf[i];
		us_buf *eb = b->h;

		if (!b->used)
			continue;
		CHECK(us_buf_state(eb) == b->state, "buffer %d: state %d, model %d", i,
		      us_buf_state(eb), b->state);
		CHECK(((us_buf_flags(eb) & US_BUF_REDIRTIED) != 0) == b->redirtied,
		      "buffer %d: REDIRTIED differs", i);
		CHECK(us_buf_commit_seq(eb) == b->seq, "buffer %d: seq %llu, model %llu", i,
		      (unsigned long long)us_buf_commit_seq(eb), (unsigned long long)b->seq);
		if (b->state == RM_CLEAN)
			CHECK(data_ok(f, b),
			      "buffer %d (uid %llu) clean with version %llu, durable %llu", i,
			      (unsigned long long)b->uid, (unsigned long long)b->ver,
			      (unsigned long long)f->durable[b->uid]);
		if (b->state == RM_WRITEBACK)
			nwb[f->m.obj[b->obj].bk]++;
	}
	for (k = 0; k < RM_NBK; k++)
		CHECK(nwb[k] == f->bk[k].npend, "backend %d: %d writes in flight, model %d", k,
		      f->bk[k].npend, nwb[k]);
	rm_sums(&f->m, sums);
	for (d = 0; d < RM_NDOM; d++) {
		struct us_domain_stats s = { .size = sizeof(s) };
		uint64_t max;

		if (!f->m.dom[d].used)
			continue;
		CHECK(us_domain_stats(f->dom[d], &s) == 0, "stats");
		CHECK(s.charged_bytes == sums[d][RM_SUM_CHARGED],
		      "domain %d charged %llu, model %llu", d, (unsigned long long)s.charged_bytes,
		      (unsigned long long)sums[d][RM_SUM_CHARGED]);
		CHECK(s.clean_bytes == sums[d][RM_CLEAN], "domain %d clean differs", d);
		CHECK(s.dirty_bytes == sums[d][RM_DIRTY], "domain %d dirty differs", d);
		CHECK(s.writeback_bytes == sums[d][RM_WRITEBACK], "domain %d writeback differs", d);
		CHECK(s.unstable_bytes == sums[d][RM_UNSTABLE], "domain %d unstable differs", d);
		CHECK(s.evictable_bytes == sums[d][RM_SUM_EVICTABLE], "domain %d evictable differs",
		      d);
		CHECK(us_domain_get_limit(f->dom[d], US_LIMIT_MAX, &max) == 0, "get_limit");
		CHECK(max == f->m.dom[d].max, "domain %d max differs", d);
		CHECK(s.charged_bytes <= max, "domain %d charged %llu above max %llu", d,
		      (unsigned long long)s.charged_bytes, (unsigned long long)max);
	}
}

/* ------------------------------------------------------------------------ */
/* The test backend                                                          */

static int obj_of(us_object *o)
{
	return (int)(uintptr_t)us_object_user(o) - 1;
}

static void complete(struct fz *f, struct fbk *k, int pi, int result, uint64_t seq);

static int fb_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
		    uint64_t length, enum us_reason reason)
{
	struct fbk *k = ctx;
	struct fz *f = F;
	int oi = obj_of(obj), rc = 0;
	size_t j;
	uint64_t expect = offset;

	f->ncb++;
	verify_limits(f);
	CHECK(n > 0 && reason <= US_REASON_USER, "bad flush call");
	CHECK(f->m.obj[oi].bk == k->idx, "object %d flushed to the wrong backend", oi);
	for (j = 0; j < n; j++) {
		int i = rm_find(&f->m, bufs[j]);
		struct rm_buf *b;
		const void *data = us_buf_data(bufs[j]);

		CHECK(i >= 0, "flush of a buffer the model does not have");
		b = &f->m.buf[i];
		CHECK(b->obj == oi && b->off == expect, "run not contiguous in ascending order");
		expect += b->len;
		rm_flushed(&f->m, i);
		if (data && b->len >= 8) {
			uint64_t v;

			memcpy(&v, data, 8);
			CHECK(v == b->ver, "buffer %d: payload holds version %llu, model %llu", i,
			      (unsigned long long)v, (unsigned long long)b->ver);
		}
		CHECK(k->npend < NPEND, "too many writes in flight");
		k->pend[k->npend++] = (struct pend){ bufs[j], b->uid, b->wver, k->epoch };
		if (reason != US_REASON_SYNC)
			f->handed++;
	}
	CHECK(expect == offset + length, "run length differs");
	switch (k->fmode) {
	case F_HOLD:
		break;
	case F_STABLE:
	case F_UNSTABLE:
	case F_ERROR:
		for (j = 0; j < n; j++) {
			int pi = k->npend - 1;

			/* Complete the run's buffers, last handed first. */
			complete(f, k, pi,
				 k->fmode == F_STABLE ? RM_STABLE :
				 k->fmode == F_ERROR  ? RM_ERROR :
							RM_ACK_UNSTABLE,
				 k->next_seq++);
		}
		break;
	case F_REFUSE:
	case F_PARTIAL:
		/* F_PARTIAL: the first half completes stable, then the call fails. */
		for (j = 0; k->fmode == F_PARTIAL && j < n / 2; j++) {
			int pi;

			for (pi = 0; pi < k->npend; pi++)
				if (k->pend[pi].b == bufs[j])
					break;
			complete(f, k, pi, RM_STABLE, 0);
		}
		for (; j < n; j++) {
			int pi;

			for (pi = 0; pi < k->npend; pi++)
				if (k->pend[pi].b == bufs[j])
					break;
			CHECK(pi < k->npend, "refused buffer not pending");
			k->pend[pi] = k->pend[--k->npend];
			/* The engine puts it back to DIRTY when we return. */
			rm_flush_refused(&f->m, rm_find(&f->m, bufs[j]));
			f->putback += reason != US_REASON_SYNC;
		}
		rc = -EIO;
		f->refused = true;
		break;
	default:
		break;
	}
	return rc;
}

static int commit_now(struct fz *f, struct fbk *k, int oi);

static int fb_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct fbk *k = ctx;
	struct fz *f = F;

	(void)reason;
	f->ncb++;
	verify_limits(f);
	if (k->cmode == C_FAIL)
		return -EIO;
	if (k->cmode == C_NOW)
		commit_now(f, k, obj_of(obj));
	return 0;
}

static int fb_sync(void *ctx, us_backend *b, enum us_reason reason)
{
	struct fbk *k = ctx;
	struct fz *f = F;

	(void)b;
	(void)reason;
	f->ncb++;
	verify_limits(f);
	if (k->cmode == C_FAIL)
		return -EIO;
	if (k->cmode == C_NOW)
		commit_now(f, k, -1);
	return 0;
}

static void fb_evict(void *ctx, us_object *obj, uint64_t offset, uint64_t length, void *data)
{
	struct fz *f = F;
	int oi = obj_of(obj), i = rm_find_at(&f->m, oi, offset);

	(void)ctx;
	(void)data;
	f->ncb++;
	CHECK(i >= 0, "evicted a buffer the model does not have");
	CHECK(f->m.buf[i].len == length, "evicted length differs");
	CHECK(data_ok(f, &f->m.buf[i]),
	      "evicted buffer %d (uid %llu) whose version %llu is not durable (%llu)", i,
	      (unsigned long long)f->m.buf[i].uid, (unsigned long long)f->m.buf[i].ver,
	      (unsigned long long)f->durable[f->m.buf[i].uid]);
	rm_evicted(&f->m, i);
}

/*
 * Completes pending write pi of k with result (seq for unstable: the given
 * one) through us_buf_write_done(), in the model and in the server.
 */
static void complete(struct fz *f, struct fbk *k, int pi, int result, uint64_t seq)
{
	struct pend p;
	int i, st, rc;
	uint64_t committed;

	CHECK(pi >= 0 && pi < k->npend, "no such pending write");
	p = k->pend[pi];
	k->pend[pi] = k->pend[--k->npend];
	i = rm_find(&f->m, p.b);
	CHECK(i >= 0, "pending write of an unknown buffer");
	committed = rm_committed(&f->m, f->m.buf[i].obj);
	rc = us_buf_write_done(p.b, (enum us_write_result)result, seq,
			       result >= RM_ERROR ? -EIO : 0);
	CHECK(rc == 0, "us_buf_write_done: %d", rc);
	st = rm_write_done(&f->m, i, result, seq);
	/* The server's side. */
	if (result == RM_STABLE) {
		supersede(k, p.uid);
		make_durable(f, p.uid, p.ver);
	} else if (result == RM_ACK_UNSTABLE && p.epoch == k->epoch) {
		supersede(k, p.uid);
		if (seq <= committed) {
			make_durable(f, p.uid, p.ver);
		} else {
			CHECK(k->nunst < NUNST, "too many unstable writes");
			k->unst[k->nunst++] = (struct unst){ p.uid, p.ver, seq, f->m.buf[i].obj };
		}
	}
	(void)st;
}

static int commit_now(struct fz *f, struct fbk *k, int oi)
{
	uint64_t seq = k->next_seq - 1;
	int expect, rc;

	if (seq == 0)
		return 0;
	if (oi >= 0) {
		expect = rm_commit_done_obj(&f->m, oi, seq);
		server_commit(f, k, oi, seq);
		rc = us_object_commit_done(f->obj[oi], seq);
	} else {
		expect = rm_commit_done_bk(&f->m, k->idx, seq);
		server_commit(f, k, -1, seq);
		rc = us_backend_commit_done(k->b, seq);
	}
	CHECK(rc == expect, "commit_done cleaned %d, model %d", rc, expect);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                */

/*
 * A call that saw the injected failure and failed: -ENOMEM, no callback
 * since ncb0 (the caller leaves the model as it was, and verify() compares).
 */
static bool failed_clean(struct fz *f, const char *what, int rc, uint64_t ncb0)
{
	if (!fired(f) || rc >= 0)
		return false;
	CHECK(rc == -ENOMEM, "%s with a failed allocation: %d", what, rc);
	CHECK(f->ncb == ncb0, "%s failed after calling %llu callbacks", what,
	      (unsigned long long)(f->ncb - ncb0));
	return true;
}

static uint64_t limit_value(struct fz *f)
{
	unsigned v = u8(f);

	if (v >= 240)
		return US_UNLIMITED;
	return (uint64_t)(v % 96) * K4 + (v >= 200 ? 1 : 0);
}

static void op_dom_create(struct fz *f)
{
	int parent = pick_dom(f, true), d, rc;
	uint64_t max = limit_value(f), ncb0;
	char name[32];
	us_domain *dom;

	if (parent < 0)
		return;
	snprintf(name, sizeof(name), "d%u", f->dom_gen++);
	d = rm_dom_add(&f->m, parent, US_UNLIMITED);
	if (d < 0)
		return;
	ncb0 = f->ncb;
	rc = us_domain_create(f->e, f->dom[parent], name, 0, &dom);
	if (failed_clean(f, "us_domain_create", rc, ncb0)) {
		f->m.dom[d].used = false;
		return;
	}
	CHECK(rc == 0, "us_domain_create: %d", rc);
	f->dom[d] = dom;
	if (max != US_UNLIMITED && max != 0) {
		rc = us_domain_set_limit(dom, US_LIMIT_MAX, max);
		CHECK(rc == 0, "set max on a new domain: %d", rc);
		f->m.dom[d].max = max;
	}
}

static void op_dom_destroy(struct fz *f)
{
	int d = pick_dom(f, false), rc;
	bool busy;

	if (d < 0)
		return;
	busy = rm_dom_busy(&f->m, d) || f->sync_dom == d;
	rc = us_domain_destroy(f->dom[d]);
	CHECK(rc == (busy ? -EBUSY : 0), "us_domain_destroy: %d, model %d", rc, busy ? -EBUSY : 0);
	if (!busy) {
		f->m.dom[d].used = false;
		f->dom[d] = NULL;
	}
}

static void op_obj_create(struct fz *f)
{
	int d = pick_dom(f, true), k = (int)(u8(f) % RM_NBK), o, rc;
	uint64_t ncb0 = f->ncb;
	us_object *obj;

	if (d < 0)
		return;
	o = rm_obj_add(&f->m, d, k, NULL);
	if (o < 0)
		return;
	rc = us_object_create(f->bk[k].b, f->dom[d], (void *)(uintptr_t)(o + 1), &obj);
	if (failed_clean(f, "us_object_create", rc, ncb0)) {
		f->m.obj[o].used = false;
		return;
	}
	CHECK(rc == 0, "us_object_create: %d", rc);
	f->obj[o] = obj;
	f->room_wait[o] = false;
	f->m.obj[o].h = obj;
}

static void op_obj_destroy(struct fz *f)
{
	int o = pick_obj(f), rc;
	bool busy;

	if (o < 0)
		return;
	busy = rm_obj_busy(&f->m, o) || f->sync_obj == o;
	rc = us_object_destroy(f->obj[o]);
	CHECK(rc == (busy ? -EBUSY : 0), "us_object_destroy: %d, model %d", rc, busy ? -EBUSY : 0);
	if (!busy) {
		/* Its clean buffers were evicted through the callback. */
		CHECK(rm_obj_nbufs(&f->m, o) == 0, "object destroyed with buffers left");
		f->m.obj[o].used = false;
		f->obj[o] = NULL;
	}
}

static void op_get(struct fz *f)
{
	int o = pick_obj(f), exists, rc, i;
	unsigned a = u8(f), b = u8(f), fl = u8(f);
	uint64_t off, len;
	enum rm_get pr;
	us_buf *eb = NULL;
	unsigned flags = 0;
	uint64_t ncb0;

	if (o < 0)
		return;
	if (a & 0x80) {
		off = (uint64_t)(a & 0x7f) * 977;
		len = 1 + (uint64_t)b * 97;
	} else {
		off = (uint64_t)(a & 0x3f) * K4;
		len = (uint64_t)(1 + b % 8) * K4;
	}
	if (fl & 1)
		flags |= US_GET_NODATA;
	if (fl & 2)
		flags |= US_GET_NOWAIT;
	pr = rm_get_predict(&f->m, o, off, len, &exists);
	if (pr != RM_GET_EXISTS) {
		int used = 0;

		for (i = 0; i < RM_NBUF; i++)
			used += f->m.buf[i].used;
		if (used >= RM_NBUF - 1)
			return;
	}
	if (fl & 4) {
		flags |= US_GET_NOCREATE;
		rc = us_buf_get(f->obj[o], off, len, flags, &eb);
		if (pr == RM_GET_EXISTS) {
			CHECK(rc == 0 && eb == f->m.buf[exists].h, "NOCREATE lookup: %d", rc);
			f->m.buf[exists].refs++;
		} else if (pr == RM_GET_OVERLAP) {
			CHECK(rc == -EEXIST || rc == -ENOENT, "NOCREATE overlap: %d", rc);
		} else {
			CHECK(rc == -ENOENT, "NOCREATE absent: %d", rc);
		}
		return;
	}
	ncb0 = f->ncb;
	rc = us_buf_get(f->obj[o], off, len, flags, &eb);
	/* A charge that fits allocates before anything changes; one that
	 * reclaims may have started writeback, the callbacks told the model. */
	if (pr == RM_GET_FITS && failed_clean(f, "us_buf_get", rc, ncb0))
		return;
	switch (pr) {
	case RM_GET_EXISTS:
		CHECK(rc == 0 && eb == f->m.buf[exists].h, "get existing: %d", rc);
		f->m.buf[exists].refs++;
		return;
	case RM_GET_OVERLAP:
		CHECK(rc == -EEXIST, "get overlapping: %d", rc);
		return;
	case RM_GET_FITS:
		/* Behind an earlier waiter: nothing started, nothing changed. */
		if (rc == -EAGAIN && other_waits(f, o) && f->ncb == ncb0) {
			f->room_wait[o] = true;
			return;
		}
		CHECK(rc == 1, "get that fits: %d", rc);
		f->room_wait[o] = false;
		break;
	case RM_GET_RECLAIM:
		CHECK(rc == 1 || rc == -EAGAIN || rc == -ENOMEM, "get after reclaim: %d", rc);
		f->room_wait[o] = rc == -EAGAIN;
		if (rc != 1)
			return;
		break;
	case RM_GET_HOPELESS:
		CHECK(rc == -ENOMEM, "get that cannot fit: %d", rc);
		f->room_wait[o] = false;
		return;
	}
	/* Created: it must fit now (the model saw the evictions). */
	i = rm_buf_add(&f->m, o, off, len, eb);
	CHECK(us_buf_length(eb) == len && us_buf_offset(eb) == off, "buffer range differs");
	CHECK(((flags & US_GET_NODATA) != 0) == (us_buf_data(eb) == NULL), "payload differs");
	(void)i;
}

/* Takes a reference on buffer i when the harness holds none. */
static void hold(struct fz *f, int i)
{
	struct rm_buf *b = &f->m.buf[i];
	us_buf *eb;
	int rc;

	if (b->refs)
		return;
	rc = us_buf_lookup(f->obj[b->obj], b->off + (b->len > 1 ? b->len / 2 : 0), &eb);
	CHECK(rc == 0 && eb == b->h, "lookup: %d", rc);
	b->refs++;
}

static void op_put(struct fz *f)
{
	int i = pick_buf(f), rc;

	if (i < 0)
		return;
	if (!f->m.buf[i].refs) {
		rc = us_buf_put(f->m.buf[i].h);
		CHECK(rc == -EINVAL, "put without a reference: %d", rc);
		return;
	}
	rc = us_buf_put(f->m.buf[i].h);
	CHECK(rc == 0, "put: %d", rc);
	f->m.buf[i].refs--;
}

static void op_dirty(struct fz *f)
{
	int i = pick_buf(f), rc;
	unsigned how = u8(f);
	uint64_t pause = 0;
	struct rm_buf *b;
	void *data;

	if (i < 0)
		return;
	hold(f, i);
	b = &f->m.buf[i];
	rm_dirty(&f->m, i);
	data = us_buf_data(b->h);
	if (data && b->len >= 8)
		memcpy(data, &b->ver, 8);
	rc = us_buf_dirty(b->h, (how & 1) ? &pause : NULL);
	CHECK(rc == 0 || rc == US_DIRTY_OVER_LIMIT, "dirty: %d", rc);
	if (how & 2) {
		rc = us_buf_put(b->h);
		CHECK(rc == 0, "put: %d", rc);
		b->refs--;
	}
}

static void op_drop(struct fz *f)
{
	int i = pick_buf(f), rc;
	bool busy;

	if (i < 0)
		return;
	hold(f, i);
	busy = rm_drop_busy(&f->m, i);
	rc = us_buf_drop(f->m.buf[i].h);
	CHECK(rc == (busy ? -EBUSY : 0), "drop: %d, model busy %d", rc, busy);
	if (!busy)
		rm_dropped(&f->m, i);
}

static void op_flush(struct fz *f)
{
	int o = pick_obj(f), i, expect = 0, rc;
	unsigned a = u8(f), b = u8(f), r = u8(f);
	uint64_t off = 0, len = US_UNLIMITED, end = UINT64_MAX, ncb0;

	if (o < 0)
		return;
	if (a & 1) {
		off = (uint64_t)(a >> 1) * K4;
		len = (uint64_t)b * K4;
		end = off + len;
	}
	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *x = &f->m.buf[i];

		if (x->used && x->obj == o && x->state == RM_DIRTY && x->off >= off &&
		    x->off + x->len <= end)
			expect++;
	}
	f->handed = f->putback = 0;
	f->refused = false;
	ncb0 = f->ncb;
	rc = us_object_flush(f->obj[o], off, len, (uint64_t)(r % 4) * 3 * K4);
	if (failed_clean(f, "us_object_flush", rc, ncb0))
		return;
	if (fired(f)) {
		/* Its array could not grow: what it took went, the rest waits. */
		CHECK(rc == f->handed - f->putback && f->handed <= expect,
		      "us_object_flush with a failed allocation: %d, model %d, handed %d, "
		      "given back %d",
		      rc, expect, f->handed, f->putback);
		return;
	}
	CHECK(rc == (f->refused ? f->handed - f->putback : expect),
	      "us_object_flush: %d, model %d, handed %d, given back %d, refused %d", rc, expect,
	      f->handed, f->putback, f->refused);
	CHECK(f->refused ? f->handed <= expect : f->handed == expect,
	      "flush handed %d buffers, returned %d", f->handed, expect);
}

static void op_complete(struct fz *f)
{
	struct fbk *k = &f->bk[u8(f) % RM_NBK];
	int pi = (int)u8(f), result = (int)(u8(f) % 4), i;
	uint64_t seq = 0, committed;

	if (!k->npend)
		return;
	pi %= k->npend;
	i = rm_find(&f->m, k->pend[pi].b);
	CHECK(i >= 0, "pending write of an unknown buffer");
	if (result == RM_ACK_UNSTABLE) {
		committed = rm_committed(&f->m, f->m.buf[i].obj);
		/* Usually a new seq; sometimes one a commit already covers. */
		if (committed && (u8(f) & 3) == 0)
			seq = 1 + (committed - 1) / 2;
		else
			seq = k->next_seq++;
	}
	complete(f, k, pi, result, seq);
}

static uint64_t pick_seq(struct fz *f, struct fbk *k)
{
	unsigned v = u8(f);

	if (k->next_seq <= 1)
		return 1;
	if (v < 128)
		return k->next_seq - 1;
	return 1 + v % (k->next_seq - 1);
}

static void op_commit_done_bk(struct fz *f)
{
	struct fbk *k = &f->bk[u8(f) % RM_NBK];
	uint64_t seq = pick_seq(f, k);
	int expect = rm_commit_done_bk(&f->m, k->idx, seq), rc;

	server_commit(f, k, -1, seq);
	rc = us_backend_commit_done(k->b, seq);
	CHECK(rc == expect, "us_backend_commit_done: %d, model %d", rc, expect);
}

static void op_commit_done_obj(struct fz *f)
{
	int o = pick_obj(f), expect, rc;
	struct fbk *k;
	uint64_t seq;

	if (o < 0)
		return;
	k = &f->bk[f->m.obj[o].bk];
	seq = pick_seq(f, k);
	expect = rm_commit_done_obj(&f->m, o, seq);
	server_commit(f, k, o, seq);
	rc = us_object_commit_done(f->obj[o], seq);
	CHECK(rc == expect, "us_object_commit_done: %d, model %d", rc, expect);
}

static void op_commit_lost(struct fz *f)
{
	struct fbk *k = &f->bk[u8(f) % RM_NBK];
	int expect = rm_commit_lost(&f->m, k->idx), rc;

	/* The server forgets what it had not committed. */
	k->nunst = 0;
	k->epoch++;
	rc = us_backend_commit_lost(k->b);
	CHECK(rc == expect, "us_backend_commit_lost: %d, model %d", rc, expect);
}

static void op_set_limit(struct fz *f)
{
	int d = pick_dom(f, true), rc, expect = 0;
	unsigned which = u8(f) % 6;
	uint64_t v = limit_value(f), got;

	if (d < 0)
		return;
	if (which == US_LIMIT_DIRTY_BG_RATIO || which == US_LIMIT_DIRTY_RATIO)
		v = v == US_UNLIMITED ? 101 : v % 101;
	if (which == US_LIMIT_MAX)
		expect = rm_set_max_result(&f->m, d, v);
	else if ((which == US_LIMIT_DIRTY_BG_BYTES || which == US_LIMIT_DIRTY_BYTES) && v == 0)
		expect = -EINVAL;
	else if ((which == US_LIMIT_DIRTY_BG_RATIO || which == US_LIMIT_DIRTY_RATIO) && v > 100)
		expect = -EINVAL;
	rc = us_domain_set_limit(f->dom[d], (enum us_limit)which, v);
	CHECK(rc == expect, "set_limit %u to %llu: %d, model %d", which, (unsigned long long)v, rc,
	      expect);
	if (rc == 0) {
		CHECK(us_domain_get_limit(f->dom[d], (enum us_limit)which, &got) == 0 && got == v,
		      "get_limit differs");
		if (which == US_LIMIT_MAX)
			f->m.dom[d].max = v;
	}
}

static void op_set_param(struct fz *f)
{
	static const struct {
		enum us_param p;
		uint64_t v[4];
	} params[] = {
		{ US_PARAM_DIRTY_EXPIRE_NS, { 1000000, 100000000, 1000000000, 30000000000ull } },
		{ US_PARAM_WRITEBACK_INTERVAL_NS,
		  { 1000000, 50000000, 1000000000, 5000000000ull } },
		{ US_PARAM_MAX_PAUSE_NS, { 1000000, 20000000, 200000000, 1000000000 } },
		{ US_PARAM_MIN_PAUSE_NS, { 0, 1000000, 10000000, 100000000 } },
		{ US_PARAM_MAX_FLUSH_BYTES, { 1, K4, 3 * K4, 4 << 20 } },
		{ US_PARAM_INIT_BW, { 1, 1 << 20, 100 << 20, 1ull << 40 } },
		{ US_PARAM_FORCE_COMMIT, { 0, 1, 1, 0 } },
		{ US_PARAM_COMMIT_INTERVAL_NS, { 1000000, 100000000, 1000000000, 30000000000ull } },
		{ US_PARAM_MAX_COMMITS, { 1, 2, 4, 100 } },
		{ US_PARAM_RECLAIM_WAIT_NS, { 1, 1000000, 100000000, 1000000000 } },
		{ US_PARAM_RECLAIM_RETRIES, { 1, 2, 16, 1000 } },
		{ US_PARAM_RECLAIM_TIMEOUT_NS, { 1000000, 100000000, 60000000000ull, UINT64_MAX } },
	};
	unsigned a = u8(f) % (sizeof(params) / sizeof(params[0])), b = u8(f) % 4;
	uint64_t got;
	int rc = us_engine_set_param(f->e, params[a].p, params[a].v[b]);

	CHECK(rc == 0, "set_param %d: %d", params[a].p, rc);
	CHECK(us_engine_get_param(f->e, params[a].p, &got) == 0 && got == params[a].v[b],
	      "get_param differs");
}

static void op_poll(struct fz *f)
{
	static const uint64_t steps[8] = {
		0,	    1000000,	   10000000,	   100000000,
		1000000000, 5000000000ull, 30000000000ull, 60000000000ull
	};
	uint64_t next = 0;
	int rc;

	f->handed = f->putback = 0;
	f->refused = false;
	rc = us_engine_poll(f->e, us_engine_now(f->e) + steps[u8(f) % 8], &next);
	if (fired(f)) {
		/* Writeback that could not start fails the call; commits and
		 * sync steps are deferred. Whatever it did, the callbacks told
		 * the model; the next call, at once, must succeed. */
		CHECK(rc == -ENOMEM || rc == f->handed - f->putback,
		      "poll with a failed allocation: %d, handed %d, %d given back", rc, f->handed,
		      f->putback);
		f->handed = f->putback = 0;
		f->refused = false;
		rc = us_engine_poll(f->e, us_engine_now(f->e), &next);
	}
	CHECK(rc >= 0, "poll: %d", rc);
	CHECK(rc == f->handed - f->putback, "poll returned %d, handed %d, %d given back", rc,
	      f->handed, f->putback);
}

static void op_mode(struct fz *f)
{
	struct fbk *k = &f->bk[u8(f) % RM_NBK];
	unsigned v = u8(f);

	k->fmode = (enum fmode)(v % F_NMODES);
	k->cmode = (enum cmode)((v >> 4) % C_NMODES);
}

static void op_obj_commit(struct fz *f)
{
	int o = pick_obj(f), rc;
	bool any;
	struct fbk *k;

	if (o < 0)
		return;
	k = &f->bk[f->m.obj[o].bk];
	any = rm_obj_nstate(&f->m, o, RM_UNSTABLE) > 0;
	rc = us_object_commit(f->obj[o]);
	if (!any)
		CHECK(rc == 0, "commit with nothing unstable: %d", rc);
	else
		CHECK(rc == (k->cmode == C_FAIL ? -EIO : 0), "us_object_commit: %d", rc);
}

static void op_reclaim(struct fz *f)
{
	int o = pick_obj(f), rc;
	uint64_t len = (uint64_t)(1 + u8(f) % 32) * K4, retry = 0, ncb0;
	enum rm_get pr;

	if (o < 0)
		return;
	pr = rm_charge_predict(&f->m, o, len);
	ncb0 = f->ncb;
	rc = us_object_reclaim(f->obj[o], len, &retry);
	if (fired(f))
		/* It started less than it wanted, or nothing. */
		CHECK(rc == 0 || rc == -EAGAIN || rc == -ENOMEM,
		      "reclaim with a failed allocation: %d", rc);
	else if (pr == RM_GET_FITS)
		CHECK(rc == 0 || (rc == -EAGAIN && other_waits(f, o) && f->ncb == ncb0),
		      "reclaim that fits: %d", rc);
	else if (pr == RM_GET_HOPELESS)
		CHECK(rc == -ENOMEM, "reclaim that cannot fit: %d", rc);
	else
		CHECK(rc == 0 || rc == -EAGAIN || rc == -ENOMEM, "reclaim: %d", rc);
	if (rc == -EAGAIN || rc == -ENOMEM)
		f->room_wait[o] = rc == -EAGAIN;
}

/* A sync step that saw the failure deferred its work: the next one, at
 * once, must go through. */
static void sync_retry(struct fz *f)
{
	int rc;

	if (!fired(f))
		return;
	rc = us_sync_done(f->sync);
	CHECK(rc == 0 || rc == 1, "us_sync_done after a deferred step: %d", rc);
}

static void op_sync(struct fz *f)
{
	unsigned a = u8(f);
	uint64_t ncb0 = f->ncb;
	int rc;

	if (f->sync) {
		if (a & 1) {
			rc = us_sync_free(f->sync);
			CHECK(rc == 0, "us_sync_free: %d", rc);
			f->sync = NULL;
			f->sync_obj = f->sync_dom = -1;
		} else {
			f->handed = 0;
			rc = us_sync_done(f->sync);
			CHECK(rc == 0 || rc == 1, "us_sync_done: %d", rc);
			sync_retry(f);
		}
		return;
	}
	if (a & 1) {
		int o = pick_obj(f);

		if (o < 0)
			return;
		rc = us_object_sync_start(f->obj[o], NULL, NULL, &f->sync);
		if (failed_clean(f, "us_object_sync_start", rc, ncb0)) {
			f->sync = NULL;
			return;
		}
		CHECK(rc == 0, "us_object_sync_start: %d", rc);
		f->sync_obj = o;
	} else {
		int d = pick_dom(f, true);

		rc = us_domain_sync_start(f->dom[d], NULL, NULL, &f->sync);
		if (failed_clean(f, "us_domain_sync_start", rc, ncb0)) {
			f->sync = NULL;
			return;
		}
		CHECK(rc == 0, "us_domain_sync_start: %d", rc);
		f->sync_dom = d;
	}
	sync_retry(f);
}

static void op_balance(struct fz *f)
{
	int o = pick_obj(f), rc;
	uint64_t pause;

	if (o < 0)
		return;
	rc = us_object_balance(f->obj[o], &pause);
	CHECK(rc == 0 || rc == -EAGAIN, "balance: %d", rc);
}

static void op_inflight(struct fz *f)
{
	struct fbk *k = &f->bk[u8(f) % RM_NBK];
	int rc = us_backend_set_max_inflight(k->b, (uint64_t)(1 + u8(f)) * K4);

	CHECK(rc == 0, "set_max_inflight: %d", rc);
}

/* Arms the hooks: the Nth next allocation (of a kind, or of both) fails,
 * during the next few operations. */
static void op_arm(struct fz *f)
{
	unsigned a = u8(f), b = u8(f);
	struct hk *h = &f->hk;

	h->armed = true;
	h->left = 1 + (a & 7);
	h->kind = (int)((a >> 3) % 3) - 1;
	h->window = 1 + b % 4;
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                        */

static void setup(struct fz *f)
{
	struct us_alloc_hooks hooks = { hk_alloc, hk_free, f };
	struct us_engine_options o;
	int k, rc;

	rm_init(&f->m, ROOTMAX);
	f->sync_obj = f->sync_dom = -1;
	us_engine_options_init(&o);
	o.clock = US_CLOCK_VIRTUAL;
	o.memory_bytes = ROOTMAX;
	if (memchr(f->p, OP_ARM, f->n))
		o.alloc = &hooks;
	rc = us_engine_create(&o, &f->e);
	CHECK(rc == 0, "us_engine_create: %d", rc);
	f->dom[0] = us_engine_root(f->e);
	for (k = 0; k < RM_NBK; k++) {
		struct us_backend_ops ops = { .size = sizeof(ops) };

		ops.flush = fb_flush;
		ops.commit = k == 0 ? fb_commit : NULL;
		ops.sync = k == 1 ? fb_sync : NULL;
		ops.evict = fb_evict;
		f->bk[k].idx = k;
		f->bk[k].next_seq = 1;
		rc = us_backend_create(f->e, &ops, &f->bk[k], &f->bk[k].b);
		CHECK(rc == 0, "us_backend_create: %d", rc);
	}
}

/*
 * Everything completes stable, every commit is reported, every buffer is
 * written back; then every clean buffer must hold its latest version in the
 * server's store, and everything is destroyed.
 */
static void teardown(struct fz *f)
{
	int k, i, round, rc;

	f->hk.armed = false;
	if (f->sync) {
		CHECK(us_sync_free(f->sync) == 0, "us_sync_free");
		f->sync = NULL;
		f->sync_obj = f->sync_dom = -1;
	}
	for (k = 0; k < RM_NBK; k++) {
		f->bk[k].fmode = F_STABLE;
		f->bk[k].cmode = C_OK;
	}
	for (round = 0; round < 4; round++) {
		for (k = 0; k < RM_NBK; k++) {
			while (f->bk[k].npend)
				complete(f, &f->bk[k], 0, RM_STABLE, 0);
			if (f->bk[k].next_seq > 1) {
				int expect = rm_commit_done_bk(&f->m, k, f->bk[k].next_seq - 1);

				server_commit(f, &f->bk[k], -1, f->bk[k].next_seq - 1);
				rc = us_backend_commit_done(f->bk[k].b, f->bk[k].next_seq - 1);
				CHECK(rc == expect, "final commit_done: %d, model %d", rc, expect);
			}
		}
		for (i = 0; i < RM_NOBJ; i++) {
			if (!f->m.obj[i].used)
				continue;
			f->handed = f->putback = 0;
			rc = us_object_flush(f->obj[i], 0, US_UNLIMITED, 0);
			CHECK(rc >= 0 && rc == f->handed - f->putback,
			      "final flush: %d, handed %d, %d given back", rc, f->handed,
			      f->putback);
		}
		verify(f);
	}
	for (i = 0; i < RM_NBUF; i++) {
		struct rm_buf *b = &f->m.buf[i];

		if (!b->used)
			continue;
		CHECK(b->state == RM_CLEAN, "buffer %d not clean at the end", i);
		CHECK(data_ok(f, b), "buffer %d: version %llu never made durable", i,
		      (unsigned long long)b->ver);
		while (b->refs) {
			CHECK(us_buf_put(b->h) == 0, "put");
			b->refs--;
		}
	}
	for (i = 0; i < RM_NOBJ; i++) {
		if (!f->m.obj[i].used)
			continue;
		rc = us_object_destroy(f->obj[i]);
		CHECK(rc == 0, "final object destroy: %d", rc);
		CHECK(rm_obj_nbufs(&f->m, i) == 0, "object destroyed with buffers left");
		f->m.obj[i].used = false;
	}
	for (k = 0; k < RM_NBK; k++)
		CHECK(us_backend_destroy(f->bk[k].b) == 0, "backend destroy");
	verify_limits(f);
	rc = us_engine_destroy(f->e);
	CHECK(rc == 0, "us_engine_destroy: %d", rc);
	CHECK(f->hk.live == 0, "%llu allocations never freed", (unsigned long long)f->hk.live);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz *f = calloc(1, sizeof(*f));
	unsigned nops = 0;

	if (!f)
		return 0;
	F = f;
	f->p = data;
	f->n = size;
	setup(f);
	while (f->i < f->n && nops++ < MAXOPS) {
		unsigned op = u8(f);

		f->m.ops = nops;
		if (op == OP_ARM) {
			op_arm(f);
			verify(f);
			continue;
		}
		switch (op % 24) {
		case 0:
			op_dom_create(f);
			break;
		case 1:
			op_dom_destroy(f);
			break;
		case 2:
			op_obj_create(f);
			break;
		case 3:
			op_obj_destroy(f);
			break;
		case 4:
		case 5:
		case 6:
			op_get(f);
			break;
		case 7:
			op_put(f);
			break;
		case 8:
		case 9:
			op_dirty(f);
			break;
		case 10:
			op_drop(f);
			break;
		case 11:
			op_flush(f);
			break;
		case 12:
		case 13:
			op_complete(f);
			break;
		case 14:
			op_commit_done_bk(f);
			break;
		case 15:
			op_commit_done_obj(f);
			break;
		case 16:
			op_commit_lost(f);
			break;
		case 17:
			op_set_limit(f);
			break;
		case 18:
			op_poll(f);
			break;
		case 19:
			op_mode(f);
			break;
		case 20:
			op_obj_commit(f);
			break;
		case 21:
			op_reclaim(f);
			break;
		case 22:
			switch (u8(f) % 4) {
			case 0:
				op_sync(f);
				break;
			case 1:
				op_set_param(f);
				break;
			case 2:
				op_balance(f);
				break;
			default:
				op_inflight(f);
				break;
			}
			break;
		default:
			op_obj_create(f);
			break;
		}
		verify(f);
		hk_step(f);
	}
	f->m.ops = nops + 1;
	teardown(f);
	F = NULL;
	free(f);
	return 0;
}
