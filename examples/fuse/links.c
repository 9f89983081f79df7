/*
 * unstable-fuse: the names of files with more than one link, so that what
 * one name changes is seen through the others at once.
 *
 * SPDX-License-Identifier: MIT
 *
 * The kernel keeps a file's attributes for a second (attr_timeout, set in
 * fs.c ufs_init()), which saves a request per stat. Through libfuse's
 * path-based API each name of a file is a kernel inode of its own, so a
 * change made through one name (link, unlink, chmod, chown, truncate,
 * utimens) updates or drops the attributes cached for that name only, and
 * the file's other names would show the old ones for up to a second. So:
 *
 *  - the names under which the kernel has looked at a file (not a
 *    directory) with more than one link (ufs_links_note(), from getattr)
 *    are kept here, per file (device and inode number);
 *  - a change through one name has the kernel drop what it caches for
 *    every other name kept (ufs_links_changed(): fuse_invalidate_path(),
 *    which writes the notification before the call is answered), and link
 *    has it drop the source name's too (the new link count and ctime).
 *
 * A file's entry goes when it is down to one name. A name moved by a
 * rename of its directory is not followed: invalidating it finds nothing,
 * or another file, whose attributes are then only read again. At most
 * UFS_LINKS_MAX files are kept, and UFS_LINKS_NAMES names of each: a new
 * file takes the place of another in its hash chain when the table is
 * full, and the names past the limit are not kept; the names not kept
 * may show attributes up to a second old, as the attribute cache of an NFS
 * client does.
 *
 * The notifications are written by a thread of their own (notifier_main()),
 * and the request waits for them up to 100 ms before it is answered, after
 * handing the reading of requests to another thread (ufs_loop_yield()). The
 * kernel drops the other names' attributes and page cache then, and may
 * need requests answered first: a dirty shared mapping written out, a read
 * holding a page; or the very request that waits, when the kernel holds the
 * file's writes back until a truncate is answered (an ftruncate through a
 * descriptor, whose name libfuse does not pass, invalidates every name of
 * the file, its own too). Past 100 ms the request is answered and the
 * notification completes once the kernel can go on: never a deadlock, at
 * worst a name that shows old attributes for that long.
 *
 * Writes do not notify: what a write changes (data, size, mtime, a
 * set-user-ID bit the kernel clears through a setattr, which does notify)
 * reaches another name at its next open (the kernel drops a file's pages
 * at each open), or within the second for a descriptor already open there,
 * as with any libfuse path-based filesystem that lets the kernel keep
 * attributes. (Direct I/O for such files would keep their data in step,
 * but the kernel then refuses a shared mmap of them: ENODEV.)
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include "ufuse.h"

#include <errno.h>
#include <fuse.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define UFS_LINKS_MAX	  65536
#define UFS_LINKS_NAMES	  256
#define UFS_LINKS_WAIT_NS 100000000L

/* Names to invalidate, in the order asked (fs->links_head). */
struct ufs_notice {
	struct ufs_notice *next;
	char **names; /* NULL-terminated */
	uint64_t ticket;
};

struct ufs_link {
	struct ufs_link *next;
	dev_t dev;
	ino_t ino;
	unsigned n, cap;
	char **names;
};

static unsigned bucket(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;

	return (unsigned)(h >> 32) % UFS_HASH;
}

static struct ufs_link **find(struct ufs *fs, dev_t dev, ino_t ino)
{
	struct ufs_link **p = &fs->links[bucket(dev, ino)];

	while (*p && ((*p)->dev != dev || (*p)->ino != ino))
		p = &(*p)->next;
	return p;
}

static bool kept(const struct stat *st)
{
	return !S_ISDIR(st->st_mode) && st->st_nlink > 1;
}

static void entry_free(struct ufs_link *l)
{
	for (unsigned i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l);
}

/* Adds path to l's names unless it is there: false when out of memory or
 * when l has UFS_LINKS_NAMES names already (the name is then not kept). */
