/*
 * unstable-fuse: the NFS backend's replies decoded (rpc_reply.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include "rpc_reply.h"

#include <errno.h>
#include <string.h>

#define RPC_LAST_FRAGMENT 0x80000000u

ssize_t ufs_rpc_records(struct ufs_rpc_record *rec, const uint8_t *in, size_t len,
			ufs_rpc_record_fn fn, void *ctx)
{
	size_t at = 0;

	while (len - at >= 4) {
		const uint8_t *m = in + at;
		uint32_t mark = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3];
		size_t n = mark & ~RPC_LAST_FRAGMENT;

		if (n > UFS_RPC_RECORD_MAX - rec->len)
			return -EPROTO;
		if (len - at - 4 < n)
			break; /* the fragment is not all in yet */
		memcpy(rec->buf + rec->len, m + 4, n);
		rec->len += n;
		at += 4 + n;
		if (mark & RPC_LAST_FRAGMENT) {
			size_t whole = rec->len;

			rec->len = 0;
			if (fn(ctx, rec->buf, whole) != 0)
				return -EPROTO;
		}
	}
	return (ssize_t)at;
}

struct rd {
	const uint8_t *p;
	size_t left;
	bool ok;
};

static uint32_t get32(struct rd *d)
{
	uint32_t v;

	if (d->left < 4) {
		d->ok = false;
		return 0;
	}
	v = (uint32_t)d->p[0] << 24 | (uint32_t)d->p[1] << 16 | (uint32_t)d->p[2] << 8 | d->p[3];
	d->p += 4;
	d->left -= 4;
	return v;
}

/* Skips n bytes of opaque data and its padding to 4. */
static void skip(struct rd *d, uint64_t n)
{
	n = (n + 3) & ~(uint64_t)3;
	if (d->left < n) {
		d->ok = false;
		return;
	}
	d->p += n;
	d->left -= (size_t)n;
}

/* A reply's header, up to and with its nfsstat3 (when accepted): 1 when
 * the body goes on (accepted, run), else the return of the decoders. */
static int head(struct rd *d, uint32_t *xid, bool *denied, uint32_t *accept_stat,
		uint32_t *nfsstat)
{
	*xid = get32(d);
	if (get32(d) != 1 /* REPLY */ || !d->ok)
		return -EBADMSG;
	if (get32(d) != 0) { /* reply_stat: MSG_DENIED */
		*denied = true;
		return d->ok ? 0 : -EPROTO;
	}
	get32(d);	    /* the verifier's flavor */
	skip(d, get32(d)); /* and body */
	*accept_stat = get32(d);
	if (!d->ok)
		return -EPROTO;
	if (*accept_stat != 0)
		return 0; /* PROG_UNAVAIL, PROG_MISMATCH (with two numbers), ... */
	*nfsstat = get32(d);
	return d->ok ? 1 : -EPROTO;
}

int ufs_rpc_status_reply(const uint8_t *p, size_t n, struct ufs_nfs_status *out)
{
	struct rd d = { .p = p, .left = n, .ok = true };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = head(&d, &out->xid, &out->denied, &out->accept_stat, &out->nfsstat);
	return rc > 0 ? 0 : rc;
}

int ufs_rpc_write_reply(const uint8_t *p, size_t n, struct ufs_write_reply *out)
{
	struct rd d = { .p = p, .left = n, .ok = true };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = head(&d, &out->xid, &out->denied, &out->accept_stat, &out->nfsstat);
	if (rc <= 0)
		return rc;
	if (get32(&d)) /* wcc_data: pre_op_attr: size, mtime, ctime */
		skip(&d, 24);
	if (get32(&d)) /* post_op_attr: fattr3 */
		skip(&d, 84);
	if (!d.ok)
		return -EPROTO;
	if (out->nfsstat != 0)
		return 0;
	out->count = get32(&d);
	out->committed = get32(&d);
	if (d.left < sizeof(out->verf) || !d.ok || out->committed > 2)
		return -EPROTO;
	memcpy(out->verf, d.p, sizeof(out->verf));
	return 0;
}
