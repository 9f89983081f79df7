/*
 * The smallest user of unstable: checks that the headers, the library and the
 * build glue agree. Used by the vendor, install and add_subdirectory tests.
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <string.h>

#include <unstable/unstable.h>

int main(void)
{
	us_engine *e = NULL;
	us_domain *d = NULL;
	int ok = 1;
	int rc;

	printf("unstable %s (headers %s)\n", us_version(), US_VERSION_STRING);
	if (strcmp(us_version(), US_VERSION_STRING) != 0) {
		fprintf(stderr, "consumer: library and header versions differ\n");
		ok = 0;
	}

	rc = us_engine_create(NULL, &e);
	if (rc != 0) {
		fprintf(stderr, "consumer: us_engine_create: %s\n", us_strerror(rc));
		return 1;
	}
	rc = us_domain_create(e, NULL, "consumer", 0, &d);
	if (rc != 0) {
		fprintf(stderr, "consumer: us_domain_create: %s\n", us_strerror(rc));
		ok = 0;
	} else {
		rc = us_domain_destroy(d);
		if (rc != 0) {
			fprintf(stderr, "consumer: us_domain_destroy: %s\n", us_strerror(rc));
			ok = 0;
		}
	}
	rc = us_engine_destroy(e);
	if (rc != 0) {
		fprintf(stderr, "consumer: us_engine_destroy: %s\n", us_strerror(rc));
		ok = 0;
	}

	printf("consumer: %s\n", ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
