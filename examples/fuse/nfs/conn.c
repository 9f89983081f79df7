/*
 * unstable-fuse, NFSv3 backend (nfs.h): the write connection, the
 * engine's WRITE3 UNSTABLE calls on a TCP connection of our own. Its socket
 * (connect, loss, connecting again), its slots, the sendmsg() of one call
 * from the chunks in place, and the reading of its replies (decoded by
 * ../rpc_reply.c) and their matching to the calls in flight. And the
 * namespace's own connection (nfsb_nc_call()): the calls libnfs cannot
 * encode (a SYMLINK3 of a long target), one at a time under ns_lock.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

/* ------------------------------------------------------------------------ */
/* The write connection                                                      */

/*
 * The engine's WRITE3 UNSTABLE calls go on a TCP connection of our own to
 * the server's NFS port, not through libnfs: libnfs 4.0 encodes a call's
 * data into a buffer of its own (one more copy of every byte) and takes one
 * buffer per call. Here the flushing thread sends the call itself with one
 * sendmsg(): the header it encodes, then the chunks' payload in place (a
 * run of adjacent chunks in one WRITE3 of up to the server's wtmax),
 * under send_lock and the inode's wb_lock (a writer does not copy into the
 * pages a write-back took, unlocked_writeback, so they do not change
 * while the kernel copies them). The service thread reads the replies
 * (nfsb_wc_receive) and finishes the requests like libnfs's callbacks do.
 *
 * Lost: an error or end of file on the socket, a reply that does not
 * parse, or no reply for WC_TIMEOUT_MS: wc_down() shuts the socket down
 * (which wakes a sender blocked in sendmsg), fails every write in flight on
 * it (-ENOTCONN: the engine keeps them dirty and writes them again), and
 * the service thread connects again with backoff (nfsb_wc_try_up).
 */

/* A connected socket to waddr (1 s at most), or -1 with errno. */
int nfsb_wc_connect(struct nb *nb)
{
	int fd = socket(nb->waddr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&nb->waddr, nb->waddrlen) != 0) {
		if (errno != EINPROGRESS)
			goto fail;
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 1000) != 1) {
			errno = ETIMEDOUT;
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			goto fail;
		if (err) {
			errno = err;
			goto fail;
		}
	}
	/* Blocking for the senders; the service thread reads with
	 * MSG_DONTWAIT. */
	if (fcntl(fd, F_SETFL, 0) != 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	err = errno;
	close(fd);
	errno = err;
	return -1;
}

/* Service thread, no lock: the write connection is gone; every write in
 * flight on it fails (finished with -ENOTCONN). */
static void wc_down(struct nb *nb, const char *why)
{
	int fd = nb->wfd;
	struct req *r, *next;

	if (fd < 0)
		return;
	/* Wakes a sender blocked in sendmsg(), which then lets send_lock go. */
	shutdown(fd, SHUT_RDWR);
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	if (!nb->stop)
		fprintf(stderr, "unstable-fuse: %s: write connection lost: %s\n", nb->url, why);
	nb->wup = false;
	nb->wgen++;
	nb->wfd = -1;
	r = nb->wq;
	nb->wq = NULL;
	nb->wq_tail = &nb->wq;
	for (; r; r = next) {
		next = r->wnext;
		r->status = -ENOTCONN;
		nb->inflight--; /* r->file's count: once completed */
		r->file->wslots--;
		nfsb_req_finish(nb, r);
	}
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	close(fd);
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	nb->rlen = 0;
	nb->rec->len = 0;
	nb->wbackoff_ms = 50;
	clock_gettime(CLOCK_MONOTONIC, &nb->wnext_try);
}

/* Service thread, no lock: connects the write connection when it is down
 * and its backoff has passed. */
void nfsb_wc_try_up(struct nb *nb)
{
	struct timespec now;
	int fd;

	if (nb->wfd >= 0 || nb->stop)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec < nb->wnext_try.tv_sec ||
	    (now.tv_sec == nb->wnext_try.tv_sec && now.tv_nsec < nb->wnext_try.tv_nsec))
		return;
	if ((fd = nfsb_wc_connect(nb)) < 0) {
		uint64_t ns = now.tv_nsec + (uint64_t)nb->wbackoff_ms * 1000000;

		nb->wnext_try.tv_sec = now.tv_sec + (time_t)(ns / 1000000000);
		nb->wnext_try.tv_nsec = (long)(ns % 1000000000);
		nb->wbackoff_ms = nb->wbackoff_ms * 2 > 250 ? 250 : nb->wbackoff_ms * 2;
		return;
	}
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->wfd = fd;
	nb->wup = true;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	atomic_fetch_add(&nb->wreconnects, 1);
}

