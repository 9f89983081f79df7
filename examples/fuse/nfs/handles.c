/*
 * unstable-fuse, NFSv3 backend (nfs.h): the namespace's file handles.
 * libnfs's calls by path walk each path from the export's root, one LOOKUP3
 * per component, before the call itself: a file created two directories
 * down was 3 round trips and a stat 3 more. Here a path is resolved from
 * the handle cache (a path's handle, kept for --attr-cache like the
 * attributes) and the LOOKUP3s of the components it does not hold, and the
 * calls that name a file are made on its handle: raw NFS3 calls on the RPC
 * context of any free namespace context of the pool (a channel, under its
 * lock: nfsb_chan_get()), serviced here until their reply like libnfs's own
 * synchronous calls, so that calls of several threads run at once (a
 * SYMLINK3, which libnfs cannot encode with a long target, on the
 * namespace's own connection: conn.c nfsb_nc_call()). The cache is under
 * ac_lock (with the attribute cache, which answers a file's stat when its
 * path still names its handle).
 *
 * The cache holds what this client resolved (a READDIRPLUS3 the handles
 * of a directory's names); what it changes it forgets: a removed name's
 * handle, and those of the paths below a directory removed or renamed
 * (either name of a rename). A handle looked up or made is kept only if nothing was
 * forgotten since the call was sent (fh_gen): a LOOKUP3 answered before a
 * concurrent rename or unlink of the name would else be kept after it. A
 * handle the server calls stale (another client removed or renamed the
 * name) empties the cache and the call is made once more, from the root.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

#include <sys/sysmacros.h>

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Synchronous raw calls                                                     */

enum ns_proc {
	NS_GETATTR,
	NS_SETATTR,
	NS_LOOKUP,
	NS_CREATE,
	NS_MKDIR,
	NS_REMOVE,
	NS_RMDIR,
	NS_RENAME,
	NS_READDIRPLUS,
	NS_READDIR,
	NS_LINK,
	NS_READLINK,
	NS_MKNOD,
	NS_FSSTAT,
	NS_ACCESS
};

/* A call's outcome. On the heap: a call given up on (the context failed)
 * stays queued on the context, whose callback may still write here; such a
 * wait is left to it. */
struct ns_wait {
	enum ns_proc proc;
	bool done;
	int rc;		 /* 0 or a negative errno */
	nfsstat3 status; /* the reply's */
	bool have_fh, have_attr, have_dir_attr;
	struct nb_fh fh;
	fattr3 attr, dir_attr; /* the object's; its directory's after the call */
	/* READDIRPLUS3: the reply's entries, copied out (the reply is freed
	 * when the callback returns), its cookie verifier and eof. */
	struct nb_dirent *ents;
	size_t nents, cap;
	char verf[NFS3_COOKIEVERFSIZE];
	bool eof;
	char *target;	 /* READLINK3's (-ENOMEM in rc if it cannot be copied) */
	FSSTAT3resok fs; /* FSSTAT3's */
	uint32_t access; /* ACCESS3's */
};

static void take_fh(struct ns_wait *w, const post_op_fh3 *p)
{
	if (p->handle_follows && p->post_op_fh3_u.handle.data.data_len <= NFS3_FHSIZE) {
		w->fh.len = p->post_op_fh3_u.handle.data.data_len;
		memcpy(w->fh.data, p->post_op_fh3_u.handle.data.data_val, w->fh.len);
		w->have_fh = w->fh.len > 0;
	}
}

static void take_attr(struct ns_wait *w, const post_op_attr *a)
{
	if (a->attributes_follow) {
		w->attr = a->post_op_attr_u.attributes;
		w->have_attr = true;
	}
}

static void take_dir_attr(struct ns_wait *w, const post_op_attr *a)
{
	if (a->attributes_follow) {
		w->dir_attr = a->post_op_attr_u.attributes;
		w->have_dir_attr = true;
	}
}

/* The entries of a READDIRPLUS3 reply, appended to w's (names copied;
 * -ENOMEM in w->rc if that fails). */
/* A new entry of w's named name, or NULL (-ENOMEM in w->rc). */
static struct nb_dirent *entry_new(struct ns_wait *w, const char *name, uint64_t ino,
				   uint64_t cookie)
{
	struct nb_dirent *d;

	if (w->nents == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct nb_dirent *n = realloc(w->ents, cap * sizeof(*n));

		if (!n) {
			w->rc = -ENOMEM;
			return NULL;
		}
		w->ents = n;
		w->cap = cap;
	}
	d = &w->ents[w->nents];
	memset(d, 0, sizeof(*d));
	if (!(d->name = strdup(name))) {
		w->rc = -ENOMEM;
		return NULL;
	}
	d->ino = ino;
	d->cookie = cookie;
	w->nents++;
	return d;
}

/*
 * The entries of a reply are read through aligned copies: libnfs's decoder
 * lays the list out at 4-byte alignment, and the entries hold 64-bit
 * fields (fileid, cookie, the attributes' sizes and times).
 */

/* READDIR3's entries (a server without READDIRPLUS3): names only. */
static void take_names(struct ns_wait *w, const READDIR3resok *ok)
{
	const void *next = ok->reply.entries;
	entry3 e;

	memcpy(w->verf, ok->cookieverf, sizeof(w->verf));
	w->eof = ok->reply.eof;
	for (; next; next = e.nextentry) {
		memcpy(&e, next, sizeof(e));
		if (!entry_new(w, e.name, e.fileid, e.cookie))
			return;
	}
}

