/*
 * Structured logging: one JSON object per line on stderr.
 *
 * Lines are built in a buffer and written with one fwrite so that lines
 * from concurrent threads never interleave. Strings go through the
 * project's one JSON string writer (ft_buf_put_json_string, buf.h).
 */
#include <flextopo/buf.h>
#include <flextopo/error.h>
#include <flextopo/log.h>

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int current_level = FT_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int ft_log_level_parse(ft_log_level_t *out, const char *name)
{
	for (int i = 0; i < 4; i++) {
		if (name && strcmp(name, level_names[i]) == 0) {
			*out = (ft_log_level_t)i;
			return 0;
		}
	}
	return ft_error_set(
	    FT_EINVAL,
	    "log level: expected debug, info, warn or error, got \"%s\"",
	    name ? name : "");
}

void ft_log_set_level(ft_log_level_t level)
{
	atomic_store(&current_level, (int)level);
}

int ft_log_enabled(ft_log_level_t level)
{
	return (int)level >= atomic_load(&current_level);
}

static void put_field(ft_buf_t *line, const char *key, const char *value)
{
	if (!value)
		return;
	ft_buf_puts(line, ",\"");
	ft_buf_puts(line, key);
	ft_buf_puts(line, "\":");
	ft_buf_put_json_string(line, value);
}

void ft_log(ft_log_level_t level, const char *verb, const char *pod,
	    const char *node, const char *reason, const char *fmt, ...)
{
	char ts[64], msg[1024];
	ft_buf_t line;
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (!ft_log_enabled(level))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, (int)(now.tv_nsec / 1000000));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ft_buf_init(&line, 256);
	ft_buf_puts(&line, "{\"ts\":\"");
	ft_buf_puts(&line, ts);
	ft_buf_puts(&line, "\"");
	put_field(&line, "level", level_names[level]);
	put_field(&line, "msg", msg);
	put_field(&line, "verb", verb);
	put_field(&line, "pod", pod);
	put_field(&line, "node", node);
	put_field(&line, "reason", reason);
	ft_buf_puts(&line, "}\n");
	if (line.failed)
		fputs("{\"level\":\"error\",\"msg\":\"log: out of memory\"}\n",
		      stderr);
	else
		fwrite(line.data, 1, line.len, stderr);
	ft_buf_dispose(&line);
}
