/*
 * The NFS backend's replies (examples/fuse/rpc_reply.c) on
 * crafted bytes: WRITE3 replies right and wrong (every truncation, a
 * committed value that is none of the three, refused and failed calls, an
 * opaque longer than the reply), the status of any reply, and record marking (records split at
 * every byte, several fragments, a record too long, a handler that stops).
 *
 * SPDX-License-Identifier: MIT
 */
#include "rpc_reply.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	uint8_t b[1024];
	size_t n;
};

static void put32(struct out *o, uint32_t v)
{
	o->b[o->n++] = (uint8_t)(v >> 24);
	o->b[o->n++] = (uint8_t)(v >> 16);
	o->b[o->n++] = (uint8_t)(v >> 8);
	o->b[o->n++] = (uint8_t)v;
}

static void put_zeros(struct out *o, size_t n)
{
	memset(o->b + o->n, 0, n);
	o->n += n;
}

static const uint8_t verf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

/* A WRITE3 reply: accepted, nfsstat, with both attributes, count, committed. */
static void write_reply(struct out *o, uint32_t xid, uint32_t nfsstat, uint32_t count,
			uint32_t committed)
{
	o->n = 0;
	put32(o, xid);
	put32(o, 1); /* REPLY */
	put32(o, 0); /* MSG_ACCEPTED */
	put32(o, 0); /* verifier AUTH_NONE */
	put32(o, 0);
	put32(o, 0); /* SUCCESS */
	put32(o, nfsstat);
	put32(o, 1); /* pre_op_attr */
	put_zeros(o, 24);
	put32(o, 1); /* post_op_attr */
	put_zeros(o, 84);
	if (nfsstat == 0) {
		put32(o, count);
		put32(o, committed);
		memcpy(o->b + o->n, verf, sizeof(verf));
		o->n += sizeof(verf);
	}
}

START_TEST(test_write_ok)
{
	struct ufs_write_reply w;
	struct out o;

	write_reply(&o, 77, 0, 131072, 0);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), 0);
	ck_assert_uint_eq(w.xid, 77);
	ck_assert(!w.denied);
	ck_assert_uint_eq(w.accept_stat, 0);
	ck_assert_uint_eq(w.nfsstat, 0);
	ck_assert_uint_eq(w.count, 131072);
	ck_assert_uint_eq(w.committed, 0);
	ck_assert_mem_eq(w.verf, verf, sizeof(verf));
	write_reply(&o, 78, 0, 4096, 2);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), 0);
	ck_assert_uint_eq(w.committed, 2);
}
END_TEST

/* Every truncation of a good reply fails: a missing verifier is never
 * taken for one of zeros. */
START_TEST(test_write_truncated)
{
	struct ufs_write_reply w;
	struct out o;

	write_reply(&o, 9, 0, 4096, 0);
	for (size_t n = 0; n < o.n; n++) {
		int rc = ufs_rpc_write_reply(o.b, n, &w);

		ck_assert_msg(rc == (n < 8 ? -EBADMSG : -EPROTO), "length %zu: %d", n, rc);
		if (n >= 8)
			ck_assert_uint_eq(w.xid, 9);
	}
}
END_TEST

START_TEST(test_write_bad_committed)
{
	struct ufs_write_reply w;
	struct out o;

	/* A server that says 3 (or anything past FILE_SYNC) is not trusted to
	 * have made the data durable. */
	write_reply(&o, 5, 0, 4096, 3);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), -EPROTO);
	write_reply(&o, 5, 0, 4096, 0xffffffffu);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), -EPROTO);
}
END_TEST

