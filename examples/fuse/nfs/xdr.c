/*
 * unstable-fuse, NFSv3 backend (nfs.h): the ONC RPC / XDR encoding it does
 * itself for the write connection (conn.c): big-endian words, opaque data,
 * the AUTH_UNIX credential of every call. Replies are decoded by
 * ../rpc_reply.c.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "nfs.h"

uint8_t *nfsb_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

uint8_t *nfsb_put64(uint8_t *p, uint64_t v)
{
	return nfsb_put32(nfsb_put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

uint8_t *nfsb_put_opaque(uint8_t *p, const void *d, uint32_t n)
{
	uint32_t pad = (4 - n % 4) % 4;

	p = nfsb_put32(p, n);
	memcpy(p, d, n);
	memset(p + n, 0, pad);
	return p + n + pad;
}

/* "uid=N" of the URL's arguments, else def. */
static uint32_t url_num(const char *url, const char *key, uint32_t def)
{
	const char *q = strchr(url, '?');
	size_t n = strlen(key);

	while (q && *q) {
		q++;
		if (strncmp(q, key, n) == 0)
			return (uint32_t)strtoul(q + n, NULL, 10);
		q = strchr(q, '&');
	}
	return def;
}

/* The AUTH_UNIX credential of every call: the URL's uid and gid, else
 * ours (as libnfs does). */
void nfsb_wc_cred(struct nb *nb)
{
	uint8_t body[64], *b = body;
	static const char host[] = "unstable-fuse";

	b = nfsb_put32(b, 0); /* stamp */
	b = nfsb_put_opaque(b, host, sizeof(host) - 1);
	b = nfsb_put32(b, url_num(nb->url, "uid=", (uint32_t)getuid()));
	b = nfsb_put32(b, url_num(nb->url, "gid=", (uint32_t)getgid()));
	b = nfsb_put32(b, 0); /* no other groups */
	nb->credlen = (size_t)(nfsb_put_opaque(nfsb_put32(nb->cred, 1 /* AUTH_UNIX */), body,
					       (uint32_t)(b - body)) -
			       nb->cred);
}
