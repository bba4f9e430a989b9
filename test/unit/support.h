/* Shared helpers for the unit tests: reading fixture files. */
#ifndef FLEXTOPO_TEST_SUPPORT_H
#define FLEXTOPO_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Read FT_FIXTURES_DIR/relpath into a NUL-terminated heap buffer; NULL on
 * failure. */
char *ft_test_read_fixture(const char *relpath, size_t *len);

/* Read any file into a NUL-terminated heap buffer; NULL on failure. */
char *ft_test_read_file(const char *path, size_t *len);

/*
 * Run `run` on every golden wire case of `verb` (FT_FIXTURES_DIR/wire/
 * <verb>/<case>.request.json) in name order, printing a line per case
 * with `label`; returns how many failed, or -1 when there is none.
 */
int ft_test_wire_cases(const char *verb, const char *label,
		       bool (*run)(const char *name, void *payload),
		       void *payload);

/* Parse JSON written with single quotes (no quote characters inside);
 * aborts, printing it, when it does not parse. The caller deletes it. */
struct cJSON *ft_test_json(const char *text);

/*
 * GET https://127.0.0.1:`port`/metrics as a scraper does: the server's
 * certificate unchecked, `token` as the bearer token (none when NULL). The
 * status is returned; *body gets the reply, to free. Fails the test when
 * the request does not complete.
 */
long ft_test_scrape_metrics(unsigned port, const char *token, char **body);

/*
 * The same for any `path`: a POST of `post` (JSON) when not NULL, a GET
 * otherwise.
 */
long ft_test_https(unsigned port, const char *path, const char *token,
		   const char *post, char **body);

/*
 * A self-signed certificate for 127.0.0.1 and localhost, tls.crt and
 * tls.key, in a new directory under /tmp whose name goes to `dir` (`size`
 * bytes). false when there is no openssl command (the caller skips the
 * case); fails the test when openssl fails. ft_test_remove_cert removes it.
 */
bool ft_test_make_cert(char *dir, size_t size);
void ft_test_remove_cert(const char *dir);

/*
 * An AdmissionReview of a ResourceClaimTemplate whose claims are guaranteed
 * numa (the affinity on its spec.metadata), asking 2 GPUs of class
 * gpu.nvidia.com and a NIC of another class, and the patch the webhook
 * answers on the DRA cluster (test/fixtures/cluster/dra.yaml): base64 of
 * the JSONPatch that constrains only the "gpus" request to one
 * resource.kubernetes.io/numaNode.
 */
#define FT_TEST_REVIEW_NUMA_TEMPLATE                                           \
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"r-1\",\"kind\":{\"group\":\"resource.k8s.io\",\"version\":\"v1\",\"kind\":\"ResourceClaimTemplate\"},\"namespace\":\"ml\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"t\"},\"spec\":{\"metadata\":{\"annotations\":{\"flextopo.io/affinity\":\"numa\"}},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpus\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2}},{\"name\":\"nic\",\"exactly\":{\"deviceClassName\":\"rdma.example.com\"}}]}}}}}}"
#define FT_TEST_REVIEW_NUMA_TEMPLATE_PATCH                                     \
	"W3sib3AiOiJhZGQiLCJ2YWx1ZSI6W3sicmVxdWVzdHMiOlsiZ3B1cyJdLCJtYXRjaEF0dHJpYnV0ZSI6InJlc291cmNlLmt1YmVybmV0ZXMuaW8vbnVtYU5vZGUifV0sInBhdGgiOiIvc3BlYy9zcGVjL2RldmljZXMvY29uc3RyYWludHMifV0="

/* Fail the test unless `reply` (`len` bytes) is an AdmissionReview whose
 * response carries `patch`. */
void ft_test_assert_review_patch(const char *reply, size_t len,
				 const char *patch);

#endif

#include <flextopo/cluster.h>
#include <flextopo/topology.h>

/*
 * Reference servers built through the topology builder (no parser):
 * - 8x RTX 4090: 2 sockets, 8 NUMA nodes of 8 CPUs (NUMA k = CPUs 8k..8k+7),
 *   GPU k on its own PCIe switch under NUMA k, no NVLink.
 * - 8x A100 SXM: 2 sockets, 2 NUMA nodes of 64 CPUs, GPUs 0-3 on NUMA 0
 *   (switches 0,1), 4-7 on NUMA 1 (switches 2,3), NV12 between every pair.
 * - 4 GPUs, 1 socket, 2 NUMA nodes of 8 CPUs, GPUs 0,1 on NUMA 0 and 2,3 on
 *   NUMA 1, one PCIe switch per NUMA node, NVLink bridges (0,1) and (2,3).
 * GPU uuids are "<prefix>-<index>".
 */
ft_topology_t *ft_test_topology_4090(const char *prefix);
ft_topology_t *ft_test_topology_a100(const char *prefix);
ft_topology_t *ft_test_topology_pairs4(const char *prefix);
/*
 * 3 GPUs "H100" (81920 MiB) on one NUMA node of CPUs 0-15, no NVLink. GPU 0:
 * 3g.40gb at 0 and 4 (MIG-0a, MIG-0b); GPU 1: 3g.40gb at 0 (MIG-1a) and
 * 1g.10gb at 4 (MIG-1b), slices 5-7 uncovered; GPU 2 whole (uuids "H-<i>").
 */
ft_topology_t *ft_test_topology_mig(void);
/*
 * The topology annotation FT_FIXTURES_DIR/topology/<name> parsed; aborts
 * with the parser's message when it does not parse.
 */
ft_topology_t *ft_test_topology_fixture(const char *name);

/*
 * A pod for node builds. `gpus` lists uuids (NULL-terminated, may be NULL);
 * `cpus` a cpulist or NULL. With no devices listed the pod has no
 * allocation and holds `unknown_gpus` GPUs of unknown placement.
 */
void ft_test_pod(ft_pod_t *out, const char *uid, int32_t priority,
		 const char *const *gpus, const char *cpus,
		 uint32_t unknown_gpus);

/* Build a node from pods (terminated by a NULL pointer). */
ft_node_t *ft_test_node(const char *name, ft_topology_t *t,
			ft_pod_t *const *pods);
