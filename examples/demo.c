/*
 * unstable-demo: a domain holding its limit while a writer dirties buffers
 * that are written back and committed.
 *
 * SPDX-License-Identifier: MIT
 *
 * A writer copies 32 MiB in 128 KiB buffers into a domain whose max is
 * 2 MiB. The simulated server acknowledges every write as UNSTABLE (it has
 * the data, not yet durable) and commits on its own only when 8 MiB of
 * uncommitted data have piled up in its journal, far more than the client's
 * limit, or when asked. It runs twice, in polled mode on a virtual clock:
 *
 *   1. "unpatched": the engine does not force commits
 *      (US_PARAM_FORCE_COMMIT 0) and the writer ignores the throttle, like a
 *      client whose kernel does not count its unstable pages. The domain
 *      fills with unstable buffers that only a commit can free; reclaim sees
 *      no progress for 16 waits of 100 ms and the charge fails with ENOMEM:
 *      the OOM of the Lustre client in shared/seeds.
 *   2. "unstable": the library's policy. The writer is throttled on its
 *      pinned bytes (unstable included), the engine writes back past the
 *      background threshold and forces a commit when unstable data is most
 *      of them, and reclaim does the same when a charge needs memory. The
 *      copy completes without the domain ever passing its max.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unstable/unstable.h>

#define KIB	      (1024ull)
#define MIB	      (1024ull * KIB)
#define BUF_BYTES     (128 * KIB)
#define COPY_BYTES    (32 * MIB)
#define LIMIT_BYTES   (2 * MIB)
#define JOURNAL_BYTES (8 * MIB)

struct server {
	us_backend *backend;
	uint64_t seq;	      /* last transaction number handed out */
	uint64_t uncommitted; /* bytes acknowledged and not yet committed */
	uint64_t commits;
	uint64_t stored;
};

/* flush: the server takes the data and acknowledges it as unstable. */
static int server_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
			uint64_t length, enum us_reason reason)
{
	struct server *s = ctx;
	size_t i;

	(void)obj;
	(void)offset;
	(void)reason;
	s->stored += length;
	for (i = 0; i < n; i++) {
		if (us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, ++s->seq, 0) != 0)
			return -EIO;
		s->uncommitted += us_buf_length(bufs[i]);
	}
	/* Its journal is full: it commits on its own. */
	if (s->uncommitted >= JOURNAL_BYTES) {
		s->uncommitted = 0;
		s->commits++;
		us_backend_commit_done(s->backend, s->seq);
	}
	return 0;
}

/* commit: the server makes everything durable now (a journal force). */
static int server_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct server *s = ctx;

	(void)obj;
	(void)reason;
	s->uncommitted = 0;
	s->commits++;
	return us_backend_commit_done(s->backend, s->seq) < 0 ? -EIO : 0;
}

static void row(us_domain *d, uint64_t written)
{
	struct us_domain_stats st = { .size = sizeof(st) };

	us_domain_stats(d, &st);
	printf("  %6llu KiB  %8llu  %8llu  %9llu  %8llu  %8llu\n",
	       (unsigned long long)(written / KIB), (unsigned long long)(st.charged_bytes / KIB),
	       (unsigned long long)(st.dirty_bytes / KIB),
	       (unsigned long long)(st.writeback_bytes / KIB),
	       (unsigned long long)(st.unstable_bytes / KIB),
	       (unsigned long long)(st.clean_bytes / KIB));
}

