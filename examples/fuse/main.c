/*
 * unstable-fuse BACKING_DIR|nfs://SERVER/EXPORT[?ARGS] MOUNTPOINT [-f]
 *               [--max SIZE] [--domain-by cgroup|uid|none] [--cgroup-percent N]
 *               [--commit-interval TIME] [--dirty-expire TIME] [--stats FILE]
 *               [--flushers N]
 *               [--dirty-ratio N] [--dirty-max SIZE] [--chunk SIZE] [--clean-max SIZE]
 *               [--xattr] [--rpcs N] [--ns-conns N] [--attr-cache TIME] [--no-cache]
 *               [--kernel-writeback] [--no-hugepages]
 *               [--direct-writeback|--buffered-writeback] [--trust-backing] [-V] [-h]
 *               [FUSE options: -d, -s, -o opt,...]
 *
 * A passthrough filesystem over BACKING_DIR, or over an NFSv3 export (the
 * NFS backend, when built with libnfs), whose writes are cached, accounted
 * and written back by the unstable engine (see ufuse.h for the data path,
 * backend.h for the backends). Bad arguments, a backing directory or an
 * NFS server or export that cannot be reached: a message and exit status 2. -V prints the
 * version. Exit status 0 after an unmount (or SIGTERM, SIGINT, SIGHUP) that
 * wrote everything back, 1 otherwise.
 *
 * Unmounting (fusermount3 -u, umount, SIGINT, SIGTERM) writes back and
 * commits everything before the process exits: wait for it to exit before
 * reading the backing directory directly.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include "ufuse.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define UFS_DEFAULT_MAX	    ((uint64_t)256 << 20)
#define UFS_DEFAULT_COMMIT  5000000000ull /* 5 s */
#define UFS_DEFAULT_PERCENT 50
#define UFS_DEFAULT_THREADS 64 /* FUSE workers: throttled writers hold one each */
/* The dirty limit of every domain, in % of its max (background at half):
 * the engine's 20 % is Linux's share of all memory; a domain here holds
 * nothing but this cache, and 1 GiB through 5 MiB ran at 85 MB/s with 20 %,
 * 181 MB/s with 50 % (each commit is an fdatasync). */
#define UFS_DEFAULT_DIRTY_RATIO 50
/* Clean data kept per domain before writers drop it behind, and the most
 * dirty data at large limits (fs.c drop_behind(), domain.c
 * ufs_domain_ratios()): 1 GiB through a 2 GiB max ran at 171 MB/s without
 * them, 524 with (passthrough: 745), the daemon's memory 1,097 -> 181 MiB. */
#define UFS_DEFAULT_CLEAN_MAX ((uint64_t)32 << 20)
#define UFS_DEFAULT_DIRTY_MAX ((uint64_t)64 << 20)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: unstable-fuse BACKING_DIR MOUNTPOINT [options]\n"
#ifdef UFS_HAVE_NFS
		"       unstable-fuse nfs://SERVER/EXPORT[?ARGS] MOUNTPOINT [options]\n"
		"\n"
		"ARGS (libnfs URL arguments, joined by &): nfsport=N, mountport=N, version=3, ...\n"
