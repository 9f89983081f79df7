/*
 * unstable-fuse's lock order witness (examples/fuse/witness.h), built with
 * US_WITNESS: real locks of the client's kinds taken in the order of
 * ufuse.h pass and leave nothing counted; each reversed pair, and a second
 * lock of one rank, stops the thread with a message naming both.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE

#include "ufuse.h"

#include "expect_abort.h"

#include <check.h>
#include <stdlib.h>

static pthread_mutex_t itable = PTHREAD_MUTEX_INITIALIZER, wb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t io = PTHREAD_RWLOCK_INITIALIZER, wb = PTHREAD_RWLOCK_INITIALIZER,
			data = PTHREAD_RWLOCK_INITIALIZER, data2 = PTHREAD_RWLOCK_INITIALIZER;

START_TEST(test_order_kept)
{
	ufs_mutex_lock(&itable, UFS_RANK_ITABLE);
	ufs_rwlock_wrlock(&io, UFS_RANK_IO);
	ufs_rwlock_rdlock(&wb, UFS_RANK_WB);
	ufs_rwlock_rdlock(&data, UFS_RANK_DATA);
	ufs_rwlock_unlock(&data, UFS_RANK_DATA);
	ufs_mutex_lock(&wb_mutex, UFS_RANK_WB_MUTEX);
	ufs_mutex_unlock(&wb_mutex, UFS_RANK_WB_MUTEX);
	ufs_rwlock_unlock(&wb, UFS_RANK_WB);
	ufs_rwlock_unlock(&io, UFS_RANK_IO);
	ufs_mutex_unlock(&itable, UFS_RANK_ITABLE);
	ck_assert_uint_eq(ufs_witness_held, 0);
	/* A trylock is not checked: it cannot wait. */
	ufs_rwlock_rdlock(&data, UFS_RANK_DATA);
	ck_assert(ufs_rwlock_trywrlock(&io, UFS_RANK_IO));
	ufs_rwlock_unlock(&io, UFS_RANK_IO);
	ufs_rwlock_unlock(&data, UFS_RANK_DATA);
	ck_assert_uint_eq(ufs_witness_held, 0);
}
END_TEST

/* Reversal k, in a child (expect_abort.h). */
static void reverse(int k)
{
	switch (k) {
	case 0: /* a flush's two locks, reversed */
		ufs_rwlock_rdlock(&data, UFS_RANK_DATA);
		ufs_rwlock_rdlock(&wb, UFS_RANK_WB);
		break;
	case 1: /* the inode table under an inode's io_lock */
		ufs_rwlock_rdlock(&io, UFS_RANK_IO);
		ufs_mutex_lock(&itable, UFS_RANK_ITABLE);
		break;
	case 2: /* two inodes' data_lock */
		ufs_rwlock_rdlock(&data, UFS_RANK_DATA);
		ufs_rwlock_rdlock(&data2, UFS_RANK_DATA);
		break;
	}
}

START_TEST(test_reversal_aborts)
{
	static const char *const want[][2] = {
		{ "taking the wb_lock (rank 4)", "holding the data_lock (rank 5)" },
		{ "taking the itable_lock (rank 1)", "holding the io_lock (rank 3)" },
		{ "taking the data_lock (rank 5)", "holding the data_lock (rank 5)" },
	};
	char msg[512];

	ck_assert_msg(expect_abort(reverse, _i, want[_i][0], want[_i][1], msg, sizeof(msg)),
		      "case %d: not stopped as expected; it said '%s'", _i, msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_witness");
	TCase *tc = tcase_create("fuse_witness");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_order_kept);
	tcase_add_loop_test(tc, test_reversal_aborts, 0, 3);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
