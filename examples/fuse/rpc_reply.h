/*
 * unstable-fuse: the replies on the NFS backend's own connections
 * (nfs/conn.c), decoded from bytes: ONC RPC record marking (RFC 5531
 * section 11), the WRITE3 reply and the status of any NFS3 reply (RFC 1813). Pure functions: no I/O, no
 * state but the caller's, so that they can be fuzzed alone
 * (tests/fuzz_rpc.c) and checked on crafted replies (tests/check_rpc.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef UFUSE_RPC_REPLY_H
#define UFUSE_RPC_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest reply record taken, its fragments together (a WRITE3 reply
 * is about 150 bytes). */
#define UFS_RPC_RECORD_MAX 65536

/* A record being put together from its fragments. */
struct ufs_rpc_record {
	uint8_t buf[UFS_RPC_RECORD_MAX];
	size_t len;
};

/* A record's handler: 0 to go on, nonzero to stop (the stream is bad). */
typedef int (*ufs_rpc_record_fn)(void *ctx, const uint8_t *p, size_t n);

/*
 * Takes the complete fragments at the start of in[0, len), in order: each
 * record, once its last fragment is in, goes to fn. Returns the bytes used
 * (a fragment not yet whole is left for the next call, with more bytes
 * after it), or -EPROTO: a record longer than UFS_RPC_RECORD_MAX, or fn
 * stopped. rec holds the fragments of a record not yet complete between
 * calls; zero it for a new connection.
 */
ssize_t ufs_rpc_records(struct ufs_rpc_record *rec, const uint8_t *in, size_t len,
			ufs_rpc_record_fn fn, void *ctx);

/* What a WRITE3 reply says. */
struct ufs_write_reply {
	uint32_t xid;
	bool denied;	      /* MSG_DENIED: the call was refused (credential, version) */
	uint32_t accept_stat; /* 0 SUCCESS; otherwise the call was not run */
	uint32_t nfsstat;     /* with accept_stat 0: NFS3_OK (0) or the error */
	/* With nfsstat 0: */
	uint32_t count;
	uint32_t committed; /* 0 UNSTABLE, 1 DATA_SYNC, 2 FILE_SYNC */
	uint8_t verf[8];
};

/*
 * Decodes a reply record. Returns 0; -EBADMSG when it is not a reply (too
 * short for its xid and message type, or not a REPLY): the stream cannot
 * be trusted; -EPROTO when the reply's body does not parse (out->xid is
 * then set): the call it answers failed. A WRITE3 reply whose committed is
 * none of the three, or whose verifier is missing, does not parse.
 */
int ufs_rpc_write_reply(const uint8_t *p, size_t n, struct ufs_write_reply *out);

/* What any NFS3 reply says first (every NFS3 result begins with its
 * nfsstat3): the namespace's own calls (nfs/conn.c nfsb_nc_call()). */
struct ufs_nfs_status {
	uint32_t xid;
	bool denied;	      /* as in struct ufs_write_reply */
	uint32_t accept_stat;
	uint32_t nfsstat;
};

/*
 * Decodes a reply record up to its nfsstat3, what follows left unread.
 * Returns 0, -EBADMSG or -EPROTO (out->xid set) as ufs_rpc_write_reply().
 */
int ufs_rpc_status_reply(const uint8_t *p, size_t n, struct ufs_nfs_status *out);

#endif /* UFUSE_RPC_REPLY_H */
