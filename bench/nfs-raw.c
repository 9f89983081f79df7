/*
 * nfs-raw: the NFSv3 server's ceiling for one client stream on this
 * machine, with no cache and no engine in the way.
 *
 *   us-bench-nfs-raw [--size BYTES] [--block BYTES] [--inflight K] [--stable] URL
 *   us-bench-nfs-raw --remove URL
 *
 * URL names the file to (re)create, in libnfs form:
 * nfs://127.0.0.1/EXPORT/FILE?nfsport=P&mountport=Q&version=3.
 *
 * Default mode: the file is created (truncated), then SIZE bytes are
 * streamed as WRITE3 with stable = UNSTABLE, BLOCK bytes each, at most K
 * RPCs in flight on the one connection (libnfs's raw asynchronous API
 * driven by a poll() loop), then one COMMIT3 covers the whole file. Every
 * reply's write verifier must equal the first one: a change means the
 * server restarted and dropped uncommitted data, and is reported (exit 3).
 *
 * The defaults (256 KiB, 16 in flight) were the best of 1 MiB and 256 KiB
 * by 2 to 32 in flight against ganesha 4.3 on the 2-core test machine.
 *
 * --stable: the cacheless client's way: FILE_SYNC writes, one at a time
 * (K is forced to 1), no COMMIT.
 *
 * --remove: removes the file with REMOVE3 and writes nothing. Benchmarks
 * remove their files through the server, not in the exported directory:
 * ganesha keeps a file it has written open, and a file removed behind its
 * back stays open, its blocks and page cache with it, for as long as the
 * server runs (1 GiB a run; every run after the first then cost ganesha
 * 3 to 5 times the CPU).
 *
 * Prints one JSON line: bytes, seconds (first WRITE to the COMMIT reply),
 * mb_s (bytes / seconds / 1e6, dd's units), the write phase alone, the
 * COMMIT's duration, the verifier checks and the last verifier (hex).
 *
 * Exit: 0 ok, 1 an NFS or RPC error, 2 bad arguments, 3 a verifier change.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/*
 * libnfs 4.0 declares struct nfs_fh (what nfs_get_fh() returns) in a
 * private header only; its layout is { int len; char *val; }. The length
 * is checked against NFS3's limit before use.
 */
struct us_nfs_fh_view {
	int len;
	char *val;
};

#define NFS3_FH_MAX 64

struct stream {
	struct rpc_context *rpc;
	nfs_fh3 fh;
	char *block;
	uint64_t size;     /* bytes to write */
	uint32_t block_bytes;
	unsigned inflight_max;
	bool stable;

	uint64_t next_off;   /* next offset to send */
	uint64_t acked;      /* bytes acknowledged */
	unsigned inflight;
	bool failed;
	bool commit_done;

	char verf[NFS3_WRITEVERFSIZE];
	bool have_verf;
	uint64_t verf_checks;
	uint64_t verf_changes;
	uint64_t replies_stable;  /* WRITE replies committed FILE_SYNC/DATA_SYNC */
	uint64_t replies_unstable;
	uint64_t short_writes;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check_verf(struct stream *s, const char *verf)
{
	s->verf_checks++;
	if (!s->have_verf) {
		memcpy(s->verf, verf, sizeof(s->verf));
		s->have_verf = true;
	} else if (memcmp(s->verf, verf, sizeof(s->verf)) != 0) {
		s->verf_changes++;
		memcpy(s->verf, verf, sizeof(s->verf));
	}
}

/* An offset the reply belongs to travels as the private pointer's target. */
struct wreq {
	struct stream *s;
	uint64_t off;
	uint32_t len;
};

static void write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct wreq *w = priv;
	struct stream *s = w->s;
	WRITE3res *res = data;

	(void)rpc;
	s->inflight--;
	if (status != RPC_STATUS_SUCCESS) {
		fprintf(stderr, "nfs-raw: WRITE3 at %" PRIu64 ": %s\n", w->off,
			status == RPC_STATUS_ERROR && data ? (const char *)data : "cancelled");
		s->failed = true;
	} else if (res->status != NFS3_OK) {
		fprintf(stderr, "nfs-raw: WRITE3 at %" PRIu64 ": NFS3 status %d\n", w->off,
			(int)res->status);
		s->failed = true;
	} else {
		WRITE3resok *ok = &res->WRITE3res_u.resok;

		if (ok->count < w->len) {
			/* A short write: not expected from ganesha at our sizes. */
			s->short_writes++;
			s->failed = true;
			fprintf(stderr, "nfs-raw: short WRITE3 at %" PRIu64 ": %u of %u\n",
				w->off, (unsigned)ok->count, (unsigned)w->len);
		}
		if (ok->committed == UNSTABLE)
			s->replies_unstable++;
		else
			s->replies_stable++;
		check_verf(s, ok->verf);
		s->acked += ok->count;
	}
	free(w);
}

