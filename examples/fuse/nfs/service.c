/*
 * unstable-fuse, NFSv3 backend (nfs.h): the service thread. It owns the
 * data context (COMMIT3, READ3 and --no-cache WRITE3 through libnfs's raw
 * async calls, and their callbacks), reads the write connection's replies
 * (conn.c), makes the engine completions of finished requests without lock
 * (the write verifier compared there), and mounts the data context again
 * when it is lost, with backoff.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

uint64_t nfsb_ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)(now.tv_sec - t->tv_sec) * 1000 +
	       (uint64_t)((now.tv_nsec - t->tv_nsec) / 1000000);
}

/* ------------------------------------------------------------------------ */
/* The service thread                                                        */

void nfsb_poke(struct nb *nb)
{
	char c = 1;

	if (write(nb->wake[1], &c, 1) < 0) {
		/* full: the thread is awake anyway */
	}
}

/* Under lock: a request is over (its RPC answered or failed). */
void nfsb_req_finish(struct nb *nb, struct req *r)
{
	if (r->waited) {
		r->done = true;
	} else {
		r->next = NULL;
		*nb->done_tail = r;
		nb->done_tail = &r->next;
	}
	pthread_cond_broadcast(&nb->cond);
}

/* Under lock: one fewer RPC in flight. An engine's commit counts for its
 * file until its completion is reported (req_complete()): a drain that
 * returned before would let the object be destroyed under the report. */
static void rpc_gone(struct nb *nb, struct req *r)
{
	nb->inflight--;
	if (r->kind != REQ_COMMIT || r->waited)
		r->file->inflight--;
}

int nfsb_reply_status(int status, int nfsstat)
{
	if (status != RPC_STATUS_SUCCESS)
		return -ENOTCONN;
	if (nfsstat == NFS3ERR_JUKEBOX)
		return -EAGAIN;
	return nfsstat == NFS3_OK ? 0 : nfsstat3_to_errno(nfsstat);
}

/* The callbacks run on the service thread, inside rpc_service() (or the
 * context's destruction), under lock: they record the reply and finish the
 * request. */
static void write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	WRITE3res *res = data;

	(void)rpc;
	rpc_gone(r->nb, r);
	r->status = nfsb_reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == 0) {
		r->committed = res->WRITE3res_u.resok.committed;
		r->got = res->WRITE3res_u.resok.count;
		memcpy(r->verf, res->WRITE3res_u.resok.verf, sizeof(r->verf));
		if (r->got < r->count)
			r->status = -EAGAIN; /* a short write: all of it again */
	}
	nfsb_req_finish(r->nb, r);
}

static void commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	struct nb *nb = r->nb;
	COMMIT3res *res = data;

	(void)rpc;
	r->status = nfsb_reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == -ENOTCONN && !nb->stop && !r->waited) {
		/* Sent again once reconnected (the connection went, or no
		 * reply came in time): still counted in flight. */
		atomic_fetch_add(&nb->commit_resends, 1);
		r->next = nb->retry;
		nb->retry = r;
		return;
	}
	rpc_gone(nb, r);
	if (r->status == 0)
		memcpy(r->verf, res->COMMIT3res_u.resok.verf, sizeof(r->verf));
	nfsb_req_finish(nb, r);
}

static void read_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct req *r = priv;
	READ3res *res = data;

	(void)rpc;
	rpc_gone(r->nb, r);
	r->status = nfsb_reply_status(status, status == RPC_STATUS_SUCCESS ? (int)res->status : 0);
	if (r->status == 0) {
		READ3resok *ok = &res->READ3res_u.resok;

		r->got = (uint32_t)min_u64(ok->data.data_len, r->count);
		memcpy(r->data, ok->data.data_val, r->got);
		r->eof = ok->eof;
	}
	nfsb_req_finish(r->nb, r);
}

