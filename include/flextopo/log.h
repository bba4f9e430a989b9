/*
 * Structured logging: one JSON object per line on stderr, with "ts",
 * "level", "msg" and optional "verb", "pod", "node" and "reason" keys.
 * The level is process-wide and set once from configuration.
 */
#ifndef FLEXTOPO_LOG_H
#define FLEXTOPO_LOG_H

typedef enum {
	FT_LOG_DEBUG = 0,
	FT_LOG_INFO = 1,
	FT_LOG_WARN = 2,
	FT_LOG_ERROR = 3,
} ft_log_level_t;

/* Parse "debug" | "info" | "warn" | "error"; FT_EINVAL otherwise. */
int ft_log_level_parse(ft_log_level_t *out, const char *name);

void ft_log_set_level(ft_log_level_t level);
int ft_log_enabled(ft_log_level_t level);

/*
 * Write one line. `verb`, `pod`, `node` and `reason` may be NULL and are
 * then left out. `fmt` formats "msg".
 */
void ft_log(ft_log_level_t level, const char *verb, const char *pod,
	    const char *node, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#define FT_LOG_ERROR_MSG(...)                                                  \
	ft_log(FT_LOG_ERROR, NULL, NULL, NULL, NULL, __VA_ARGS__)
#define FT_LOG_INFO_MSG(...)                                                   \
	ft_log(FT_LOG_INFO, NULL, NULL, NULL, NULL, __VA_ARGS__)
#define FT_LOG_WARN_MSG(...)                                                   \
	ft_log(FT_LOG_WARN, NULL, NULL, NULL, NULL, __VA_ARGS__)
#define FT_LOG_DEBUG_MSG(...)                                                  \
	ft_log(FT_LOG_DEBUG, NULL, NULL, NULL, NULL, __VA_ARGS__)

#endif
