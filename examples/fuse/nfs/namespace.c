/*
 * unstable-fuse, NFSv3 backend (nfs.h): the namespace. Files (open,
 * reopen, close, fstat, uncached reads and writes, setattr), directories,
 * names (lookup by stat, create, unlink, rename, link, symlink...), each a
 * synchronous call: the raw calls on handles on any free namespace context
 * (handles.c: lookups, creates, setattrs, removes, renames, links, device
 * nodes, link reads, listings, statfs and access), libnfs's call by path
 * on the first one under ns_lock only for a stat that follows a symbolic
 * link (a symlink's SYMLINK3 on the namespace's own connection, conn.c,
 * under ns_lock too); the attribute
 * cache that answers stats by path; and the backend's table of operations
 * (ufs_backend_nfs).
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

/* "." or "a/b" to "/" or "/a/b". NULL on ENOMEM. */
static char *abs_path(const char *rel)
{
	char *p;

	if (strcmp(rel, ".") == 0)
		return strdup("/");
	if (asprintf(&p, "/%s", rel) < 0)
		return NULL;
	return p;
}

/*
 * The attribute cache. With the kernel asking for every attribute (as it
 * did with attr_timeout 0; it keeps them a second now, fs.c), a copy of 792 files and directories (cp -a
 * /usr/include/linux) made 8,472 path stats, 11 per file, most of them of
 * a name looked at a moment before (each a round trip per path component
 * when libnfs walked every path). So
 * an lstat or stat by path is answered from here for up to --attr-cache
 * (default 1 s, like the Linux NFS client's attribute cache, whose shortest
 * is 3 s), and a name found missing too. What this client changes it
 * forgets at once: a name and its parent after a call that makes or
 * removes it, a name after a SETATTR3 of it (its directory did not
 * change) and the file's other names if it has several, everything after
 * a rename, link or unlink (other names of the same file), a file's name when a write of its data is answered. A
 * change made by another client shows after the lifetime at most, as with
 * NFS's own attribute cache. An answer that raced a change (the cache's
 * generation moved while it was asked: sampled before the call is sent,
 * moved by every forgetting, which follows the reply of the call that made
 * the change) is not kept; calls run at once on several contexts, so this
 * is what keeps an answer older than a change out of the cache. The attributes a
 * CREATE3, MKDIR3 or SETATTR3 answers with are kept for the name it was
 * made on; a file's stat by its handle (fstat) is answered from its path's
 * entry while the handle cache says the path still names it.
 */
static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static size_t ac_slot(const char *path, bool follow)
{
	uint64_t h = 1469598103934665603ull ^ follow;

	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 1099511628211ull;
	return (size_t)(h % AC_SLOTS);
}

/* A cached answer for path: true with *rc (and *st); false with the
 * generation to give ac_put() (gen may be NULL). A hit or a miss counted
 * when count. */
static bool ac_lookup(struct nb *nb, const char *path, bool follow, struct stat *st, int *rc,
		      uint64_t *gen, bool count)
{
	struct ac_ent *e;
	bool hit = false;

	if (gen)
		*gen = 0;
	if (!nb->ac)
		return false;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	e = &nb->ac[ac_slot(path, follow)];
	if (e->path && e->follow == follow && strcmp(e->path, path) == 0 &&
	    mono_ns() < e->until_ns) {
		*rc = e->rc;
		if (e->rc == 0)
			*st = e->st;
		hit = true;
	}
	if (gen)
		*gen = nb->ac_gen;
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (count)
		atomic_fetch_add(hit ? &nb->ac_hits : &nb->ac_misses, 1);
	return hit;
}

static bool ac_get(struct nb *nb, const char *path, bool follow, struct stat *st, int *rc,
		   uint64_t *gen)
{
	return ac_lookup(nb, path, follow, st, rc, gen, true);
}

