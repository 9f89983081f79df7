/*
 * libFuzzer target: the NFS backend's replies
 * (examples/fuse/rpc_reply.c). The input's first byte sets a piece size;
 * the rest is a byte stream as the server's socket gives it. It is fed to
 * the record reader whole, then in pieces of that size (unused bytes kept
 * and given again, as nfs/conn.c does): both must hand over the same
 * records, and stop at the same point when the stream is bad. Each record
 * is decoded as a WRITE3 reply, which must return 0, -EBADMSG or -EPROTO,
 * and never a committed value past FILE_SYNC, and as any reply's status,
 * which must agree with the WRITE3 decoding when that one parsed.
 * Violations abort.
 *
 * Built with -DUS_FUZZ_REPLAY (any compiler): a main() that runs the files
 * named, or every file of the directories named (the corpus,
 * tests/corpus/fuzz_rpc, as the test fuzz_rpc_corpus).
 *
 * SPDX-License-Identifier: MIT
 */
#include "rpc_reply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEEN 4096

struct seen {
	uint64_t hash[MAX_SEEN];
	int n;
};

static int take(void *ctx, const uint8_t *p, size_t n)
{
	struct seen *s = ctx;
	struct ufs_write_reply w;
	uint64_t h = 1469598103934665603ull ^ n;
	int rc = ufs_rpc_write_reply(p, n, &w);

	if (rc != 0 && rc != -EBADMSG && rc != -EPROTO)
		abort();
	if (rc == 0 && !w.denied && w.accept_stat == 0 && w.nfsstat == 0 && w.committed > 2)
		abort();
	/* The status decoder reads a prefix of what the WRITE3 decoder does. */
	{
		struct ufs_nfs_status st;
		int src = ufs_rpc_status_reply(p, n, &st);

		if (src != 0 && src != -EBADMSG && src != -EPROTO)
			abort();
		if (rc == 0 && (src != 0 || st.xid != w.xid || st.denied != w.denied ||
				st.accept_stat != w.accept_stat || st.nfsstat != w.nfsstat))
			abort();
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	if (s->n < MAX_SEEN)
		s->hash[s->n] = h ^ (uint64_t)(rc & 0xff);
	s->n++;
	return rc == -EBADMSG; /* the backend drops the connection there */
}

static struct ufs_rpc_record rec;
static uint8_t buf[UFS_RPC_RECORD_MAX + 4];

/* Feeds the stream in pieces of step bytes; the bytes left unused, or -1
 * for a stream found bad. */
static long feed(const uint8_t *d, size_t n, size_t step, struct seen *s)
{
	size_t have = 0, at = 0;

	rec.len = 0;
	for (;;) {
		size_t room = sizeof(buf) - have, take_n = n - at < step ? n - at : step;
		ssize_t used;

		if (take_n > room)
			take_n = room;
		memcpy(buf + have, d + at, take_n);
		have += take_n;
		at += take_n;
		used = ufs_rpc_records(&rec, buf, have, take, s);
		if (used < 0)
			return -1;
		if ((size_t)used > have)
			abort();
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
		if (at == n)
			return (long)have;
		if (!take_n)
			abort(); /* no room and nothing used: the buffer is too small */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seen whole, pieces;
	long a, b;

	if (size < 1)
		return 0;
	whole.n = pieces.n = 0;
	a = feed(data + 1, size - 1, size, &whole);
	b = feed(data + 1, size - 1, (size_t)data[0] + 1, &pieces);
	if (whole.n != pieces.n || (a < 0) != (b < 0))
		abort();
	for (int i = 0; i < whole.n && i < MAX_SEEN; i++)
		if (whole.hash[i] != pieces.hash[i])
			abort();
	return 0;
}

#ifdef US_FUZZ_REPLAY
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	static uint8_t in[1 << 20];
	size_t n;

	if (!fp) {
		perror(path);
		return -1;
	}
	n = fread(in, 1, sizeof(in), fp);
	fclose(fp);
	LLVMFuzzerTestOneInput(in, n);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *dir;
		struct dirent *e;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) != 0)
				return 1;
			files++;
			continue;
		}
		if (!(dir = opendir(argv[i])))
			return 1;
		while ((e = readdir(dir))) {
			char path[4096];

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
			if (run_file(path) != 0) {
				closedir(dir);
				return 1;
			}
			files++;
		}
		closedir(dir);
	}
	printf("fuzz_rpc: %d inputs, every one consistent\n", files);
	return files ? 0 : 1;
}
#endif