/* Under lock: a reply record on the write connection; nonzero when it
 * does not parse (the connection is then dropped). */
static int wc_reply(void *ctx, const uint8_t *p, size_t len)
{
	struct nb *nb = ctx;
	struct ufs_write_reply w;
	int rc = ufs_rpc_write_reply(p, len, &w);
	struct req *r, **pp;

	if (rc == -EBADMSG)
		return -1;
	for (pp = &nb->wq; (r = *pp); pp = &r->wnext)
		if (r->xid == w.xid)
			break;
	if (!r)
		return rc; /* a reply to a call already failed (a late one), or a duplicate */
	*pp = r->wnext;
	if (!*pp)
		nb->wq_tail = pp;
	nb->inflight--; /* r->file's count: once completed (req_complete) */
	r->file->wslots--;
	if (rc) {
		r->status = -ENOTCONN; /* written again once reconnected */
	} else if (w.denied) {
		r->status = -EACCES; /* the credential is refused */
	} else if (w.accept_stat) {
		r->status = w.accept_stat == 5 /* SYSTEM_ERR */ ? -EIO : -EPROTO;
	} else {
		r->status = nfsb_reply_status(RPC_STATUS_SUCCESS, (int)w.nfsstat);
		if (w.nfsstat == NFS3_OK) {
			r->got = w.count;
			r->committed = (stable_how)w.committed;
			memcpy(r->verf, w.verf, NFS3_WRITEVERFSIZE);
			if (r->got < r->count)
				r->status = -EAGAIN; /* a short write: all of it again */
			else if (r->got > r->count)
				r->status = -ENOTCONN, rc = -1; /* more than was sent: not ours */
		}
	}
	nfsb_req_finish(nb, r);
	return rc;
}

/* Service thread: reads what came on the write connection and completes
 * the calls it answers. */
void nfsb_wc_receive(struct nb *nb)
{
	for (;;) {
		ssize_t got = recv(nb->wfd, nb->rbuf + nb->rlen, WC_RBUF - nb->rlen, MSG_DONTWAIT);
		ssize_t used;

		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
			wc_down(nb, got == 0 ? "closed by the server" : strerror(errno));
			return;
		}
		if (got < 0)
			return;
		nb->rlen += (size_t)got;
		ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
		used = ufs_rpc_records(nb->rec, nb->rbuf, nb->rlen, wc_reply, nb);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		if (used < 0) {
			wc_down(nb, "a reply that does not parse");
			return;
		}
		memmove(nb->rbuf, nb->rbuf + used, nb->rlen - (size_t)used);
		nb->rlen -= (size_t)used;
	}
}

/* Service thread, no lock: drops the connection when its oldest write had
 * no reply for WC_TIMEOUT_MS (the server is stopped or gone unseen). */
void nfsb_wc_check_timeout(struct nb *nb)
{
	bool late;

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	late = nb->wq && nfsb_ms_since(&nb->wq->queued) > WC_TIMEOUT_MS;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	if (late)
		wc_down(nb, "no reply in 10 s");
}

/*
 * The flushing thread, before it takes the inode's wb_lock: waits for a
 * slot under the cap and f's (NB_FILE_RPCS) and up to 1 s for a
 * connection, and takes the slot. 0, or -ENOTCONN (no connection),
 * -ESHUTDOWN.
 */
int nfsb_wc_slot(struct nb *nb, struct ufs_bfile *f)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	for (;;) {
		if (nb->stop) {
			ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
			return -ESHUTDOWN;
		}
		if (nb->wup && nb->inflight < nb->cap && f->wslots < NB_FILE_RPCS)
			break;
		if (!nb->wup) {
			int w = ufs_cond_timedwait(&nb->cond, &nb->lock, &until, UFS_RANK_NFS);

			if (w == ETIMEDOUT && !nb->wup) {
				ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
				return -ENOTCONN;
			}
			continue;
		}
		ufs_cond_wait(&nb->cond, &nb->lock, UFS_RANK_NFS);
	}
	nb->inflight++;
	if (++f->wslots > atomic_load(&nb->peak_file_rpcs))
		atomic_store(&nb->peak_file_rpcs, f->wslots);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	return 0;
}

/* A slot taken by nfsb_wc_slot() and not used. */
void nfsb_wc_slot_put(struct nb *nb, struct ufs_bfile *f)
{
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	nb->inflight--;
	f->wslots--;
	pthread_cond_broadcast(&nb->cond);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
}

/* An NFSv3 call's header at h, up to its arguments: the record mark (0,
 * set once the length is known), xid, the program, proc, the backend's
 * credential and an AUTH_NONE verifier. Returns the end. */
