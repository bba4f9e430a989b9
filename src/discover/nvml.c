/*
 * NVML loaded at run time. flextopo-discover must start on nodes without an
 * NVIDIA driver (and be built where there is none), so libnvidia-ml.so.1 is
 * opened with dlopen and its symbols copied into the ft_nvml_t table of
 * discover.h; nothing links against it. Symbols that older drivers lack
 * stay NULL and discovery goes without what they would tell.
 */
#include <flextopo/discover.h>
#include <flextopo/error.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LIBRARY "libnvidia-ml.so.1"

static const struct symbol {
	const char *name;
	size_t offset;
	bool required;
} symbols[] = {
    {"nvmlInit_v2", offsetof(ft_nvml_t, init), true},
    {"nvmlShutdown", offsetof(ft_nvml_t, shutdown), true},
    {"nvmlErrorString", offsetof(ft_nvml_t, error_string), false},
    {"nvmlDeviceGetHandleByPciBusId_v2",
     offsetof(ft_nvml_t, device_by_pci_bus_id), true},
    {"nvmlDeviceGetIndex", offsetof(ft_nvml_t, device_index), true},
    {"nvmlDeviceGetUUID", offsetof(ft_nvml_t, device_uuid), true},
    {"nvmlDeviceGetName", offsetof(ft_nvml_t, device_name), false},
    {"nvmlDeviceGetMemoryInfo", offsetof(ft_nvml_t, device_memory), false},
    {"nvmlDeviceGetNvLinkState", offsetof(ft_nvml_t, nvlink_state), false},
    {"nvmlDeviceGetNvLinkRemotePciInfo_v2",
     offsetof(ft_nvml_t, nvlink_remote_pci), false},
    {"nvmlDeviceGetNvLinkRemoteDeviceType",
     offsetof(ft_nvml_t, nvlink_remote_type), false},
    {"nvmlDeviceGetMigMode", offsetof(ft_nvml_t, mig_mode), false},
    {"nvmlDeviceGetMaxMigDeviceCount", offsetof(ft_nvml_t, max_mig_devices),
     false},
    {"nvmlDeviceGetMigDeviceHandleByIndex",
     offsetof(ft_nvml_t, mig_device_by_index), false},
    {"nvmlDeviceGetGpuInstanceId", offsetof(ft_nvml_t, gpu_instance_id), false},
    {"nvmlDeviceGetGpuInstanceById", offsetof(ft_nvml_t, gpu_instance_by_id),
     false},
    {"nvmlGpuInstanceGetInfo", offsetof(ft_nvml_t, gpu_instance_info), false},
};

/*
 * POSIX guarantees that dlsym's object pointer can be used as a function
 * pointer; copying the bytes says so without a cast ISO C does not define.
 */
static int resolve(ft_nvml_t *nvml, const char *library)
{
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		void *fn = dlsym(nvml->library, symbols[i].name);
		if (!fn && symbols[i].required)
			return ft_error_set(FT_EUNAVAIL, "NVML: %s lacks %s",
					    library, symbols[i].name);
		memcpy((char *)nvml + symbols[i].offset, &fn, sizeof(fn));
	}
	return 0;
}

int ft_discover_nvml_new(ft_nvml_t **out, const char *library)
{
	const char *name = library ? library : DEFAULT_LIBRARY;
	ft_nvml_t *nvml = calloc(1, sizeof(*nvml));
	int rc;

	*out = NULL;
	if (!nvml)
		return ft_error_set(FT_ENOMEM, "NVML: out of memory");
	if (!(nvml->library = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
		const char *why = dlerror();
		rc = ft_error_set(FT_EUNAVAIL, "NVML: %s", why ? why : name);
		goto cleanup;
	}
	if ((rc = resolve(nvml, name)) < 0)
		goto cleanup;
	*out = nvml;
	nvml = NULL;
cleanup:
	ft_discover_nvml_free(nvml);
	return rc;
}

void ft_discover_nvml_free(ft_nvml_t *nvml)
{
	if (!nvml)
		return;
	if (nvml->library)
		dlclose(nvml->library);
	free(nvml);
}
