/*
 * stored: a storage daemon in miniature that vendors unstable.
 *
 * Built by the plain Makefile beside it, which compiles every lib/ source
 * into the program: no CMake, no pkg-config, no jemalloc. The engine's memory
 * comes from the daemon's own allocator through the allocator hooks: a
 * budgeted allocator that refuses past its budget, as a daemon with a fixed
 * memory reservation would.
 *
 * Two tenants (domains of 8 and 16 MiB under a 32 MiB root) each get two
 * client threads writing 64 MiB into their own file of a data directory,
 * in 64 KiB chunks. The engine runs in threaded mode: its flusher threads
 * call the daemon's flush (pwrite, acknowledged unstable with a sequence
 * number) and commit (fdatasync, then commit_done). At the end every file
 * is synced, the engine shut down, and every byte read back and compared.
 *
 *   make && ./stored [DATA_DIR]
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <unstable/unstable.h>

#define MIB	     (1024u * 1024u)
#define CHUNK	     (64u * 1024u)
#define PER_THREAD   (32ull * MIB) /* two threads: 64 MiB per tenant */
#define BUDGET_BYTES (40ull * MIB) /* the daemon's reservation: root max + records */

/* The daemon's allocator: a byte budget over the C allocator. */
struct pool {
	_Atomic uint64_t used, peak, refused;
	uint64_t budget;
};

static void *pool_alloc(void *ctx, size_t size, enum us_alloc_kind kind)
{
	struct pool *p = ctx;
	uint64_t used = atomic_fetch_add(&p->used, size) + size, peak;
	void *m;

	if (used > p->budget) {
		atomic_fetch_sub(&p->used, size);
		atomic_fetch_add(&p->refused, 1);
		return NULL;
	}
	peak = atomic_load(&p->peak);
	while (used > peak && !atomic_compare_exchange_weak(&p->peak, &peak, used))
		;
	/* Payloads page-aligned, ready for O_DIRECT; records as malloc gives. */
	if (kind == US_ALLOC_PAYLOAD && size % 4096 == 0)
		m = aligned_alloc(4096, size);
	else
		m = malloc(size);
	if (!m)
		atomic_fetch_sub(&p->used, size);
	return m;
}

static void pool_free(void *ctx, void *ptr, size_t size, enum us_alloc_kind kind)
{
	struct pool *p = ctx;

	(void)kind;
	free(ptr);
	atomic_fetch_sub(&p->used, size);
}

/* The disk: one file per object; the object's user pointer is its fd. */
struct disk {
	_Atomic uint64_t seq, writes, commits;
};

static int fd_of(us_object *o)
{
	return (int)(intptr_t)us_object_user(o);
}

static int disk_flush(void *ctx, us_object *o, us_buf *const *bufs, size_t n, uint64_t off,
		      uint64_t len, enum us_reason reason)
{
	struct disk *d = ctx;
	uint64_t seq;
	size_t i;

	(void)len;
	(void)reason;
	(void)off;
	for (i = 0; i < n; i++) {
		uint64_t l = us_buf_length(bufs[i]), done = 0;
		const char *p = us_buf_data(bufs[i]);

		while (done < l) {
			ssize_t w = pwrite(fd_of(o), p + done, l - done,
					   (off_t)(us_buf_offset(bufs[i]) + done));
			int err = w < 0 ? -errno : -ENOSPC;

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				/* Transient for the whole run (none of it
				 * is reported yet): the engine keeps the data
				 * and retries with backoff. */
				for (i = 0; i < n; i++)
					us_buf_write_done(bufs[i], US_WRITE_ERROR, 0, err);
				return 0;
			}
			done += (uint64_t)w;
		}
	}
	/* In the file, not durable: unstable until an fdatasync. */
	seq = atomic_fetch_add(&d->seq, 1) + 1;
	for (i = 0; i < n; i++)
		us_buf_write_done(bufs[i], US_WRITE_UNSTABLE, seq, 0);
	atomic_fetch_add(&d->writes, 1);
	return 0;
}

static int disk_commit(void *ctx, us_object *o, enum us_reason reason)
{
	struct disk *d = ctx;
	/* Every write acknowledged before this point is covered. */
	uint64_t seq = atomic_load(&d->seq);

	(void)reason;
	if (fdatasync(fd_of(o)) != 0) {
		int err = -errno;

		/* The kernel may have dropped the failed pages: rewrite every
		 * unstable buffer from the cache rather than retry the sync. */
		us_backend_commit_lost(us_object_backend(o));
		return err;
	}
	atomic_fetch_add(&d->commits, 1);
	return us_object_commit_done(o, seq) < 0 ? -EIO : 0;
}

static unsigned char pattern(int file, uint64_t off)
{
	return (unsigned char)(file * 37 + off / CHUNK * 11 + off % 251);
}

struct client {
	us_object *o;
	int file;
	uint64_t start; /* this thread's half of the file */
	int err;
};