static uint8_t *call_header(const struct nb *nb, uint8_t *h, uint32_t xid, uint32_t proc)
{
	h = nfsb_put32(h, 0);
	h = nfsb_put32(h, xid);
	h = nfsb_put32(h, 0); /* CALL */
	h = nfsb_put32(h, 2); /* RPC version */
	h = nfsb_put32(h, NFS_PROGRAM);
	h = nfsb_put32(h, NFS_V3);
	h = nfsb_put32(h, proc);
	memcpy(h, nb->cred, nb->credlen);
	h += nb->credlen;
	return nfsb_put32(nfsb_put32(h, 0), 0);
}

/* Sends iov[0..n) whole; 0, or -1 (the connection is lost). */
static int iov_send(int fd, struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	while (msg.msg_iovlen) {
		ssize_t got = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		while (msg.msg_iovlen && (size_t)got >= msg.msg_iov->iov_len) {
			got -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (got) {
			msg.msg_iov->iov_base = (char *)msg.msg_iov->iov_base + got;
			msg.msg_iov->iov_len -= (size_t)got;
		}
	}
	return 0;
}

/*
 * The flushing thread, with a slot (nfsb_wc_slot) and the inode's wb_lock
 * held (shared): sends r, a WRITE3 of r->count bytes from iov[1..niov) (iov[0] is
 * set here to the header; one more entry is used for the padding). 0 once
 * sent (its reply, or the connection's loss, finishes it: r is then no
 * longer the caller's), or -ENOTCONN (the connection went since the slot
 * was taken; the slot is given back).
 */
int nfsb_wc_send(struct nb *nb, struct req *r, struct iovec *iov, int niov)
{
	uint8_t hdr[WC_HDR_MAX], *h = hdr;
	uint32_t count = r->count, pad = (4 - count % 4) % 4;
	static const uint8_t zeros[4];
	uint64_t gen;
	size_t total;

	r->nb = nb;
	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	if (!nb->wup || nb->stop) {
		nb->inflight--;
		r->file->wslots--;
		pthread_cond_broadcast(&nb->cond);
		ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
		return -ENOTCONN;
	}
	r->xid = ++nb->xid;
	gen = nb->wgen;
	clock_gettime(CLOCK_MONOTONIC, &r->queued);
	r->wnext = NULL;
	*nb->wq_tail = r;
	nb->wq_tail = &r->wnext;
	r->file->inflight++;
	/* The header, from what r holds: r may be finished (and freed) by the
	 * service thread from here on. */
	h = call_header(nb, h, r->xid, NFS3_WRITE);
	h = nfsb_put_opaque(h, r->file->fh, r->file->fhlen);
	h = nfsb_put64(h, r->offset);
	h = nfsb_put32(h, r->count);
	h = nfsb_put32(h, (uint32_t)r->stable);
	h = nfsb_put32(h, r->count);
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	iov[0].iov_base = hdr;
	iov[0].iov_len = (size_t)(h - hdr);
	if (pad) {
		iov[niov].iov_base = (void *)zeros;
		iov[niov++].iov_len = pad;
	}
	total = (size_t)(h - hdr) + count + pad; /* (r may be gone: not r->count) */
	nfsb_put32(hdr, 0x80000000u | (uint32_t)(total - 4));
	ufs_mutex_lock(&nb->send_lock, UFS_RANK_NFS_SEND);
	/* Gone since it was queued: wc_down() failed it already. Lost while
	 * sent: the service thread sees the end and fails r. */
	if (nb->wgen == gen && nb->wfd >= 0 && iov_send(nb->wfd, iov, niov) != 0)
		shutdown(nb->wfd, SHUT_RDWR);
	ufs_mutex_unlock(&nb->send_lock, UFS_RANK_NFS_SEND);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The namespace's connection                                                */

/*
 * libnfs 4.0 encodes a call into a buffer of 4 KiB, and its calls (raw or
 * not) cannot ask for more: a SYMLINK3 of a target longer than about 3,900
 * bytes failed with ENOMEM, where Linux takes PATH_MAX - 1. Such a call
 * goes on a second connection of our own to the NFS port, made at its
 * first call and kept, used under ns_lock (and the first namespace
 * context's lock: handles.c nfsb_symlink()), one call at a time: the
 * calling thread sends it and reads its reply (other records, replies to
 * a call sent again, are skipped). Lost (an error, the server's close, no
 * reply for WC_TIMEOUT_MS), it is made again, with the write connection's
 * backoff, and the call sent again, as libnfs does with the namespace
 * context's calls: a hard mount waits for the server (until the backend
 * stops). A call sent again that the server had already made is answered
 * as a second one would be (EEXIST for a SYMLINK3), as with libnfs.
 */

struct nc_wait {
	uint32_t xid;
	bool got;
	int rc;
	struct ufs_nfs_status st;
};

/* A record on the namespace's connection; nonzero when it is not a reply
 * (the connection is then dropped). */
static int nc_reply(void *ctx, const uint8_t *p, size_t len)
{
	struct nc_wait *w = ctx;
	struct ufs_nfs_status st;
	int rc = ufs_rpc_status_reply(p, len, &st);

	if (rc == -EBADMSG)
		return -1;
	if (st.xid != w->xid || w->got)
		return 0;
	w->got = true;
	w->st = st;
	w->rc = rc;
	return 0;
}

/* Under ns_lock: the connection dropped. */
void nfsb_nc_close(struct nb *nb)
{
	if (nb->nc && nb->nc->fd >= 0) {
		close(nb->nc->fd);
		nb->nc->fd = -1;
	}
	if (nb->nc) {
		nb->nc->len = 0;
		nb->nc->rec.len = 0;
	}
}

static bool nc_stopping(struct nb *nb)
{
	bool stop;

	ufs_mutex_lock(&nb->lock, UFS_RANK_NFS);
	stop = nb->stop;
	ufs_mutex_unlock(&nb->lock, UFS_RANK_NFS);
	return stop;
}


/* Reads until w's reply; 0, or -1 (the connection is lost or late). */
static int nc_receive(struct nb_nc *nc, struct nc_wait *w)
{
	struct timespec sent;

	clock_gettime(CLOCK_MONOTONIC, &sent);
	while (!w->got) {
		uint64_t ms = nfsb_ms_since(&sent);
		struct pollfd p = { .fd = nc->fd, .events = POLLIN };
		ssize_t got, used;
		int n;

		if (ms >= WC_TIMEOUT_MS)
			return -1;
		n = poll(&p, 1, (int)(WC_TIMEOUT_MS - ms));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			continue;
		got = recv(nc->fd, nc->buf + nc->len, WC_RBUF - nc->len, MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0)
			return -1;
		nc->len += (size_t)got;
		used = ufs_rpc_records(&nc->rec, nc->buf, nc->len, nc_reply, w);
		if (used < 0)
			return -1;
		memmove(nc->buf, nc->buf + used, nc->len - (size_t)used);
		nc->len -= (size_t)used;
	}
	return 0;
}

/*
 * Under ns_lock: the NFS3 call proc with its arguments args[0, len) (XDR,
 * padded), on the namespace's connection; 0 or the call's negative errno
 * (-EACCES when the credential is refused), or -ESHUTDOWN when the backend
 * stops before the server answers.
 */
int nfsb_nc_call(struct nb *nb, uint32_t proc, const uint8_t *args, size_t len)
{
	uint8_t hdr[WC_HDR_MAX], *h;
	struct iovec iov[2];
	struct nc_wait w;
	unsigned backoff_ms = 50;

	if (!nb->nc) {
		struct timespec t;

		if (!(nb->nc = calloc(1, sizeof(*nb->nc))))
			return -ENOMEM;
		nb->nc->fd = -1;
		clock_gettime(CLOCK_REALTIME, &t);
		nb->nc->xid = (uint32_t)(t.tv_sec ^ t.tv_nsec) << 8;
	}
	memset(&w, 0, sizeof(w));
	w.xid = ++nb->nc->xid;
	h = call_header(nb, hdr, w.xid, proc);
	nfsb_put32(hdr, 0x80000000u | (uint32_t)((size_t)(h - hdr) - 4 + len));
	for (;;) {
		struct nb_nc *nc = nb->nc;

		if (nc->fd < 0 && (nc->fd = nfsb_wc_connect(nb)) >= 0)
			backoff_ms = 50;
		if (nc->fd >= 0) {
			iov[0] = (struct iovec){ .iov_base = hdr, .iov_len = (size_t)(h - hdr) };
			iov[1] = (struct iovec){ .iov_base = (void *)args, .iov_len = len };
			if (iov_send(nc->fd, iov, 2) == 0 && nc_receive(nc, &w) == 0)
				break;
			nfsb_nc_close(nb);
		}
		if (nc_stopping(nb))
			return -ESHUTDOWN;
		usleep(backoff_ms * 1000);
		backoff_ms = backoff_ms * 2 > 250 ? 250 : backoff_ms * 2;
	}
	if (w.rc)
		return -EIO; /* a reply that does not parse */
	if (w.st.denied)
		return -EACCES;
	if (w.st.accept_stat)
		return w.st.accept_stat == 5 /* SYSTEM_ERR */ ? -EIO : -EPROTO;
	return nfsb_reply_status(RPC_STATUS_SUCCESS, (int)w.st.nfsstat);
}