static void take_entries(struct ns_wait *w, const READDIRPLUS3resok *ok)
{
	const void *next = ok->reply.entries;
	entryplus3 ent, *e = &ent;

	memcpy(w->verf, ok->cookieverf, sizeof(w->verf));
	w->eof = ok->reply.eof;
	for (; next; next = ent.nextentry) {
		struct nb_dirent *d;

		memcpy(&ent, next, sizeof(ent));
		if (!(d = entry_new(w, e->name, e->fileid, e->cookie)))
			return;
		if (e->name_attributes.attributes_follow) {
			nfsb_st_from_fattr(&d->st, &e->name_attributes.post_op_attr_u.attributes);
			d->have_st = true;
		}
		if (e->name_handle.handle_follows &&
		    e->name_handle.post_op_fh3_u.handle.data.data_len <= NFS3_FHSIZE &&
		    e->name_handle.post_op_fh3_u.handle.data.data_len > 0) {
			d->fh.len = e->name_handle.post_op_fh3_u.handle.data.data_len;
			memcpy(d->fh.data, e->name_handle.post_op_fh3_u.handle.data.data_val,
			       d->fh.len);
			d->have_fh = true;
		}
	}
}

void nfsb_dirents_free(struct nb_dirent *ents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
}

/* What a CREATE3, MKDIR3 or MKNOD3 made: its handle and attributes, and
 * its directory's attributes after it. */
static void take_made(struct ns_wait *w, const post_op_fh3 *fh, const post_op_attr *a,
		      const wcc_data *dir)
{
	take_fh(w, fh);
	take_attr(w, a);
	take_dir_attr(w, &dir->after);
}

static void ns_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct ns_wait *w = priv;

	(void)rpc;
	w->done = true;
	if (status != RPC_STATUS_SUCCESS) {
		w->rc = status == RPC_STATUS_TIMEOUT ? -ETIMEDOUT : -EIO;
		return;
	}
	/* Every NFS3 result begins with its nfsstat3. */
	w->status = *(nfsstat3 *)data;
	if (*(nfsstat3 *)data != NFS3_OK) {
		w->rc = nfsstat3_to_errno(*(nfsstat3 *)data);
		if (w->rc >= 0)
			w->rc = -EIO;
		if (w->proc == NS_SETATTR)
			take_attr(w, &((SETATTR3res *)data)->SETATTR3res_u.resfail.obj_wcc.after);
		return;
	}
	switch (w->proc) {
	case NS_GETATTR:
		w->attr = ((GETATTR3res *)data)->GETATTR3res_u.resok.obj_attributes;
		w->have_attr = true;
		break;
	case NS_SETATTR:
		take_attr(w, &((SETATTR3res *)data)->SETATTR3res_u.resok.obj_wcc.after);
		break;
	case NS_LOOKUP: {
		LOOKUP3resok *ok = &((LOOKUP3res *)data)->LOOKUP3res_u.resok;

		if (ok->object.data.data_len <= NFS3_FHSIZE) {
			w->fh.len = ok->object.data.data_len;
			memcpy(w->fh.data, ok->object.data.data_val, w->fh.len);
			w->have_fh = w->fh.len > 0;
		}
		take_attr(w, &ok->obj_attributes);
		break;
	}
	case NS_CREATE: {
		CREATE3resok *ok = &((CREATE3res *)data)->CREATE3res_u.resok;

		take_made(w, &ok->obj, &ok->obj_attributes, &ok->dir_wcc);
		break;
	}
	case NS_MKDIR: {
		MKDIR3resok *ok = &((MKDIR3res *)data)->MKDIR3res_u.resok;

		take_made(w, &ok->obj, &ok->obj_attributes, &ok->dir_wcc);
		break;
	}
	case NS_REMOVE:
		take_dir_attr(w, &((REMOVE3res *)data)->REMOVE3res_u.resok.dir_wcc.after);
		break;
	case NS_RMDIR:
		take_dir_attr(w, &((RMDIR3res *)data)->RMDIR3res_u.resok.dir_wcc.after);
		break;
	case NS_RENAME:
		break; /* its status says it all */
	case NS_READDIRPLUS:
		take_entries(w, &((READDIRPLUS3res *)data)->READDIRPLUS3res_u.resok);
		break;
	case NS_READDIR:
		take_names(w, &((READDIR3res *)data)->READDIR3res_u.resok);
		break;
	case NS_LINK:
		take_attr(w, &((LINK3res *)data)->LINK3res_u.resok.file_attributes);
		take_dir_attr(w, &((LINK3res *)data)->LINK3res_u.resok.linkdir_wcc.after);
		break;
	case NS_READLINK: {
		const char *t = ((READLINK3res *)data)->READLINK3res_u.resok.data;

		if (!(w->target = strdup(t ? t : "")))
			w->rc = -ENOMEM;
		break;
	}
	case NS_MKNOD: {
		MKNOD3resok *ok = &((MKNOD3res *)data)->MKNOD3res_u.resok;

		take_made(w, &ok->obj, &ok->obj_attributes, &ok->dir_wcc);
		break;
	}
	case NS_FSSTAT:
		w->fs = ((FSSTAT3res *)data)->FSSTAT3res_u.resok;
		break;
	case NS_ACCESS:
		w->access = ((ACCESS3res *)data)->ACCESS3res_u.resok.access;
		break;
	}
}

