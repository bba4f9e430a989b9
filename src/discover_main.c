/*
 * flextopo-discover: build the flextopo.io/topology annotation of this node
 * from hwloc (and NVML when the NVIDIA driver is there) and print it, or
 * merge-patch it onto the Node object the way a DaemonSet would:
 *
 *   flextopo-discover                        print this machine's annotation
 *   flextopo-discover --input box.xml        from an hwloc XML export instead
 *   flextopo-discover --node $(NODE_NAME)    PATCH /api/v1/nodes/NAME with
 *                                            the in-cluster service account
 *   flextopo-discover --sharing-config F     with the replicas of GPUs that
 *                                            the NVIDIA device plugin's
 *                                            config file F shares
 *
 * Warnings (what discovery had to guess or leave out) go to stderr, one line
 * each; the annotation goes to stdout. Exit status 0, 1 on errors, 2 on
 * usage errors.
 */
#include <flextopo/codec.h>
#include <flextopo/discover.h>
#include <flextopo/error.h>
#include <flextopo/kube.h>
#include <flextopo/sharing.h>
#include <flextopo/topology.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRAM		  "flextopo-discover"
#define DEFAULT_PREFIX	  "flextopo.io"
#define NODE_NAME_MAX	  253 /* a DNS subdomain (RFC 1123) */
#define REQUEST_TIMEOUT	  10000
#define REPLY_SHOWN_BYTES 300

typedef struct args {
	const char *input;
	const char *node;
	const char *kubeconfig;
	const char *prefix;
	const char *sharing_config;
	bool in_cluster;
	bool print;
	bool no_nvml;
} args_t;

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: " PROGRAM " [--input FILE] [--print] [--no-nvml]\n"
	    "                         [--sharing-config FILE]\n"
	    "                         [--node NAME [--kubeconfig FILE | --in-cluster]]\n"
	    "                         [--annotation-prefix PREFIX]\n"
	    "  --input FILE      read an hwloc XML export (lstopo --of xml) instead of\n"
	    "                    this machine; NVML is then not asked\n"
	    "  --node NAME       merge-patch the annotation onto Node NAME\n"
	    "  --kubeconfig FILE API server credentials (default with --node: in-cluster)\n"
	    "  --in-cluster      the pod's service account\n"
	    "  --print           print the annotation (the default without --node)\n"
	    "  --no-nvml         do not load libnvidia-ml.so.1\n"
	    "  --sharing-config FILE  the NVIDIA device plugin's config file (its\n"
	    "                    --config-file); the GPUs its sharing.timeSlicing or\n"
	    "                    sharing.mps resources cover get their replicas, and\n"
	    "                    a renamed resource becomes sharedResource\n"
	    "  --annotation-prefix PREFIX  annotation PREFIX/topology (default " DEFAULT_PREFIX
	    ")\n");
}

/* -1 to go on, or the exit status. */
static int parse_args(args_t *a, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"input", required_argument, NULL, 'i'},
	    {"node", required_argument, NULL, 'n'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"in-cluster", no_argument, NULL, 'c'},
	    {"print", no_argument, NULL, 'p'},
	    {"no-nvml", no_argument, NULL, 'N'},
	    {"annotation-prefix", required_argument, NULL, 'a'},
	    {"sharing-config", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	int c;

	memset(a, 0, sizeof(*a));
	a->prefix = DEFAULT_PREFIX;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			a->input = optarg;
			break;
		case 'n':
			a->node = optarg;
			break;
		case 'k':
			a->kubeconfig = optarg;
			break;
		case 'c':
			a->in_cluster = true;
			break;
		case 'p':
			a->print = true;
			break;
		case 'N':
			a->no_nvml = true;
			break;
		case 'a':
			a->prefix = optarg;
			break;
		case 's':
			a->sharing_config = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc || (a->kubeconfig && a->in_cluster) ||
	    ((a->kubeconfig || a->in_cluster) && !a->node)) {
		usage(stderr);
		return 2;
	}
	if (!a->node)
		a->print = true;
	return -1;
}

static void warn(const char *message, void *payload)
{
	fprintf(stderr, PROGRAM ": warning: %s\n", message);
}

/*
 * NVML for a live discovery; NULL without it. Why it is missing is kept
 * in `why` and told only if GPUs turn up, since nodes without GPUs have
 * no NVIDIA driver.
 */