#endif
		"\n"
		"  -f                      stay in the foreground\n"
		"  --max SIZE              the root domain's max (default 256M): all cached data\n"
		"  --domain-by KIND        cgroup: a domain per memory cgroup of the opener,\n"
		"                          its max a share of the cgroup's limit; uid: a domain\n"
		"                          per user; none (default): everything in the root\n"
		"  --cgroup-percent N      a cgroup domain's max in percent of its limit (50)\n"
		"  --commit-interval TIME  unstable data older than this is committed (5s)\n"
		"  --dirty-expire TIME     dirty data older than this is written back (30s)\n"
		"  --stats FILE            rewrite FILE with every domain's statistics each second\n"
		"                          (SIGUSR1 prints them on standard output)\n"
		"  --flushers N            the engine's flusher threads (2)\n"
		"  --dirty-ratio N         each domain's dirty limit (dirty, writeback and unstable\n"
		"                          data) in %% of its max, background writeback from half\n"
		"                          of it (default 50)\n"
		"  --dirty-max SIZE        the most dirty, writeback and unstable data in all,\n"
		"                          background writeback from half of it, when the ratio\n"
		"                          gives more (default 64M; 0: the ratio's)\n"
		"  --chunk SIZE            the size of the chunks data is cached in, a power of\n"
		"                          two from 4K to 128K (default %lluK; NFS: %lluK):\n"
		"                          smaller ones hold more of scattered small writes\n"
		"  --clean-max SIZE        clean (written back and committed) data a domain keeps\n"
		"                          for reads; beyond it writers drop clean chunks of their\n"
		"                          file behind (default 32M; max: keep up to the max)\n"
		"  --xattr                 pass extended attributes through (default: none, as\n"
		"                          without it the kernel asks for security.capability\n"
		"                          before every write)\n"
		"  --close MODE            start (default): a close that wrote starts the file's\n"
		"                          write-back and reports the errors seen, as on a local\n"
		"                          filesystem (fsync is the integrity point); writeback:\n"
		"                          it waits until the data is on the backing file or the\n"
		"                          server (close-to-open: other clients see it); sync:\n"
		"                          until it is committed (close-to-open durability)\n"
		"  --rpcs N                NFS: WRITE3 RPCs in flight at most (default 16)\n"
		"  --ns-conns N            NFS: namespace connections, each a libnfs context:\n"
		"                          metadata calls of several threads at once (1..64,\n"
		"                          default 4; 1: one call at a time)\n"
		"  --attr-cache TIME       NFS: how long attributes and missing names looked up\n"
		"                          by path are kept, and a directory made here is taken\n"
		"                          to hold only the names made here (default 1s; 0: not\n"
		"                          kept)\n"
		"  --no-cache              no cache of our own: each write goes to the backend at\n"
		"                          once (NFS: WRITE3 FILE_SYNC), for comparison\n"
		"  --kernel-writeback      let the kernel cache writes too (FUSE writeback cache):\n"
		"                          fastest for random rewrites; the kernel then keeps\n"
		"                          every cached file's size and times (see the manual)\n"
		"  --no-hugepages          the cache's memory in 4 KiB pages (default: advised for\n"
		"                          transparent huge pages, one page fault per 2 MiB)\n"
		"  --buffered-writeback    backing directory: write everything back through the\n"
		"                          page cache (default: runs of whole chunks O_DIRECT,\n"
		"                          --direct-writeback)\n"
		"  --trust-backing         backing directory: data written to the backing file is\n"
		"                          released without fdatasync(), as by a passthrough and\n"
		"                          the kernel's FUSE writeback cache; fsync and\n"
		"                          --close=sync still fdatasync(), the unmount does not\n"
		"                          (default: kept until an fdatasync() succeeds, and\n"
		"                          written again if it fails)\n"
		"  -d                      FUSE debug output (implies -f)\n"
		"  -s                      one FUSE worker thread\n"
		"  -o allow_other          let other users than the one who mounts use the mount\n"
		"                          (the kernel checks their permissions: default_permissions;\n"
		"                          a non-root mounter needs user_allow_other in /etc/fuse.conf)\n"
		"  -o max_threads=N        FUSE worker threads (at least %d)\n"
		"  -V, --version           the version\n"
		"  -h, --help              this text and the other FUSE options\n"
		"\n"
		"SIZE: bytes, or with K, M, G or T (KiB..TiB). TIME: seconds, or with ms, s or m.\n"
		"Data is cached in chunks of %llu KiB (NFS: %llu KiB) unless --chunk says.\n",
		(unsigned long long)(UFS_CHUNK_DEFAULT >> 10), (unsigned long long)(UFS_CHUNK_NFS >> 10),
		UFS_DEFAULT_THREADS, (unsigned long long)(UFS_CHUNK_DEFAULT >> 10),
		(unsigned long long)(UFS_CHUNK_NFS >> 10));
}

