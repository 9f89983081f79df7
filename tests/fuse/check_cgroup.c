/*
 * unstable-fuse's cgroup reading, without a mount or a real cgroup: fake
 * /proc/PID/cgroup files and limit files in a temporary tree, for cgroup v1
 * and v2 (this machine may have only one of them), the hierarchy lines the
 * kernel writes, and limits set on ancestors.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE
#include "ufuse.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

static void put(const char *rel, const char *text)
{
	char path[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static void setup(struct ufs *fs, int version)
{
	static char proc[512];

	strcpy(root, "/tmp/us-cgroup-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	memset(fs, 0, sizeof(*fs));
	snprintf(proc, sizeof(proc), "%s/proc", root);
	fs->proc = proc;
	fs->cg_version = version;
	snprintf(fs->cg_mount, sizeof(fs->cg_mount), "%s/cg", root);
}

static void teardown(void)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* v2: the "0::" line, whatever v1 hierarchies a hybrid machine also lists. */
START_TEST(test_v2)
{
	struct ufs fs;
	char out[256], dir[700];

	setup(&fs, 2);
	put("proc/42/cgroup", "12:cpu,cpuacct:/elsewhere\n0::/user.slice/job\n");
	ck_assert_int_eq(ufs_cgroup_of(&fs, 42, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/user.slice/job");
	/* No "0::" line: no cgroup. */
	put("proc/43/cgroup", "5:memory:/v1only\n");
	ck_assert_int_eq(ufs_cgroup_of(&fs, 43, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(ufs_cgroup_of(&fs, 44, out, sizeof(out)), -ENOENT);
	/* Limits: "max" is none; the smallest of the cgroup and its ancestors. */
	put("cg/user.slice/memory.max", "33554432\n");
	put("cg/user.slice/job/memory.max", "max\n");
	snprintf(dir, sizeof(dir), "%s/user.slice/job", fs.cg_mount);
	ck_assert_uint_eq(ufs_cgroup_limit(&fs, dir), 32u << 20);
	put("cg/user.slice/job/memory.max", "16777216\n");
	ck_assert_uint_eq(ufs_cgroup_limit(&fs, dir), 16u << 20);
	put("cg/user.slice/memory.max", "max\n");
	put("cg/user.slice/job/memory.max", "max\n");
	ck_assert_uint_eq(ufs_cgroup_limit(&fs, dir), US_UNLIMITED);
	teardown();
}
END_TEST

/* v1: the memory hierarchy's line among the others; its "no limit" value. */
START_TEST(test_v1)
{
	struct ufs fs;
	char out[256], dir[700];

	setup(&fs, 1);
	put("proc/7/cgroup", "12:cpu,cpuacct:/a\n9:blkio:/b\n4:memory:/batch/job1\n0::/c\n");
	ck_assert_int_eq(ufs_cgroup_of(&fs, 7, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/batch/job1");
	put("proc/8/cgroup", "12:cpu,cpuacct:/a\n0::/c\n");
	ck_assert_int_eq(ufs_cgroup_of(&fs, 8, out, sizeof(out)), -ENOENT);
	put("cg/batch/memory.limit_in_bytes", "67108864\n");
	put("cg/batch/job1/memory.limit_in_bytes", "9223372036854771712\n");
	snprintf(dir, sizeof(dir), "%s/batch/job1", fs.cg_mount);
	ck_assert_uint_eq(ufs_cgroup_limit(&fs, dir), 64u << 20);
	put("cg/batch/memory.limit_in_bytes", "9223372036854771712\n");
	ck_assert_uint_eq(ufs_cgroup_limit(&fs, dir), US_UNLIMITED);
	teardown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_cgroup");
	TCase *tc = tcase_create("parse");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_v2);
	tcase_add_test(tc, test_v1);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