static void ac_put(struct nb *nb, const char *path, bool follow, int rc, const struct stat *st,
		   uint64_t gen)
{
	struct ac_ent *e;
	char *copy;

	if (!nb->ac || (rc != 0 && rc != -ENOENT) || !(copy = strdup(path)))
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (gen == nb->ac_gen) {
		e = &nb->ac[ac_slot(path, follow)];
		free(e->path);
		e->path = copy;
		copy = NULL;
		e->follow = follow;
		e->rc = rc;
		if (rc == 0)
			e->st = *st;
		e->until_ns = mono_ns() + nb->ac_ttl_ns;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	free(copy);
}

/* Under ac_lock: forgets path's answers. */
static void ac_drop(struct nb *nb, const char *path)
{
	for (int follow = 0; follow < 2; follow++) {
		struct ac_ent *e = &nb->ac[ac_slot(path, follow)];

		if (e->path && strcmp(e->path, path) == 0) {
			free(e->path);
			e->path = NULL;
		}
	}
}

/* Forgets what is cached of path and of its parent directory. */
void nfsb_ac_forget(struct nb *nb, const char *path)
{
	const char *slash;

	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	ac_drop(nb, path);
	if ((slash = strrchr(path, '/'))) {
		char parent[PATH_MAX];
		size_t n = slash == path ? 1 : (size_t)(slash - path);

		if (n < sizeof(parent)) {
			memcpy(parent, path, n);
			parent[n] = '\0';
			ac_drop(nb, parent);
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets what is cached of a file's path, not of its directory: after a
 * write of its data, which changes the file alone. */
void nfsb_ac_forget_file(struct nb *nb, const char *path)
{
	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	ac_drop(nb, path);
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets the other names of the file ino but keep (its hard links): after
 * a SETATTR3 of it by one name. */
static void ac_forget_links(struct nb *nb, const char *keep, ino_t ino)
{
	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	for (size_t i = 0; i < AC_SLOTS; i++) {
		struct ac_ent *e = &nb->ac[i];

		if (e->path && e->rc == 0 && e->st.st_ino == ino && strcmp(e->path, keep) != 0) {
			free(e->path);
			e->path = NULL;
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* ------------------------------------------------------------------------ */
/* Made directories                                                          */

/*
 * A directory this client made holds, for --attr-cache after its MKDIR3,
 * the names this client made in it since and no other, as far as a client
 * with attributes kept that long can know: the lookup of another name
 * there is answered missing without a LOOKUP3 (nfs_made_misses), the
 * round trip that a copy of a tree (cp -a, tar x) made before each create.
 * The kernel's NFS client skips the same LOOKUP3 for an exclusive create;
 * FUSE looks every name up first and does not say why. A name made, removed
 * or failed to be made there is noted, or the directory forgotten (a create
 * that failed may have been made all the same; EEXIST says another client
 * made the name); a rename or a link forgets them all, as it does the
 * attributes. Under ac_lock; without an attribute cache, nothing is kept.
 */

static size_t made_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 1099511628211ull;
	return (size_t)h;
}

static void made_free(struct nb_made *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->names[i]);
	free(m->names);
	free(m->path);
	memset(m, 0, sizeof(*m));
}

/* The slot of name in m (its own, or the free one where it would go). */
static size_t made_slot(const struct nb_made *m, const char *name)
{
	size_t i = made_hash(name) & (m->cap - 1);

	while (m->names[i] && strcmp(m->names[i], name) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* Adds name to m's names: false if it cannot (no memory, too many). */
static bool made_add(struct nb_made *m, const char *name)
{
	if (m->cap && m->names[made_slot(m, name)])
		return true;
	if (m->n >= NB_MADE_NAMES)
		return false;
	if (2 * (m->n + 1) > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		char **old = m->names, **names = calloc(cap, sizeof(*names));
		size_t ocap = m->cap;

		if (!names)
			return false;
		m->names = names;
		m->cap = cap;
		for (size_t i = 0; i < ocap; i++)
			if (old[i])
				m->names[made_slot(m, old[i])] = old[i];
		free(old);
	}
	{
		size_t i = made_slot(m, name);

		if (!(m->names[i] = strdup(name)))
			return false;
	}
	m->n++;
	return true;
}

/* Takes name out of m's names (open addressing: the run after it is put
 * back). */
static void made_del(struct nb_made *m, const char *name)
{
	size_t i;

	if (!m->cap || !m->names[i = made_slot(m, name)])
		return;
	free(m->names[i]);
	m->names[i] = NULL;
	m->n--;
	for (size_t j = (i + 1) & (m->cap - 1); m->names[j]; j = (j + 1) & (m->cap - 1)) {
		char *e = m->names[j];

		m->names[j] = NULL;
		m->names[made_slot(m, e)] = e;
	}
}

/* Under ac_lock: the made directory path[0..len), while its names are
 * known (one past it is freed). */
static struct nb_made *made_find(struct nb *nb, const char *path, size_t len)
{
	uint64_t now = mono_ns();

	for (size_t i = 0; i < NB_MADE_DIRS; i++) {
		struct nb_made *m = &nb->made[i];

		if (!m->path)
			continue;
		if (now >= m->until_ns) {
			made_free(m);
			continue;
		}
		if (strlen(m->path) == len && memcmp(m->path, path, len) == 0)
			return m;
	}
	return NULL;
}

/* Splits path at its last '/': the directory's length (1 for the root)
 * and the name. */
static size_t made_split(const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');

	if (!slash || !slash[1])
		return 0;
	*name = slash + 1;
	return slash == path ? 1 : (size_t)(slash - path);
}

/* Under ac_lock: forgets every made directory. */
static void made_clear_locked(struct nb *nb)
{
	if (!nb->made)
		return;
	for (size_t i = 0; i < NB_MADE_DIRS; i++)
		if (nb->made[i].path)
			made_free(&nb->made[i]);
}

/* After a call that made path, or tried to (made: whether it did): noted
 * in its directory, if that is a made one, or the directory forgotten. A
 * directory made is then a made one itself (dir). */
static void made_note(struct nb *nb, const char *path, bool made, bool dir)
{
	const char *name = NULL;
	size_t len;
	struct nb_made *m;

	if (!nb->made)
		return;
	len = made_split(path, &name);
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (len && (m = made_find(nb, path, len)) && (!made || !made_add(m, name)))
		made_free(m);
	if (made && dir) {
		struct nb_made *slot = NULL;

		/* (one of the name before, forgotten: it cannot still be) */
		if ((m = made_find(nb, path, strlen(path))))
			made_free(m);
		for (size_t i = 0; i < NB_MADE_DIRS; i++) {
			m = &nb->made[i];
			if (!m->path) {
				slot = m;
				break;
			}
			if (!slot || m->seq < slot->seq)
				slot = m;
		}
		if (slot->path)
			made_free(slot);
		if ((slot->path = strdup(path))) {
			slot->until_ns = mono_ns() + nb->ac_ttl_ns;
			slot->seq = ++nb->made_seq;
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* After a call that removed path, or tried to: out of its directory's
 * names (the directory forgotten if the call failed), and a directory
 * removed forgotten with those below it. */
static void made_gone(struct nb *nb, const char *path, bool removed)
{
	const char *name = NULL;
	size_t len, plen = strlen(path);
	struct nb_made *m;

	if (!nb->made)
		return;
	len = made_split(path, &name);
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (len && (m = made_find(nb, path, len))) {
		if (removed)
			made_del(m, name);
		else
			made_free(m);
	}
	for (size_t i = 0; i < NB_MADE_DIRS; i++) {
		const char *q = nb->made[i].path;

		if (q && strncmp(q, path, plen) == 0 && (q[plen] == '\0' || q[plen] == '/'))
			made_free(&nb->made[i]);
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Whether path is known missing: a name this client did not make in a
 * directory it made. */
static bool made_missing(struct nb *nb, const char *path)
{
	const char *name = NULL;
	size_t len;
	struct nb_made *m;
	bool missing = false;

	if (!nb->made || !(len = made_split(path, &name)))
		return false;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if ((m = made_find(nb, path, len)))
		missing = !m->cap || !m->names[made_slot(m, name)];
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (missing)
		atomic_fetch_add(&nb->made_misses, 1);
	return missing;
}

/* After a listing of the directory d: forgotten as a made one if it
 * holds a name this client did not make there (another client's), which
 * a lookup would else answer missing once its attributes are gone. */
static void made_listed(struct nb *nb, const struct ufs_bfile *d)
{
	struct nb_made *m;

	if (!nb->made)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if ((m = made_find(nb, d->path, strlen(d->path)))) {
		for (size_t i = 0; i < d->nents; i++) {
			const char *name = d->ents[i].name;

			if (strcmp(name, ".") && strcmp(name, "..") &&
			    (!m->cap || !m->names[made_slot(m, name)])) {
				made_free(m);
				break;
			}
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets the made directories (a handle found stale: another client
 * changed the tree). */
static void made_clear(struct nb *nb)
{
	if (!nb->made)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	made_clear_locked(nb);
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets everything: the attributes and the made directories. */
void nfsb_ac_clear(struct nb *nb)
{
	if (!nb->ac)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->ac_gen++;
	for (size_t i = 0; i < AC_SLOTS; i++) {
		free(nb->ac[i].path);
		nb->ac[i].path = NULL;
	}
	made_clear_locked(nb);
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* The attribute cache's generation, sampled before a call whose reply
 * gives attributes (ac_forget_put()). */
static uint64_t ac_gen_now(struct nb *nb)
{
	uint64_t gen;

	if (!nb->ac)
		return 0;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	gen = nb->ac_gen;
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	return gen;
}

/* Under ac_lock: st is path's answer, followed or not (a symbolic link's
 * only when not followed). */
static void ac_set_locked(struct nb *nb, const char *path, const struct stat *st)
{
	for (int follow = 0; follow < 2; follow++) {
		struct ac_ent *e;
		char *copy;

		if (follow && S_ISLNK(st->st_mode))
			break;
		if (!(copy = strdup(path)))
			return;
		e = &nb->ac[ac_slot(path, follow)];
		free(e->path);
		e->path = copy;
		e->follow = follow;
		e->rc = 0;
		e->st = *st;
		e->until_ns = mono_ns() + nb->ac_ttl_ns;
	}
}

/*
 * After a call that changed path: forgets path, and its parent if it made
 * path (a SETATTR3 changes the file alone), then keeps st and pst (if not NULL), the attributes the
 * reply gave of path and of its parent directory, unless the cache changed since gen (a write answered
 * meanwhile: st may be older than it). Whether the cache changed only by
 * this forgetting (st, if given, then kept); *now then holds the
 * generation st is current at.
 */
static bool ac_forget_put(struct nb *nb, const char *path, bool made, const struct stat *st,
			  const struct stat *pst, uint64_t gen, uint64_t *now)
{
	bool keep;

	if (!nb->ac)
		return false;
	if (made)
		nfsb_ac_forget(nb, path);
	else
		nfsb_ac_forget_file(nb, path);
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	/* (the forgetting moved it by one) */
	keep = nb->ac_gen == gen + 1;
	if (keep)
		*now = nb->ac_gen;
	if (keep && st)
		ac_set_locked(nb, path, st);
	if (keep && pst) {
		const char *slash = strrchr(path, '/');
		char parent[PATH_MAX];
		size_t n = slash == path ? 1 : (size_t)(slash - path);

		if (slash && n < sizeof(parent)) {
			memcpy(parent, path, n);
			parent[n] = '\0';
			ac_set_locked(nb, parent, pst);
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	return keep;
}

static void st_from(struct stat *st, const struct nfs_stat_64 *s)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = (dev_t)s->nfs_dev;
	st->st_ino = (ino_t)s->nfs_ino;
	st->st_mode = (mode_t)s->nfs_mode;
	st->st_nlink = (nlink_t)s->nfs_nlink;
	st->st_uid = (uid_t)s->nfs_uid;
	st->st_gid = (gid_t)s->nfs_gid;
	st->st_rdev = (dev_t)s->nfs_rdev;
	st->st_size = (off_t)s->nfs_size;
	st->st_blksize = (blksize_t)s->nfs_blksize;
	st->st_blocks = (blkcnt_t)s->nfs_blocks;
	st->st_atim.tv_sec = (time_t)s->nfs_atime;
	st->st_atim.tv_nsec = (long)s->nfs_atime_nsec;
	st->st_mtim.tv_sec = (time_t)s->nfs_mtime;
	st->st_mtim.tv_nsec = (long)s->nfs_mtime_nsec;
	st->st_ctim.tv_sec = (time_t)s->nfs_ctime;
	st->st_ctim.tv_nsec = (long)s->nfs_ctime_nsec;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

/* The first namespace context, for libnfs's calls by path: ns_lock, then
 * its channel's lock (the raw calls may take that context too). */
static void ns0_lock(struct nb *nb)
{
	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	ufs_mutex_lock(&nb->chan[0].lock, UFS_RANK_NFS_CHAN);
	nfsb_ns_busy(nb);
}

static void ns0_unlock(struct nb *nb)
{
	nfsb_ns_idle(nb);
	ufs_mutex_unlock(&nb->chan[0].lock, UFS_RANK_NFS_CHAN);
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
}


static struct ufs_bfile *bfile_new(const char *rel)
{
	struct ufs_bfile *f = calloc(1, sizeof(*f));

	if (f && !(f->path = abs_path(rel))) {
		free(f);
		f = NULL;
	}
	return f;
}

/* A call on the handle of path (resolved, cached), made once more from
 * the root if the server calls a cached handle stale. */
#define WITH_HANDLE(nb, rc, call)                  \
	for (int tries_ = 0; tries_ < 2; tries_++) { \
		rc = (call);                         \
		if (rc != -ESTALE)                   \
			break;                       \
		nfsb_fh_clear(nb);                   \
		made_clear(nb);                      \
	}

/* Under ac_lock: whether f's path names f, as far as the handle cache
 * knows. */
static bool names_file(struct nb *nb, const struct ufs_bfile *f)
{
	struct nb_fh fh;

	return nfsb_fh_get_locked(nb, f->path, strlen(f->path), &fh) && fh.len == f->fhlen &&
	       memcmp(fh.data, f->fh, fh.len) == 0;
}

/* f's attributes from the attribute cache, kept for its path while its
 * path names it. */
static bool ac_get_file(struct nb *nb, const struct ufs_bfile *f, struct stat *st)
{
	struct ac_ent *e;
	bool hit = false;

	if (!nb->ac)
		return false;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	e = &nb->ac[ac_slot(f->path, false)];
	if (e->path && !e->follow && e->rc == 0 && strcmp(e->path, f->path) == 0 &&
	    mono_ns() < e->until_ns && names_file(nb, f)) {
		*st = e->st;
		hit = true;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	atomic_fetch_add(hit ? &nb->ac_hits : &nb->ac_misses, 1);
	return hit;
}

/* Keeps st, f's attributes asked at generation gen, for f's path if it
 * names f and nothing was forgotten since. */
static void ac_put_file(struct nb *nb, const struct ufs_bfile *f, const struct stat *st,
			uint64_t gen)
{
	char *a, *b;

	if (!nb->ac || !(a = strdup(f->path)))
		return;
	if (!(b = strdup(f->path))) {
		free(a);
		return;
	}
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (gen == nb->ac_gen && names_file(nb, f)) {
		for (int follow = 0; follow < 2; follow++) {
			struct ac_ent *e = &nb->ac[ac_slot(f->path, follow)];

			free(e->path);
			e->path = follow ? b : a;
			e->follow = follow;
			e->rc = 0;
			e->st = *st;
			e->until_ns = mono_ns() + nb->ac_ttl_ns;
		}
		a = b = NULL;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	free(a);
	free(b);
}

/*
 * A file opened: its handle, from the handle cache or looked up, or from
 * the CREATE3 that made it with its mode (one call: GUARDED for O_EXCL).
 * Nothing is opened on the server (NFSv3 has no open); the kernel checked
 * the caller's permissions (default_permissions).
 */
static int open_path(struct nb *nb, struct ufs_bfile *f, int flags, mode_t mode)
{
	uint64_t gen = ac_gen_now(nb), now = 0;
	struct nb_fh fh;
	struct stat st, pst;
	bool have = false, have_pst = false;
	int rc;

	if (flags & O_CREAT) {
		WITH_HANDLE(nb, rc,
			    nfsb_make(nb, f->path, false, flags & O_EXCL, mode, &fh, &st, &have,
				      &pst, &have_pst));
		ac_forget_put(nb, f->path, true, rc == 0 && have ? &st : NULL,
			      rc == 0 && have_pst ? &pst : NULL, gen, &now);
		made_note(nb, f->path, rc == 0, false);
	} else {
		WITH_HANDLE(nb, rc, nfsb_resolve(nb, f->path, &fh, &st, &have));
	}
	if (rc == 0 && have && S_ISDIR(st.st_mode) && (flags & O_ACCMODE) != O_RDONLY)
		rc = -EISDIR;
	if (rc)
		return rc;
	f->fhlen = fh.len;
	memcpy(f->fh, fh.data, fh.len);
	return 0;
}

static int nfs_open_file(struct ufs *fs, const char *rel, int flags, mode_t mode,
			 struct ufs_bfile **out)
{
	struct ufs_bfile *f = bfile_new(rel);
	int rc;

	if (!f)
		return -ENOMEM;
	if ((rc = open_path(nb_of(fs), f, flags, mode))) {
		free(f->path);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* The same file for the engine: its handle is all it needs (the file may
 * have been renamed since; the namespace calls then use the old name). */
static int nfs_reopen_rw(struct ufs *fs, struct ufs_bfile *f, struct ufs_bfile **out)
{
	struct ufs_bfile *g;

	(void)fs;
	if (!f->fhlen)
		return -EISDIR;
	if (!(g = calloc(1, sizeof(*g))) || !(g->path = strdup(f->path))) {
		free(g);
		return -ENOMEM;
	}
	g->fhlen = f->fhlen;
	memcpy(g->fh, f->fh, f->fhlen);
	*out = g;
	return 0;
}

static void nfs_close_file(struct ufs *fs, struct ufs_bfile *f)
{
	struct nb *nb = nb_of(fs);

	(void)nb;
	nfsb_drain(fs, f);
	nfsb_dirents_free(f->ents, f->nents);
	free(f->path);
	free(f);
}

static int stat_abs(struct nb *nb, const char *p, struct stat *st, bool follow);

static void bfile_handle(const struct ufs_bfile *f, struct nb_fh *fh)
{
	fh->len = f->fhlen;
	memcpy(fh->data, f->fh, f->fhlen);
}

/* A file's attributes: the attribute cache's for its path while its path
 * names it, else a GETATTR3 of its handle. */
static int nfs_fstat_file(struct ufs *fs, struct ufs_bfile *f, struct stat *st)
{
	struct nb *nb = nb_of(fs);
	struct nb_fh fh;
	uint64_t gen;
	int rc;

	if (!f->fhlen)
		return stat_abs(nb, f->path, st, true);
	if (ac_get_file(nb, f, st))
		return 0;
	gen = ac_gen_now(nb);
	bfile_handle(f, &fh);
	rc = nfsb_getattr(nb, &fh, st);
	if (rc == 0)
		ac_put_file(nb, f, st, gen);
	return rc;
}

static ssize_t nfs_pread_file(struct ufs *fs, struct ufs_bfile *f, void *buf, size_t n,
			      uint64_t off)
{
	struct nb *nb = nb_of(fs);
	size_t got = 0;

	while (got < n) {
		struct req r = { .kind = REQ_READ,
				 .file = f,
				 .offset = off + got,
				 .count = (uint32_t)min_u64(n - got, nb->rsize),
				 .data = (char *)buf + got };
		int rc = nfsb_req_wait(nb, &r);

		if (rc)
			return got ? (ssize_t)got : rc;
		atomic_fetch_add(&nb->reads, 1);
		got += r.got;
		if (r.eof || r.got == 0)
			break;
	}
	return (ssize_t)got;
}

/* Uncached (--no-cache): WRITE3 FILE_SYNC, waited for. */
static ssize_t nfs_pwrite_file(struct ufs *fs, struct ufs_bfile *f, const void *buf, size_t n,
			       uint64_t off)
{
	struct nb *nb = nb_of(fs);
	size_t done = 0;

	while (done < n) {
		struct req r = { .kind = REQ_WRITE,
				 .file = f,
				 .offset = off + done,
				 .count = (uint32_t)min_u64(n - done, nb->wsize),
				 .stable = FILE_SYNC,
				 .data = (char *)buf + done };
		int rc = nfsb_req_wait(nb, &r);

		if (rc) {
			nfsb_ac_forget_file(nb, f->path);
			return done ? (ssize_t)done : rc;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, r.count);
		if (r.committed != UNSTABLE)
			atomic_fetch_add(&nb->stable_replies, 1);
		done += r.count;
	}
	nfsb_ac_forget_file(nb, f->path);
	return (ssize_t)done;
}

static int nfs_fsync_file(struct ufs *fs, struct ufs_bfile *f)
{
	struct req r = { .kind = REQ_COMMIT, .file = f };

	return nfsb_req_wait(nb_of(fs), &r);
}

static int setattr_path(struct nb *nb, const char *p, const sattr3 *sa, struct stat *st,
			bool *have)
{
	struct nb_fh fh;
	int rc = nfsb_resolve(nb, p, &fh, NULL, NULL);

	return rc ? rc : nfsb_setattr(nb, &fh, sa, st, have);
}

/*
 * A SETATTR3 of f (its handle; a directory's by its path), or of the path p
 * when f is NULL. The attributes it answers with are kept for p (a path
 * call) or for f. Its name forgotten in the attribute cache.
 */
static int setattr_of(struct nb *nb, struct ufs_bfile *f, const char *p, const sattr3 *sa)
{
	uint64_t gen = ac_gen_now(nb), now = 0;
	struct nb_fh fh;
	struct stat st;
	bool have = false;
	int rc;

	if (f && f->fhlen) {
		bfile_handle(f, &fh);
		rc = nfsb_setattr(nb, &fh, sa, &st, &have);
	} else {
		WITH_HANDLE(nb, rc, setattr_path(nb, f ? f->path : p, sa, &st, &have));
	}
	if (f && f->fhlen) {
		/* Its path's attributes replaced only while its path names
		 * it (it may have been renamed since it was opened). */
		if (ac_forget_put(nb, f->path, false, NULL, NULL, gen, &now) && rc == 0 && have)
			ac_put_file(nb, f, &st, now);
	} else {
		ac_forget_put(nb, f ? f->path : p, false, rc == 0 && have ? &st : NULL, NULL, gen,
			      &now);
	}
	/* A file of several names: the others' attributes changed too. */
	if (rc == 0 && have && st.st_nlink > 1 && !S_ISDIR(st.st_mode))
		ac_forget_links(nb, f ? f->path : p, st.st_ino);
	return rc;
}

static void sa_size(sattr3 *sa, uint64_t size)
{
	memset(sa, 0, sizeof(*sa));
	sa->size.set_it = 1;
	sa->size.set_size3_u.size = size;
}

static void sa_mode(sattr3 *sa, mode_t mode)
{
	memset(sa, 0, sizeof(*sa));
	sa->mode.set_it = 1;
	sa->mode.set_mode3_u.mode = (mode3)(mode & 07777);
}

static void sa_owner(sattr3 *sa, uid_t uid, gid_t gid)
{
	memset(sa, 0, sizeof(*sa));
	if (uid != (uid_t)-1) {
		sa->uid.set_it = 1;
		sa->uid.set_uid3_u.uid = (uid3)uid;
	}
	if (gid != (gid_t)-1) {
		sa->gid.set_it = 1;
		sa->gid.set_gid3_u.gid = (gid3)gid;
	}
}

/* utimensat()'s times: UTIME_NOW is the server's time, UTIME_OMIT left
 * as it is, the others to the nanosecond. */
static void sa_times(sattr3 *sa, const struct timespec tv[2])
{
	memset(sa, 0, sizeof(*sa));
	if (tv[0].tv_nsec == UTIME_NOW) {
		sa->atime.set_it = SET_TO_SERVER_TIME;
	} else if (tv[0].tv_nsec != UTIME_OMIT) {
		sa->atime.set_it = SET_TO_CLIENT_TIME;
		sa->atime.set_atime_u.atime.seconds = (u_int)tv[0].tv_sec;
		sa->atime.set_atime_u.atime.nseconds = (u_int)tv[0].tv_nsec;
	}
	if (tv[1].tv_nsec == UTIME_NOW) {
		sa->mtime.set_it = SET_TO_SERVER_TIME;
	} else if (tv[1].tv_nsec != UTIME_OMIT) {
		sa->mtime.set_it = SET_TO_CLIENT_TIME;
		sa->mtime.set_mtime_u.mtime.seconds = (u_int)tv[1].tv_sec;
		sa->mtime.set_mtime_u.mtime.nseconds = (u_int)tv[1].tv_nsec;
	}
}

/* A SETATTR3 of the path rel, made with sattr3 sa set by SET(&sa, ...). */
#define SETATTR_PATH(SET, ...)                                  \
	char *p = abs_path(rel);                                \
	sattr3 sa;                                              \
	int rc;                                                 \
	if (!p)                                                 \
		return -ENOMEM;                                 \
	SET(&sa, __VA_ARGS__);                                  \
	rc = setattr_of(nb_of(fs), NULL, p, &sa);               \
	free(p);                                                \
	return rc

static int nfs_ftruncate_file(struct ufs *fs, struct ufs_bfile *f, uint64_t size)
{
	sattr3 sa;

	/* A WRITE3 still in flight could land after the SETATTR. */
	nfsb_drain(fs, f);
	sa_size(&sa, size);
	return setattr_of(nb_of(fs), f, NULL, &sa);
}

static int nfs_fchmod_file(struct ufs *fs, struct ufs_bfile *f, mode_t mode)
{
	sattr3 sa;

	sa_mode(&sa, mode);
	return setattr_of(nb_of(fs), f, NULL, &sa);
}

static int nfs_fchown_file(struct ufs *fs, struct ufs_bfile *f, uid_t uid, gid_t gid)
{
	sattr3 sa;

	sa_owner(&sa, uid, gid);
	return setattr_of(nb_of(fs), f, NULL, &sa);
}

static int nfs_futimens_file(struct ufs *fs, struct ufs_bfile *f, const struct timespec tv[2])
{
	sattr3 sa;

	sa_times(&sa, tv);
	return setattr_of(nb_of(fs), f, NULL, &sa);
}

/* A chmod and times in one SETATTR3. */
static int nfs_fsetattrs_file(struct ufs *fs, struct ufs_bfile *f, mode_t mode,
			      const struct timespec tv[2])
{
	sattr3 sa;

	sa_times(&sa, tv);
	if (mode != (mode_t)-1) {
		sa.mode.set_it = 1;
		sa.mode.set_mode3_u.mode = (mode3)(mode & 07777);
	}
	return setattr_of(nb_of(fs), f, NULL, &sa);
}

/*
 * A directory opened: read whole at once, READDIRPLUS3 on any namespace
 * context (handles.c nfsb_readdir()); the attributes of its names go to
 * the attribute cache, for the lookups that follow a listing (ls -l, rm
 * -r), and their handles to the handle cache.
 */
static int nfs_opendir_path(struct ufs *fs, const char *rel, struct ufs_bfile **out)
{
	struct ufs_bfile *f = bfile_new(rel);
	struct nb *nb = nb_of(fs);
	uint64_t gen = ac_gen_now(nb);
	size_t plen;
	int rc;

	if (!f)
		return -ENOMEM;
	WITH_HANDLE(nb, rc, nfsb_readdir(nb, f->path, &f->ents, &f->nents));
	if (rc) {
		free(f->path);
		free(f);
		return rc < 0 ? rc : -EIO;
	}
	made_listed(nb, f);
	plen = strlen(f->path);
	for (size_t i = 0; i < f->nents; i++) {
		const struct nb_dirent *d = &f->ents[i];
		size_t nl = strlen(d->name), at = plen > 1 ? plen : 0;
		char *p;

		if (!d->have_st || !strcmp(d->name, ".") || !strcmp(d->name, "..") ||
		    at + 1 + nl >= PATH_MAX || !(p = malloc(at + 2 + nl)))
			continue;
		memcpy(p, f->path, at);
		p[at] = '/';
		memcpy(p + at + 1, d->name, nl + 1);
		ac_put(nb, p, false, 0, &d->st, gen);
		if (!S_ISLNK(d->st.st_mode))
			ac_put(nb, p, true, 0, &d->st, gen);
		free(p);
	}
	*out = f;
	return 0;
}

static int nfs_readdir_dir(struct ufs *fs, struct ufs_bfile *d, uint64_t off, ufs_fill_fn fill,
			   void *ctx)
{
	(void)fs;
	(void)off; /* read whole at opendir: every call lists it all */
	for (size_t i = 0; i < d->nents; i++) {
		const struct nb_dirent *e = &d->ents[i];
		struct stat st = { .st_ino = (ino_t)e->ino,
				   .st_mode = e->have_st ? e->st.st_mode : 0 };

		if (fill(ctx, e->name, &st))
			break;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */

/* The cached attributes of path (not followed), without counting a hit or
 * a miss: whether there are. */
static bool ac_peek(struct nb *nb, const char *path, struct stat *st)
{
	int rc;

	return ac_lookup(nb, path, false, st, &rc, NULL, false) && rc == 0;
}

/*
 * Removes a name: one REMOVE3 or RMDIR3 on its parent's handle, on any
 * namespace context; its handle forgotten (and for a directory those of
 * the paths below it). Of the attributes, the name's are forgotten, its
 * directory's taken from the reply, and those of the file's other names
 * forgotten when it has some (their nlink); everything when the cache
 * does not know the file. So the attributes a listing cached (opendir)
 * still answer the lookups of the names after it (rm -r).
 */
static int remove_path(struct ufs *fs, const char *rel, bool dir)
{
	struct nb *nb = nb_of(fs);
	char *p = abs_path(rel);
	uint64_t gen = ac_gen_now(nb), now;
	struct stat st, pst;
	bool known, have_pst;
	int rc;

	if (!p)
		return -ENOMEM;
	known = ac_peek(nb, p, &st);
	WITH_HANDLE(nb, rc, nfsb_remove(nb, p, dir, &pst, &have_pst));
	made_gone(nb, p, rc == 0);
	if (dir)
		nfsb_fh_forget_tree(nb, p);
	else
		nfsb_fh_forget(nb, p);
	if (!known) {
		nfsb_ac_clear(nb);
	} else {
		/* The directory's attributes after the removal, from the
		 * reply: the kernel asks for them before the next name's
		 * (default_permissions), a GETATTR3 a name in rm -r. */
		bool alone = ac_forget_put(nb, p, true, NULL, have_pst ? &pst : NULL, gen, &now);

		/* Another name may have been made meanwhile (a link: its
		 * nlink cached after the peek), unless the cache moved only by
		 * this forgetting. */
		if (!S_ISDIR(st.st_mode) && (st.st_nlink > 1 || !alone))
			ac_forget_links(nb, p, st.st_ino);
	}
	free(p);
	return rc < 0 ? rc : 0;
}

static int nfs_unlink_path(struct ufs *fs, const char *rel)
{
	return remove_path(fs, rel, false);
}

static int nfs_rmdir_path(struct ufs *fs, const char *rel)
{
	return remove_path(fs, rel, true);
}

static int lstat_call(struct nb *nb, const char *p, struct stat *st)
{
	struct nb_fh fh;
	bool have;
	int rc = nfsb_resolve(nb, p, &fh, st, &have);

	return rc || have ? rc : nfsb_getattr(nb, &fh, st);
}

/* The attributes of p: from its LOOKUP3 (or a GETATTR3 of its cached
 * handle); a symbolic link followed by libnfs (on the first context). */
static int stat_call(struct nb *nb, const char *p, struct stat *st, bool follow)
{
	struct nfs_stat_64 s;
	int rc;

	WITH_HANDLE(nb, rc, lstat_call(nb, p, st));
	if (rc == 0 && follow && S_ISLNK(st->st_mode)) {
		ns0_lock(nb);
		rc = nfs_stat64(nb->ns, p, &s);
		ns0_unlock(nb);
		if (rc == 0)
			st_from(st, &s);
	}
	return rc;
}

/* stat or lstat of p (absolute): the attribute cache's, or asked. */
static int stat_abs(struct nb *nb, const char *p, struct stat *st, bool follow)
{
	uint64_t gen;
	int rc;

	if (ac_get(nb, p, follow, st, &rc, &gen))
		return rc;
	if (made_missing(nb, p))
		return -ENOENT;
	rc = stat_call(nb, p, st, follow);
	ac_put(nb, p, follow, rc < 0 ? rc : 0, st, gen);
	return rc < 0 ? rc : 0;
}

static int stat_path(struct ufs *fs, const char *rel, struct stat *st, bool follow)
{
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	rc = stat_abs(nb_of(fs), p, st, follow);
	free(p);
	return rc;
}

static int nfs_lstat_path(struct ufs *fs, const char *rel, struct stat *st)
{
	return stat_path(fs, rel, st, false);
}

static int nfs_stat_path(struct ufs *fs, const char *rel, struct stat *st)
{
	return stat_path(fs, rel, st, true);
}

static int nfs_truncate_path(struct ufs *fs, const char *rel, uint64_t size)
{
	SETATTR_PATH(sa_size, size);
}

static int nfs_mkdir_path(struct ufs *fs, const char *rel, mode_t mode)
{
	char *p = abs_path(rel);
	struct nb *nb = nb_of(fs);
	uint64_t gen = ac_gen_now(nb), now;
	struct nb_fh fh;
	struct stat st, pst;
	bool have = false, have_pst = false;
	int rc;

	if (!p)
		return -ENOMEM;
	WITH_HANDLE(nb, rc, nfsb_make(nb, p, true, true, mode, &fh, &st, &have, &pst, &have_pst));
	ac_forget_put(nb, p, true, rc == 0 && have ? &st : NULL, rc == 0 && have_pst ? &pst : NULL,
		      gen, &now);
	made_note(nb, p, rc == 0, true);
	free(p);
	return rc;
}

/* One MKNOD3 (a FIFO, a socket, a device) on the parent's handle, on any
 * namespace context. (libfuse sends a regular file's mknod as a create
 * when there is one, as here: should one come, it is a CREATE3 that fails
 * if the name is taken, as mknod(2) does.) */
static int nfs_mknod_path(struct ufs *fs, const char *rel, mode_t mode, dev_t rdev)
{
	struct nb *nb = nb_of(fs);
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	if (S_ISREG(mode) || !(mode & S_IFMT)) {
		uint64_t gen = ac_gen_now(nb), now;
		struct nb_fh fh;
		struct stat st, pst;
		bool have = false, have_pst = false;

		WITH_HANDLE(nb, rc,
			    nfsb_make(nb, p, false, true, mode, &fh, &st, &have, &pst, &have_pst));
		ac_forget_put(nb, p, true, rc == 0 && have ? &st : NULL,
			      rc == 0 && have_pst ? &pst : NULL, gen, &now);
	} else {
		WITH_HANDLE(nb, rc, nfsb_mknod(nb, p, mode, rdev));
		nfsb_ac_forget(nb, p);
	}
	made_note(nb, p, rc == 0, false);
	free(p);
	return rc < 0 ? rc : 0;
}

/* On the namespace's connection, under ns_lock (not the first context's
 * lock: its parent is resolved by raw calls, each on a free context, and
 * the SYMLINK3 then takes it, handles.c nfsb_symlink()). */
static int nfs_symlink_path(struct ufs *fs, const char *target, const char *rel)
{
	struct nb *nb = nb_of(fs);
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	ufs_mutex_lock(&nb->ns_lock, UFS_RANK_NFS_NS);
	WITH_HANDLE(nb, rc, nfsb_symlink(nb, target, p));
	nfsb_ac_forget(nb, p);
	made_note(nb, p, rc == 0, false);
	ufs_mutex_unlock(&nb->ns_lock, UFS_RANK_NFS_NS);
	free(p);
	return rc < 0 ? rc : 0;
}

/* One READLINK3 on the link's handle, on any namespace context. */
static int nfs_readlink_path(struct ufs *fs, const char *rel, char *buf, size_t size)
{
	struct nb *nb = nb_of(fs);
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	WITH_HANDLE(nb, rc, nfsb_readlink(nb, p, buf, size));
	free(p);
	return rc < 0 ? rc : 0;
}

static int nfs_rename_path(struct ufs *fs, const char *from, const char *to, unsigned flags)
{
	struct nb *nb = nb_of(fs);
	char *a, *b;
	int rc;

	if (flags)
		return -EINVAL; /* no RENAME_NOREPLACE or RENAME_EXCHANGE in NFSv3 */
	a = abs_path(from);
	b = abs_path(to);
	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	/* One RENAME3 on the parents' handles, on any namespace context. */
	WITH_HANDLE(nb, rc, nfsb_rename(nb, a, b));
	/* The names below either are gone or elsewhere; the others keep
	 * their handles. Every attribute goes (nlink, the directories'). */
	nfsb_fh_forget_tree(nb, a);
	nfsb_fh_forget_tree(nb, b);
	nfsb_ac_clear(nb);
	free(a);
	free(b);
	return rc < 0 ? rc : 0;
}

/* One LINK3 on the file's handle and the new name's parent's, on any
 * namespace context. Every attribute goes (nlink, the directory's). */
static int nfs_link_path(struct ufs *fs, const char *from, const char *to)
{
	struct nb *nb = nb_of(fs);
	char *a = abs_path(from), *b = abs_path(to);
	int rc;

	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	WITH_HANDLE(nb, rc, nfsb_link(nb, a, b));
	nfsb_ac_clear(nb);
	free(a);
	free(b);
	return rc < 0 ? rc : 0;
}

static int nfs_chmod_path(struct ufs *fs, const char *rel, mode_t mode)
{
	SETATTR_PATH(sa_mode, mode);
}

static int nfs_chown_path(struct ufs *fs, const char *rel, uid_t uid, gid_t gid)
{
	SETATTR_PATH(sa_owner, uid, gid);
}

static int nfs_utimens_path(struct ufs *fs, const char *rel, const struct timespec tv[2])
{
	SETATTR_PATH(sa_times, tv);
}

/* One FSSTAT3 on the path's handle, on any namespace context: sizes in
 * blocks of 4 KiB, and the name length the server takes (PATHCONF3, at
 * the mount). */
static int nfs_statfs_path(struct ufs *fs, const char *rel, struct statvfs *st)
{
	const unsigned long bs = 4096;
	struct nb *nb = nb_of(fs);
	struct nb_fsstat s;
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	WITH_HANDLE(nb, rc, nfsb_fsstat(nb, p, &s));
	free(p);
	if (rc == 0) {
		memset(st, 0, sizeof(*st));
		st->f_bsize = bs;
		st->f_frsize = bs;
		st->f_blocks = (fsblkcnt_t)(s.tbytes / bs);
		st->f_bfree = (fsblkcnt_t)(s.fbytes / bs);
		st->f_bavail = (fsblkcnt_t)(s.abytes / bs);
		st->f_files = (fsfilcnt_t)s.tfiles;
		/* The files the caller may still make, as the Linux client
		 * reports them (FUSE carries no f_favail). */
		st->f_ffree = (fsfilcnt_t)s.afiles;
		st->f_favail = (fsfilcnt_t)s.afiles;
		st->f_namemax = nb->name_max ? nb->name_max : 255;
	}
	return rc < 0 ? rc : 0;
}

/* One ACCESS3 on the path's handle, on any namespace context: each bit of
 * mask needs one of the rights that grant it (as libnfs read them); F_OK,
 * that the name resolves. (With default_permissions, main.c, the kernel
 * checks permissions itself and does not ask.) */
static int nfs_access_path(struct ufs *fs, const char *rel, int mask)
{
	struct nb *nb = nb_of(fs);
	uint32_t asked = 0, got = 0;
	char *p = abs_path(rel);
	int rc;

	if (!p)
		return -ENOMEM;
	if (mask & R_OK)
		asked |= ACCESS3_READ;
	if (mask & W_OK)
		asked |= ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE;
	if (mask & X_OK)
		asked |= ACCESS3_EXECUTE | ACCESS3_LOOKUP;
	if (!asked) {
		struct nb_fh fh;

		WITH_HANDLE(nb, rc, nfsb_resolve(nb, p, &fh, NULL, NULL));
	} else {
		WITH_HANDLE(nb, rc, nfsb_access(nb, p, asked, &got));
	}
	free(p);
	if (rc)
		return rc < 0 ? rc : -EIO;
	if (((mask & R_OK) && !(got & ACCESS3_READ)) ||
	    ((mask & W_OK) && !(got & (ACCESS3_MODIFY | ACCESS3_EXTEND | ACCESS3_DELETE))) ||
	    ((mask & X_OK) && !(got & (ACCESS3_EXECUTE | ACCESS3_LOOKUP))))
		return -EACCES;
	return 0;
}

const struct ufs_backend ufs_backend_nfs = {
	.name = "nfs",
	.shared = true,
	.page_writeback = true,
	.chunk_default = UFS_CHUNK_NFS,
	.unlocked_writeback = true,
	.attach = nfsb_attach,
	.start = nfsb_start,
	.detach = nfsb_detach,
	.stats = nfsb_stats,
	.flush = nfsb_flush,
	.commit = nfsb_commit,
	.drain = nfsb_drain,
	.seal = nfsb_seal,
	.open = nfs_open_file,
	.reopen_rw = nfs_reopen_rw,
	.close = nfs_close_file,
	.fstat = nfs_fstat_file,
	.pread = nfs_pread_file,
	.pwrite = nfs_pwrite_file,
	.fsync = nfs_fsync_file,
	.ftruncate = nfs_ftruncate_file,
	.fchmod = nfs_fchmod_file,
	.fchown = nfs_fchown_file,
	.futimens = nfs_futimens_file,
	.fsetattrs = nfs_fsetattrs_file,
	.opendir = nfs_opendir_path,
	.readdir = nfs_readdir_dir,
	.lstat = nfs_lstat_path,
	.stat = nfs_stat_path,
	.truncate = nfs_truncate_path,
	.mkdir = nfs_mkdir_path,
	.mknod = nfs_mknod_path,
	.unlink = nfs_unlink_path,
	.rmdir = nfs_rmdir_path,
	.symlink = nfs_symlink_path,
	.readlink = nfs_readlink_path,
	.rename = nfs_rename_path,
	.link = nfs_link_path,
	.chmod = nfs_chmod_path,
	.chown = nfs_chown_path,
	.utimens = nfs_utimens_path,
	.statfs = nfs_statfs_path,
	.access = nfs_access_path,
};