static int bad(const char *fmt, const char *arg)
{
	fprintf(stderr, "unstable-fuse: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'unstable-fuse --help'.\n");
	return 2;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	if (!*s || *s == '-')
		return -EINVAL;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
		end += strlen(end);
	if (*end || v == 0 || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_time(const char *s, uint64_t *out)
{
	char *end;
	double v;
	double unit = 1e9;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v > 0) || v > 1e6)
		return -EINVAL;
	if (strcmp(end, "ms") == 0)
		unit = 1e6;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		unit = 60e9;
	else if (*end && strcmp(end, "s") != 0)
		return -EINVAL;
	if (v * unit < 1)
		return -EINVAL;
	*out = (uint64_t)(v * unit);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */

static atomic_bool stats_stop;

static void stats_file(struct ufs *fs)
{
	char tmp[4200];
	FILE *f;

	if (!fs->opt.stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", fs->opt.stats_path);
	if (!(f = fopen(tmp, "w")))
		return;
	ufs_stats_write(fs, f);
	if (fclose(f) == 0)
		rename(tmp, fs->opt.stats_path);
	else
		unlink(tmp);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Once a second: cgroup limits read again, the stats file rewritten. On
 * SIGUSR1 (blocked in every thread, taken here with sigtimedwait()): the
 * same text on standard output.
 */
static void *stats_main(void *arg)
{
	struct ufs *fs = arg;
	struct timespec step = { .tv_sec = 0, .tv_nsec = 100000000L };
	uint64_t next = mono_ns() + 1000000000ull;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	while (!atomic_load(&stats_stop)) {
		if (sigtimedwait(&set, NULL, &step) == SIGUSR1) {
			ufs_stats_write(fs, stdout);
			fflush(stdout);
		}
		if (mono_ns() >= next) {
			next += 1000000000ull;
			ufs_domain_refresh(fs);
			stats_file(fs);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */

/* The daemon runs in "/" (fuse_daemonize()): relative names are made
 * absolute first. */
static char *absolute(const char *name)
{
	char cwd[4096], *out;

	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&out, "%s/%s", cwd, name) < 0)
		return NULL;
	return out;
}

/* libfuse's own options, but those init() sets whatever is given
 * (attr_timeout: a second, with the names of a file's other links kept in
 * step, links.c): the help must not offer them. libfuse prints to stdout; its text
 * is caught and filtered (printed whole if it cannot be caught). */
static void lib_help(struct fuse_args *fa)
{
	static const char *const forced[] = { "-o attr_timeout=", "-o use_ino", "-o hard_remove" };
	FILE *out = stdout, *mem;
	char *text = NULL, *line, *next;
	size_t len = 0, i;

	fflush(stdout);
	mem = open_memstream(&text, &len);
	if (!mem) {
		fuse_lib_help(fa);
		return;
	}
	stdout = mem;
	fuse_lib_help(fa);
	stdout = out;
	if (fclose(mem) != 0 || !text) {
		free(text);
		fuse_lib_help(fa);
		return;
	}
	for (line = text; *line; line = next) {
		bool skip = false;

		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		for (i = 0; i < sizeof(forced) / sizeof(forced[0]); i++)
			if (strstr(line, forced[i]) && strstr(line, forced[i]) - line < 8)
				skip = true;
		if (!skip)
			fwrite(line, 1, (size_t)(next - line), stdout);
	}
	printf("    (attr_timeout is 1 s, over NFS --attr-cache; use_ino on: set by unstable-fuse)\n");
	free(text);
}

/* -h and -V: the text printed and the process ends (status 0); else
 * nothing. */
static void help_or_version(const char *a, struct fuse_args *fa)
{
	if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
		/* Not fuse_cmdline_help(): it lists -h and -f again. */
		usage(stdout);
		printf("\nOther FUSE options:\n");
		lib_help(fa);
		exit(0);
	}
	if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
		printf("unstable-fuse with libunstable %s\n", us_version());
		fflush(stdout);
		fuse_lowlevel_version();
		exit(0);
	}
}

/* An option without a value (--xattr, --no-cache...): its flag set, true;
 * false when a is not one. */
static bool set_flag(const char *a, struct ufs_options *o)
{
	/* The options without a value: each sets its flag. */
	const struct {
		const char *name;
		bool *on;
	} flags[] = { { "--xattr", &o->xattr },
		      { "--no-cache", &o->no_cache },
		      { "--kernel-writeback", &o->kernel_writeback },
		      { "--no-hugepages", &o->no_hugepages },
		      { "--direct-writeback", &o->direct_writeback },
		      { "--buffered-writeback", &o->buffered_writeback },
		      { "--trust-backing", &o->trust_backing } };
	size_t k;

	for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
		if (strcmp(a, flags[k].name) == 0)
			break;
	if (k < sizeof(flags) / sizeof(flags[0])) {
		*flags[k].on = true;
		return true;
	}
	return false;
}

/* The value of argv[*i] when it is one of our options that take one
 * ("--max=1G" or "--max 1G", *i then moved past it): in *val, else NULL.
 * 0, or the exit status when the value is missing. */
static int option_value(int argc, char **argv, int *i, const char **val)
{
	const char *a = argv[*i];
	static const char *const with_value[] = {
		"--max",	  "--domain-by", "--cgroup-percent", "--commit-interval",
		"--stats",	  "--flushers",	 "--dirty-ratio",    "--rpcs",
		"--dirty-expire", "--clean-max", "--dirty-max",	     "--close",
		"--attr-cache",	  "--ns-conns",	 "--chunk"
	};
	size_t k;

	*val = NULL;
	for (k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++) {
		size_t n = strlen(with_value[k]);

		if (strncmp(a, with_value[k], n) == 0 && (a[n] == '=' || !a[n])) {
			if (a[n] == '=')
				*val = a + n + 1;
			else if (*i + 1 < argc)
				*val = argv[++*i];
			else
				return bad("%s needs a value", a);
			break;
		}
	}
	return 0;
}

/* The options whose value is a whole number in a range: --cgroup-percent,
 * --dirty-ratio, --rpcs, --ns-conns, --flushers. 0, or the exit status. */
static int set_number_option(struct ufs_options *o, const char *a, const char *val)
{
	if (strncmp(a, "--cgroup-percent", 16) == 0) {
		char *end;
		long v = strtol(val, &end, 10);

		if (*end || end == val || v < 1 || v > 100)
			return bad("--cgroup-percent: '%s' is not 1..100", val);
		o->cgroup_percent = (unsigned)v;
	} else if (strncmp(a, "--dirty-ratio", 13) == 0) {
		char *end;
		long v = strtol(val, &end, 10);

		if (*end || end == val || v < 2 || v > 100)
			return bad("--dirty-ratio: '%s' is not 2..100", val);
		o->dirty_ratio = (unsigned)v;
	} else if (strncmp(a, "--rpcs", 6) == 0) {
		char *end;
		long v = strtol(val, &end, 10);

		if (*end || end == val || v < 1 || v > 1024)
			return bad("--rpcs: '%s' is not 1..1024", val);
		o->rpcs = (unsigned)v;
	} else if (strncmp(a, "--ns-conns", 10) == 0) {
		char *end;
		long v = strtol(val, &end, 10);

		if (*end || end == val || v < 1 || v > 64)
			return bad("--ns-conns: '%s' is not 1..64", val);
		o->ns_conns = (unsigned)v;
	} else {
		char *end;
		long v = strtol(val, &end, 10);

		if (*end || end == val || v < 1 || v > 64)
			return bad("--flushers: '%s' is not 1..64", val);
		o->flushers = (unsigned)v;
	}
	return 0;
}

/* Option a (one of option_value()'s) set to val: sizes, times, names and
 * the others; the numbers by set_number_option(). 0, or the exit status. */
static int set_option(struct ufs_options *o, const char *a, const char *val)
{
	if (strncmp(a, "--max", 5) == 0) {
		if (parse_size(val, &o->max_bytes) || o->max_bytes < (1u << 20))
			return bad("--max: '%s' is not a size of at least 1M", val);
	} else if (strncmp(a, "--domain-by", 11) == 0) {
		if (strcmp(val, "cgroup") == 0)
			o->domain_by = UFS_DOMAIN_CGROUP;
		else if (strcmp(val, "uid") == 0)
			o->domain_by = UFS_DOMAIN_UID;
		else if (strcmp(val, "none") == 0)
			o->domain_by = UFS_DOMAIN_NONE;
		else
			return bad("--domain-by: '%s' is not cgroup, uid or none", val);
	} else if (strncmp(a, "--commit-interval", 17) == 0) {
		if (parse_time(val, &o->commit_interval_ns))
			return bad("--commit-interval: '%s' is not a time (5s, 500ms)", val);
	} else if (strncmp(a, "--dirty-expire", 14) == 0) {
		if (parse_time(val, &o->dirty_expire_ns))
			return bad("--dirty-expire: '%s' is not a time (30s, 500ms)", val);
	} else if (strncmp(a, "--stats", 7) == 0) {
		if (!*val)
			return bad("--stats: %sempty file name", "");
		free(o->stats_path);
		o->stats_path = val[0] == '/' ? strdup(val) : absolute(val);
		if (!o->stats_path)
			return bad("--stats: %scannot make the name absolute", "");
	} else if (strncmp(a, "--clean-max", 11) == 0) {
		if (strcmp(val, "max") == 0)
			o->clean_max = UINT64_MAX;
		else if (strcmp(val, "0") == 0)
			o->clean_max = 0;
		else if (parse_size(val, &o->clean_max))
			return bad("--clean-max: '%s' is not a size or 'max'", val);
	} else if (strncmp(a, "--dirty-max", 11) == 0) {
		if (strcmp(val, "0") == 0)
			o->dirty_max = 0;
		else if (parse_size(val, &o->dirty_max) || o->dirty_max < (1u << 20))
			return bad("--dirty-max: '%s' is not 0 or a size of at least 1M", val);
	} else if (strncmp(a, "--close", 7) == 0) {
		if (strcmp(val, "sync") == 0)
			o->close_sync = true, o->close_wait = false;
		else if (strcmp(val, "writeback") == 0)
			o->close_sync = false, o->close_wait = true;
		else if (strcmp(val, "start") == 0)
			o->close_sync = false, o->close_wait = false;
		else
			return bad("--close: '%s' is not start, writeback or sync", val);
	} else if (strncmp(a, "--chunk", 7) == 0) {
		uint64_t c;

		if (parse_size(val, &c) || c < UFS_PAGE_BYTES || c > UFS_CHUNK_MAX || (c & (c - 1)))
			return bad("--chunk: '%s' is not a power of two from 4K to 128K", val);
		o->chunk_bytes = c;
	} else if (strncmp(a, "--attr-cache", 12) == 0) {
		if (strcmp(val, "0") == 0)
			o->attr_cache_ns = 0;
		else if (parse_time(val, &o->attr_cache_ns) || o->attr_cache_ns > 3600000000000ull)
			return bad("--attr-cache: '%s' is not a time up to 1 h (1s, 0)", val);
	} else {
		return set_number_option(o, a, val);
	}
	return 0;
}

/* Takes our own options and BACKING_DIR out of argv; the rest is FUSE's. */
static int parse_args(int argc, char **argv, struct ufs_options *o, struct fuse_args *fa)
{
	int i, rc;

	fuse_opt_add_arg(fa, argv[0]);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val;

		help_or_version(a, fa);
		if (set_flag(a, o))
			continue;
		if (strcmp(a, "-o") == 0) {
			if (i + 1 == argc)
				return bad("%s needs a value", a);
			fuse_opt_add_arg(fa, a);
			fuse_opt_add_arg(fa, argv[++i]);
			continue;
		}
		if ((rc = option_value(argc, argv, &i, &val)))
			return rc;
		if (!val) {
			if (a[0] != '-' && !o->backing)
				o->backing = a;
			else
				fuse_opt_add_arg(fa, a);
			continue;
		}
		if ((rc = set_option(o, a, val)))
			return rc;
	}
	if (!o->backing)
		return bad("%smissing BACKING_DIR and MOUNTPOINT", "");
	if (o->direct_writeback && o->buffered_writeback)
		return bad("%s--direct-writeback and --buffered-writeback together", "");
	o->direct_writeback = !o->buffered_writeback;
	return 0;
}

/* The options' defaults, before the command line; the directory backend. */
static void options_default(struct ufs *fs)
{
	fs->opt.max_bytes = UFS_DEFAULT_MAX;
	fs->opt.cgroup_percent = UFS_DEFAULT_PERCENT;
	fs->opt.commit_interval_ns = UFS_DEFAULT_COMMIT;
	fs->opt.flushers = 2;
	fs->opt.dirty_ratio = UFS_DEFAULT_DIRTY_RATIO;
	fs->opt.clean_max = UFS_DEFAULT_CLEAN_MAX;
	fs->opt.dirty_max = UFS_DEFAULT_DIRTY_MAX;
	fs->opt.rpcs = 16;
	fs->opt.ns_conns = 4;
	fs->opt.attr_cache_ns = 1000000000ull;
	fs->be = &ufs_backend_dir;
	fs->backing_fd = -1;
}

/* The whole command line: ours (parse_args()), then FUSE's, which must
 * name the mount point. 0 to mount; -1 when -V was FUSE's (the version
 * printed: exit 0); else the exit status. */
static int command_line(int argc, char **argv, struct ufs *fs, struct fuse_args *args,
			struct fuse_cmdline_opts *copts)
{
	int ret;

	if ((ret = parse_args(argc, argv, &fs->opt, args)))
		return ret;
	if (fuse_parse_cmdline(args, copts) != 0)
		return bad("%sbad FUSE options", "");
	if (copts->show_version) {
		printf("unstable-fuse with libunstable %s\n", us_version());
		fuse_lowlevel_version();
		return -1;
	}
	if (!copts->mountpoint)
		return bad("%smissing MOUNTPOINT", "");
	return 0;
}

/* The backend the target names (an nfs:// URL, else a directory),
 * attached (*attached then set), and the cgroup controller found for
 * --domain-by cgroup. 0, or the exit status. */
static int backend_attach(struct ufs *fs, bool *attached)
{
	if (strncmp(fs->opt.backing, "nfs://", 6) == 0) {
#ifdef UFS_HAVE_NFS
		fs->be = &ufs_backend_nfs;
#else
		return bad("%s: this unstable-fuse was built without libnfs (no NFS backend)",
			   fs->opt.backing);
#endif
	}
	ufs_chunk_bytes = fs->opt.chunk_bytes	   ? fs->opt.chunk_bytes :
			  fs->be->chunk_default ? fs->be->chunk_default :
						  UFS_CHUNK_DEFAULT;
	fs->opt.chunk_bytes = ufs_chunk_bytes;
	if (fs->opt.trust_backing && fs->be != &ufs_backend_dir)
		return bad("%s--trust-backing: a backing directory only (an NFS server's "
			   "UNSTABLE writes are kept until its COMMIT3)", "");
	if (fs->be->attach(fs, fs->opt.backing) != 0)
		return 2;
	*attached = true;
	if (fs->opt.domain_by == UFS_DOMAIN_CGROUP && ufs_cgroup_detect(fs) != 0) {
		fprintf(stderr, "unstable-fuse: --domain-by cgroup: no memory cgroup controller "
				"in /sys/fs/cgroup\n");
		return 2;
	}
	return 0;
}

/* The tables' locks, and as many descriptors as allowed: one per cached
 * file and one per open handle. */
static void tables_init(struct ufs *fs)
{
	struct rlimit rl;

	pthread_mutex_init(&fs->itable_lock, NULL);
	pthread_cond_init(&fs->itable_cond, NULL);
	pthread_mutex_init(&fs->dom_lock, NULL);
	pthread_mutex_init(&fs->links_lock, NULL);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* SIGUSR1 is taken by the stats thread only: blocked before any
 * thread (the engine's, FUSE's) is created. SIGTERM, SIGINT and
 * SIGHUP must reach a FUSE thread, whose read() they interrupt to end
 * the loop: blocked while the daemon's own threads (the backend's, the
 * stats thread) are created, unblocked before the loop starts FUSE's. A
 * signal sent meanwhile waits until then. The terminating ones in *term. */
static void signals_block(sigset_t *term)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sigemptyset(term);
	sigaddset(term, SIGTERM);
	sigaddset(term, SIGINT);
	sigaddset(term, SIGHUP);
	pthread_sigmask(SIG_BLOCK, term, NULL);
}

