/*
 * Structured logging: one JSON object per line on stderr.
 *
 * Lines are built in a local buffer and written with one fwrite so that lines
 * from concurrent threads never interleave. Strings are JSON-escaped here
 * rather than through cJSON so that the base layer has no dependencies.
 */
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

typedef struct {
	char buf[2048];
	size_t len;
} line_t;

static void put_raw(line_t *line, const char *s)
{
	size_t n = strlen(s);

	if (n > sizeof(line->buf) - 1 - line->len)
		n = sizeof(line->buf) - 1 - line->len;
	memcpy(line->buf + line->len, s, n);
	line->len += n;
}

static void put_escaped(line_t *line, const char *s)
{
	char esc[8];

	for (; *s && line->len < sizeof(line->buf) - 8; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			esc[2] = '\0';
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		} else {
			esc[0] = (char)c;
			esc[1] = '\0';
		}
		put_raw(line, esc);
	}
}

static void put_field(line_t *line, const char *key, const char *value)
{
	if (!value)
		return;
	put_raw(line, ",\"");
	put_raw(line, key);
	put_raw(line, "\":\"");
	put_escaped(line, value);
	put_raw(line, "\"");
}

void ft_log(ft_log_level_t level, const char *verb, const char *pod,
	    const char *node, const char *reason, const char *fmt, ...)
{
	line_t line = {.len = 0};
	char ts[64], msg[1024];
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
	put_raw(&line, "{\"ts\":\"");
	put_raw(&line, ts);
	put_raw(&line, "\"");
	put_field(&line, "level", level_names[level]);
	put_field(&line, "msg", msg);
	put_field(&line, "verb", verb);
	put_field(&line, "pod", pod);
	put_field(&line, "node", node);
	put_field(&line, "reason", reason);
	put_raw(&line, "}\n");
	fwrite(line.buf, 1, line.len, stderr);
}