/* Under lock, connected: queues the RPC of r. 0, or a negative errno. */
static int req_send(struct nb *nb, struct req *r)
{
	struct nfs_fh3 fh = { .data = { .data_len = r->file->fhlen, .data_val = r->file->fh } };
	int rc;

	if (r->kind == REQ_WRITE) {
		WRITE3args a = {
			.file = fh, .offset = r->offset, .count = r->count, .stable = r->stable
		};

		a.data.data_len = r->count;
		a.data.data_val = r->data;
		rc = rpc_nfs3_write_async(nb->rpc, write_cb, &a, r);
	} else if (r->kind == REQ_COMMIT) {
		COMMIT3args a = { .file = fh, .offset = 0, .count = 0 };

		rc = rpc_nfs3_commit_async(nb->rpc, commit_cb, &a, r);
	} else {
		READ3args a = { .file = fh, .offset = r->offset, .count = r->count };

		rc = rpc_nfs3_read_async(nb->rpc, read_cb, &a, r);
	}
	return rc ? -EIO : 0;
}

/*
 * Sends r: waits for a slot under the cap (writes only) and, when wait_up,
 * for the connection. An engine commit while the connection is down is kept
 * and sent once it is back. 0 once queued (its callback will finish it),
 * or -ENOTCONN (down and not waiting), -ESHUTDOWN, -EIO; -ECANCELED for an
 * engine's commit of a file sealed (nfsb_seal()), checked under the same
 * hold of the lock that counts it in flight, so a drain after the seal
 * waits for it (a commit waited for, fsync's, is on an open file: sent).
 */