/* Serves the mount's requests until it ends: the exit status (0 after an
 * unmount or a terminating signal, 1 after an error). */
static int serve(struct ufs *fs, struct fuse *fuse, const struct fuse_cmdline_opts *copts)
{
	int ret;

	if (copts->singlethread) {
		ret = fuse_loop(fuse);
	} else {
		/* Our loop (loop.c): one reader serves what does not wait. */
		ret = ufs_loop_run(fuse_get_session(fuse),
				   copts->max_threads > UFS_DEFAULT_THREADS ? copts->max_threads :
									      UFS_DEFAULT_THREADS,
				   fs->be->quick_names) ?
			      1 :
			      0;
	}
	/* A loop ended by SIGTERM, SIGINT or SIGHUP returns the signal: a
	 * clean end, as an unmount. The status is then that of the final
	 * write-back. */
	return ret && ret != SIGTERM && ret != SIGINT && ret != SIGHUP ? 1 : 0;
}

/* What is left once FUSE is gone: the domains' records, the backend
 * (when attached), the options' copies. */
static void state_free(struct ufs *fs, bool attached)
{
	while (fs->domains) {
		struct ufs_domain *d = fs->domains;

		fs->domains = d->next;
		free(d);
	}
	ufs_links_free(fs);
	if (attached)
		fs->be->detach(fs);
	free(fs->opt.stats_path);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_cmdline_opts copts = { 0 };
	static struct ufs fs;
	struct fuse *fuse;
	pthread_t stats;
	sigset_t term;
	bool attached = false;
	int rc, ret = 0;

	/* The kernel applies the caller's umask to the modes it sends. */
	umask(0);
	options_default(&fs);
	if ((ret = command_line(argc, argv, &fs, &args, &copts))) {
		ret = ret < 0 ? 0 : ret;
		goto out_args;
	}
	if ((ret = backend_attach(&fs, &attached)))
		goto out_args;
	tables_init(&fs);

	/* The kernel checks permissions: the daemon may serve other users. */
	fuse_opt_add_arg(&args, "-odefault_permissions");
	fuse = fuse_new(&args, ufs_operations(), sizeof(struct fuse_operations), &fs);
	if (!fuse) {
		ret = bad("%sbad FUSE options", "");
		goto out_args;
	}
	if (fuse_mount(fuse, copts.mountpoint) != 0) {
		ret = 1;
		goto out_destroy;
	}
	if (fuse_daemonize(copts.foreground) != 0) {
		ret = 1;
		goto out_unmount;
	}
	signals_block(&term);
	if ((rc = ufs_engine_start(&fs))) {
		fprintf(stderr, "unstable-fuse: engine: %s\n", us_strerror(rc));
		ret = 1;
		goto out_unmount;
	}
	if ((rc = fs.be->start(&fs))) {
		fprintf(stderr, "unstable-fuse: %s backend: %s\n", fs.be->name, strerror(-rc));
		ret = 1;
		goto out_engine;
	}
	if (fuse_set_signal_handlers(fuse_get_session(fuse)) != 0) {
		ret = 1;
		goto out_engine;
	}
	if (pthread_create(&stats, NULL, stats_main, &fs) != 0) {
		ret = 1;
		goto out_signals;
	}
	pthread_sigmask(SIG_UNBLOCK, &term, NULL);

	ret = serve(&fs, fuse, &copts);

	atomic_store(&stats_stop, true);
	pthread_join(stats, NULL);
out_signals:
	fuse_remove_signal_handlers(fuse_get_session(fuse));
out_engine:
	/* No request comes any more: write back and commit everything, write
	 * the last statistics, and shut the engine down. */
	fuse_unmount(fuse);
	ufs_links_stop(&fs);
	us_domain_sync(us_engine_root(fs.engine));
	stats_file(&fs);
	if (ufs_engine_stop(&fs) != 0)
		ret = 1;
	goto out_destroy;
out_unmount:
	fuse_unmount(fuse);
out_destroy:
	fuse_destroy(fuse);
out_args:
	fuse_opt_free_args(&args);
	free(copts.mountpoint);
	state_free(&fs, attached);
	return ret;
}