static void *client_run(void *arg)
{
	struct client *c = arg;
	uint64_t off;

	for (off = c->start; off < c->start + PER_THREAD; off += CHUNK) {
		unsigned char *p;
		us_buf *b;
		uint64_t i;
		int rc = us_buf_get(c->o, off, CHUNK, 0, &b); /* blocks for memory */

		if (rc < 0) {
			c->err = rc;
			return NULL;
		}
		p = us_buf_data(b);
		for (i = 0; i < CHUNK; i++)
			p[i] = pattern(c->file, off + i);
		us_buf_dirty(b, NULL); /* throttled here, smoothly */
		us_buf_put(b);
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int verify(int fd, int file, uint64_t size)
{
	static unsigned char buf[CHUNK];
	uint64_t off, i;

	for (off = 0; off < size; off += CHUNK) {
		if (pread(fd, buf, CHUNK, (off_t)off) != (ssize_t)CHUNK)
			return -1;
		for (i = 0; i < CHUNK; i++)
			if (buf[i] != pattern(file, off + i))
				return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *names[] = { "tenant-a", "tenant-b" };
	static const uint64_t maxes[] = { 8ull * MIB, 16ull * MIB };
	char tmpl[] = "/tmp/stored.XXXXXX", path[4200];
	const char *dir = argc > 1 ? argv[1] : mkdtemp(tmpl);
	struct pool pool = { .budget = BUDGET_BYTES };
	struct us_alloc_hooks hooks = { pool_alloc, pool_free, &pool };
	struct us_backend_ops ops = { .size = sizeof(ops),
				      .flush = disk_flush,
				      .commit = disk_commit };
	struct us_engine_options opts;
	struct disk disk = { 0 };
	struct client cl[4];
	pthread_t th[4];
	us_domain *dom[2];
	us_object *obj[2];
	int fd[2], i, rc, bad = 0;
	us_backend *bk;
	us_engine *e;
	double t0, t1;

	if (!dir || (argc > 1 && mkdir(dir, 0755) != 0 && errno != EEXIST)) {
		fprintf(stderr, "stored: cannot make the data directory\n");
		return 2;
	}
	us_engine_options_init(&opts);
	opts.memory_bytes = 32ull * MIB;
	opts.alloc = &hooks;
	opts.flusher_threads = 2;
	if ((rc = us_engine_create(&opts, &e)) != 0 ||
	    (rc = us_backend_create(e, &ops, &disk, &bk)) != 0) {
		fprintf(stderr, "stored: engine: %s\n", us_strerror(rc));
		return 1;
	}
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s.dat", dir, names[i]);
		fd[i] = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd[i] < 0 || (rc = us_domain_create(e, NULL, names[i], 0, &dom[i])) != 0 ||
		    (rc = us_domain_set_limit(dom[i], US_LIMIT_MAX, maxes[i])) != 0 ||
		    (rc = us_object_create(bk, dom[i], (void *)(intptr_t)fd[i], &obj[i])) != 0) {
			fprintf(stderr, "stored: %s: %s\n", names[i], us_strerror(rc));
			return 1;
		}
	}
	t0 = now_s();
	for (i = 0; i < 4; i++) {
		cl[i] = (struct client){ obj[i / 2], i / 2, (uint64_t)(i % 2) * PER_THREAD, 0 };
		pthread_create(&th[i], NULL, client_run, &cl[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		if (cl[i].err) {
			fprintf(stderr, "stored: client %d: %s\n", i, us_strerror(cl[i].err));
			bad = 1;
		}
	}
	for (i = 0; i < 2; i++) {
		uint64_t since = 0; /* see every error since the object began */

		if ((rc = us_object_sync(obj[i], &since)) != 0) {
			fprintf(stderr, "stored: sync %s: %s\n", names[i], us_strerror(rc));
			bad = 1;
		}
	}
	t1 = now_s();
	for (i = 0; i < 2; i++) {
		struct us_domain_stats st = { .size = sizeof(st) };

		us_domain_stats(dom[i], &st);
		printf("stored: %s: %llu MiB durable in %.2f s, peak charged %.1f of %.0f MiB\n",
		       names[i], (unsigned long long)(2 * PER_THREAD / MIB), t1 - t0,
		       (double)st.peak_charged_bytes / MIB, (double)maxes[i] / MIB);
		if (st.peak_charged_bytes > maxes[i])
			bad = 1;
	}
	/* Writes back and commits whatever is left, then destroys the engine. */
	if ((rc = us_engine_shutdown(e)) != 0) {
		fprintf(stderr, "stored: shutdown: %s\n", us_strerror(rc));
		bad = 1;
	}
	for (i = 0; i < 2; i++) {
		if (verify(fd[i], i, 2 * PER_THREAD) != 0) {
			fprintf(stderr, "stored: %s differs from what was written\n", names[i]);
			bad = 1;
		}
		close(fd[i]);
		snprintf(path, sizeof(path), "%s/%s.dat", dir, names[i]);
		if (argc <= 1)
			unlink(path);
	}
	if (argc <= 1)
		rmdir(dir);
	printf("stored: %llu writes, %llu commits; allocator peak %.1f of %.0f MiB budget, "
	       "%llu refused; %s\n",
	       (unsigned long long)disk.writes, (unsigned long long)disk.commits,
	       (double)pool.peak / MIB, (double)BUDGET_BYTES / MIB,
	       (unsigned long long)pool.refused, bad ? "FAILED" : "ok");
	return bad;
}