static bool name_add(struct ufs_link *l, const char *path)
{
	char *copy;

	for (unsigned i = 0; i < l->n; i++)
		if (strcmp(l->names[i], path) == 0)
			return true;
	if (l->n == UFS_LINKS_NAMES)
		return false;
	if (l->n == l->cap) {
		unsigned cap = l->cap ? 2 * l->cap : 2;
		char **names = realloc(l->names, cap * sizeof(*names));

		if (!names)
			return false;
		l->names = names;
		l->cap = cap;
	}
	if (!(copy = strdup(path)))
		return false;
	l->names[l->n++] = copy;
	return true;
}

static void name_remove(struct ufs_link *l, const char *path)
{
	for (unsigned i = 0; i < l->n; i++) {
		if (strcmp(l->names[i], path) == 0) {
			free(l->names[i]);
			l->names[i] = l->names[--l->n];
			return;
		}
	}
}

void ufs_links_note(struct ufs *fs, const char *path, const struct stat *st)
{
	struct ufs_link **p, *l;

	if (!path || !kept(st))
		return;
	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	p = find(fs, st->st_dev, st->st_ino);
	if (!(l = *p) && (l = calloc(1, sizeof(*l)))) {
		struct ufs_link **chain = &fs->links[bucket(st->st_dev, st->st_ino)];

		/* Full: the new file takes the place of its chain's first. */
		if (fs->nlinks >= UFS_LINKS_MAX && *chain) {
			struct ufs_link *old = *chain;

			*chain = old->next;
			entry_free(old);
			fs->nlinks--;
		}
		if (fs->nlinks < UFS_LINKS_MAX) {
			l->dev = st->st_dev;
			l->ino = st->st_ino;
			l->next = *chain;
			*chain = l;
			fs->nlinks++;
			atomic_store_explicit(&fs->nlinks_any, true, memory_order_relaxed);
		} else {
			free(l);
			l = NULL;
		}
	}
	if (l)
		name_add(l, path);
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
}

/*
 * The names of the file (dev, ino) other than path (all of them when path
 * is NULL), copied, NULL-terminated;
 * after removing path from them when gone. NULL when the file is not kept
 * (or no memory: its names then catch up within the attribute timeout).
 */
static char **others(struct ufs *fs, const char *path, dev_t dev, ino_t ino, bool gone)
{
	struct ufs_link **p, *l;
	char **out = NULL;
	unsigned k = 0;

	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	p = find(fs, dev, ino);
	if (!(l = *p))
		goto out;
	if (gone && path)
		name_remove(l, path);
	if ((out = calloc(l->n + 1, sizeof(*out)))) {
		for (unsigned i = 0; i < l->n; i++)
			if ((!path || strcmp(l->names[i], path) != 0) &&
			    (out[k] = strdup(l->names[i])))
				k++;
	}
	/* Down to one name (or none): nothing left to keep in step. */
	if (gone && l->n <= 1) {
		*p = l->next;
		entry_free(l);
		fs->nlinks--;
	}
out:
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
	return out;
}

static void names_free(char **names)
{
	for (char **n = names; n && *n; n++)
		free(*n);
	free(names);
}

/* The notifier: writes the notifications queued, in order, with no lock
 * held (see the top of this file). */
static void *notifier_main(void *arg)
{
	struct ufs *fs = arg;

	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	for (;;) {
		struct ufs_notice *b;
		bool stop;

		while (!fs->links_head && !fs->links_stop)
			ufs_cond_wait(&fs->links_cond, &fs->links_lock, UFS_RANK_LINKS);
		if (!(b = fs->links_head))
			break;
		fs->links_head = b->next;
		stop = fs->links_stop;
		ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
		for (char **n = b->names; *n && !stop; n++)
			fuse_invalidate_path(fs->links_fuse, *n);
		names_free(b->names);
		ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
		fs->links_sent = b->ticket;
		free(b);
		pthread_cond_broadcast(&fs->links_done);
	}
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
	return NULL;
}

/* Under links_lock: the notifier, started once (its signals blocked: they
 * are for the request loop's threads). 0 or an errno. */
static int notifier_start(struct ufs *fs)
{
	sigset_t all, old;
	pthread_condattr_t ca;
	int rc;

	if (fs->links_on)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->links_done, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&fs->links_cond, NULL);
	fs->links_fuse = fuse_get_context()->fuse;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&fs->links_thread, NULL, notifier_main, fs);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&fs->links_done);
		pthread_cond_destroy(&fs->links_cond);
		return rc;
	}
	fs->links_on = true;
	return 0;
}

