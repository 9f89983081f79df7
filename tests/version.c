/*
 * version: every place that states the library's version agrees.
 *
 * SPDX-License-Identifier: MIT
 *
 * usage: version UNSTABLE_PC CONFIG_VERSION_CMAKE CHANGELOG_MD
 *
 * Compares us_version() (the shared library's, at run time) with
 * include/unstable/version.h (US_VERSION_STRING and MAJOR.MINOR.PATCH, at
 * compile time), the "Version:" of the generated unstable.pc, the
 * PACKAGE_VERSION of the generated unstableConfigVersion.cmake and the
 * newest release of CHANGELOG.md (its first "## [X.Y.Z]" heading; the
 * "## [Unreleased]" section is skipped). Exit 0 when all agree, 1 otherwise.
 */
#include <stdio.h>
#include <string.h>

#include <unstable/unstable.h>

#define STR_(x) #x
#define STR(x)	STR_(x)

/* The first line of path that starts with prefix (and, when skip is not NULL,
 * not with prefix then skip): the text after prefix, up to any of the
 * characters in stop, into out. Returns 0, or -1 when there is none. */
static int find(const char *path, const char *prefix, const char *skip, const char *stop, char *out,
		size_t len)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int rc = -1;

	if (!f) {
		perror(path);
		return -1;
	}
	while (rc && fgets(line, sizeof(line), f)) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		if (skip && strncmp(line + strlen(prefix), skip, strlen(skip)) == 0)
			continue;
		snprintf(out, len, "%.*s", (int)strcspn(line + strlen(prefix), stop),
			 line + strlen(prefix));
		rc = 0;
	}
	fclose(f);
	if (rc)
		fprintf(stderr, "version: no line starting with \"%s\" in %s\n", prefix, path);
	return rc;
}

static int check(const char *what, const char *got, const char *want)
{
	int ok = strcmp(got, want) == 0;

	printf("version: %-44s %-10s %s\n", what, got, ok ? "ok" : "MISMATCH");
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *lib = us_version();
	char pc[64], cmake[64], changelog[64];
	int bad = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: version UNSTABLE_PC CONFIG_VERSION_CMAKE CHANGELOG_MD\n");
		return 2;
	}
	if (find(argv[1], "Version: ", NULL, " \r\n", pc, sizeof(pc)) ||
	    find(argv[2], "set(PACKAGE_VERSION \"", NULL, "\"", cmake, sizeof(cmake)) ||
	    find(argv[3], "## [", "Unreleased]", "]", changelog, sizeof(changelog)))
		return 1;
	printf("version: %-44s %s\n", "us_version() of libunstable", lib);
	bad |= check("version.h US_VERSION_STRING", US_VERSION_STRING, lib);
	bad |= check("version.h US_VERSION_MAJOR.MINOR.PATCH",
		     STR(US_VERSION_MAJOR) "." STR(US_VERSION_MINOR) "." STR(US_VERSION_PATCH),
		     lib);
	bad |= check("unstable.pc Version", pc, lib);
	bad |= check("unstableConfigVersion.cmake PACKAGE_VERSION", cmake, lib);
	bad |= check("CHANGELOG.md newest release", changelog, lib);
	return bad;
}