/* ------------------------------------------------------------------------ */
/* The namespace contexts (channels)                                          */

/* A namespace call begins (a channel taken, or the namespace connection's
 * call): counted, and the most at once kept (nfs_ns_peak). */
void nfsb_ns_busy(struct nb *nb)
{
	uint_fast64_t n = atomic_fetch_add(&nb->ns_busy, 1) + 1;
	uint_fast64_t peak = atomic_load(&nb->ns_peak);

	while (n > peak && !atomic_compare_exchange_weak(&nb->ns_peak, &peak, n))
		;
}

void nfsb_ns_idle(struct nb *nb)
{
	atomic_fetch_sub(&nb->ns_busy, 1);
}

/*
 * A namespace context for one raw call: the first free one, tried in turn
 * from a point that moves at every call, the first context (the calls by
 * path use it under ns_lock) last; if none is free, the wait for one of
 * the others. Under its lock until nfsb_chan_put().
 */
struct nb_chan *nfsb_chan_get(struct nb *nb)
{
	unsigned n = nb->nchan, start = atomic_fetch_add(&nb->chan_next, 1);
	struct nb_chan *c;

	for (unsigned i = 0; i < n; i++) {
		c = &nb->chan[i + 1 < n ? 1 + (start + i) % (n - 1) : 0];
		if (ufs_mutex_trylock(&c->lock, UFS_RANK_NFS_CHAN))
			goto got;
	}
	c = &nb->chan[n > 1 ? 1 + start % (n - 1) : 0];
	ufs_mutex_lock(&c->lock, UFS_RANK_NFS_CHAN);
got:
	nfsb_ns_busy(nb);
	return c;
}

void nfsb_chan_put(struct nb *nb, struct nb_chan *c)
{
	nfsb_ns_idle(nb);
	ufs_mutex_unlock(&c->lock, UFS_RANK_NFS_CHAN);
}

/* Services the namespace context nfs until w's reply, as libnfs's
 * synchronous calls do (its reconnects and timeouts included). 0 or a
 * negative errno; on -EIO from the context itself, w is left to it. */
static int ns_wait(struct nfs_context *nfs, struct ns_wait *w)
{
	while (!w->done) {
		struct pollfd pfd = { .fd = nfs_get_fd(nfs), .events = (short)nfs_which_events(nfs) };
		int n = poll(&pfd, 1, 100);

		if (n < 0 && errno != EINTR)
			return -EIO;
		if (nfs_service(nfs, n > 0 ? pfd.revents : 0) < 0)
			return -EIO;
	}
	return 0;
}

static struct ns_wait *ns_new(enum ns_proc proc)
{
	struct ns_wait *w = calloc(1, sizeof(*w));

	if (w)
		w->proc = proc;
	return w;
}

static int ns_send(struct rpc_context *rpc, struct ns_wait *w, void *args)
{
	switch (w->proc) {
	case NS_GETATTR:
		return rpc_nfs3_getattr_async(rpc, ns_cb, args, w);
	case NS_SETATTR:
		return rpc_nfs3_setattr_async(rpc, ns_cb, args, w);
	case NS_LOOKUP:
		return rpc_nfs3_lookup_async(rpc, ns_cb, args, w);
	case NS_CREATE:
		return rpc_nfs3_create_async(rpc, ns_cb, args, w);
	case NS_MKDIR:
		return rpc_nfs3_mkdir_async(rpc, ns_cb, args, w);
	case NS_REMOVE:
		return rpc_nfs3_remove_async(rpc, ns_cb, args, w);
	case NS_RMDIR:
		return rpc_nfs3_rmdir_async(rpc, ns_cb, args, w);
	case NS_RENAME:
		return rpc_nfs3_rename_async(rpc, ns_cb, args, w);
	case NS_READDIRPLUS:
		return rpc_nfs3_readdirplus_async(rpc, ns_cb, args, w);
	case NS_READDIR:
		return rpc_nfs3_readdir_async(rpc, ns_cb, args, w);
	case NS_LINK:
		return rpc_nfs3_link_async(rpc, ns_cb, args, w);
	case NS_READLINK:
		return rpc_nfs3_readlink_async(rpc, ns_cb, args, w);
	case NS_MKNOD:
		return rpc_nfs3_mknod_async(rpc, ns_cb, args, w);
	case NS_FSSTAT:
		return rpc_nfs3_fsstat_async(rpc, ns_cb, args, w);
	case NS_ACCESS:
		return rpc_nfs3_access_async(rpc, ns_cb, args, w);
	}
	return -1;
}

/* The call w->proc with args (its NFS3 arguments) on a free namespace
 * context, waited for; frees w unless the context kept it. The call's rc
 * (its reply's, in w->rc, when 0). */
static int ns_call(struct nb *nb, struct ns_wait *w, void *args)
{
	struct nb_chan *c = nfsb_chan_get(nb);
	int rc;

	if (ns_send(nfs_get_rpc_context(c->nfs), w, args) != 0) {
		free(w);
		rc = -EIO;
	} else {
		atomic_fetch_add(&nb->ns_rpcs, 1);
		rc = ns_wait(c->nfs, w); /* on an error w stays with the context */
	}
	nfsb_chan_put(nb, c);
	return rc;
}

static void fh3(nfs_fh3 *out, const struct nb_fh *fh)
{
	out->data.data_len = fh->len;
	out->data.data_val = (char *)fh->data;
}

