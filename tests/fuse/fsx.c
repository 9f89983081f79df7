/*
 * fsx-style random operations on a few files in a directory (a FUSE mount
 * in tests/fuse/fsx.sh), every read checked against an in-memory model of
 * each file:
 *
 *   us-fuse-fsx DIR MODEL_DIR [-n OPS] [-s SEED] [-f FILES] [-l MAXLEN]
 *               [--corrupt-model]
 *
 * Operations, drawn from a seeded generator: pwrite, pread, reads and
 * writes through a MAP_SHARED mapping (writes made durable by msync),
 * ftruncate up and down, fsync, fdatasync, fstat (size), close and reopen.
 * A read is compared byte for byte with the model; at the end every file is
 * read whole and compared, then the model of file N is written to
 * MODEL_DIR/fsxN for the caller to compare with the backing files.
 *
 * The seed is printed first (and taken from -s): a failure reproduces with
 * the same seed and options. On a mismatch it prints the operation, the
 * first differing offset and the last operations, and exits 1.
 * --corrupt-model flips one byte of the model half-way through, to show
 * that the checks catch wrong data (the run must then fail).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FSX_MAX_FILES 16
#define FSX_LOG 32

struct fsx_file {
	char path[4096];
	int fd;
	uint8_t *model; /* MAXLEN bytes; [size, MAXLEN) is always zero */
	size_t size;
};

static struct {
	struct fsx_file f[FSX_MAX_FILES];
	int nfiles;
	size_t maxlen;
	uint64_t rng;
	unsigned long op;
	char log[FSX_LOG][160];
	uint8_t *buf;
	long pagesize;
	uint64_t seed;
} fsx;

static uint64_t rnd(void)
{
	/* xorshift64* */
	fsx.rng ^= fsx.rng >> 12;
	fsx.rng ^= fsx.rng << 25;
	fsx.rng ^= fsx.rng >> 27;
	return fsx.rng * 2685821657736338717ull;
}

static size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static void logop(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logop(const char *fmt, ...)
{
	va_list ap;
	char *s = fsx.log[fsx.op % FSX_LOG];
	int n = snprintf(s, sizeof(fsx.log[0]), "op %lu: ", fsx.op);

	va_start(ap, fmt);
	vsnprintf(s + n, sizeof(fsx.log[0]) - (size_t)n, fmt, ap);
	va_end(ap);
}

static void dump_log(void)
{
	unsigned long first = fsx.op >= FSX_LOG - 1 ? fsx.op - (FSX_LOG - 1) : 0;

	fprintf(stderr, "last operations:\n");
	for (unsigned long i = first; i <= fsx.op; i++)
		fprintf(stderr, "  %s\n", fsx.log[i % FSX_LOG]);
	fprintf(stderr, "reproduce with: -s %" PRIu64 "\n", fsx.seed);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL (seed %" PRIu64 ", op %lu): ", fsx.seed, fsx.op);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_log();
	exit(1);
}

/* Compares LEN bytes read at OFF of file F with the model. */
static void check(struct fsx_file *f, const uint8_t *got, size_t off, size_t len, const char *how)
{
	const uint8_t *want = f->model + off;

	if (memcmp(got, want, len) == 0)
		return;
	for (size_t i = 0; i < len; i++) {
		if (got[i] != want[i]) {
			size_t j = i;
			while (j < len && got[j] != want[j])
				j++;
			die("%s of %s [%zu, +%zu): byte %zu is 0x%02x, the model has 0x%02x "
			    "(%zu differing bytes from there; size %zu)",
			    how, f->path, off, len, off + i, got[i], want[i], j - i, f->size);
		}
	}
}

static void fsx_open(struct fsx_file *f)
{
	f->fd = open(f->path, O_RDWR | O_CREAT, 0644);
	if (f->fd < 0)
		die("open %s: %s", f->path, strerror(errno));
}

static void op_write(struct fsx_file *f)
{
	size_t off = rnd_below(fsx.maxlen), len;
	ssize_t n;

	/* Mostly small, sometimes up to 1 MiB (the mount's whole max). */
	len = rnd_below(8) ? 1 + rnd_below(64 << 10) : 1 + rnd_below(1 << 20);
	if (off + len > fsx.maxlen)
		len = fsx.maxlen - off;
	if (!len)
		return;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = rnd();
		memcpy(fsx.buf + i, &v, len - i < 8 ? len - i : 8);
	}
	logop("pwrite %s [%zu, +%zu) (size %zu)", f->path, off, len, f->size);
	n = pwrite(f->fd, fsx.buf, len, (off_t)off);
	if (n != (ssize_t)len)
		die("pwrite: %zd of %zu: %s", n, len, n < 0 ? strerror(errno) : "short");
	memcpy(f->model + off, fsx.buf, len);
	if (off + len > f->size)
		f->size = off + len;
}

