/*
 * Error codes and the per-thread last error message.
 *
 * The message lives in thread-local storage so that concurrent request
 * handlers never see each other's errors.
 */
#include <flextopo/error.h>

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_message[1024];

int ft_error_set(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	return code;
}

int ft_error_vset_at(int code, const char *where, const char *fmt, va_list ap)
{
	int n = snprintf(last_message, sizeof(last_message), "%s: ", where);

	if (n >= 0 && (size_t)n < sizeof(last_message))
		vsnprintf(last_message + n, sizeof(last_message) - (size_t)n,
			  fmt, ap);
	return code;
}

const char *ft_error_last(void)
{
	return last_message[0] ? last_message : "no error message";
}

void ft_error_clear(void)
{
	last_message[0] = '\0';
}