/* ------------------------------------------------------------------------ */
/* The handle cache (under ac_lock)                                          */

static size_t fh_slot(const char *path, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)path[i]) * 1099511628211ull;
	return (size_t)(h % NB_FH_SLOTS);
}

/* Under ac_lock: the cached handle of path[0..len). */
bool nfsb_fh_get_locked(struct nb *nb, const char *path, size_t len, struct nb_fh *fh)
{
	struct nb_fh_ent *e;

	if (!nb->fhc)
		return false;
	e = &nb->fhc[fh_slot(path, len)];
	if (!e->path || strlen(e->path) != len || memcmp(e->path, path, len) != 0 ||
	    now_ns() >= e->until_ns)
		return false;
	*fh = e->fh;
	return true;
}

static bool fh_get(struct nb *nb, const char *path, size_t len, struct nb_fh *fh)
{
	bool hit;

	if (!nb->fhc)
		return false;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	hit = nfsb_fh_get_locked(nb, path, len, fh);
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	return hit;
}

/* The handle cache's generation, sampled before a call whose reply gives
 * a handle (fh_put()). */
static uint64_t fh_gen_now(struct nb *nb)
{
	uint64_t gen;

	if (!nb->fhc)
		return 0;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	gen = nb->fh_gen;
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	return gen;
}

/* Keeps fh for path[0..len), answered to a call sent at generation gen,
 * unless a handle was forgotten since (a rename or unlink that ran
 * meanwhile may have made it another name's, or none's). */