static void op_read(struct fsx_file *f)
{
	size_t off = rnd_below(f->size + (64 << 10)), len = 1 + rnd_below(256 << 10), want;
	ssize_t n;

	if (off > fsx.maxlen)
		off = fsx.maxlen;
	if (off + len > fsx.maxlen)
		len = fsx.maxlen - off;
	want = off >= f->size ? 0 : (off + len > f->size ? f->size - off : len);
	logop("pread %s [%zu, +%zu) (size %zu)", f->path, off, len, f->size);
	n = pread(f->fd, fsx.buf, len, (off_t)off);
	if (n < 0)
		die("pread: %s", strerror(errno));
	if ((size_t)n != want)
		die("pread %s [%zu, +%zu): %zd bytes, the model has %zu (size %zu)", f->path, off,
		    len, n, want, f->size);
	check(f, fsx.buf, off, want, "pread");
}

static void op_truncate(struct fsx_file *f)
{
	size_t size = rnd_below(2) ? rnd_below(f->size + 1) : rnd_below(fsx.maxlen + 1);

	logop("ftruncate %s %zu -> %zu", f->path, f->size, size);
	if (ftruncate(f->fd, (off_t)size) < 0)
		die("ftruncate: %s", strerror(errno));
	if (size < f->size)
		memset(f->model + size, 0, f->size - size);
	f->size = size;
}

/* Maps [off, off + len) rounded to pages; returns the mapping and sets
 * *delta, the offset of OFF in it. */
static uint8_t *map(struct fsx_file *f, size_t off, size_t len, int prot, size_t *delta)
{
	size_t start = off - off % (size_t)fsx.pagesize;
	void *p;

	*delta = off - start;
	p = mmap(NULL, len + *delta, prot, MAP_SHARED, f->fd, (off_t)start);
	if (p == MAP_FAILED)
		die("mmap %s [%zu, +%zu): %s", f->path, start, len + *delta, strerror(errno));
	return p;
}

static void op_mapread(struct fsx_file *f)
{
	size_t off, len, delta;
	uint8_t *p;

	if (!f->size)
		return;
	off = rnd_below(f->size);
	len = 1 + rnd_below(f->size - off < (256 << 10) ? f->size - off : 256 << 10);
	logop("mapread %s [%zu, +%zu) (size %zu)", f->path, off, len, f->size);
	p = map(f, off, len, PROT_READ, &delta);
	check(f, p + delta, off, len, "mapped read");
	munmap(p, len + delta);
}

static void op_mapwrite(struct fsx_file *f)
{
	size_t off = rnd_below(fsx.maxlen), len = 1 + rnd_below(128 << 10), delta;
	uint8_t *p;

	if (off + len > fsx.maxlen)
		len = fsx.maxlen - off;
	if (!len)
		return;
	logop("mapwrite %s [%zu, +%zu) (size %zu)", f->path, off, len, f->size);
	if (off + len > f->size) {
		/* A mapping writes only within the file: grow it first. */
		if (ftruncate(f->fd, (off_t)(off + len)) < 0)
			die("ftruncate (mapwrite): %s", strerror(errno));
		f->size = off + len;
	}
	p = map(f, off, len, PROT_READ | PROT_WRITE, &delta);
	for (size_t i = 0; i < len; i++)
		p[delta + i] = (uint8_t)rnd();
	memcpy(f->model + off, p + delta, len);
	if (msync(p, len + delta, MS_SYNC) < 0)
		die("msync: %s", strerror(errno));
	munmap(p, len + delta);
}

static void op_stat(struct fsx_file *f)
{
	struct stat st;

	logop("fstat %s (size %zu)", f->path, f->size);
	if (fstat(f->fd, &st) < 0)
		die("fstat: %s", strerror(errno));
	if ((size_t)st.st_size != f->size)
		die("fstat %s: size %lld, the model has %zu", f->path, (long long)st.st_size, f->size);
}

static void op_sync(struct fsx_file *f)
{
	int data = (int)rnd_below(2);

	logop("%s %s", data ? "fdatasync" : "fsync", f->path);
	if ((data ? fdatasync(f->fd) : fsync(f->fd)) < 0)
		die("%s: %s", data ? "fdatasync" : "fsync", strerror(errno));
}

static void op_reopen(struct fsx_file *f)
{
	logop("close and reopen %s", f->path);
	if (close(f->fd) < 0)
		die("close: %s", strerror(errno));
	fsx_open(f);
}