static void commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct stream *s = priv;
	COMMIT3res *res = data;

	(void)rpc;
	s->inflight--;
	s->commit_done = true;
	if (status != RPC_STATUS_SUCCESS) {
		fprintf(stderr, "nfs-raw: COMMIT3: %s\n",
			status == RPC_STATUS_ERROR && data ? (const char *)data : "cancelled");
		s->failed = true;
	} else if (res->status != NFS3_OK) {
		fprintf(stderr, "nfs-raw: COMMIT3: NFS3 status %d\n", (int)res->status);
		s->failed = true;
	} else {
		check_verf(s, res->COMMIT3res_u.resok.verf);
	}
}

static int send_write(struct stream *s)
{
	struct wreq *w = malloc(sizeof(*w));
	WRITE3args args;
	uint64_t left = s->size - s->next_off;

	if (!w)
		return -ENOMEM;
	w->s = s;
	w->off = s->next_off;
	w->len = left < s->block_bytes ? (uint32_t)left : s->block_bytes;
	memset(&args, 0, sizeof(args));
	args.file = s->fh;
	args.offset = w->off;
	args.count = w->len;
	args.stable = s->stable ? FILE_SYNC : UNSTABLE;
	args.data.data_len = w->len;
	args.data.data_val = s->block;
	if (rpc_nfs3_write_async(s->rpc, write_cb, &args, w) != 0) {
		fprintf(stderr, "nfs-raw: cannot queue WRITE3: %s\n", rpc_get_error(s->rpc));
		free(w);
		return -EIO;
	}
	s->inflight++;
	s->next_off += w->len;
	return 0;
}

static int send_commit(struct stream *s)
{
	COMMIT3args args;

	memset(&args, 0, sizeof(args));
	args.file = s->fh;
	args.offset = 0;
	args.count = 0; /* to the end of the file */
	if (rpc_nfs3_commit_async(s->rpc, commit_cb, &args, s) != 0) {
		fprintf(stderr, "nfs-raw: cannot queue COMMIT3: %s\n", rpc_get_error(s->rpc));
		return -EIO;
	}
	s->inflight++;
	return 0;
}

/* One turn of the event loop: waits for the socket, services it. */
static int service(struct stream *s, double *idle_since)
{
	struct pollfd pfd = {
		.fd = rpc_get_fd(s->rpc),
		.events = (short)rpc_which_events(s->rpc),
	};
	int n = poll(&pfd, 1, 100);

	if (n < 0) {
		if (errno == EINTR)
			return 0;
		perror("nfs-raw: poll");
		return -EIO;
	}
	/* With nothing ready, still service: libnfs runs its timeouts there. */
	if (rpc_service(s->rpc, n > 0 ? pfd.revents : 0) < 0) {
		fprintf(stderr, "nfs-raw: RPC: %s\n", rpc_get_error(s->rpc));
		return -EIO;
	}
	if (n > 0)
		*idle_since = now_s();
	else if (now_s() - *idle_since > 60) {
		fprintf(stderr, "nfs-raw: no reply from the server for 60 s\n");
		return -ETIMEDOUT;
	}
	return 0;
}