START_TEST(test_write_errors)
{
	struct ufs_write_reply w;
	struct out o;

	/* An NFS error: no count, committed or verifier follows. */
	write_reply(&o, 11, 28 /* NFS3ERR_NOSPC */, 0, 0);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), 0);
	ck_assert_uint_eq(w.nfsstat, 28);
	/* MSG_DENIED (AUTH_ERROR). */
	o.n = 0;
	put32(&o, 12);
	put32(&o, 1);
	put32(&o, 1);
	put32(&o, 1);
	put32(&o, 1);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), 0);
	ck_assert(w.denied);
	ck_assert_uint_eq(w.xid, 12);
	/* SYSTEM_ERR. */
	o.n = 0;
	put32(&o, 13);
	put32(&o, 1);
	put32(&o, 0);
	put32(&o, 0);
	put32(&o, 0);
	put32(&o, 5);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), 0);
	ck_assert_uint_eq(w.accept_stat, 5);
	/* Not a reply (a CALL). */
	o.n = 0;
	put32(&o, 14);
	put32(&o, 0);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), -EBADMSG);
	/* A verifier body longer than the reply, and the largest length. */
	o.n = 0;
	put32(&o, 15);
	put32(&o, 1);
	put32(&o, 0);
	put32(&o, 0);
	put32(&o, 400);
	put32(&o, 0);
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), -EPROTO);
	o.b[16] = o.b[17] = o.b[18] = o.b[19] = 0xff;
	ck_assert_int_eq(ufs_rpc_write_reply(o.b, o.n, &w), -EPROTO);
}
END_TEST

/* The status of any NFS3 reply (a SYMLINK3's on the namespace's
 * connection): what follows the nfsstat3 is left unread; every truncation
 * before its end fails; a denied or failed call as for WRITE3. */
START_TEST(test_status)
{
	struct ufs_nfs_status st;
	struct out o;

	write_reply(&o, 21, 0, 4096, 0);
	ck_assert_int_eq(ufs_rpc_status_reply(o.b, o.n, &st), 0);
	ck_assert_uint_eq(st.xid, 21);
	ck_assert(!st.denied);
	ck_assert_uint_eq(st.accept_stat, 0);
	ck_assert_uint_eq(st.nfsstat, 0);
	write_reply(&o, 22, 17 /* NFS3ERR_EXIST */, 0, 0);
	ck_assert_int_eq(ufs_rpc_status_reply(o.b, 28, &st), 0);
	ck_assert_uint_eq(st.nfsstat, 17);
	for (size_t n = 0; n < 28; n++) {
		int rc = ufs_rpc_status_reply(o.b, n, &st);

		ck_assert_msg(rc == (n < 8 ? -EBADMSG : -EPROTO), "length %zu: %d", n, rc);
		if (n >= 8)
			ck_assert_uint_eq(st.xid, 22);
	}
	o.n = 0;
	put32(&o, 23);
	put32(&o, 1);
	put32(&o, 1); /* MSG_DENIED */
	put32(&o, 1);
	put32(&o, 1);
	ck_assert_int_eq(ufs_rpc_status_reply(o.b, o.n, &st), 0);
	ck_assert(st.denied);
	o.n = 0;
	put32(&o, 24);
	put32(&o, 1);
	put32(&o, 0);
	put32(&o, 0);
	put32(&o, 0);
	put32(&o, 1); /* PROG_UNAVAIL */
	ck_assert_int_eq(ufs_rpc_status_reply(o.b, o.n, &st), 0);
	ck_assert_uint_eq(st.accept_stat, 1);
	o.n = 0;
	put32(&o, 25);
	put32(&o, 0); /* a CALL */
	ck_assert_int_eq(ufs_rpc_status_reply(o.b, o.n, &st), -EBADMSG);
}
END_TEST

/* The records a stream gives: their xids (first 4 bytes) in order. */
struct seen {
	uint32_t xid[64];
	size_t len[64];
	int n, stop_at;
};

static int note(void *ctx, const uint8_t *p, size_t n)
{
	struct seen *s = ctx;

	if (s->n == s->stop_at)
		return 1;
	ck_assert_int_lt(s->n, 64);
	s->xid[s->n] = n >= 4 ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3] :
				0;
	s->len[s->n++] = n;
	return 0;
}

