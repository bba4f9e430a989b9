/*
 * Fuzz target for the configuration reader. Any input must either load
 * into a configuration that passes the cross-key checks, or fail with
 * FT_EINVAL (or FT_ENOMEM) and leave the configuration exactly as it was.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <flextopo/config.h>
#include <flextopo/error.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_string(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static int same_config(const ft_config_t *a, const ft_config_t *b)
{
	return same_string(a->listen, b->listen) &&
	       same_string(a->debug_listen, b->debug_listen) &&
	       same_string(a->annotation_prefix, b->annotation_prefix) &&
	       same_string(a->kubeconfig, b->kubeconfig) &&
	       same_string(a->snapshot, b->snapshot) &&
	       same_string(a->log_level, b->log_level) &&
	       same_string(a->gpu_resource, b->gpu_resource) &&
	       same_string(a->mig_resource_prefix, b->mig_resource_prefix) &&
	       a->default_affinity_mode == b->default_affinity_mode &&
	       a->policy == b->policy &&
	       a->max_request_bytes == b->max_request_bytes &&
	       a->threads == b->threads &&
	       a->api_timeout_ms == b->api_timeout_ms &&
	       a->watch_backoff_initial_ms == b->watch_backoff_initial_ms &&
	       a->watch_backoff_max_ms == b->watch_backoff_max_ms &&
	       a->decision_log_size == b->decision_log_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_config_t cfg;
	ft_config_t defaults;
	int rc;

	if (ft_config_init(&cfg) != 0)
		return 0;
	if (ft_config_init(&defaults) != 0) {
		ft_config_dispose(&cfg);
		return 0;
	}
	rc = ft_config_load_string(&cfg, (const char *)data, size, "fuzz.yaml");
	if (rc == 0 &&
	    (cfg.watch_backoff_initial_ms > cfg.watch_backoff_max_ms ||
	     cfg.threads > 256 || cfg.max_request_bytes < 1024))
		abort();
	if (rc != 0 && ((rc != FT_EINVAL && rc != FT_ENOMEM) ||
			!same_config(&cfg, &defaults)))
		abort();
	ft_config_dispose(&cfg);
	ft_config_dispose(&defaults);
	return 0;
}
