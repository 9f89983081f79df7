/*
 * us-fuzz-replay: runs inputs of the libFuzzer harness tests/fuzz_api.c
 * without libFuzzer, with any compiler and under any sanitizer: each
 * argument is a file, or a directory whose files are all run. The corpus
 * in tests/corpus/fuzz_api/ runs this way as the ctest test fuzz_corpus.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern uint64_t us_fuzz_oom_fired; /* fuzz_api.c */

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (!fp) {
		perror(path);
		return -1;
	}
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
		fclose(fp);
		return -1;
	}
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		fclose(fp);
		return -1;
	}
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	int i, runs = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		DIR *dir;
		struct dirent *de;
		char **names = NULL;
		size_t n = 0, cap = 0, j;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) != 0)
				return 1;
			runs++;
			continue;
		}
		dir = opendir(argv[i]);
		if (!dir) {
			perror(argv[i]);
			return 1;
		}
		while ((de = readdir(dir)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				names = realloc(names, cap * sizeof(*names));
				if (!names)
					return 1;
			}
			names[n] = malloc(strlen(argv[i]) + strlen(de->d_name) + 2);
			if (!names[n])
				return 1;
			sprintf(names[n++], "%s/%s", argv[i], de->d_name);
		}
		closedir(dir);
		qsort(names, n, sizeof(*names), cmp);
		for (j = 0; j < n; j++) {
			if (run_file(names[j]) != 0)
				return 1;
			runs++;
			free(names[j]);
		}
		free(names);
	}
	printf("fuzz replay: %d inputs, every step checked against the model; %llu injected "
	       "allocation failures\n",
	       runs, (unsigned long long)us_fuzz_oom_fired);
	return runs > 0 ? 0 : 1;
}
