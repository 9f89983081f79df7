/*
 * unstable-fuse: which accounting domain a file is charged to, the memory
 * cgroup limits that drive the cgroup domains, and the statistics text.
 *
 * SPDX-License-Identifier: MIT
 *
 * With --domain-by cgroup, the opener of a file (the pid of the FUSE
 * request) is looked up in /proc/PID/cgroup; its memory cgroup gets a domain
 * under the root, made on first use. The domain's max is
 * --cgroup-percent (default 50) percent of the cgroup's memory limit: the
 * smallest of the limits of the cgroup and of its ancestors
 * (memory.limit_in_bytes in cgroup v1, memory.max in v2), so that a limit
 * set on a parent holds too. The rest of the cgroup's limit is left for the
 * writer's own memory, including the kernel's page cache of the file it
 * writes. A cgroup without a limit gets a domain without a max of its own
 * (the root's --max still bounds it); the root cgroup maps to the root
 * domain. The limits are read again every second, so a domain follows its
 * cgroup when the limit changes. A max never falls below
 * UFS_MIN_DOMAIN_BYTES, so that a writer can always make progress.
 */
#define _GNU_SOURCE

#include "ufuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UFS_MIN_DOMAIN_BYTES ((uint64_t)1 << 20) /* 8 chunks at most (--chunk) */

/* cgroup v1 reports "no limit" as a large page-rounded number. */
#define UFS_V1_UNLIMITED ((uint64_t)1 << 62)

int ufs_cgroup_detect(struct ufs *fs)
{
	char buf[256] = "";
	FILE *f;

	if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", R_OK) == 0) {
		snprintf(fs->cg_mount, sizeof(fs->cg_mount), "/sys/fs/cgroup/memory");
		fs->cg_version = 1;
		return 0;
	}
	if ((f = fopen("/sys/fs/cgroup/cgroup.controllers", "r"))) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		if (strstr(buf, "memory")) {
			snprintf(fs->cg_mount, sizeof(fs->cg_mount), "/sys/fs/cgroup");
			fs->cg_version = 2;
			return 0;
		}
	}
	return -ENOENT;
}