static void check_whole(struct fsx_file *f)
{
	ssize_t n;

	fsx.op++;
	logop("read %s whole (size %zu)", f->path, f->size);
	n = pread(f->fd, fsx.buf, fsx.maxlen, 0);
	if (n != (ssize_t)f->size)
		die("read %s whole: %zd bytes, the model has %zu", f->path, n, f->size);
	check(f, fsx.buf, 0, f->size, "whole-file read");
}

static void usage(void)
{
	fprintf(stderr, "usage: us-fuse-fsx DIR MODEL_DIR [-n OPS] [-s SEED] [-f FILES] "
			"[-l MAXLEN] [--corrupt-model]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long ops = 10000, counts[8] = {0};
	const char *dir, *modeldir;
	int corrupt = 0;
	static const char *names[8] = {"pwrite",   "pread", "mapread", "mapwrite",
				       "truncate", "fstat", "sync",    "reopen"};

	if (argc < 3)
		usage();
	dir = argv[1];
	modeldir = argv[2];
	fsx.nfiles = 4;
	fsx.maxlen = 3 << 20;
	fsx.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--corrupt-model"))
			corrupt = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "-n"))
			ops = strtoul(argv[++i], NULL, 0);
		else if (i + 1 < argc && !strcmp(argv[i], "-s"))
			fsx.seed = strtoull(argv[++i], NULL, 0);
		else if (i + 1 < argc && !strcmp(argv[i], "-f"))
			fsx.nfiles = atoi(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "-l"))
			fsx.maxlen = strtoul(argv[++i], NULL, 0);
		else
			usage();
	}
	if (fsx.nfiles < 1 || fsx.nfiles > FSX_MAX_FILES || fsx.maxlen < 4096 || !fsx.seed)
		usage();
	printf("fsx: seed %" PRIu64 ", %lu operations on %d files of up to %zu bytes\n", fsx.seed,
	       ops, fsx.nfiles, fsx.maxlen);
	fflush(stdout);
	fsx.rng = fsx.seed;
	fsx.pagesize = sysconf(_SC_PAGESIZE);
	fsx.buf = malloc(fsx.maxlen + 8);
	if (!fsx.buf)
		die("out of memory");
	for (int i = 0; i < fsx.nfiles; i++) {
		struct fsx_file *f = &fsx.f[i];

		snprintf(f->path, sizeof(f->path), "%s/fsx%d", dir, i);
		f->model = calloc(1, fsx.maxlen);
		if (!f->model)
			die("out of memory");
		unlink(f->path);
		fsx_open(f);
	}

	for (fsx.op = 1; fsx.op <= ops; fsx.op++) {
		struct fsx_file *f = &fsx.f[rnd_below((size_t)fsx.nfiles)];
		unsigned r = (unsigned)rnd_below(100), k;

		/* Weights: pwrite 30, pread 25, mapread 10, mapwrite 10,
		 * truncate 8, fstat 8, sync 5, reopen 4. */
		k = r < 30 ? 0 : r < 55 ? 1 : r < 65 ? 2 : r < 75 ? 3 : r < 83 ? 4 : r < 91 ? 5 : r < 96 ? 6 : 7;
		counts[k]++;
		switch (k) {
		case 0: op_write(f); break;
		case 1: op_read(f); break;
		case 2: op_mapread(f); break;
		case 3: op_mapwrite(f); break;
		case 4: op_truncate(f); break;
		case 5: op_stat(f); break;
		case 6: op_sync(f); break;
		default: op_reopen(f); break;
		}
		if (corrupt && fsx.op == ops / 2) {
			/* The model is now wrong by one byte of live data. */
			for (int i = 0; i < fsx.nfiles; i++) {
				struct fsx_file *c = &fsx.f[(size_t)(f - fsx.f + i) % (size_t)fsx.nfiles];
				if (c->size) {
					c->model[rnd_below(c->size)] ^= 0x5a;
					fprintf(stderr, "fsx: corrupted the model of %s at op %lu\n",
						c->path, fsx.op);
					check_whole(c);
					break;
				}
			}
		}
	}
	fsx.op = ops;
	for (int i = 0; i < fsx.nfiles; i++)
		check_whole(&fsx.f[i]);
	for (int i = 0; i < fsx.nfiles; i++) {
		struct fsx_file *f = &fsx.f[i];
		char path[4096];
		FILE *out;

		if (close(f->fd) < 0)
			die("close %s: %s", f->path, strerror(errno));
		snprintf(path, sizeof(path), "%s/fsx%d", modeldir, i);
		out = fopen(path, "wb");
		if (!out || fwrite(f->model, 1, f->size, out) != f->size || fclose(out) != 0)
			die("writing the model %s", path);
	}
	printf("fsx: passed:");
	for (int k = 0; k < 8; k++)
		printf(" %s %lu", names[k], counts[k]);
	printf("\n");
	return 0;
}
