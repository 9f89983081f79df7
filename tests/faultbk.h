/*
 * A fault-injecting test backend: a simulated server that stores what it
 * was sent, byte for byte, and misbehaves on demand. Used by check_faults
 * (thousands of seeds in polled mode on a virtual clock), check_stress
 * (threaded, completions from its own threads) and bench/soak.
 *
 * Faults, each with a probability in per mille:
 *   refuse     the flush callback fails (-EIO): the engine redirties
 *   error      a write completes with US_WRITE_ERROR (transient)
 *   short      part of a run completes inside the flush callback, the rest
 *              later: short completions
 *   unstable   a write is acknowledged UNSTABLE with the server's next
 *              transaction number (else STABLE)
 *   commit_fail the commit or sync callback fails
 *   lost       at a delivery, the server restarts: everything it held
 *              uncommitted is gone, us_backend_commit_lost() is called, and
 *              the commits it was running never complete
 *   stall      at a delivery, the server stops completing anything for
 *              stall_ns (polled) or stall_picks picks (threaded), then
 *              recovers
 * Completions come out of order: each write gets a random latency in
 * [lat_ns, lat_ns + jitter_ns] (polled); threaded, the completer threads
 * take the queued items in random order.
 *
 * Buffers must be bs bytes at offsets that are multiples of bs; an object's
 * us_object_user() must be (void *)(uintptr_t)(id + 1) with id < nobj.
 * The server keeps, per (object, block), the durable content: the bytes
 * (keep_bytes) and a 64-bit hash (always).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef US_FAULTBK_H
#define US_FAULTBK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <unstable/unstable.h>

struct fb_config {
	uint64_t seed;
	unsigned refuse_pm, error_pm, short_pm, unstable_pm, commit_fail_pm, lost_pm, stall_pm;
	uint64_t lat_ns, jitter_ns, commit_lat_ns, stall_ns; /* polled mode */
	unsigned stall_picks;				     /* threaded mode */
	unsigned threads; /* completer threads; 0: polled, call fb_deliver() */
	size_t nobj;	  /* objects, ids 0..nobj-1 */
	uint64_t bs;	  /* block (buffer) size */
	uint64_t nblocks; /* blocks per object */
	bool keep_bytes;  /* store the bytes, not only their hash */
	bool with_commit; /* a commit callback; a sync callback always */
	/* Copies b's payload into dst for the write (a test whose writers
	 * change payloads concurrently takes its lock here). NULL: memcpy. */
	void (*snapshot)(void *ctx, us_buf *b, void *dst);
	void *snapshot_ctx;
};

struct fb_stats {
	uint64_t flushes, flushed_bytes, refused, errors, shorts, stable, unstable;
	uint64_t commits, commit_fails, commit_done, lost, stalls, durable_bytes;
};

struct fb;

uint64_t fb_hash(const void *p, size_t n);
/* The next number of the xorshift64 generator of state *s (never 0 when *s
 * is not): the backend's own, and its users'. */
uint64_t fb_rand(uint64_t *s);
/* Creates the backend in e; NULL on failure. Threads start at once. */
struct fb *fb_create(us_engine *e, const struct fb_config *c);
us_backend *fb_backend(struct fb *f);
/* Polled: delivers every completion and commit due at now_ns; returns the
 * number of items delivered. */
size_t fb_deliver(struct fb *f, uint64_t now_ns);
/* The time of the next item (polled), UINT64_MAX if none. */
uint64_t fb_next(struct fb *f);
/* Items queued (writes and commits not yet delivered). */
size_t fb_queued(struct fb *f);
/*
 * Stops injecting faults: from now on every write is acknowledged STABLE
 * and every commit succeeds, nothing is lost and nothing stalls (for the
 * final drain).
 */
void fb_calm(struct fb *f);
/* The durable hash of a block (0 if never written), and its bytes
 * (keep_bytes; NULL otherwise). */
uint64_t fb_durable_hash(struct fb *f, size_t obj, uint64_t block);
const unsigned char *fb_durable_bytes(struct fb *f, size_t obj, uint64_t block);
void fb_stats(struct fb *f, struct fb_stats *st);
/* Stops the threads and frees everything; the backend must be destroyed
 * first (or the engine). */
void fb_destroy(struct fb *f);

#endif
