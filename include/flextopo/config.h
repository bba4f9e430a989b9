/*
 * Extender configuration: one flat YAML mapping read with libyaml.
 *
 * Every key, its type, default and meaning is listed in one schema table in
 * src/config/config.c and documented in configs/flextopo.yaml. Unknown keys,
 * wrong types and out-of-range values are errors that name the file and the
 * line ("flextopo.yaml:12: policy: expected packed or distributed, got
 * \"spread\""). Command-line flags override the file.
 *
 * Rules that span keys are checked when a file is loaded, after the whole
 * file: tlsCertFile and tlsKeyFile both or neither, tlsClientCAFile only
 * with them, watchBackoffInitialMs at most watchBackoffMaxMs.
 * ft_config_set() checks the backoff order too but not the TLS pair (a
 * command line sets one key at a time); ft_server_new() refuses half a pair.
 */
#ifndef FLEXTOPO_CONFIG_H
#define FLEXTOPO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* A key that is on or off. */
typedef enum {
	FT_OFF = 0,
	FT_ON = 1,
} ft_switch_t;

/* "off", "on": by value, NULL-terminated. */
extern const char *const ft_switch_names[];

typedef struct ft_config {
	char *listen; /* "HOST:PORT" of the extender API; default "0.0.0.0:8888"
		       */
	char *
	    debug_listen; /* "HOST:PORT" of the debug API; "" = off (default) */
	/* "HOST:PORT" of the authenticated /metrics listener; "" = off */
	char *metrics_listen;
	/* PEM certificate chain and key of the extender API; "" = plain HTTP */
	char *tls_cert_file;
	char *tls_key_file;
	/* PEM CAs that client certificates must chain to; "" = none asked */
	char *tls_client_ca_file;
	char *annotation_prefix; /* default "flextopo.io" */
	char *kubeconfig;	 /* "" = in-cluster service account (default) */
	char *snapshot;		 /* "" = watch the API server (default) */
	char *log_level;    /* debug | info | warn | error; default "info" */
	char *gpu_resource; /* default "nvidia.com/gpu" */
	char *mig_resource_prefix; /* default "nvidia.com/mig-" */
	ft_affinity_mode_t default_affinity_mode; /* default guaranteed */
	ft_policy_t policy;			  /* default packed */
	size_t
	    max_request_bytes; /* request body cap in bytes; default 67108864 */
	unsigned threads; /* HTTP worker threads; 0 = one per core (default) */
	unsigned max_connections; /* open on listen at once; default 1024 */
	/* open from one client address; 0 = no limit; default 128 */
	unsigned max_connections_per_client;
	unsigned connection_timeout_s; /* silent connection closed; 120 */
	unsigned api_timeout_ms; /* API server request timeout; default 10000 */
	/* a Binding of unknown outcome stays held this long at least; 60 */
	unsigned bind_settle_s;
	unsigned watch_backoff_initial_ms; /* default 800 (client-go's) */
	unsigned watch_backoff_max_ms;	   /* default 30000 */
	unsigned decision_log_size; /* decisions kept for debug; default 1024 */
	unsigned fragmentation_window; /* pods in the workload mix (frag.h);
					  0 = off; default 256 */
	/* Watch ResourceSlices and ResourceClaims (dra.h); default on */
	ft_switch_t dra;
	char *dra_driver; /* the GPU DRA driver; default "gpu.nvidia.com" */
	/* The mutating admission webhook (docs/dra.md): "HOST:PORT" or ""
	 * (off); HTTPS with its own certificate and key (PEM files). */
	char *webhook_listen;
	char *webhook_cert_file;
	char *webhook_key_file;
	/*
	 * Label keys read as all-or-nothing gangs (gang.h), comma-separated,
	 * at most FT_CONFIG_GANG_LABEL_KEYS; "" = none.
	 */
	char *gang_label_keys;
} ft_config_t;

#define FT_CONFIG_GANG_LABEL_KEYS 8

/* Fill `out` with the defaults; strings are heap copies. FT_ENOMEM. */
int ft_config_init(ft_config_t *out);

/*
 * Read `path` over the values already in `cfg` (normally the defaults).
 * FT_EIO when the file cannot be read, FT_EINVAL with "path:line: key: why"
 * for a YAML error, an unknown key, a wrong type or a bad value. On error
 * `cfg` keeps the values it had before the call.
 */
int ft_config_load_file(ft_config_t *cfg, const char *path);

/* Same as ft_config_load_file() for text in memory; `name` is used in errors.
 */
int ft_config_load_string(ft_config_t *cfg, const char *text, size_t len,
			  const char *name);

/*
 * Set one key from a string as if it stood in the file ("policy",
 * "distributed"); used for command-line overrides. FT_EINVAL for an unknown
 * key or bad value.
 */
int ft_config_set(ft_config_t *cfg, const char *key, const char *value);

/* Free the strings; `cfg` may be NULL. */
void ft_config_dispose(ft_config_t *cfg);

#endif