/* See ufuse.h. */
int ufs_cgroup_of(struct ufs *fs, pid_t pid, char *out, size_t len)
{
	char name[600], line[4096];
	int rc = -ENOENT;
	FILE *f;

	snprintf(name, sizeof(name), "%s/%d/cgroup", fs->proc ? fs->proc : "/proc", (int)pid);
	if (!(f = fopen(name, "r")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *path;

		if (!ctl || !(path = strchr(ctl + 1, ':')))
			continue;
		*path++ = '\0';
		*ctl++ = '\0'; /* line: the hierarchy id alone ("0" on v2) */
		path[strcspn(path, "\n")] = '\0';
		if (fs->cg_version == 1) {
			char *tok, *save = NULL;
			bool mem = false;

			for (tok = strtok_r(ctl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				mem |= strcmp(tok, "memory") == 0;
			if (!mem)
				continue;
		} else if (strcmp(line, "0") != 0 || *ctl) {
			continue;
		}
		snprintf(out, len, "%s", path);
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

/* A limit file's value; US_UNLIMITED for none. */
static uint64_t read_limit(const char *file)
{
	char buf[64] = "";
	uint64_t v;
	FILE *f = fopen(file, "r");

	if (!f)
		return US_UNLIMITED;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strncmp(buf, "max", 3) == 0 || !buf[0])
		return US_UNLIMITED;
	v = strtoull(buf, NULL, 10);
	return v >= UFS_V1_UNLIMITED ? US_UNLIMITED : v;
}

uint64_t ufs_cgroup_limit(struct ufs *fs, const char *dir)
{
	const char *file = fs->cg_version == 1 ? "memory.limit_in_bytes" : "memory.max";
	size_t mlen = strlen(fs->cg_mount);
	uint64_t lim = US_UNLIMITED;
	char path[4200], *slash;

	snprintf(path, sizeof(path), "%s", dir);
	while (strlen(path) > mlen) {
		char f[4300];
		uint64_t v;

		snprintf(f, sizeof(f), "%s/%s", path, file);
		v = read_limit(f);
		if (v < lim)
			lim = v;
		if (!(slash = strrchr(path, '/')))
			break;
		*slash = '\0';
	}
	return lim;
}

/* The max of a cgroup domain for a cgroup limit. */
static uint64_t scaled(struct ufs *fs, uint64_t limit)
{
	uint64_t v;

	if (limit == US_UNLIMITED)
		return US_UNLIMITED;
	v = limit / 100 * fs->opt.cgroup_percent + limit % 100 * fs->opt.cgroup_percent / 100;
	return v < UFS_MIN_DOMAIN_BYTES ? UFS_MIN_DOMAIN_BYTES : v;
}

/* A domain name for key, unique among the root's children and at most 63
 * bytes: the key itself when short, else its tail and a hash. */
static void domain_name(const char *prefix, const char *key, char *out, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t klen = strlen(key);
	const char *p;

	if (strlen(prefix) + klen <= 63 && snprintf(out, len, "%s%s", prefix, key) < (int)len)
		return;
	for (p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	if (snprintf(out, len, "%s~%s~%08llx", prefix, key + klen - 40,
		     (unsigned long long)(h >> 32)) >= (int)len)
		out[len - 1] = '\0';
}

/* --dirty-ratio N: the dirty limit at N % of the domain's max, the
 * background threshold at half of it. --dirty-max: the root's at most that
 * many bytes, background at half (so every domain's, the root's being the
 * bound of the whole tree), when its ratio would give more. A ratio is
 * raised by the engine for the commit pipeline (bytes written per commit
 * latency); for a backing directory that rate is the copy into the page
 * cache, and the commit, an fdatasync, grows with what it covers: without
 * the bound, a 2 GiB max held 640 MiB pinned and filled the cache with
 * fresh memory. */
void ufs_domain_ratios(struct ufs *fs, us_domain *d)
{
	unsigned ratio = fs->opt.dirty_ratio ? fs->opt.dirty_ratio : 20;

	if (fs->opt.dirty_ratio) {
		us_domain_set_limit(d, US_LIMIT_DIRTY_RATIO, fs->opt.dirty_ratio);
		us_domain_set_limit(d, US_LIMIT_DIRTY_BG_RATIO, fs->opt.dirty_ratio / 2);
	}
	if (d == us_engine_root(fs->engine) && fs->opt.dirty_max &&
	    fs->opt.max_bytes / 100 * ratio > fs->opt.dirty_max) {
		us_domain_set_limit(d, US_LIMIT_DIRTY_BYTES, fs->opt.dirty_max);
		us_domain_set_limit(d, US_LIMIT_DIRTY_BG_BYTES, fs->opt.dirty_max / 2);
	}
}

/* With dom_lock held: the domain of key, made on first use. */
static struct ufs_domain *domain_get(struct ufs *fs, const char *prefix, const char *key,
				     const char *limit_path)
{
	struct ufs_domain *d;
	char name[64];

	for (d = fs->domains; d; d = d->next)
		if (strcmp(d->key, key) == 0)
			return d;
	if (!(d = calloc(1, sizeof(*d))))
		return NULL;
	snprintf(d->key, sizeof(d->key), "%s", key);
	snprintf(d->limit_path, sizeof(d->limit_path), "%s", limit_path);
	domain_name(prefix, key, name, sizeof(name));
	if (us_domain_create(fs->engine, NULL, name, 0, &d->dom) != 0) {
		free(d);
		return NULL;
	}
	d->applied_max = US_UNLIMITED;
	ufs_domain_ratios(fs, d->dom);
	if (*limit_path) {
		uint64_t max = scaled(fs, ufs_cgroup_limit(fs, limit_path));

		if (max != US_UNLIMITED && us_domain_set_limit(d->dom, US_LIMIT_MAX, max) == 0)
			d->applied_max = max;
	}
	d->next = fs->domains;
	fs->domains = d;
	fs->ndomains++;
	return d;
}

us_domain *ufs_domain_for(struct ufs *fs, pid_t pid, uid_t uid)
{
	char key[256], dir[4096 + 512];
	struct ufs_domain *d = NULL;

	if (fs->opt.domain_by == UFS_DOMAIN_NONE)
		return NULL;
	ufs_mutex_lock(&fs->dom_lock, UFS_RANK_DOM);
	if (fs->opt.domain_by == UFS_DOMAIN_UID) {
		snprintf(key, sizeof(key), "%u", (unsigned)uid);
		d = domain_get(fs, "uid:", key, "");
	} else if (pid > 0 && ufs_cgroup_of(fs, pid, key, sizeof(key)) == 0 &&
		   strcmp(key, "/") != 0) {
		snprintf(dir, sizeof(dir), "%s%s", fs->cg_mount, key);
		d = domain_get(fs, "cg", key, dir);
	}
	ufs_mutex_unlock(&fs->dom_lock, UFS_RANK_DOM);
	/* Unknown (the process is gone, the root cgroup): the root domain. */
	return d ? d->dom : NULL;
}

void ufs_domain_refresh(struct ufs *fs)
{
	struct ufs_domain *d;

	ufs_mutex_lock(&fs->dom_lock, UFS_RANK_DOM);
	for (d = fs->domains; d; d = d->next) {
		uint64_t max;

		if (!*d->limit_path || access(d->limit_path, F_OK) != 0)
			continue; /* a uid domain, or the cgroup is gone */
		max = scaled(fs, ufs_cgroup_limit(fs, d->limit_path));
		/* Lowering it below what is charged fails with -EBUSY after
		 * evicting: retried at the next tick, while writeback goes on. */
		if (max != d->applied_max && us_domain_set_limit(d->dom, US_LIMIT_MAX, max) == 0)
			d->applied_max = max;
	}
	ufs_mutex_unlock(&fs->dom_lock, UFS_RANK_DOM);
}

static void stat_domain(FILE *f, us_domain *dom, const char *name, const char *cgroup,
			uint64_t cg_limit)
{
	char buf[4096];
	uint64_t max = US_UNLIMITED;

	us_domain_get_limit(dom, US_LIMIT_MAX, &max);
	fprintf(f, "domain %s\n", name);
	if (cgroup)
		fprintf(f, "cgroup %s\ncgroup_limit %llu\n", cgroup, (unsigned long long)cg_limit);
	/* The max set on the domain itself; "max" below is the one in force,
	 * also bounded by the root's headroom. */
	fprintf(f, "limit_max %llu\n", (unsigned long long)max);
	if (us_domain_stat_text(dom, buf, sizeof(buf)) > 0)
		fputs(buf, f);
	fputc('\n', f);
}

/*
 * Every domain's statistics, memory.stat style: a "domain NAME" line, for
 * cgroup domains the cgroup and its limit, the domain's own max, then the
 * engine's text (us_domain_stat_text()); a blank line between domains.
 */
void ufs_stats_write(struct ufs *fs, FILE *f)
{
	struct ufs_domain *d;
	unsigned nclosed;

	stat_domain(f, us_engine_root(fs->engine), "/", NULL, 0);
	ufs_mutex_lock(&fs->dom_lock, UFS_RANK_DOM);
	for (d = fs->domains; d; d = d->next)
		stat_domain(f, d->dom, us_domain_name(d->dom),
			    *d->limit_path ? d->limit_path : NULL,
			    *d->limit_path ? ufs_cgroup_limit(fs, d->limit_path) : 0);
	ufs_mutex_unlock(&fs->dom_lock, UFS_RANK_DOM);
	ufs_mutex_lock(&fs->itable_lock, UFS_RANK_ITABLE);
	nclosed = fs->nclosed + fs->nreaping;
	ufs_mutex_unlock(&fs->itable_lock, UFS_RANK_ITABLE);
	/* closed_files: files closed and kept until their data is clean
	 * (fs.c, "Closed files"); fill_bytes: read from the backend for
	 * writes that cover a page in part (fs.c, "Partial writes");
	 * writeback_waits and writeback_passes: writes into a chunk under
	 * write-back that waited for it to end, and that did not (fs.c
	 * ufs_write()); trusted_commits: commits taken as done without an
	 * fdatasync (--trust-backing); chunk_bytes: the chunks' size
	 * (--chunk, or the backend's). */
	fprintf(f,
		"cache\nchunk_bytes %llu\ndropped_behind %llu\nclosed_files %u\nfill_bytes %llu\n"
		"writeback_waits %llu\nwriteback_passes %llu\ntrusted_commits %llu\n\n",
		(unsigned long long)fs->opt.chunk_bytes,
		(unsigned long long)atomic_load(&fs->dropped_behind), nclosed,
		(unsigned long long)atomic_load(&fs->fill_bytes),
		(unsigned long long)atomic_load(&fs->wb_waits),
		(unsigned long long)atomic_load(&fs->wb_passes),
		(unsigned long long)atomic_load(&fs->trusted_commits));
	if (fs->be && fs->be->stats)
		fs->be->stats(fs, f);
}
