/*
 * unstable-fuse, NFSv3 backend (nfs.h): the engine's callbacks. The flush
 * (a run cut into WRITE3s sent on the write connection, chunks written in
 * part as WRITE3s of their pages), the commit (COMMIT3 through the service
 * thread), and the seal and drain of a file's RPCs.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

/* ------------------------------------------------------------------------ */
/* The engine's callbacks                                                    */

/* Completes bufs[0..n) now with a transient error (kept dirty). */
static void fail_bufs(us_buf *const *bufs, size_t n, int err)
{
	for (size_t i = 0; i < n; i++)
		us_buf_write_done(bufs[i], US_WRITE_ERROR, 0, err);
}

/*
 * Sends the WRITE3s of the pages of chunk b in bits (ufs_pages_take(): some
 * of its pages, not all adjacent or not all valid), one per range of
 * adjacent pages clipped to end, each from the chunk in place. With the
 * flush's hold on p; 0, or the negative errno that stopped the sending (p
 * then has it).
 */
static int send_pages(struct nb *nb, struct ufs_inode *ino, us_object *obj, us_buf *b,
		      uint32_t bits, struct part *p)
{
	unsigned pg = 0, npg = ufs_chunk_pages();

	while (pg < npg) {
		uint64_t from, to, end;
		struct iovec iov[3];
		struct req *r;
		int rc;

		while (pg < npg && !(bits >> pg & 1))
			pg++;
		if (pg == npg)
			return 0;
		from = pg * UFS_PAGE_BYTES;
		while (pg < npg && (bits >> pg & 1))
			pg++;
		to = pg * UFS_PAGE_BYTES;
		if ((rc = nfsb_wc_slot(nb, ino->file)))
			return rc == -ESHUTDOWN ? -EAGAIN : rc;
		if (!(r = calloc(1, sizeof(*r)))) {
			nfsb_wc_slot_put(nb, ino->file);
			return -ENOMEM;
		}
		ufs_rwlock_rdlock(&ino->wb_lock, UFS_RANK_WB);
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		end = ino->size;
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		if (us_buf_offset(b) + from >= end) {
			/* Past the end (a truncate cut it): nothing to keep. */
			ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
			nfsb_wc_slot_put(nb, ino->file);
			free(r);
			return 0;
		}
		to = min_u64(to, end - us_buf_offset(b));
		iov[1].iov_base = (char *)us_buf_data(b) + from;
		iov[1].iov_len = (size_t)(to - from);
		r->kind = REQ_WRITE;
		r->file = ino->file;
		r->obj = obj;
		r->offset = us_buf_offset(b) + from;
		r->count = (uint32_t)(to - from);
		r->stable = UNSTABLE;
		r->nbufs = 1;
		r->bufs[0] = b;
		r->part = p;
		atomic_fetch_add(&p->left, 1);
		rc = nfsb_wc_send(nb, r, iov, 2);
		ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
		if (rc) {
			atomic_fetch_sub(&p->left, 1);
			free(r);
			return rc;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, to - from);
		atomic_fetch_add(&nb->page_writes, 1);
	}
	return 0;
}

