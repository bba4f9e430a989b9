/*
 * Shared GPUs as the NVIDIA device plugin configures them: the "sharing"
 * section of its configuration file (k8s-device-plugin README, "Shared
 * Access to GPUs"; --config-file, usually a ConfigMap). flextopo-discover
 * reads it to write gpus[].replicas and sharedResource into the topology
 * annotation (api/topology.schema.json).
 *
 *   version: v1                  optional; "v1" is the only version
 *   flags: ...                   and every other top-level key: ignored
 *   sharing:
 *     timeSlicing:               or mps: (the same shape), not both
 *       renameByDefault: false   true: replicas go by "<name>.shared"
 *       failRequestsGreaterThanOne: false   read, not used
 *       resources:               one entry at least
 *       - name: nvidia.com/gpu   or nvidia.com/mig-<profile>
 *         rename: NAME           optional: the name the replicas go by
 *         replicas: 10           2..FT_REPLICAS_MAX
 *         devices: all           optional (absent: all), or a count N (the
 *                                first N GPUs), or a list of GPU indexes
 *                                (0 or "0"), GPU UUIDs ("GPU-..."), MIG
 *                                indexes ("0:1") and MIG UUIDs ("MIG-...")
 *
 * The plugin (its api/config/v1 types) accepts more replicas than this;
 * the annotation's model stops at FT_REPLICAS_MAX. Unknown keys are ignored
 * as the plugin ignores them. Note that released plugins (v0.20 and
 * earlier) reset a per-resource `rename` and `devices` to their defaults
 * with a warning (NVIDIA/k8s-device-plugin issue #353): they share every
 * GPU under the default name. The decoder keeps what the file says; the
 * discovery step that applies it warns (discover.h).
 */
#ifndef FLEXTOPO_SHARING_H
#define FLEXTOPO_SHARING_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
	FT_SHARING_NONE = 0,	     /* no sharing section, or "sharing: {}";
					a timeSlicing or mps section must
					list resources */
	FT_SHARING_TIME_SLICING = 1, /* sharing.timeSlicing */
	FT_SHARING_MPS = 2,	     /* sharing.mps */
} ft_sharing_kind_t;

/* Which GPUs of a resource are shared ("devices"). */
typedef enum {
	FT_SHARING_ALL = 0,   /* absent, null or "all" */
	FT_SHARING_COUNT = 1, /* an integer N >= 1: the first N */
	FT_SHARING_LIST = 2,  /* a list of device references */
} ft_sharing_select_t;

/* One entry of a "devices" list, by its form. */
typedef enum {
	FT_SHARING_GPU_INDEX = 0, /* 3 or "3": nvidia-smi index */
	FT_SHARING_GPU_UUID = 1,  /* "GPU-..." */
	FT_SHARING_MIG = 2,	  /* "3:1" (GPU:MIG index) or "MIG-..." */
} ft_sharing_ref_t;

typedef struct ft_sharing_device {
	ft_sharing_ref_t ref;
	int index;     /* FT_SHARING_GPU_INDEX: the GPU index */
	char *text;    /* the entry as written ("3" for the number 3) */
	unsigned line; /* where it is in the file; 0 when unknown */
} ft_sharing_device_t;

typedef struct ft_sharing_resource {
	char *name;	   /* "nvidia.com/gpu" or "nvidia.com/mig-..." */
	char *rename;	   /* as written; NULL when absent */
	unsigned replicas; /* 2..FT_REPLICAS_MAX */
	ft_sharing_select_t select;
	unsigned count;	    /* FT_SHARING_COUNT */
	unsigned n_devices; /* FT_SHARING_LIST: at least one */
	ft_sharing_device_t *devices;
	unsigned line;	       /* of the entry; 0 when unknown */
	unsigned rename_line;  /* of "rename"; 0 when absent or unknown */
	unsigned devices_line; /* of "devices"; 0 when absent or unknown */
} ft_sharing_resource_t;

typedef struct ft_sharing {
	char *file; /* the name messages use (the path of a loaded file) */
	ft_sharing_kind_t kind;
	bool rename_by_default;
	unsigned n_resources; /* at least one unless kind is NONE */
	ft_sharing_resource_t *resources;
	unsigned line; /* of the timeSlicing or mps section */
} ft_sharing_t;

/* "timeSlicing", "mps", or "" for FT_SHARING_NONE. */
const char *ft_sharing_kind_name(ft_sharing_kind_t kind);

/*
 * The name the replicas of `r` go by when it is not r->name itself: its
 * rename (which wins over renameByDefault), else "<name>.shared" under
 * renameByDefault; NULL otherwise, a rename to the name itself included.
 * The string is `r`'s own, or written into buf (`size` bytes).
 */
const char *ft_sharing_advertised(const ft_sharing_t *s,
				  const ft_sharing_resource_t *r, char *buf,
				  size_t size);

/*
 * Decode a device plugin configuration file's text; `name` (the path) is
 * copied into out->file and starts every message. FT_EINVAL with
 * "name:line: field: what is wrong", the field as a path
 * ("sharing.timeSlicing.resources[0].replicas: must be an integer 2..100");
 * the line is left out where it is unknown. FT_ETOOBIG for runaway
 * aliases, FT_ENOMEM. On error *out is left zeroed. Lives in the codec
 * stage (src/codec/sharing.c).
 */
int ft_codec_sharing_decode(ft_sharing_t *out, const char *text, size_t len,
			    const char *name);

/* Read (at most 1 MiB) and decode a file; FT_EIO when it cannot be read. */
int ft_codec_sharing_load(ft_sharing_t *out, const char *path);

/* Free what a decode gave. A zeroed struct is fine. */
void ft_sharing_dispose(ft_sharing_t *s);

#endif
