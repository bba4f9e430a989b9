/*
 * Whole-file reads for the edges of the program (configuration, snapshot
 * and kubeconfig files, token files).
 */
#ifndef FLEXTOPO_FILE_H
#define FLEXTOPO_FILE_H

#include <stddef.h>

/*
 * Read `path` into *out, a NUL-terminated heap buffer the caller frees;
 * *len (if not NULL) gets its length. FT_EIO with "path: reason",
 * FT_ETOOBIG when the file holds more than `max` bytes, FT_ENOMEM.
 */
int ft_file_read(char **out, size_t *len, const char *path, size_t max);

#endif