static ft_nvml_t *load_nvml(const args_t *a, char *why, size_t size)
{
	ft_nvml_t *nvml = NULL;

	why[0] = '\0';
	if (a->input || a->no_nvml)
		return NULL;
	if (ft_discover_nvml_new(&nvml, NULL) < 0)
		snprintf(why, size, "%s", ft_error_last());
	return nvml;
}

static int discover(ft_topology_t **out, const args_t *a)
{
	char why[512];
	ft_sharing_t sharing = {0};
	ft_nvml_t *nvml = NULL;
	ft_discover_options_t opts = {
	    .xml_path = a->input, .sharing = &sharing, .warn = warn};
	int rc;

	/* A bad file stops before the hardware is looked at. */
	if (a->sharing_config &&
	    (rc = ft_codec_sharing_load(&sharing, a->sharing_config)) < 0)
		return rc;
	opts.nvml = nvml = load_nvml(a, why, sizeof(why));
	rc = ft_discover_topology(out, &opts);
	if (rc == 0 && (*out)->n_gpus > 0 && why[0])
		fprintf(
		    stderr,
		    PROGRAM
		    ": warning: no NVML (%s): GPU indexes and uuids come from hwloc or PCI order\n",
		    why);
	ft_discover_nvml_free(nvml);
	ft_sharing_dispose(&sharing);
	return rc;
}

static bool valid_node_name(const char *name)
{
	size_t len = strlen(name);

	return len > 0 && len <= NODE_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789.-") == len;
}

static int load_credentials(ft_kube_credentials_t *creds, const args_t *a)
{
	char why[512];
	int rc;

	if (a->kubeconfig)
		return ft_kube_credentials_from_kubeconfig(creds,
							   a->kubeconfig);
	if ((rc = ft_kube_credentials_in_cluster(creds)) != FT_ENOTFOUND)
		return rc;
	snprintf(why, sizeof(why), "%s", ft_error_last());
	return ft_error_set(rc, "%s (outside a pod: give --kubeconfig)", why);
}

static int send_patch(ft_kube_client_t *client, const char *node,
		      const char *body)
{
	char path[64 + NODE_NAME_MAX], *reply = NULL;
	long status = 0;
	int rc;

	snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
	rc = ft_kube_request(client, "PATCH", path,
			     "application/merge-patch+json", body, strlen(body),
			     &status, &reply);
	if (rc == 0 && (status < 200 || status >= 300))
		rc = ft_error_set(status == 404 ? FT_ENOTFOUND : FT_EIO,
				  "node %s: HTTP %ld: %.*s", node, status,
				  REPLY_SHOWN_BYTES, reply ? reply : "");
	free(reply);
	return rc;
}

static int annotate_node(const args_t *a, const char *annotation)
{
	ft_kube_credentials_t creds;
	ft_kube_client_t *client = NULL;
	char key[256], *body = NULL;
	int rc;

	memset(&creds, 0, sizeof(creds));
	if (!valid_node_name(a->node))
		return ft_error_set(FT_EINVAL,
				    "node \"%s\": not a Kubernetes node name",
				    a->node);
	snprintf(key, sizeof(key), "%s/topology", a->prefix);
	if ((rc = ft_codec_annotation_patch_encode(&body, key, annotation)) <
		0 ||
	    (rc = load_credentials(&creds, a)) < 0 ||
	    (rc = ft_kube_client_new(&client, &creds, REQUEST_TIMEOUT)) < 0 ||
	    (rc = send_patch(client, a->node, body)) < 0)
		goto cleanup;
	fprintf(stderr, PROGRAM ": node %s: annotation %s set (%zu bytes)\n",
		a->node, key, strlen(annotation));
cleanup:
	ft_kube_client_free(client);
	ft_kube_credentials_dispose(&creds);
	free(body);
	return rc;
}

int main(int argc, char **argv)
{
	ft_topology_t *t = NULL;
	char *annotation = NULL;
	args_t a;
	int rc;

	if ((rc = parse_args(&a, argc, argv)) >= 0)
		return rc;
	if ((rc = discover(&t, &a)) < 0 ||
	    (rc = ft_codec_topology_encode(&annotation, t)) < 0)
		goto cleanup;
	if (a.print) {
		printf("%s\n", annotation);
		fflush(stdout);
	}
	if (a.node)
		rc = annotate_node(&a, annotation);
cleanup:
	if (rc < 0)
		fprintf(stderr, PROGRAM ": %s\n", ft_error_last());
	free(annotation);
	ft_topology_unref(t);
	return rc < 0 ? 1 : 0;
}