static int parse_bytes(const char *arg, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!arg[0] || arg[0] == '-')
		return -EINVAL;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: us-bench-nfs-raw [--size BYTES] [--block BYTES] [--inflight K] "
		   "[--stable] nfs://SERVER/EXPORT/FILE?ARGS\n"
		   "       us-bench-nfs-raw --remove nfs://SERVER/EXPORT/FILE?ARGS\n"
		   "  --size     bytes to write (default 1G; K, M, G suffixes)\n"
		   "  --block    bytes per WRITE3 (default 256K, at most the server's wtmax)\n"
		   "  --inflight WRITE3 RPCs in flight at most (default 16)\n"
		   "  --stable   FILE_SYNC writes one at a time, no COMMIT\n"
		   "  --remove   remove the file (REMOVE3) instead, write nothing\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "block", required_argument, NULL, 'b' },
		{ "inflight", required_argument, NULL, 'k' },
		{ "stable", no_argument, NULL, 'S' },
		{ "remove", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct stream s;
	uint64_t size = 1ull << 30, block = 256u << 10, inflight = 16;
	bool stable = false, remove = false, write_opts = false;
	struct nfs_context *nfs;
	struct nfs_url *url;
	struct nfsfh *fh = NULL;
	const struct us_nfs_fh_view *raw;
	char verf_hex[2 * NFS3_WRITEVERFSIZE + 1];
	double t0, t_writes, t_end, idle;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "s:b:k:SRh", opts, NULL)) != -1) {
		write_opts |= c == 's' || c == 'b' || c == 'k' || c == 'S';
		switch (c) {
		case 's':
			if (parse_bytes(optarg, &size) || size == 0)
				goto bad;
			break;
		case 'b':
			if (parse_bytes(optarg, &block) || block == 0 || block > (64u << 20))
				goto bad;
			break;
		case 'k':
			if (parse_bytes(optarg, &inflight) || inflight == 0 || inflight > 4096)
				goto bad;
			break;
		case 'S':
			stable = true;
			break;
		case 'R':
			remove = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc - 1 || (remove && write_opts))
		goto bad;
	if (stable)
		inflight = 1;
	memset(&s, 0, sizeof(s));

	nfs = nfs_init_context();
	if (!nfs) {
		fprintf(stderr, "nfs-raw: cannot create an NFS context\n");
		return 1;
	}
	url = nfs_parse_url_full(nfs, argv[optind]);
	if (!url) {
		fprintf(stderr, "nfs-raw: %s: %s\n", argv[optind], nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return 2;
	}
	if (nfs_mount(nfs, url->server, url->path) != 0) {
		fprintf(stderr, "nfs-raw: mount %s:%s: %s\n", url->server, url->path,
			nfs_get_error(nfs));
		goto out;
	}
	if (remove) {
		if (nfs_unlink(nfs, url->file) != 0)
			fprintf(stderr, "nfs-raw: remove %s: %s\n", url->file, nfs_get_error(nfs));
		else
			rc = 0;
		goto out;
	}
	if (nfs_create(nfs, url->file, O_WRONLY | O_CREAT | O_TRUNC, 0644, &fh) != 0) {
		fprintf(stderr, "nfs-raw: create %s: %s\n", url->file, nfs_get_error(nfs));
		goto out;
	}
	raw = (const struct us_nfs_fh_view *)nfs_get_fh(fh);
	if (!raw || raw->len <= 0 || raw->len > NFS3_FH_MAX || !raw->val) {
		fprintf(stderr, "nfs-raw: unexpected file handle from libnfs "
				"(not libnfs 4.0's layout?)\n");
		goto out;
	}
	if (block > nfs_get_writemax(nfs))
		block = nfs_get_writemax(nfs);

	s.rpc = nfs_get_rpc_context(nfs);
	s.fh.data.data_len = (u_int)raw->len;
	s.fh.data.data_val = raw->val;
	s.size = size;
	s.block_bytes = (uint32_t)block;
	s.inflight_max = (unsigned)inflight;
	s.stable = stable;
	s.block = malloc(block);
	if (!s.block) {
		perror("nfs-raw");
		goto out;
	}
	/* Incompressible, as dd's source of random data. */
	srandom(1);
	for (uint64_t i = 0; i < block; i++)
		s.block[i] = (char)(random() >> 7);

	t0 = now_s();
	idle = t0;
	while (!s.failed && s.acked < s.size) {
		while (!s.failed && s.next_off < s.size && s.inflight < s.inflight_max)
			if (send_write(&s) != 0)
				s.failed = true;
		if (s.failed || service(&s, &idle) != 0)
			break;
	}
	while (s.inflight > 0 && service(&s, &idle) == 0)
		;
	t_writes = now_s();
	if (!s.failed && s.acked == s.size && !stable) {
		if (send_commit(&s) != 0)
			s.failed = true;
		while (!s.failed && !s.commit_done && service(&s, &idle) == 0)
			;
	}
	t_end = now_s();
	for (size_t i = 0; i < sizeof(s.verf); i++)
		snprintf(verf_hex + 2 * i, 3, "%02x", (unsigned char)s.verf[i]);
	if (s.failed || s.acked != s.size || (!stable && !s.commit_done))
		goto out;

	printf("{\"mode\": \"%s\", \"bytes\": %" PRIu64 ", \"block\": %" PRIu64
	       ", \"inflight\": %" PRIu64 ", \"seconds\": %.3f, \"mb_s\": %.1f"
	       ", \"write_mb_s\": %.1f, \"commit_ms\": %.1f, \"replies_unstable\": %" PRIu64
	       ", \"replies_stable\": %" PRIu64 ", \"verifier_checks\": %" PRIu64
	       ", \"verifier_changes\": %" PRIu64 ", \"verifier\": \"%s\"}\n",
	       stable ? "file_sync" : "unstable", size, block, inflight, t_end - t0,
	       (double)size / (t_end - t0) / 1e6, (double)size / (t_writes - t0) / 1e6,
	       (t_end - t_writes) * 1e3, s.replies_unstable, s.replies_stable,
	       s.verf_checks, s.verf_changes, verf_hex);
	rc = s.verf_changes ? 3 : 0;
	if (s.verf_changes)
		fprintf(stderr, "nfs-raw: the write verifier changed %" PRIu64
				" times: the server restarted\n", s.verf_changes);
out:
	if (fh)
		nfs_close(nfs, fh);
	nfs_destroy_url(url);
	/* Last: RPCs still queued (after an error) are cancelled here. */
	nfs_destroy_context(nfs);
	free(s.block);
	return rc;
bad:
	usage(stderr);
	return 2;
}