/* Appends the record r as fragments of at most frag bytes. */
static void marked(struct out *o, const struct out *r, size_t frag)
{
	size_t at = 0;

	do {
		size_t n = r->n - at < frag ? r->n - at : frag;

		put32(o, (uint32_t)n | (at + n == r->n ? 0x80000000u : 0));
		memcpy(o->b + o->n, r->b + at, n);
		o->n += n;
		at += n;
	} while (at < r->n);
}

/* Feeds stream[0, n) in pieces of `step` bytes as a receiver would:
 * unused bytes are kept and given again with the next. */
static ssize_t feed(const uint8_t *stream, size_t n, size_t step, struct seen *s)
{
	static struct ufs_rpc_record rec;
	uint8_t buf[2048];
	size_t have = 0, at = 0;

	rec.len = 0;
	while (at < n || have) {
		size_t take = n - at < step ? n - at : step;
		ssize_t used;

		memcpy(buf + have, stream + at, take);
		have += take;
		at += take;
		used = ufs_rpc_records(&rec, buf, have, note, s);
		if (used < 0)
			return used;
		memmove(buf, buf + used, have - (size_t)used);
		have -= (size_t)used;
		if (!take)
			break; /* the end, a fragment left incomplete */
	}
	return (ssize_t)have;
}

START_TEST(test_records_split)
{
	struct out stream = { .n = 0 }, r;
	size_t frags[3] = { 1000, 7, 64 };

	for (int i = 0; i < 3; i++) {
		write_reply(&r, 100 + (uint32_t)i, 0, 4096, 0);
		marked(&stream, &r, frags[i]);
	}
	for (size_t step = 1; step <= stream.n; step++) {
		struct seen s = { .stop_at = -1 };

		ck_assert_int_eq(feed(stream.b, stream.n, step, &s), 0);
		ck_assert_int_eq(s.n, 3);
		for (int i = 0; i < 3; i++) {
			ck_assert_uint_eq(s.xid[i], 100 + (uint32_t)i);
			ck_assert_uint_eq(s.len[i], r.n);
		}
	}
}
END_TEST

START_TEST(test_records_bad)
{
	static struct ufs_rpc_record rec;
	struct seen s = { .stop_at = -1 };
	struct out o = { .n = 0 }, r;

	/* A fragment longer than a record may be. */
	put32(&o, 0x80000000u | (UFS_RPC_RECORD_MAX + 1));
	ck_assert_int_eq(ufs_rpc_records(&rec, o.b, o.n, note, &s), -EPROTO);
	/* Fragments that add up past it. */
	rec.len = 0;
	o.n = 0;
	put32(&o, 8);
	put_zeros(&o, 8);
	put32(&o, 0x80000000u | (UFS_RPC_RECORD_MAX - 4));
	ck_assert_int_eq(ufs_rpc_records(&rec, o.b, o.n, note, &s), -EPROTO);
	/* An incomplete fragment: nothing used, nothing handed over. */
	rec.len = 0;
	o.n = 0;
	write_reply(&r, 1, 0, 1, 0);
	marked(&o, &r, 4096);
	ck_assert_int_eq(ufs_rpc_records(&rec, o.b, o.n - 1, note, &s), 0);
	ck_assert_int_eq(s.n, 0);
	ck_assert_int_eq(ufs_rpc_records(&rec, o.b, o.n, note, &s), (ssize_t)o.n);
	ck_assert_int_eq(s.n, 1);
	/* A handler that stops the stream. */
	s.stop_at = 1;
	ck_assert_int_eq(ufs_rpc_records(&rec, o.b, o.n, note, &s), -EPROTO);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rpc_reply");
	TCase *tc = tcase_create("decode");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_write_ok);
	tcase_add_test(tc, test_write_truncated);
	tcase_add_test(tc, test_write_bad_committed);
	tcase_add_test(tc, test_write_errors);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_records_split);
	tcase_add_test(tc, test_records_bad);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
