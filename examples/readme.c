/* readme.c: the README's example, whole. The part between the README markers is the README's
 * code block, character for character once its tab is taken off (tests/readme.sh checks it);
 * around it, a server in memory that acknowledges writes at once as unstable and commits
 * when asked, and a check that the data ends durable. In ctest.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unstable/unstable.h>

static struct {
	uint64_t seq;
	unsigned char durable[128 << 10], received[128 << 10];
} srv;

/* flush: the server receives the run and acknowledges each buffer, not yet durable. */
static int my_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t off,
		    uint64_t len, enum us_reason why)
{
	(void)ctx, (void)obj, (void)off, (void)len, (void)why;
	for (size_t i = 0; i < n; i++) {
		memcpy(srv.received + us_buf_offset(bufs[i]), us_buf_data(bufs[i]),
		       us_buf_length(bufs[i]));
		/* acknowledged, not durable: UNSTABLE, with the server's sequence number */
		us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, ++srv.seq, 0);
	}
	return 0;
}

/* commit: the server makes everything it received durable, then says so. */
static int my_commit(void *ctx, us_object *obj, enum us_reason why)
{
	(void)ctx, (void)obj, (void)why;
	memcpy(srv.durable, srv.received, sizeof(srv.durable));
	us_object_commit_done(obj, srv.seq); /* its UNSTABLE buffers with seq <= it: CLEAN */
	return 0;
}

static int example(const unsigned char *data)
{
	/* README: begin */
	struct us_engine_options opts;
	/* a sized struct: it grows without breaking the ABI */
	us_engine_options_init(&opts);
	opts.memory_bytes = 8ull << 30; /* the root domain's max (default: physical memory) */
	us_engine *e;
	if (us_engine_create(&opts, &e) < 0) /* polled mode: the host calls us_engine_poll() */
		return -1;

	us_domain *tenant; /* a node of the accounting tree, like a memory cgroup */
	us_domain_create(e, NULL, "tenant", 0, &tenant);
	us_domain_set_limit(tenant, US_LIMIT_MAX, 1ull << 30); /* hard: never crossed */

	struct us_backend_ops ops = { .size = sizeof(ops), .flush = my_flush, .commit = my_commit };
	us_backend *server; /* where data goes: the callbacks above */
	us_backend_create(e, &ops, NULL, &server);
	us_object *file; /* one per file, charged to a domain */
	us_object_create(server, tenant, NULL, &file);

	us_buf *b; /* gets or creates [offset, offset + length), charged to the domain */
	int rc = us_buf_get(file, 0, 128 << 10, US_GET_NOWAIT, &b);
	if (rc < 0) /* -EAGAIN: the domain is full and reclaim started: poll, then try again */
		return rc;
	memcpy(us_buf_data(b), data, 128 << 10);
	uint64_t pause_ns;
	/* pause_ns: the writer's throttle pause */
	rc = us_buf_dirty(b, &pause_ns);
	us_buf_put(b); /* from here on, b is not ours to use */
	uint64_t next_ns;
	if (rc == US_DIRTY_OVER_LIMIT) /* at the dirty limit: wait until it lets us go on */
		while (us_object_balance(file, &pause_ns) == -EAGAIN)
			us_engine_poll(e, 0, &next_ns);
	us_engine_poll(e, 0, &next_ns); /* writes back and commits what is due; call again then */

	us_sync *s; /* fsync(): polled, a sync is stepped by the polls */
	if ((rc = us_object_sync_start(file, NULL, NULL, &s)) < 0)
		return rc;
	while (us_sync_done(s) == 0)
		us_engine_poll(e, 0, &next_ns);
	us_sync_free(s);
	while ((rc = us_engine_shutdown(e)) == -EBUSY) /* polled: poll, and call again */
		us_engine_poll(e, 0, &next_ns);
	/* README: end */
	return rc;
}

int main(void)
{
	static unsigned char data[128 << 10];
	int rc;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 31 + 7);
	rc = example(data);
	if (rc < 0) {
		fprintf(stderr, "readme: %s\n", us_strerror(rc));
		return 1;
	}
	if (memcmp(srv.durable, data, sizeof(data)) != 0) {
		fprintf(stderr,
			"readme: the server's durable copy differs from what was written\n");
		return 1;
	}
	printf("readme: 128 KiB written, acknowledged unstable, committed: durable on the server\n");
	return 0;
}