int nfsb_flush(void *ctx, us_object *obj, us_buf *const *bufs, size_t n, uint64_t offset,
	       uint64_t length, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct nb *nb = nb_of(fs);
	struct ufs_inode *ino = us_object_user(obj);
	size_t i = 0, per = (size_t)(min_u64(nb->wsize, NB_RPC_BYTES) / ufs_chunk_bytes);
	uint32_t stack_bits[64], *bits;

	(void)offset;
	(void)length;
	(void)reason;
	if (per > NB_MAX_GROUP)
		per = NB_MAX_GROUP;
	bits = n > 64 ? malloc(n * sizeof(*bits)) : stack_bits;
	if (!bits) {
		fail_bufs(bufs, n, -ENOMEM); /* nothing taken */
		return 0;
	}
	/* The pages to write of chunks written in part (0: whole). */
	ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
	for (i = 0; i < n; i++)
		bits[i] = ufs_pages_take(ino, us_buf_offset(bufs[i]) / ufs_chunk_bytes);
	ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
	i = 0;
	while (i < n) {
		uint64_t end, start = us_buf_offset(bufs[i]), bytes = 0;
		size_t k, take = n - i < per ? n - i : per;
		struct iovec iov[NB_MAX_GROUP + 2];
		struct req *r;
		int rc;

		if (bits[i]) {
			/* Some pages of it only, in WRITE3s of their own. */
			struct part *p = calloc(1, sizeof(*p));

			if (!p) {
				fail_bufs(bufs + i, n - i, -ENOMEM);
				break;
			}
			atomic_init(&p->left, 1);
			atomic_init(&p->worst, (uint64_t)US_WRITE_STABLE << 32);
			rc = send_pages(nb, ino, obj, bufs[i], bits[i], p);
			nfsb_part_end(nb, bufs[i], p, rc ? US_WRITE_ERROR : US_WRITE_STABLE, rc);
			if (rc) {
				fail_bufs(bufs + i + 1, n - i - 1, rc);
				break;
			}
			i++;
			continue;
		}
		/* The slot first, then wb_lock (shared) while one WRITE3 is
		 * built and sent: a truncate waits for the send, so that what
		 * it cuts is not sent after it. data_lock only to read the
		 * size: a writer does not copy into the pages a write-back
		 * took (unlocked_writeback: it waits for its completion), so
		 * they do not change while the kernel copies them, and a
		 * writer of other chunks waits for no send. */
		if ((rc = nfsb_wc_slot(nb, ino->file))) {
			fail_bufs(bufs + i, n - i, rc == -ESHUTDOWN ? -EAGAIN : rc);
			break;
		}
		if (!(r = calloc(1, sizeof(*r)))) {
			nfsb_wc_slot_put(nb, ino->file);
			fail_bufs(bufs + i, n - i, -ENOMEM);
			break;
		}
		ufs_rwlock_rdlock(&ino->wb_lock, UFS_RANK_WB);
		ufs_rwlock_rdlock(&ino->data_lock, UFS_RANK_DATA);
		end = ino->size;
		ufs_rwlock_unlock(&ino->data_lock, UFS_RANK_DATA);
		if (start >= end) {
			/* Wholly past the end (a truncate cut it): nothing to keep. */
			ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
			nfsb_wc_slot_put(nb, ino->file);
			free(r);
			for (; i < n; i++)
				us_buf_write_done(bufs[i], US_WRITE_STABLE, 0, 0);
			break;
		}
		/* Adjacent whole chunks, up to the server's wtmax, clipped to
		 * the logical size: one WRITE3 sent from the chunks in place. */
		for (k = 0; k < take && us_buf_offset(bufs[i + k]) == start + bytes &&
			    start + bytes < end && !bits[i + k];
		     k++) {
			uint64_t len = min_u64(us_buf_length(bufs[i + k]), end - (start + bytes));

			iov[1 + k].iov_base = us_buf_data(bufs[i + k]);
			iov[1 + k].iov_len = (size_t)len;
			bytes += len;
		}
		r->kind = REQ_WRITE;
		r->file = ino->file;
		r->obj = obj;
		r->offset = start;
		r->count = (uint32_t)bytes;
		r->stable = UNSTABLE;
		r->nbufs = (unsigned)k;
		memcpy(r->bufs, bufs + i, k * sizeof(*bufs));
		/* Once queued, r belongs to the service thread, which may
		 * complete and free it before nfsb_wc_send() returns here. */
		rc = nfsb_wc_send(nb, r, iov, (int)(1 + k));
		ufs_rwlock_unlock(&ino->wb_lock, UFS_RANK_WB);
		if (rc) {
			free(r);
			fail_bufs(bufs + i, n - i, rc);
			break;
		}
		atomic_fetch_add(&nb->writes, 1);
		atomic_fetch_add(&nb->write_bytes, bytes);
		i += k;
	}
	if (bits != stack_bits)
		free(bits);
	/* Writers waiting for chunks this flush completed here (failed, or
	 * past the end). */
	ufs_writeback_done(ino);
	return 0;
}

