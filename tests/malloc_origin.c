/*
 * malloc_origin: libunstable may use jemalloc for its payloads, but loading
 * it must not replace the process's malloc. Debian's jemalloc exports an
 * unprefixed malloc; linked PRIVATE into libunstable.so it comes after the C
 * library in the global lookup scope, so the program keeps glibc's malloc.
 * This test checks that, with the shared library and jemalloc loaded.
 *
 * Exit: 0 pass, 1 fail.
 *
 * SPDX-License-Identifier: MIT
 */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unstable/unstable.h>

typedef void *(*malloc_fn)(size_t);

static int names_libc(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return strstr(base, "libc.so") != NULL || strncmp(base, "libc-", 5) == 0;
}

/* Which object holds addr; prints it under label. NULL if unknown. */
static const char *object_of(const char *label, void *addr)
{
	Dl_info info;

	if (dladdr(addr, &info) == 0 || info.dli_fname == NULL) {
		printf("%-22s %p: no object found\n", label, addr);
		return NULL;
	}
	printf("%-22s %p: %s (%s)\n", label, addr, info.dli_fname,
	       info.dli_sname ? info.dli_sname : "?");
	return info.dli_fname;
}

static int find_jemalloc(struct dl_phdr_info *info, size_t size, void *data)
{
	const char **found = data;

	if (info->dlpi_name != NULL && strstr(info->dlpi_name, "jemalloc") != NULL) {
		*found = info->dlpi_name;
		return 1;
	}
	return 0;
}

static int check_malloc(const char *label, void *addr)
{
	const char *obj = object_of(label, addr);

	if (obj == NULL)
		return 0;
	if (strstr(obj, "jemalloc") != NULL) {
		printf("FAIL: %s comes from jemalloc\n", label);
		return 0;
	}
	if (!names_libc(obj)) {
		printf("FAIL: %s does not come from the C library\n", label);
		return 0;
	}
	return 1;
}

int main(void)
{
	/* volatile: the compiler must not fold the address of malloc. */
	malloc_fn volatile fn = malloc;
	const char *jemalloc_path = NULL;
	us_engine *e = NULL;
	us_domain *d = NULL;
	int ok = 1;
	int rc;

	rc = us_engine_create(NULL, &e);
	if (rc != 0) {
		printf("FAIL: us_engine_create: %d\n", rc);
		return 1;
	}
	/* A domain with its own arena, so jemalloc is in use if built in. */
	rc = us_domain_create(e, NULL, "malloc_origin", US_DOMAIN_ARENA, &d);
	if (rc != 0) {
		printf("FAIL: us_domain_create: %d\n", rc);
		ok = 0;
	}

	printf("unstable %s\n", us_version());
	object_of("us_version", (void *)us_version);

	dl_iterate_phdr(find_jemalloc, &jemalloc_path);
	printf("%-22s %s\n", "jemalloc loaded:", jemalloc_path ? jemalloc_path : "no");
#ifdef US_EXPECT_JEMALLOC
	if (jemalloc_path == NULL) {
		printf("FAIL: built with jemalloc, but it is not loaded\n");
		ok = 0;
	}
#endif

	if (!check_malloc("malloc", (void *)fn))
		ok = 0;
	if (!check_malloc("dlsym(malloc)", dlsym(RTLD_DEFAULT, "malloc")))
		ok = 0;

	/* The pointer really allocates. */
	void *p = fn(64);
	if (p == NULL) {
		printf("FAIL: malloc(64) returned NULL\n");
		ok = 0;
	}
	free(p);

	if (d != NULL && us_domain_destroy(d) != 0) {
		printf("FAIL: us_domain_destroy\n");
		ok = 0;
	}
	if (us_engine_destroy(e) != 0) {
		printf("FAIL: us_engine_destroy\n");
		ok = 0;
	}

	printf("malloc_origin: %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
