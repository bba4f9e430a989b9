/*
 * Corpus replay driver: runs a libFuzzer target over every file of a corpus
 * folder, so that the corpora run as ordinary ctest tests without clang's
 * fuzzer runtime. A crash or sanitizer report fails the test.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	int rc = -1;

	if (!f)
		return -1;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			LLVMFuzzerTestOneInput(buf, (size_t)n);
			rc = 0;
		}
	}
	free(buf);
	fclose(f);
	return rc;
}

int main(int argc, char **argv)
{
	DIR *dir;
	struct dirent *e;
	char path[4096];
	int count = 0;

	if (argc != 2 || !(dir = opendir(argv[1]))) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], e->d_name);
		if (replay_file(path) == 0)
			count++;
	}
	closedir(dir);
	printf("replayed %d inputs from %s\n", count, argv[1]);
	return count > 0 ? 0 : 1;
}