int nfsb_req_submit(struct nb *nb, struct req *r, bool wait_up)
{
	struct timespec until;
	int rc;

	/* An engine write waits a little for a connection being made again:
	 * it goes out as soon as it is back, rather than after the engine's
	 * retry backoff. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	r->nb = nb;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	for (;;) {
		if (nb->stop) {
			rc = -ESHUTDOWN;
			goto out;
		}
		if (r->kind == REQ_COMMIT && r->file->sealed && !r->waited) {
			rc = -ECANCELED;
			goto out;
		}
		if (!nb->up && r->kind == REQ_COMMIT && !r->waited) {
			r->next = nb->retry;
			nb->retry = r;
			nb->inflight++;
			r->file->inflight++;
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			return 0;
		}
		if (nb->up && (r->kind != REQ_WRITE || nb->inflight < nb->cap))
			break;
		if (!nb->up && !wait_up) {
			int w = ufs_cond_timedwait(&nb->cond, &nb->lock, &until, UFS_RANK_NFS);

			if (w == ETIMEDOUT && !nb->up) {
				rc = -ENOTCONN;
				goto out;
			}
			continue;
		}
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	}
	if ((rc = req_send(nb, r)) == 0) {
		nb->inflight++;
		r->file->inflight++;
	}
out:
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (rc == 0)
		nfsb_poke(nb);
	return rc;
}

/* Sends r and waits for its reply, again after a lost connection (a hard
 * mount). Its status. */
int nfsb_req_wait(struct nb *nb, struct req *r)
{
	int rc;

	r->waited = true;
	for (;;) {
		r->done = false;
		if ((rc = nfsb_req_submit(nb, r, true)))
			return rc;
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		while (!r->done)
			ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (r->status != -ENOTCONN && r->status != -EAGAIN)
			return r->status;
	}
}

/* Service thread, no lock: the server restarted (a new verifier). */
/* Every unstable chunk of the mount DIRTY again, to be written again:
 * their number. */
static int write_again(struct nb *nb)
{
	int n = us_backend_commit_lost(nb->fs->backend);

	if (n > 0)
		atomic_fetch_add(&nb->lost_bufs, (uint64_t)n);
	return n;
}

static void verifier_changed(struct nb *nb, const char *verf)
{
	int n;

	memcpy(nb->verf, verf, sizeof(nb->verf));
	atomic_fetch_add(&nb->verf_changes, 1);
	n = write_again(nb);
	fprintf(stderr,
		"unstable-fuse: %s: the server's write verifier changed (it restarted): "
		"%d unstable chunks are written again\n",
		nb->url, n);
}

/* One WRITE3 of chunk b's pages ended with res (err); the last one that
 * ends completes b. Any thread, no lock. */
void nfsb_part_end(struct nb *nb, us_buf *b, struct part *p, enum us_write_result res, int err)
{
	uint64_t mine = (uint64_t)res << 32 | (uint32_t)err, worst = atomic_load(&p->worst);

	while ((uint32_t)res > (uint32_t)(worst >> 32) &&
	       !atomic_compare_exchange_weak(&p->worst, &worst, mine))
		;
	if (atomic_fetch_sub(&p->left, 1) != 1)
		return;
	worst = atomic_load(&p->worst);
	res = (enum us_write_result)(worst >> 32);
	/* A number taken after every one of its replies: a commit that reads
	 * it or a later one was sent after them all. */
	us_buf_write_done(b, res, res == US_WRITE_UNSTABLE ? atomic_fetch_add(&nb->fs->seq, 1) + 1 : 0,
			  (int)(uint32_t)worst);
	free(p);
}

/* Service thread, no lock: the engine completions of a finished request. */
static void req_complete(struct nb *nb, struct req *r)
{
	unsigned i;

	if (r->kind == REQ_WRITE) {
		/* (Taken before the completions: a chunk answered stable may
		 * leave the object clean, destroyed at an unmount.) */
		struct ufs_inode *ino = us_object_user(r->obj);
		enum us_write_result res = US_WRITE_UNSTABLE;
		uint64_t seq = 0;

		if (r->status == -ENOTCONN || r->status == -EAGAIN || r->status == -ENOMEM ||
		    r->status == -EIO) {
			res = US_WRITE_ERROR;
			atomic_fetch_add(&nb->write_errors, 1);
		} else if (r->status) {
			res = US_WRITE_LOST;
			atomic_fetch_add(&nb->write_errors, 1);
		} else if (r->committed != UNSTABLE) {
			res = US_WRITE_STABLE;
			atomic_fetch_add(&nb->stable_replies, 1);
		} else {
			if (!nb->have_verf) {
				memcpy(nb->verf, r->verf, sizeof(nb->verf));
				nb->have_verf = true;
			} else if (memcmp(nb->verf, r->verf, sizeof(nb->verf)) != 0) {
				verifier_changed(nb, r->verf);
			}
			if (!r->part)
				seq = atomic_fetch_add(&nb->fs->seq, 1) + 1;
		}
		/* The server's times and size of the file moved (not its
		 * directory's). */
		nfsb_ac_forget_file(nb, r->file->path);
		ufs_writeback_ending(ino);
		if (r->part)
			nfsb_part_end(nb, r->bufs[0], r->part, res, r->status);
		for (i = 0; !r->part && i < r->nbufs; i++)
			us_buf_write_done(r->bufs[i], res, seq, r->status);
		if (seq && !r->part)
			nfsb_early_commit(nb, r->file, r->obj, r->count);
		/* Writers waiting to copy into these chunks (unlocked_writeback). */
		ufs_writeback_done(ino);
		/* Only now may the file be drained (its object destroyed, the
		 * file closed): nothing of r's is used after this. */
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		/* A drain waits for none left (flushers waiting for a slot
		 * were woken when the reply freed it). */
		if (--r->file->inflight == 0)
			pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	} else if (r->kind == REQ_COMMIT) {
		if (r->status == -ESTALE) {
			/* The file is gone from the server (another client
			 * removed it): its unstable data can never be
			 * committed, and a commit asked again would be refused
			 * again, for ever. Its chunks, and only its, are
			 * written again: the WRITE3s are refused as stale too,
			 * and the chunks end US_WRITE_LOST, the error reported
			 * by the next fsync or close, as the Linux NFS client
			 * does. The other files' unstable data stays. */
			int n = us_object_commit_lost(r->obj);

			if (n > 0)
				atomic_fetch_add(&nb->lost_bufs, (uint64_t)n);
			atomic_fetch_add(&nb->commit_errors, 1);
			fprintf(stderr,
				"unstable-fuse: %s: COMMIT of %s: stale (removed on the server): "
				"%d unstable chunks are written again\n",
				nb->url, r->file->path, n);
		} else if (r->status) {
			atomic_fetch_add(&nb->commit_errors, 1);
			fprintf(stderr, "unstable-fuse: %s: COMMIT: %s\n", nb->url,
				strerror(-r->status));
		} else if (nb->have_verf && memcmp(nb->verf, r->verf, sizeof(nb->verf)) != 0) {
			verifier_changed(nb, r->verf);
		} else {
			if (!nb->have_verf) {
				memcpy(nb->verf, r->verf, sizeof(nb->verf));
				nb->have_verf = true;
			}
			/* -ESTALE: a verifier change since it was sent. */
			us_object_commit_done_epoch(r->obj, r->epoch, r->seq);
		}
		if (r->early)
			atomic_fetch_sub(&r->file->early, 1);
		/* Only now may the file be drained (rpc_gone()). */
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		if (--r->file->inflight == 0)
			pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	}
	free(r);
}

/* Under lock, connected: sends the commits kept to be sent again (their
 * connection went, or their RPC timed out). */
static void resend(struct nb *nb)
{
	struct req *r = nb->retry, *next;

	nb->retry = NULL;
	for (; r; r = next) {
		next = r->next;
		if (req_send(nb, r) != 0) {
			r->status = -EIO;
			rpc_gone(nb, r);
			nfsb_req_finish(nb, r);
		}
	}
}

/* Service thread: a new data connection, with backoff. */
static void reconnect(struct nb *nb)
{
	unsigned backoff_ms = 50;
	char err[1024];

	while (!nb->stop) {
		struct nfs_context *c = nfsb_mount_ctx(nb->url, true, err, sizeof(err), NULL, NULL);

		if (c) {
			uint64_t ms = nfsb_ms_since(&nb->down_since);

			ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
			nb->data = c;
			nb->rpc = nfs_get_rpc_context(c);
			nb->up = true;
			/* The commits the connection took with it. */
			resend(nb);
			pthread_cond_broadcast(&nb->cond);
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			atomic_fetch_add(&nb->reconnects, 1);
			atomic_fetch_add(&nb->outage_ms, ms);
			atomic_store(&nb->outage_last_ms, ms);
			fprintf(stderr, "unstable-fuse: %s: reconnected after %llu ms\n", nb->url,
				(unsigned long long)ms);
			return;
		}
		poll(NULL, 0, (int)backoff_ms);
		backoff_ms = backoff_ms * 2 > 250 ? 250 : backoff_ms * 2;
	}
}

/* Under lock: the data connection is dead. Every RPC on it fails (its
 * callback runs now). */
static void go_down(struct nb *nb)
{
	struct nfs_context *c = nb->data;

	fprintf(stderr, "unstable-fuse: %s: connection lost: %s\n", nb->url,
		rpc_get_error(nb->rpc) ? rpc_get_error(nb->rpc) : "?");
	nb->up = false;
	nb->data = NULL;
	nb->rpc = NULL;
	clock_gettime(CLOCK_MONOTONIC, &nb->down_since);
	nfs_destroy_context(c);
	pthread_cond_broadcast(&nb->cond);
}

void *nfsb_service_main(void *arg)
{
	struct nb *nb = arg;

	for (;;) {
		struct pollfd p[3] = { { .fd = -1 },
				       { .fd = nb->wake[0], .events = POLLIN },
				       { .fd = nb->wfd, .events = POLLIN } };
		struct req *done, *next;
		bool down;
		char sink[256];

		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		if (nb->stop && (!nb->up || nb->inflight == 0)) {
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			break;
		}
		down = !nb->up;
		if (!down) {
			p[0].fd = rpc_get_fd(nb->rpc);
			p[0].events = (short)rpc_which_events(nb->rpc);
		}
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (down) {
			reconnect(nb);
			continue;
		}
		poll(p, 3, 100);
		if (p[1].revents)
			while (read(nb->wake[0], sink, sizeof(sink)) > 0)
				;
		if (p[2].revents)
			nfsb_wc_receive(nb);
		nfsb_wc_check_timeout(nb);
		nfsb_wc_try_up(nb);
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		/* With 0 too: libnfs times RPCs out there. */
		if (rpc_service(nb->rpc, p[0].revents) < 0 || rpc_get_fd(nb->rpc) < 0)
			go_down(nb);
		else if (nb->retry)
			resend(nb); /* commits that timed out */
		done = nb->done;
		nb->done = NULL;
		nb->done_tail = &nb->done;
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		for (; done; done = next) {
			next = done->next;
			req_complete(nb, done);
		}
	}
	return NULL;
}