static void fh_put(struct nb *nb, const char *path, size_t len, const struct nb_fh *fh,
		   uint64_t gen)
{
	struct nb_fh_ent *e;
	char *copy;

	if (!nb->fhc || !(copy = strndup(path, len)))
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	if (gen == nb->fh_gen) {
		e = &nb->fhc[fh_slot(path, len)];
		free(e->path);
		e->path = copy;
		copy = NULL;
		e->fh = *fh;
		e->until_ns = now_ns() + nb->ac_ttl_ns;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
	free(copy);
}

/* Forgets path's handle. */
void nfsb_fh_forget(struct nb *nb, const char *path)
{
	size_t len = strlen(path);
	struct nb_fh_ent *e;

	if (!nb->fhc)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->fh_gen++;
	e = &nb->fhc[fh_slot(path, len)];
	if (e->path && strcmp(e->path, path) == 0) {
		free(e->path);
		e->path = NULL;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets the handles of path and of every path below it (a directory
 * removed or renamed: their names are gone or elsewhere). */
void nfsb_fh_forget_tree(struct nb *nb, const char *path)
{
	size_t len = strlen(path);

	if (!nb->fhc)
		return;
	while (len > 1 && path[len - 1] == '/')
		len--;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->fh_gen++;
	for (size_t i = 0; i < NB_FH_SLOTS; i++) {
		const char *q = nb->fhc[i].path;

		if (q && strncmp(q, path, len) == 0 && (q[len] == '\0' || q[len] == '/' || len == 1)) {
			free(nb->fhc[i].path);
			nb->fhc[i].path = NULL;
		}
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* Forgets every handle. */
void nfsb_fh_clear(struct nb *nb)
{
	if (!nb->fhc)
		return;
	ufs_mutex_lock(&nb->ac_lock, UFS_RANK_NFS_AC);
	nb->fh_gen++;
	for (size_t i = 0; i < NB_FH_SLOTS; i++) {
		free(nb->fhc[i].path);
		nb->fhc[i].path = NULL;
	}
	ufs_mutex_unlock(&nb->ac_lock, UFS_RANK_NFS_AC);
}

/* The export root's handle, into nb->root. Before any other thread. */
int nfsb_fh_root(struct nb *nb)
{
	struct nfsfh *root = NULL;
	struct lnfs_fh *fh;
	int rc = nfs_open(nb->ns, "/", O_RDONLY, &root);

	if (rc)
		return rc < 0 ? rc : -EIO;
	fh = (struct lnfs_fh *)nfs_get_fh(root);
	if (!fh || fh->len <= 0 || fh->len > NFS3_FHSIZE) {
		nfs_close(nb->ns, root);
		return -EIO;
	}
	nb->root.len = (unsigned)fh->len;
	memcpy(nb->root.data, fh->val, nb->root.len);
	nfs_close(nb->ns, root);
	if (nb->ac_ttl_ns && !(nb->fhc = calloc(NB_FH_SLOTS, sizeof(*nb->fhc))))
		return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Calls                                                                     */

void nfsb_st_from_fattr(struct stat *st, const fattr3 *a)
{
	static const mode_t type[] = { [NF3REG] = S_IFREG,  [NF3DIR] = S_IFDIR,
				       [NF3BLK] = S_IFBLK,  [NF3CHR] = S_IFCHR,
				       [NF3LNK] = S_IFLNK,  [NF3SOCK] = S_IFSOCK,
				       [NF3FIFO] = S_IFIFO };

	memset(st, 0, sizeof(*st));
	/* As libnfs's stat: the device is the fsid. */
	st->st_dev = (dev_t)a->fsid;
	st->st_ino = (ino_t)a->fileid;
	st->st_mode = (mode_t)(a->mode & 07777);
	if ((unsigned)a->type < sizeof(type) / sizeof(type[0]))
		st->st_mode |= type[a->type];
	st->st_nlink = (nlink_t)a->nlink;
	st->st_uid = (uid_t)a->uid;
	st->st_gid = (gid_t)a->gid;
	st->st_rdev = makedev(a->rdev.specdata1, a->rdev.specdata2);
	st->st_size = (off_t)a->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((a->used + 511) / 512);
	st->st_atim.tv_sec = (time_t)a->atime.seconds;
	st->st_atim.tv_nsec = (long)a->atime.nseconds;
	st->st_mtim.tv_sec = (time_t)a->mtime.seconds;
	st->st_mtim.tv_nsec = (long)a->mtime.nseconds;
	st->st_ctim.tv_sec = (time_t)a->ctime.seconds;
	st->st_ctim.tv_nsec = (long)a->ctime.nseconds;
}

static int ns_lookup(struct nb *nb, const struct nb_fh *dir, const char *name,
		     struct nb_fh *fh, struct stat *st, bool *have_st)
{
	struct ns_wait *w = ns_new(NS_LOOKUP);
	LOOKUP3args a;
	int rc;

	if (!w)
		return -ENOMEM;
	fh3(&a.what.dir, dir);
	a.what.name = (char *)name;
	if ((rc = ns_call(nb, w, &a)))
		return rc;
	rc = w->rc;
	if (rc == 0 && !w->have_fh)
		rc = -EIO;
	if (rc == 0) {
		*fh = w->fh;
		if (st && w->have_attr) {
			nfsb_st_from_fattr(st, &w->attr);
			*have_st = true;
		}
	}
	free(w);
	return rc;
}

/*
 * The handle of path (absolute in the export; "/" is the root), from the
 * cache or with a LOOKUP3 of each component past the longest prefix the
 * cache holds; every component but the last is a directory (the kernel
 * resolved the symbolic links on the way), the last is not followed. Its
 * attributes in *st when the last LOOKUP3 gave them (*have_st, if st).
 * Each LOOKUP3 on a free namespace context.
 */
int nfsb_resolve(struct nb *nb, const char *path, struct nb_fh *fh, struct stat *st,
		 bool *have_st)
{
	uint64_t gen = fh_gen_now(nb);
	size_t len = strlen(path), at;
	struct nb_fh cur;
	char name[NAME_MAX + 1];
	int rc;

	if (have_st)
		*have_st = false;
	while (len > 1 && path[len - 1] == '/')
		len--;
	if (len <= 1) {
		*fh = nb->root;
		return 0;
	}
	/* The longest cached prefix ending at a component. */
	at = len;
	while (at > 0 && !fh_get(nb, path, at, &cur)) {
		while (at > 0 && path[at - 1] != '/')
			at--;
		while (at > 0 && path[at - 1] == '/')
			at--;
	}
	if (at == 0)
		cur = nb->root;
	while (at < len) {
		size_t from, n;
		bool last;

		while (at < len && path[at] == '/')
			at++;
		from = at;
		while (at < len && path[at] != '/')
			at++;
		n = at - from;
		if (n == 0)
			break;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, path + from, n);
		name[n] = '\0';
		last = at >= len;
		rc = ns_lookup(nb, &cur, name, &cur, last ? st : NULL, have_st);
		if (rc)
			return rc;
		fh_put(nb, path, at, &cur, gen);
	}
	*fh = cur;
	return 0;
}

int nfsb_getattr(struct nb *nb, const struct nb_fh *fh, struct stat *st)
{
	struct ns_wait *w = ns_new(NS_GETATTR);
	GETATTR3args a;
	int rc;

	if (!w)
		return -ENOMEM;
	fh3(&a.object, fh);
	if ((rc = ns_call(nb, w, &a)))
		return rc;
	rc = w->rc;
	if (rc == 0)
		nfsb_st_from_fattr(st, &w->attr);
	free(w);
	return rc;
}

/* A SETATTR3 of fh; its attributes after it in *st when the reply has them
 * (*have_st). */
int nfsb_setattr(struct nb *nb, const struct nb_fh *fh, const sattr3 *sa, struct stat *st,
		 bool *have_st)
{
	struct ns_wait *w = ns_new(NS_SETATTR);
	SETATTR3args a;
	int rc;

	*have_st = false;
	if (!w)
		return -ENOMEM;
	memset(&a, 0, sizeof(a));
	fh3(&a.object, fh);
	a.new_attributes = *sa;
	if ((rc = ns_call(nb, w, &a)))
		return rc;
	rc = w->rc;
	if (w->have_attr) {
		nfsb_st_from_fattr(st, &w->attr);
		*have_st = true;
	}
	free(w);
	return rc;
}

/* Splits path into its parent's handle and its last name (into name). */
static int parent_of(struct nb *nb, const char *path, struct nb_fh *dir, char *name)
{
	const char *slash = strrchr(path, '/');
	char parent[PATH_MAX];
	size_t n;

	if (!slash || !slash[1])
		return -EINVAL;
	if (strlen(slash + 1) > NAME_MAX)
		return -ENAMETOOLONG;
	strcpy(name, slash + 1);
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof(parent))
		return -ENAMETOOLONG;
	memcpy(parent, path, n);
	parent[n] = '\0';
	return nfsb_resolve(nb, parent, dir, NULL, NULL);
}

/*
 * CREATE3 (GUARDED when excl: EEXIST if the name is taken; else
 * UNCHECKED) or MKDIR3 of path with mode, in one call: the handle (into fh,
 * cached) and the attributes (*st, *have_st) of what was made, and those
 * of its directory after it (*pst, *have_pst).
 */
int nfsb_make(struct nb *nb, const char *path, bool dir, bool excl, mode_t mode,
	      struct nb_fh *fh, struct stat *st, bool *have_st, struct stat *pst, bool *have_pst)
{
	struct nb_fh parent;
	char name[NAME_MAX + 1];
	struct ns_wait *w;
	uint64_t gen = fh_gen_now(nb);
	sattr3 sa;
	int rc;

	*have_st = *have_pst = false;
	if ((rc = parent_of(nb, path, &parent, name)))
		return rc;
	if (!(w = ns_new(dir ? NS_MKDIR : NS_CREATE)))
		return -ENOMEM;
	memset(&sa, 0, sizeof(sa));
	sa.mode.set_it = 1;
	sa.mode.set_mode3_u.mode = (mode3)(mode & 07777);
	if (dir) {
		MKDIR3args a;

		fh3(&a.where.dir, &parent);
		a.where.name = name;
		a.attributes = sa;
		rc = ns_call(nb, w, &a);
	} else {
		CREATE3args a;

		memset(&a, 0, sizeof(a));
		fh3(&a.where.dir, &parent);
		a.where.name = name;
		a.how.mode = excl ? GUARDED : UNCHECKED;
		a.how.createhow3_u.obj_attributes = sa;
		rc = ns_call(nb, w, &a);
	}
	if (rc)
		return rc;
	rc = w->rc;
	if (rc == 0 && w->have_attr) {
		nfsb_st_from_fattr(st, &w->attr);
		*have_st = true;
	}
	if (rc == 0 && w->have_dir_attr) {
		nfsb_st_from_fattr(pst, &w->dir_attr);
		*have_pst = true;
	}
	if (rc == 0 && w->have_fh) {
		*fh = w->fh;
		fh_put(nb, path, strlen(path), fh, gen);
	} else if (rc == 0) {
		/* No handle in the reply: looked up. The create is made: a
		 * stale parent here is walked to from the root at once (an
		 * -ESTALE returned would have the caller create it again,
		 * and a GUARDED create then fail with EEXIST). */
		rc = ns_lookup(nb, &parent, name, fh, st, have_st);
		if (rc == -ESTALE) {
			nfsb_fh_clear(nb);
			rc = nfsb_resolve(nb, path, fh, st, have_st);
		} else if (rc == 0) {
			fh_put(nb, path, strlen(path), fh, gen);
		}
	}
	free(w);
	return rc;
}

/* The call w on args; its reply's rc. */
static int ns_status(struct nb *nb, struct ns_wait *w, void *args)
{
	int rc = ns_call(nb, w, args);

	if (rc)
		return rc; /* w freed, or left to its context */
	rc = w->rc;
	free(w);
	return rc;
}

/* REMOVE3 (RMDIR3 when dir) of path, on its parent's handle: the
 * parent's attributes after it into *pst (*have_pst) when the reply has
 * them. The caller forgets what the name's removal changes. */
int nfsb_remove(struct nb *nb, const char *path, bool dir, struct stat *pst, bool *have_pst)
{
	struct nb_fh parent;
	char name[NAME_MAX + 1];
	struct ns_wait *w;
	int rc;

	*have_pst = false;
	if ((rc = parent_of(nb, path, &parent, name)))
		return rc;
	if (!(w = ns_new(dir ? NS_RMDIR : NS_REMOVE)))
		return -ENOMEM;
	if (dir) {
		RMDIR3args a;

		fh3(&a.object.dir, &parent);
		a.object.name = name;
		rc = ns_call(nb, w, &a);
	} else {
		REMOVE3args a;

		fh3(&a.object.dir, &parent);
		a.object.name = name;
		rc = ns_call(nb, w, &a);
	}
	if (rc)
		return rc; /* w freed, or left to its context */
	rc = w->rc;
	if (rc == 0 && w->have_dir_attr) {
		nfsb_st_from_fattr(pst, &w->dir_attr);
		*have_pst = true;
	}
	free(w);
	return rc;
}

/* RENAME3 of from to to, on their parents' handles. The caller forgets
 * what the rename changes. */
int nfsb_rename(struct nb *nb, const char *from, const char *to)
{
	struct nb_fh fdir, tdir;
	char fname[NAME_MAX + 1], tname[NAME_MAX + 1];
	struct ns_wait *w;
	RENAME3args a;
	int rc;

	if ((rc = parent_of(nb, from, &fdir, fname)) || (rc = parent_of(nb, to, &tdir, tname)))
		return rc;
	if (!(w = ns_new(NS_RENAME)))
		return -ENOMEM;
	fh3(&a.from.dir, &fdir);
	a.from.name = fname;
	fh3(&a.to.dir, &tdir);
	a.to.name = tname;
	return ns_status(nb, w, &a);
}

/* LINK3: the new name to of the file from, on from's handle and to's
 * parent's. The caller forgets what the link changes. */
int nfsb_link(struct nb *nb, const char *from, const char *to)
{
	struct nb_fh file, tdir;
	char tname[NAME_MAX + 1];
	struct ns_wait *w;
	LINK3args a;
	int rc;

	if ((rc = nfsb_resolve(nb, from, &file, NULL, NULL)) ||
	    (rc = parent_of(nb, to, &tdir, tname)))
		return rc;
	if (!(w = ns_new(NS_LINK)))
		return -ENOMEM;
	fh3(&a.file, &file);
	fh3(&a.link.dir, &tdir);
	a.link.name = tname;
	return ns_status(nb, w, &a);
}

/* The call proc with args on the handle of path (resolved, cached), whose
 * place in args is obj: its outcome into *out (0 returned: free it), or a
 * negative errno (nothing to free: w freed, or left to its context). */
static int call_on_path(struct nb *nb, const char *path, enum ns_proc proc, void *args,
			nfs_fh3 *obj, struct ns_wait **out)
{
	struct nb_fh fh;
	struct ns_wait *w;
	int rc;

	if ((rc = nfsb_resolve(nb, path, &fh, NULL, NULL)))
		return rc;
	if (!(w = ns_new(proc)))
		return -ENOMEM;
	fh3(obj, &fh);
	if ((rc = ns_call(nb, w, args)))
		return rc;
	*out = w;
	return 0;
}

/* READLINK3 of the symbolic link path: its target into buf (size bytes,
 * cut there and always terminated). */
int nfsb_readlink(struct nb *nb, const char *path, char *buf, size_t size)
{
	struct ns_wait *w;
	READLINK3args a;
	int rc;

	if (size == 0)
		return -EINVAL;
	if ((rc = call_on_path(nb, path, NS_READLINK, &a, &a.symlink, &w)))
		return rc;
	rc = w->rc;
	if (rc == 0) {
		size_t n = strlen(w->target);

		if (n >= size)
			n = size - 1;
		memcpy(buf, w->target, n);
		buf[n] = '\0';
	}
	free(w->target);
	free(w);
	return rc;
}

/* MKNOD3 of path: a FIFO, a socket, or a character or block device (rdev),
 * with mode's permission bits. The caller forgets what it changes. */
int nfsb_mknod(struct nb *nb, const char *path, mode_t mode, dev_t rdev)
{
	struct nb_fh parent;
	char name[NAME_MAX + 1];
	struct ns_wait *w;
	MKNOD3args a;
	sattr3 sa;
	int rc;

	memset(&a, 0, sizeof(a));
	memset(&sa, 0, sizeof(sa));
	sa.mode.set_it = 1;
	sa.mode.set_mode3_u.mode = (mode3)(mode & 07777);
	switch (mode & S_IFMT) {
	case S_IFIFO:
		a.what.type = NF3FIFO;
		a.what.mknoddata3_u.pipe_attributes = sa;
		break;
	case S_IFSOCK:
		a.what.type = NF3SOCK;
		a.what.mknoddata3_u.sock_attributes = sa;
		break;
	case S_IFCHR:
	case S_IFBLK: {
		devicedata3 *dd = &a.what.mknoddata3_u.chr_device;

		a.what.type = S_ISCHR(mode) ? NF3CHR : NF3BLK;
		if (S_ISBLK(mode))
			dd = &a.what.mknoddata3_u.blk_device;
		dd->dev_attributes = sa;
		dd->spec.specdata1 = major(rdev);
		dd->spec.specdata2 = minor(rdev);
		break;
	}
	default:
		return -EINVAL; /* regular files and directories have their calls */
	}
	if ((rc = parent_of(nb, path, &parent, name)))
		return rc;
	if (!(w = ns_new(NS_MKNOD)))
		return -ENOMEM;
	fh3(&a.where.dir, &parent);
	a.where.name = name;
	return ns_status(nb, w, &a);
}

/* FSSTAT3 of the filesystem that holds path. */
int nfsb_fsstat(struct nb *nb, const char *path, struct nb_fsstat *out)
{
	struct ns_wait *w;
	FSSTAT3args a;
	int rc;

	if ((rc = call_on_path(nb, path, NS_FSSTAT, &a, &a.fsroot, &w)))
		return rc;
	rc = w->rc;
	if (rc == 0) {
		out->tbytes = w->fs.tbytes;
		out->fbytes = w->fs.fbytes;
		out->abytes = w->fs.abytes;
		out->tfiles = w->fs.tfiles;
		out->ffiles = w->fs.ffiles;
		out->afiles = w->fs.afiles;
	}
	free(w);
	return rc;
}

/* ACCESS3 of path for the bits asked (ACCESS3_READ...): those the server
 * grants into *granted. */
int nfsb_access(struct nb *nb, const char *path, uint32_t asked, uint32_t *granted)
{
	struct ns_wait *w;
	ACCESS3args a;
	int rc;

	a.access = asked;
	if ((rc = call_on_path(nb, path, NS_ACCESS, &a, &a.object, &w)))
		return rc;
	rc = w->rc;
	if (rc == 0)
		*granted = w->access;
	free(w);
	return rc;
}

/*
 * The entries of directory path, read whole with READDIRPLUS3 calls on any
 * namespace context (its handle resolved and cached): into *out (n of
 * them, "." and ".." among them, as the server lists them; free with
 * nfsb_dirents_free()). The handles of its names go to the handle cache,
 * as a LOOKUP3's would (unless something was forgotten since the first
 * call was sent). 0 or a negative errno.
 */
int nfsb_readdir(struct nb *nb, const char *path, struct nb_dirent **out, size_t *n)
{
	uint64_t gen = fh_gen_now(nb), cookie = 0;
	char verf[NFS3_COOKIEVERFSIZE] = { 0 };
	struct nb_dirent *ents = NULL;
	size_t nents = 0, plen = strlen(path);
	struct nb_fh dir;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = nfsb_resolve(nb, path, &dir, NULL, NULL)))
		return rc;
	for (;;) {
		bool plus = !atomic_load(&nb->no_rdplus), eof;
		struct ns_wait *w = ns_new(plus ? NS_READDIRPLUS : NS_READDIR);
		READDIRPLUS3args a;
		READDIR3args b;
		size_t got;

		if (!w) {
			rc = -ENOMEM;
			break;
		}
		if (plus) {
			fh3(&a.dir, &dir);
			a.cookie = cookie;
			memcpy(a.cookieverf, verf, sizeof(verf));
			a.dircount = 32768;
			a.maxcount = 131072;
		} else {
			fh3(&b.dir, &dir);
			b.cookie = cookie;
			memcpy(b.cookieverf, verf, sizeof(verf));
			b.count = 32768;
		}
		if ((rc = ns_call(nb, w, plus ? (void *)&a : (void *)&b)))
			break; /* w freed, or left to its context */
		if (plus && w->status == NFS3ERR_NOTSUPP && cookie == 0) {
			/* A server without READDIRPLUS3 (Linux's nordirplus
			 * export): READDIR3 from now on, names only. */
			atomic_store(&nb->no_rdplus, true);
			nfsb_dirents_free(w->ents, w->nents);
			free(w);
			continue;
		}
		got = w->nents;
		rc = w->rc;
		eof = w->eof;
		memcpy(verf, w->verf, sizeof(verf));
		if (rc == 0 && got) {
			struct nb_dirent *m = realloc(ents, (nents + got) * sizeof(*m));

			if (m) {
				ents = m;
				memcpy(ents + nents, w->ents, got * sizeof(*m));
				nents += got;
				free(w->ents);
				w->ents = NULL;
				w->nents = 0;
			} else {
				rc = -ENOMEM;
			}
		}
		nfsb_dirents_free(w->ents, w->nents);
		free(w);
		if (rc)
			break;
		if (eof)
			break;
		/* No progress and no end: the server's fault, not a loop. */
		if (got == 0 || ents[nents - 1].cookie == cookie || nents > NB_DIR_MAX) {
			rc = -EIO;
			break;
		}
		cookie = ents[nents - 1].cookie;
	}
	if (rc) {
		nfsb_dirents_free(ents, nents);
		return rc;
	}
	for (size_t i = 0; i < nents; i++) {
		const char *name = ents[i].name;
		size_t nl = strlen(name), len = plen + 1 + nl;
		char *p;

		if (!ents[i].have_fh || !strcmp(name, ".") || !strcmp(name, "..") ||
		    len >= PATH_MAX || !(p = malloc(len + 1)))
			continue;
		memcpy(p, path, plen);
		len = plen > 1 ? plen : 0; /* the root: "/name" */
		p[len] = '/';
		memcpy(p + len + 1, name, nl + 1);
		fh_put(nb, p, len + 1 + nl, &ents[i].fh, gen);
		free(p);
	}
	*out = ents;
	*n = nents;
	return 0;
}

/*
 * SYMLINK3 of path to target, on the namespace's own connection (conn.c
 * nfsb_nc_call(): libnfs encodes a call into 4 KiB, too small for a
 * target of PATH_MAX - 1 bytes). Mode 0777 as libnfs's nfs_symlink();
 * ENAMETOOLONG for a target of PATH_MAX bytes or more, as Linux. Under
 * ns_lock (the connection's), its parent resolved on the channels, the
 * call made with the first context's lock.
 */
int nfsb_symlink(struct nb *nb, const char *target, const char *path)
{
	uint8_t args[4 + NFS3_FHSIZE + 4 + NAME_MAX + 4 + 7 * 4 + 4 + PATH_MAX + 4], *a = args;
	size_t len = strlen(target);
	struct nb_fh dir;
	char name[NAME_MAX + 1];
	int rc;

	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	if ((rc = parent_of(nb, path, &dir, name)))
		return rc;
	a = nfsb_put_opaque(a, dir.data, dir.len); /* where: diropargs3 */
	a = nfsb_put_opaque(a, name, (uint32_t)strlen(name));
	a = nfsb_put32(a, 1); /* symlink_attributes: sattr3, the mode set */
	a = nfsb_put32(a, 0777);
	a = nfsb_put32(a, 0); /* uid */
	a = nfsb_put32(a, 0); /* gid */
	a = nfsb_put32(a, 0); /* size */
	a = nfsb_put32(a, 0); /* atime: DONT_CHANGE */
	a = nfsb_put32(a, 0); /* mtime: DONT_CHANGE */
	a = nfsb_put_opaque(a, target, (uint32_t)len); /* symlink_data */
	atomic_fetch_add(&nb->ns_rpcs, 1);
	/* With the first context's lock, as a call by path: one call at a
	 * time with --ns-conns 1, as before there was a pool. */
	ufs_mutex_lock(&nb->chan[0].lock, UFS_RANK_NFS_CHAN);
	nfsb_ns_busy(nb);
	rc = nfsb_nc_call(nb, NFS3_SYMLINK, args, (size_t)(a - args));
	nfsb_ns_idle(nb);
	ufs_mutex_unlock(&nb->chan[0].lock, UFS_RANK_NFS_CHAN);
	return rc;
}
