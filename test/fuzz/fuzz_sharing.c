/*
 * Fuzz target for the device plugin's sharing configuration (sharing.h).
 * Any input must either decode into a configuration whose counts, ranges
 * and strings hold what the header promises, or fail with one of the
 * documented codes and leave nothing behind; never crash or leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <flextopo/error.h>
#include <flextopo/sharing.h>
#include <flextopo/topology.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_devices(const ft_sharing_resource_t *r)
{
	if (r->select == FT_SHARING_COUNT && r->count == 0)
		abort();
	if (r->select == FT_SHARING_LIST && (r->n_devices == 0 || !r->devices))
		abort();
	if (r->select != FT_SHARING_LIST && r->n_devices != 0)
		abort();
	for (unsigned k = 0; k < r->n_devices; k++)
		if (!r->devices[k].text || r->devices[k].index < 0 ||
		    r->devices[k].ref > FT_SHARING_MIG)
			abort();
}

static void check(const ft_sharing_t *s)
{
	char buf[64];

	if (!s->file || s->kind > FT_SHARING_MPS ||
	    (s->kind == FT_SHARING_NONE) != (s->n_resources == 0))
		abort();
	for (unsigned i = 0; i < s->n_resources; i++) {
		const ft_sharing_resource_t *r = &s->resources[i];
		if (!r->name || !r->name[0] || r->replicas < 2 ||
		    r->replicas > FT_REPLICAS_MAX ||
		    r->select > FT_SHARING_LIST)
			abort();
		check_devices(r);
		ft_sharing_advertised(s, r, buf, sizeof(buf));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ft_sharing_t s;
	int rc =
	    ft_codec_sharing_decode(&s, (const char *)data, size, "fuzz.yaml");

	if (rc == 0)
		check(&s);
	else if (s.file || s.resources ||
		 (rc != FT_EINVAL && rc != FT_ETOOBIG && rc != FT_ENOMEM))
		abort();
	ft_sharing_dispose(&s);
	return 0;
}
