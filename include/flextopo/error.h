/*
 * flextopo error codes and the per-thread error message.
 *
 * Every fallible function returns an int: 0 on success, one of the negative
 * FT_E* codes below, or -1 for anything the caller cannot act on. The function
 * where an error starts sets a one-line message with ft_error_set(); callers
 * pass the code up unchanged and read the message with ft_error_last().
 *
 * Out-of-memory policy: allocation failures are reported as FT_ENOMEM and the
 * operation is abandoned with nothing half-applied; the process keeps running.
 */
#ifndef FLEXTOPO_ERROR_H
#define FLEXTOPO_ERROR_H

#include <stdarg.h>

/* X(name, value, description) */
#define FT_ERRNO_MAP(X)                                                        \
	X(EINVAL, -2, "invalid input")                                         \
	X(ENOMEM, -3, "out of memory")                                         \
	X(ENOTFOUND, -4, "not found")                                          \
	X(ECONFLICT, -5, "conflict")                                           \
	X(EIO, -6, "I/O error")                                                \
	X(ETOOBIG, -7, "too large")                                            \
	X(EUNAVAIL, -8, "unavailable")                                         \
	X(EGONE, -9, "resource version gone")                                  \
	X(EUNKNOWN, -10, "outcome unknown")

typedef enum {
	FT_OK = 0,
	FT_ERROR = -1,
#define FT_ERRNO_ENUM(name, value, desc) FT_##name = value,
	FT_ERRNO_MAP(FT_ERRNO_ENUM)
#undef FT_ERRNO_ENUM
} ft_error_code_t;

/*
 * Set the calling thread's last error message (printf-style, truncated to
 * 1023 bytes). Returns `code` so that a caller can write
 * `return ft_error_set(FT_EINVAL, "...")`.
 */
int ft_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * As ft_error_set(), for the error helpers of parsers that name where an
 * error is first: the message is `where`, ": ", then `fmt` formatted with
 * `ap` (truncated as above).
 */
int ft_error_vset_at(int code, const char *where, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* The calling thread's last message; borrowed, valid until the next set. */
const char *ft_error_last(void);

/* Forget the calling thread's last message. */
void ft_error_clear(void);

#endif