/* Sends a COMMIT3 of f (obj's file) covering every write answered so far,
 * reported to the engine when answered (service.c). 0, or a negative errno. */
static int commit_send(struct nb *nb, struct ufs_bfile *f, us_object *obj, bool early)
{
	struct ufs *fs = nb->fs;
	struct req *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->kind = REQ_COMMIT;
	r->file = f;
	r->obj = obj;
	r->early = early;
	/* Before sending: every write numbered up to seq had its reply. */
	r->epoch = us_backend_epoch(fs->backend);
	r->seq = atomic_load(&fs->seq);
	if (r->seq == 0) {
		free(r);
		return 0;
	}
	atomic_store(&f->acked, 0);
	if (early)
		atomic_fetch_add(&f->early, 1);
	if ((rc = nfsb_req_submit(nb, r, false))) {
		if (early)
			atomic_fetch_sub(&f->early, 1);
		free(r);
		/* Sealed: its object is being destroyed, and nothing of it
		 * is left to commit (a file holding data is not sealed:
		 * fs.c inode_destroy()); the engine's slot for the commit
		 * was freed as its data left UNSTABLE. */
		if (rc == -ECANCELED) {
			atomic_fetch_add(&nb->sealed_commits, 1);
			return 0;
		}
		return rc;
	}
	atomic_fetch_add(&nb->commits, 1);
	if (early)
		atomic_fetch_add(&nb->early_commits, 1);
	return 0;
}

int nfsb_commit(void *ctx, us_object *obj, enum us_reason reason)
{
	struct ufs *fs = ctx;
	struct ufs_inode *ino = us_object_user(obj);

	(void)reason;
	if (nb_of(fs)->test_commit_delay_ms)
		poll(NULL, 0, (int)nb_of(fs)->test_commit_delay_ms);
	return commit_send(nb_of(fs), ino->file, obj, false);
}

/*
 * The service thread, once bytes more of f were answered UNSTABLE and
 * their chunks completed: a COMMIT3 of the backend's own when NB_EARLY_BYTES
 * were answered since f's last one was sent, NB_EARLY_COMMITS of them in
 * flight at most. The engine asks for a commit when a domain's writers are
 * held at its dirty limit, or its unstable data reaches half its background
 * threshold, and one of an object at a time: a writer streaming through a
 * cache of 60 MiB or more waited for each (20 to 30 ms for what it covered,
 * with nothing else to send: 30 % of a 1 GiB dd's time), then wrote again
 * with nothing sent until the background threshold. These commits, sent as
 * the writes are answered and overlapping, free the cache before the
 * writer reaches its limit.
 */
void nfsb_early_commit(struct nb *nb, struct ufs_bfile *f, us_object *obj, uint64_t bytes)
{
	if (atomic_fetch_add(&f->acked, bytes) + bytes < NB_EARLY_BYTES ||
	    atomic_load(&f->early) >= NB_EARLY_COMMITS || atomic_load(&nb->no_early))
		return;
	/* Not sent (no memory, the mount stopping): the engine's commits
	 * remain. */
	(void)commit_send(nb, f, obj, true);
}

void nfsb_seal(struct ufs *fs, struct ufs_bfile *f, bool sealed)
{
	struct nb *nb = nb_of(fs);

	if (!f) {
		atomic_store(&nb->no_early, sealed);
		return;
	}
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	f->sealed = sealed;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
}

void nfsb_drain(struct ufs *fs, struct ufs_bfile *f)
{
	struct nb *nb = nb_of(fs);

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	while (f->inflight && !(nb->stop && !nb->thread_started))
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
}