/* Copies COPY_BYTES; returns 0 when done, 2 when stopped by ENOMEM. */
static int run(bool patched)
{
	struct us_engine_options opts;
	struct us_backend_ops ops = { .size = sizeof(ops) };
	struct us_domain_stats st = { .size = sizeof(st) };
	struct server srv = { 0 };
	us_engine *e;
	us_domain *d;
	us_object *o;
	uint64_t off = 0, now = 0, next, pause;
	unsigned waits = 0;
	int rc;

	us_engine_options_init(&opts);
	opts.clock = US_CLOCK_VIRTUAL;
	ops.flush = server_flush;
	ops.commit = server_commit;
	if (us_engine_create(&opts, &e) || us_domain_create(e, NULL, "writer", 0, &d) ||
	    us_domain_set_limit(d, US_LIMIT_MAX, LIMIT_BYTES) ||
	    us_engine_set_param(e, US_PARAM_FORCE_COMMIT, patched) ||
	    us_backend_create(e, &ops, &srv, &srv.backend) ||
	    us_object_create(srv.backend, d, NULL, &o)) {
		fprintf(stderr, "demo: setup failed\n");
		return 1;
	}

	printf("\n%s: copy %llu MiB through a %llu MiB domain, server journal %llu MiB\n",
	       patched ? "unstable (the library's policy)" :
			 "unpatched (no forced commit, no throttling on unstable)",
	       (unsigned long long)(COPY_BYTES / MIB), (unsigned long long)(LIMIT_BYTES / MIB),
	       (unsigned long long)(JOURNAL_BYTES / MIB));
	printf("  %10s  %8s  %8s  %9s  %8s  %8s   (KiB)\n", "written", "charged", "dirty",
	       "writeback", "unstable", "clean");

	while (off < COPY_BYTES) {
		us_buf *b;

		us_engine_poll(e, now, &next);
		rc = us_buf_get(o, off, BUF_BYTES, US_GET_NOWAIT, &b);
		if (rc == -EAGAIN) {
			/* Reclaim is writing back and committing: retry later. */
			waits++;
			us_object_reclaim(o, BUF_BYTES, &pause);
			now += pause ? pause : 1000000;
			continue;
		}
		if (rc == -ENOMEM) {
			printf("  ENOMEM at %llu KiB after %.1f s: the domain is full of unstable "
			       "buffers that only a commit can free\n",
			       (unsigned long long)(off / KIB), (double)now / 1e9);
			row(d, off);
			break;
		}
		if (rc < 0) {
			fprintf(stderr, "demo: us_buf_get: %s\n", us_strerror(rc));
			return 1;
		}
		memset(us_buf_data(b), 'u', BUF_BYTES);
		rc = us_buf_dirty(b, &pause);
		us_buf_put(b);
		off += BUF_BYTES;
		now += 1000000; /* 1 ms per buffer */
		if (patched) {
			now += pause;
			while (rc == US_DIRTY_OVER_LIMIT &&
			       (rc = us_object_balance(o, &pause)) == -EAGAIN) {
				now += pause;
				us_engine_poll(e, now, &next);
			}
		}
		if (off % (4 * MIB) == 0)
			row(d, off);
	}

	us_domain_stats(d, &st);
	printf("  peak charged %llu KiB of max %llu KiB; %u charges waited for reclaim; "
	       "%llu evictions; %llu commits; %llu KiB reached the server; %.2f s\n",
	       (unsigned long long)(st.peak_charged_bytes / KIB),
	       (unsigned long long)(LIMIT_BYTES / KIB), waits, (unsigned long long)st.evictions,
	       (unsigned long long)srv.commits, (unsigned long long)(srv.stored / KIB),
	       (double)now / 1e9);
	if (st.peak_charged_bytes > LIMIT_BYTES) {
		fprintf(stderr, "demo: the limit was crossed\n");
		return 1;
	}

	/* Shut down: write back and commit what is left, then destroy. */
	while ((rc = us_engine_shutdown(e)) == -EBUSY) {
		now += 1000000;
		us_engine_poll(e, now, &next);
	}
	if (rc) {
		fprintf(stderr, "demo: us_engine_shutdown: %s\n", us_strerror(rc));
		return 1;
	}
	return off < COPY_BYTES ? 2 : 0;
}

int main(void)
{
	int without, with;

	printf("unstable %s demo\n", us_version());
	without = run(false);
	with = run(true);
	if (without == 1 || with != 0) {
		fprintf(stderr, "demo: unexpected result (%d, %d)\n", without, with);
		return 1;
	}
	printf("\nUnpatched, the writer hit ENOMEM with its limit full of unstable data;\n"
	       "with the library's policy it copied everything and never passed its max.\n");
	return 0;
}
