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
 * UFS_LINKS_MAX files are kept; past that, a further file's other names
 * may show attributes up to a second old, as the attribute cache of an NFS
 * client does.
 *
 * The notification is written from the request's own thread, with no lock
 * of the client held: the kernel drops the other inodes' attributes and
 * page cache, which needs no lock that the request being served holds (it
 * holds the locks of its own inode and directory). Writes do not notify:
 * the kernel holds the pages of a write while the daemon serves it, so a
 * write through one name that waited for the pages of a write through
 * another, which waited for the first's, would never end. What a write
 * changes reaches another name at its next open (the kernel drops a file's
 * pages at each open), or within the second for a descriptor already open
 * there, as with any libfuse path-based filesystem that lets the kernel
 * keep attributes. (Direct I/O for such files would keep their data in
 * step, but the kernel then refuses a shared mmap of them: ENODEV.)
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include "ufuse.h"

#include <errno.h>
#include <fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define UFS_LINKS_MAX 65536

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

/* Adds path to l's names unless it is there: false when out of memory. */
static bool name_add(struct ufs_link *l, const char *path)
{
	char *copy;

	for (unsigned i = 0; i < l->n; i++)
		if (strcmp(l->names[i], path) == 0)
			return true;
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
	if (!(l = *p) && fs->nlinks < UFS_LINKS_MAX && (l = calloc(1, sizeof(*l)))) {
		l->dev = st->st_dev;
		l->ino = st->st_ino;
		*p = l;
		fs->nlinks++;
		atomic_store_explicit(&fs->nlinks_any, true, memory_order_relaxed);
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

static void invalidate(char **names)
{
	struct fuse *f = fuse_get_context()->fuse;

	if (!names)
		return;
	for (char **n = names; *n; n++) {
		if (f)
			fuse_invalidate_path(f, *n);
		free(*n);
	}
	free(names);
}

void ufs_links_changed(struct ufs *fs, const char *path, dev_t dev, ino_t ino)
{
	if (atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		invalidate(others(fs, path, dev, ino, false));
}

void ufs_links_unlinked(struct ufs *fs, const char *path, dev_t dev, ino_t ino)
{
	if (path && atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		invalidate(others(fs, path, dev, ino, true));
}

void ufs_links_linked(struct ufs *fs, const char *from, const char *to, const struct stat *st)
{
	struct fuse *f = fuse_get_context()->fuse;
	char **names;

	ufs_links_note(fs, from, st);
	ufs_links_note(fs, to, st);
	/* Every other name, the source's included: its link count and ctime
	 * changed. The source at least when the file could not be kept. */
	if ((names = others(fs, to, st->st_dev, st->st_ino, false)))
		invalidate(names);
	else if (f)
		fuse_invalidate_path(f, from);
}

void ufs_links_renamed(struct ufs *fs, const char *from, const char *to, dev_t dev, ino_t ino)
{
	struct ufs_link *l;

	if (!atomic_load_explicit(&fs->nlinks_any, memory_order_relaxed))
		return;
	ufs_mutex_lock(&fs->links_lock, UFS_RANK_LINKS);
	if ((l = *find(fs, dev, ino))) {
		name_remove(l, from);
		name_add(l, to);
	}
	ufs_mutex_unlock(&fs->links_lock, UFS_RANK_LINKS);
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