/* Has the kernel drop what it caches for names (taken), and waits for it
 * up to UFS_LINKS_WAIT_NS. */
static void invalidate(struct ufs *fs, char **names)
{
	struct ufs_notice *b, **at;
	struct timespec until;
	uint64_t ticket;

	if (!names || !names[0] || !fuse_get_context()->fuse) {
		names_free(names);
		return;
	}
	/* The kernel may need other requests answered first. */
	ufs_loop_yield();
	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	if (fs->links_stop || notifier_start(fs) != 0 || !(b = calloc(1, sizeof(*b)))) {
		ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
		names_free(names);
		return;
	}
	b->names = names;
	b->ticket = ticket = ++fs->links_queued;
	for (at = &fs->links_head; *at; at = &(*at)->next)
		;
	*at = b; /* b is the notifier's from here */
	pthread_cond_signal(&fs->links_cond);
	until = ufs_deadline(CLOCK_MONOTONIC, UFS_LINKS_WAIT_NS);
	while (fs->links_sent < ticket && !fs->links_stop)
		if (ufs_cond_timedwait(&fs->links_done, &fs->links_lock, &until, UFS_RANK_LINKS) ==
		    ETIMEDOUT)
			break;
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
}

void ufs_links_changed(struct ufs *fs, const char *path, dev_t dev, ino_t ino)
{
	if (atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		invalidate(fs, others(fs, path, dev, ino, false));
}

void ufs_links_self(struct ufs *fs, const char *path, dev_t dev, ino_t ino)
{
	char **names = NULL, **all;
	size_t n = 0;

	if (atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		names = others(fs, path, dev, ino, false);
	while (names && names[n])
		n++;
	if (!path || !(all = realloc(names, (n + 2) * sizeof(*all)))) {
		invalidate(fs, names);
		return;
	}
	all[n + 1] = NULL;
	if (!(all[n] = strdup(path)))
		all[n] = NULL;
	invalidate(fs, all);
}

void ufs_links_unlinked(struct ufs *fs, const char *path, dev_t dev, ino_t ino)
{
	if (path && atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		invalidate(fs, others(fs, path, dev, ino, true));
}

void ufs_links_linked(struct ufs *fs, const char *from, const char *to, const struct stat *st)
{
	char **names;

	ufs_links_note(fs, from, st);
	ufs_links_note(fs, to, st);
	/* Every other name, the source's included: its link count and ctime
	 * changed. The source at least when the file could not be kept. */
	if (!(names = others(fs, to, st->st_dev, st->st_ino, false)) &&
	    (names = calloc(2, sizeof(*names))) && !(names[0] = strdup(from))) {
		free(names);
		names = NULL;
	}
	invalidate(fs, names);
}

void ufs_links_renamed(struct ufs *fs, const char *from, const char *to, dev_t dev, ino_t ino)
{
	struct ufs_link *l;
	bool kept_it = false;

	if (!atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		return;
	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	if ((l = *find(fs, dev, ino))) {
		name_remove(l, from);
		name_add(l, to);
		kept_it = true;
	}
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
	/* Its ctime moved: the other names. */
	if (kept_it)
		invalidate(fs, others(fs, to, dev, ino, false));
}

void ufs_links_stop(struct ufs *fs)
{
	bool on;

	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	fs->links_stop = true;
	on = fs->links_on;
	if (on)
		pthread_cond_broadcast(&fs->links_cond);
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
	if (on) {
		pthread_join(fs->links_thread, NULL);
		pthread_cond_destroy(&fs->links_cond);
		pthread_cond_destroy(&fs->links_done);
		fs->links_on = false;
	}
}

void ufs_links_free(struct ufs *fs)
{
	for (unsigned b = 0; b < UFS_HASH; b++) {
		while (fs->links[b]) {
			struct ufs_link *l = fs->links[b];

			fs->links[b] = l->next;
			entry_free(l);
		}
	}
	fs->nlinks = 0;
}
