/*
 * Reading a whole file into a NUL-terminated buffer, with a size cap, for
 * every text file the extender reads (configuration, snapshot, kubeconfig,
 * service-account token). Reads to the end rather than trusting a size, so
 * pipes and /dev/stdin work too.
 */
#include <flextopo/error.h>
#include <flextopo/file.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(char **buf, size_t *cap, const char *path)
{
	char *bigger = realloc(*buf, *cap * 2 + 1);

	if (!bigger)
		return ft_error_set(FT_ENOMEM, "%s: out of memory", path);
	*buf = bigger;
	*cap *= 2;
	return 0;
}

static int read_stream(char **out, size_t *len, FILE *f, const char *path,
		       size_t max)
{
	char *buf = NULL;
	size_t n = 0, cap = 4096;
	int rc = 0;

	if (!(buf = malloc(cap + 1)))
		return ft_error_set(FT_ENOMEM, "%s: out of memory", path);
	while (!feof(f) && n <= max) {
		if (n == cap && (rc = grow(&buf, &cap, path)) < 0)
			goto cleanup;
		n += fread(buf + n, 1, cap - n, f);
		if (ferror(f)) {
			rc = ft_error_set(FT_EIO, "%s: %s", path,
					  strerror(errno));
			goto cleanup;
		}
	}
	if (n > max) {
		rc = ft_error_set(FT_ETOOBIG, "%s: larger than %zu bytes", path,
				  max);
		goto cleanup;
	}
	buf[n] = '\0';
	if (len)
		*len = n;
	*out = buf;
	buf = NULL;
cleanup:
	free(buf);
	return rc;
}

int ft_file_read(char **out, size_t *len, const char *path, size_t max)
{
	FILE *f = fopen(path, "rb");
	int rc;

	if (!f)
		return ft_error_set(FT_EIO, "%s: %s", path, strerror(errno));
	rc = read_stream(out, len, f, path, max);
	fclose(f);
	return rc;
}
