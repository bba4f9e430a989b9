/*
 * flextopo-extender: flags and configuration, the source of cluster state
 * (a snapshot file, or list+watch of the API server), the HTTP server, and
 * an orderly stop on SIGINT/SIGTERM.
 *
 * Signals are blocked before any thread starts and taken with sigwait() in
 * the main thread, so no handler runs inside library code.
 */
#include <flextopo/access.h>
#include <flextopo/app.h>
#include <flextopo/debug.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/upkeep.h>
#include <flextopo/webhook.h>
#include <flextopo/yamljson.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The codec's options from the configuration (borrows its strings). */
static void options_from_config(ft_codec_options_t *out, const ft_config_t *cfg)
{
	out->annotation_prefix = cfg->annotation_prefix;
	out->gpu_resource = cfg->gpu_resource;
	out->mig_resource_prefix = cfg->mig_resource_prefix;
	out->default_mode = cfg->default_affinity_mode;
	out->dra_driver = cfg->dra_driver;
}

/* gangLabelKeys, split at its commas into the codec's options. */
static int gang_keys_from_config(ft_app_t *app)
{
	char *save = NULL;
	unsigned n = 0;

	if (!(app->gang_keys = strdup(app->cfg.gang_label_keys)))
		return ft_error_set(FT_ENOMEM, "out of memory");
	for (char *key = strtok_r(app->gang_keys, ",", &save);
	     key && n < FT_CONFIG_GANG_LABEL_KEYS;
	     key = strtok_r(NULL, ",", &save))
		app->gang_key_list[n++] = key;
	app->opts.gang_label_keys = app->gang_key_list;
	app->opts.n_gang_label_keys = n;
	return 0;
}

int ft_app_init(ft_app_t *app)
{
	ft_log_level_t level;
	int rc;

	if ((rc = ft_log_level_parse(&level, app->cfg.log_level)) < 0)
		return rc;
	ft_log_set_level(level);
	options_from_config(&app->opts, &app->cfg);
	if ((rc = gang_keys_from_config(app)) < 0 ||
	    (rc = ft_codec_mig_catalog_builtin(&app->mig_catalog)) < 0)
		return rc;
	app->opts.mig_catalog = &app->mig_catalog;
	if ((rc = ft_decisions_new(&app->decisions,
				   app->cfg.decision_log_size)) < 0 ||
	    (rc = ft_metrics_new(&app->metrics)) < 0)
		return rc;
	if ((rc = ft_state_new(&app->state, &app->opts)) < 0)
		return rc;
	ft_state_set_mix_window(app->state, app->cfg.fragmentation_window);
	return 0;
}

void ft_app_dispose(ft_app_t *app)
{
	ft_server_free(app->metrics_server);
	ft_server_free(app->webhook_server);
	ft_server_free(app->debug_server);
	ft_server_free(app->server);
	ft_access_free(app->access);
	ft_informer_free(app->node_informer);
	ft_informer_free(app->pod_informer);
	ft_informer_free(app->pdb_informer);
	ft_informer_free(app->slice_informer);
	ft_informer_free(app->claim_informer);
	ft_informer_free(app->class_informer);
	ft_informer_free(app->workload_group_informer);
	ft_informer_free(app->cosched_group_informer);
	ft_upkeep_free(app->upkeep);
	ft_kube_client_free(app->kube);
	ft_state_free(app->state);
	ft_mig_catalog_dispose(&app->mig_catalog);
	ft_decisions_free(app->decisions);
	ft_metrics_free(app->metrics);
	ft_config_dispose(&app->cfg);
	free(app->gang_keys);
	memset(app, 0, sizeof(*app));
}

/* Append `kind` to the list in `kinds` when `informer` is not synced. */
static bool kind_synced(char *kinds, size_t size, const ft_informer_t *informer,
			const char *kind)
{
	size_t len = strlen(kinds);

	if (ft_informer_synced(informer))
		return true;
	if (len < size)
		snprintf(kinds + len, size - len, "%s%s", len ? ", " : "",
			 kind);
	return false;
}

bool ft_app_in_sync(const ft_app_t *app, char *why, size_t size)
{
	char kinds[128] = "";
	bool nodes, pods, pdbs, slices, claims, classes, groups;

	if (why && size)
		why[0] = '\0';
	if (atomic_load(&app->snapshot_loaded))
		return true;
	if (app->embedded) {
		if (atomic_load(&app->embedded_synced))
			return true;
		if (why && size)
			snprintf(
			    why, size,
			    "not in sync with the API server: waiting for the scheduler's informers to deliver their first lists");
		return false;
	}
	nodes = kind_synced(kinds, sizeof(kinds), app->node_informer, "nodes");
	pods = kind_synced(kinds, sizeof(kinds), app->pod_informer, "pods");
	pdbs = kind_synced(kinds, sizeof(kinds), app->pdb_informer,
			   "poddisruptionbudgets");
	slices = !app->slice_informer ||
		 kind_synced(kinds, sizeof(kinds), app->slice_informer,
			     "resourceslices");
	claims = !app->claim_informer ||
		 kind_synced(kinds, sizeof(kinds), app->claim_informer,
			     "resourceclaims");
	classes = !app->class_informer ||
		  kind_synced(kinds, sizeof(kinds), app->class_informer,
			      "deviceclasses");
	groups = (!app->workload_group_informer ||
		  kind_synced(kinds, sizeof(kinds),
			      app->workload_group_informer, "podgroups")) &&
		 (!app->cosched_group_informer ||
		  kind_synced(kinds, sizeof(kinds), app->cosched_group_informer,
			      "coscheduling podgroups"));
	if (nodes && pods && pdbs && slices && claims && classes && groups)
		return true;
	if (why && size)
		snprintf(
		    why, size,
		    "not in sync with the API server: waiting for a complete list of %s",
		    kinds);
	return false;
}

bool ft_app_ready(const ft_app_t *app)
{
	return ft_app_in_sync(app, NULL, 0);
}

static const char *item_kind(const cJSON *item)
{
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(item, "kind");

	return cJSON_IsString(kind) ? kind->valuestring : "";
}

static int load_items(ft_app_t *app, const cJSON *items, const char *path)
{
	const cJSON *item;
	unsigned i = 0;

	cJSON_ArrayForEach (item, items) {
		const char *kind = item_kind(item);
		if (strcmp(kind, "Node") == 0)
			ft_state_apply_node(app->state, item);
		else if (strcmp(kind, "Pod") == 0)
			ft_state_apply_pod(app->state, item);
		else if (strcmp(kind, "PodDisruptionBudget") == 0)
			ft_state_apply_pdb(app->state, item);
		else if (strcmp(kind, "ResourceSlice") == 0)
			ft_state_apply_slice(app->state, item);
		else if (strcmp(kind, "ResourceClaim") == 0)
			ft_state_apply_claim(app->state, item);
		else if (strcmp(kind, "DeviceClass") == 0)
			ft_state_apply_class(app->state, item);
		else if (strcmp(kind, "PodGroup") == 0)
			ft_state_apply_pod_group(app->state, item);
		else
			FT_LOG_WARN_MSG(
			    "%s: items[%u]: kind \"%s\" ignored (Node, Pod, PodDisruptionBudget, ResourceSlice, ResourceClaim, DeviceClass and PodGroup are read)",
			    path, i, kind);
		i++;
	}
	return 0;
}

int ft_app_load_snapshot(ft_app_t *app, const char *path)
{
	cJSON *root = NULL;
	const cJSON *items;
	int rc;

	if ((rc = ft_yaml_file_to_json(&root, path)) < 0)
		goto cleanup;
	items = cJSON_GetObjectItemCaseSensitive(root, "items");
	if (!cJSON_IsArray(items)) {
		rc = ft_error_set(
		    FT_EINVAL,
		    "%s: expected a List with \"items\" (the output of kubectl get nodes,pods -A -o yaml)",
		    path);
		goto cleanup;
	}
	for (unsigned k = 0; k < FT_KIND_COUNT; k++)
		ft_state_replace_begin(app->state, (ft_kind_t)k);
	rc = load_items(app, items, path);
	for (unsigned k = 0; k < FT_KIND_COUNT; k++)
		ft_state_replace_end(app->state, (ft_kind_t)k);
	atomic_store(&app->snapshot_loaded, true);
cleanup:
	cJSON_Delete(root);
	return rc;
}

static void nodes_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_NODE);
}

static void nodes_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_NODE);
}

static void nodes_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_node(app->state, obj);
	else
		ft_state_apply_node(app->state, obj);
}

static void pods_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_POD);
}

static void pods_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_POD);
}

static void pods_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_pod(app->state, obj);
	else
		ft_state_apply_pod(app->state, obj);
}

static void pdbs_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_PDB);
}

static void pdbs_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_PDB);
}

static void pdbs_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_pdb(app->state, obj);
	else
		ft_state_apply_pdb(app->state, obj);
}

static void slices_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_SLICE);
}

static void slices_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_SLICE);
}

static void slices_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_slice(app->state, obj);
	else
		ft_state_apply_slice(app->state, obj);
}

static void claims_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_CLAIM);
}

static void claims_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_CLAIM);
}

static void claims_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_claim(app->state, obj);
	else
		ft_state_apply_claim(app->state, obj);
}

static void classes_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state, FT_KIND_CLASS);
}

static void classes_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state, FT_KIND_CLASS);
}

static void classes_apply(ft_watch_event_t type, const cJSON *obj,
			  void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_class(app->state, obj);
	else
		ft_state_apply_class(app->state, obj);
}

static void workload_groups_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state,
			       FT_KIND_WORKLOAD_GROUP);
}

static void workload_groups_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state,
			     FT_KIND_WORKLOAD_GROUP);
}

static void cosched_groups_begin(void *payload)
{
	ft_state_replace_begin(((ft_app_t *)payload)->state,
			       FT_KIND_COSCHED_GROUP);
}

static void cosched_groups_end(void *payload)
{
	ft_state_replace_end(((ft_app_t *)payload)->state,
			     FT_KIND_COSCHED_GROUP);
}

/* Either API's PodGroups: the object's apiVersion tells them apart. */
static void groups_apply(ft_watch_event_t type, const cJSON *obj, void *payload)
{
	ft_app_t *app = payload;

	if (type == FT_WATCH_DELETED)
		ft_state_delete_pod_group(app->state, obj);
	else
		ft_state_apply_pod_group(app->state, obj);
}

static const ft_informer_handler_t pdb_handler = {pdbs_begin, pdbs_apply,
						  pdbs_end};
static const ft_informer_handler_t workload_group_handler = {
    workload_groups_begin, groups_apply, workload_groups_end};
static const ft_informer_handler_t cosched_group_handler = {
    cosched_groups_begin, groups_apply, cosched_groups_end};
static const ft_informer_handler_t slice_handler = {slices_begin, slices_apply,
						    slices_end};
static const ft_informer_handler_t claim_handler = {claims_begin, claims_apply,
						    claims_end};
static const ft_informer_handler_t class_handler = {classes_begin,
						    classes_apply, classes_end};
static const ft_informer_handler_t node_handler = {nodes_begin, nodes_apply,
						   nodes_end};
static const ft_informer_handler_t pod_handler = {pods_begin, pods_apply,
						  pods_end};

/*
 * ResourceSlices, ResourceClaims and DeviceClasses (resource.k8s.io/v1): a
 * cluster that
 * does not serve the group has none, which the informers take as a
 * complete empty list.
 */
static int start_dra_watch(ft_app_t *app)
{
	int rc;

	if ((rc = ft_informer_start_optional(
		 &app->slice_informer, app->kube,
		 "/apis/resource.k8s.io/v1/resourceslices", &slice_handler, app,
		 app->cfg.watch_backoff_initial_ms,
		 app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	if ((rc = ft_informer_start_optional(
		 &app->claim_informer, app->kube,
		 "/apis/resource.k8s.io/v1/resourceclaims", &claim_handler, app,
		 app->cfg.watch_backoff_initial_ms,
		 app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	return ft_informer_start_optional(
	    &app->class_informer, app->kube,
	    "/apis/resource.k8s.io/v1/deviceclasses", &class_handler, app,
	    app->cfg.watch_backoff_initial_ms, app->cfg.watch_backoff_max_ms);
}

int ft_app_connect(ft_app_t *app)
{
	ft_kube_credentials_t creds;
	int rc;

	memset(&creds, 0, sizeof(creds));
	rc = app->cfg.kubeconfig[0] ? ft_kube_credentials_from_kubeconfig(
					  &creds, app->cfg.kubeconfig)
				    : ft_kube_credentials_in_cluster(&creds);
	if (rc == 0)
		rc = ft_kube_client_new(&app->kube, &creds,
					(long)app->cfg.api_timeout_ms);
	ft_kube_credentials_dispose(&creds);
	return rc;
}

/*
 * PodGroups of the Workload API (scheduling.k8s.io/v1alpha2, alpha in
 * v1.36, served only with the GenericWorkload gate) and of coscheduling
 * (scheduling.x-k8s.io/v1alpha1, a CRD): a group the API server does not
 * serve is a complete empty list, asked for again every
 * watchBackoffMaxMs, so a CRD installed later is found.
 */
static int start_gang_watch(ft_app_t *app)
{
	int rc;

	if ((rc = ft_informer_start_optional(
		 &app->workload_group_informer, app->kube,
		 "/apis/scheduling.k8s.io/v1alpha2/podgroups",
		 &workload_group_handler, app,
		 app->cfg.watch_backoff_initial_ms,
		 app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	return ft_informer_start_optional(
	    &app->cosched_group_informer, app->kube,
	    "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
	    &cosched_group_handler, app, app->cfg.watch_backoff_initial_ms,
	    app->cfg.watch_backoff_max_ms);
}

static int start_watch(ft_app_t *app)
{
	int rc;

	if ((rc = ft_app_connect(app)) < 0)
		return rc;
	if ((rc = ft_informer_start(&app->node_informer, app->kube,
				    "/api/v1/nodes", &node_handler, app,
				    app->cfg.watch_backoff_initial_ms,
				    app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	if ((rc = ft_informer_start(&app->pod_informer, app->kube,
				    "/api/v1/pods", &pod_handler, app,
				    app->cfg.watch_backoff_initial_ms,
				    app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	if ((rc = ft_informer_start(&app->pdb_informer, app->kube,
				    "/apis/policy/v1/poddisruptionbudgets",
				    &pdb_handler, app,
				    app->cfg.watch_backoff_initial_ms,
				    app->cfg.watch_backoff_max_ms)) < 0)
		return rc;
	if (app->cfg.dra && (rc = start_dra_watch(app)) < 0)
		return rc;
	if ((rc = start_gang_watch(app)) < 0)
		return rc;
	return ft_upkeep_start(&app->upkeep, app);
}

int ft_app_routes(ft_app_t *app, ft_server_t *server)
{
	int rc = 0;

	if ((rc = ft_app_verb_routes(app, server)) < 0 ||
	    (rc = ft_server_route(server, "GET", "/healthz", ft_app_healthz,
				  app)) < 0 ||
	    (rc = ft_server_route(server, "GET", "/readyz", ft_app_readyz,
				  app)) < 0)
		return rc;
	return ft_server_route(server, "GET", "/version", ft_app_version, app);
}

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: flextopo-extender [--config FILE] [--listen HOST:PORT]\n"
	    "                         [--snapshot FILE | --kubeconfig FILE]\n"
	    "                         [--log-level LEVEL] [--policy POLICY]\n"
	    "  --config FILE      YAML configuration (configs/flextopo.yaml documents every key)\n"
	    "  --listen HOST:PORT where kube-scheduler reaches the extender\n"
	    "  --snapshot FILE    serve a fixed cluster from `kubectl get nodes,pods -A -o yaml` output\n"
	    "  --kubeconfig FILE  watch the API server of this kubeconfig (default: in-cluster)\n"
	    "  --log-level LEVEL  debug | info | warn | error\n"
	    "  --policy POLICY    packed | distributed\n"
	    "  --version          print the version and exit\n");
}

/* Flags override the file: read --config first, then apply the rest. */
static int parse_flags(ft_config_t *cfg, int argc, char **argv, int *exit_now)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"listen", required_argument, NULL, 'l'},
	    {"snapshot", required_argument, NULL, 's'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"log-level", required_argument, NULL, 'v'},
	    {"policy", required_argument, NULL, 'p'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	static const char *const keys[128] = {['l'] = "listen",
					      ['s'] = "snapshot",
					      ['k'] = "kubeconfig",
					      ['v'] = "logLevel",
					      ['p'] = "policy"};
	int c, rc = 0;

	*exit_now = -1;
	for (int pass = 0; pass < 2 && rc == 0 && *exit_now < 0; pass++) {
		optind = 1;
		while (rc == 0 && (c = getopt_long(argc, argv, "", longopts,
						   NULL)) != -1) {
			if (c == '?') {
				usage(stderr);
				*exit_now = 2;
			} else if (c == 'h' || c == 'V') {
				if (c == 'h')
					usage(stdout);
				else
					printf("flextopo-extender %s (%s)\n",
					       FLEXTOPO_VERSION,
					       FLEXTOPO_COMMIT);
				*exit_now = 0;
			} else if (pass == 0 && c == 'c') {
				rc = ft_config_load_file(cfg, optarg);
			} else if (pass == 1 && c != 'c') {
				rc = ft_config_set(cfg, keys[c], optarg);
			}
			if (*exit_now >= 0)
				break;
		}
	}
	return rc;
}

static int start_source(ft_app_t *app)
{
	int rc;

	if (!app->cfg.snapshot[0])
		return start_watch(app);
	if ((rc = ft_app_load_snapshot(app, app->cfg.snapshot)) == 0) {
		ft_state_stats_t st;
		ft_state_stats(app->state, &st);
		FT_LOG_INFO_MSG(
		    "snapshot %s: %u nodes (%u without usable topology), %u pods",
		    app->cfg.snapshot, st.nodes, st.nodes_bad_topology,
		    st.pods);
	}
	return rc;
}

static int start_server(ft_app_t *app)
{
	/* The kubelet's probes carry no client certificate. */
	static const char *const public_paths[] = {"/healthz", "/readyz", NULL};
	ft_server_options_t opts = {
	    .listen = app->cfg.listen,
	    .max_body_bytes = app->cfg.max_request_bytes,
	    .threads = app->cfg.threads,
	    .tls_cert_file = app->cfg.tls_cert_file,
	    .tls_key_file = app->cfg.tls_key_file,
	    .tls_client_ca_file = app->cfg.tls_client_ca_file,
	    .tls_public_paths = public_paths,
	    .max_connections = app->cfg.max_connections,
	    .max_connections_per_client = app->cfg.max_connections_per_client,
	    .connection_timeout_s = app->cfg.connection_timeout_s,
	};
	int rc;

	if ((rc = ft_server_new(&app->server, &opts)) < 0 ||
	    (rc = ft_app_routes(app, app->server)) < 0 ||
	    (rc = ft_server_start(app->server)) < 0)
		return rc;
	FT_LOG_INFO_MSG("serving the extender API on %s (port %u)",
			app->cfg.listen, ft_server_port(app->server));
	if ((rc = ft_app_debug_start(app)) < 0 ||
	    (rc = ft_app_metrics_start(app)) < 0)
		return rc;
	return ft_app_webhook_start(app);
}

static void wait_for_signal(const sigset_t *set)
{
	int sig = 0;

	sigwait(set, &sig);
	FT_LOG_INFO_MSG("signal %d: stopping", sig);
}

int ft_app_main(int argc, char **argv)
{
	ft_app_t app;
	sigset_t set;
	int rc, exit_now = -1;

	memset(&app, 0, sizeof(app));
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((rc = ft_config_init(&app.cfg)) < 0 ||
	    (rc = parse_flags(&app.cfg, argc, argv, &exit_now)) < 0 ||
	    exit_now >= 0)
		goto cleanup;
	if ((rc = ft_app_init(&app)) < 0 || (rc = start_source(&app)) < 0 ||
	    (rc = start_server(&app)) < 0)
		goto cleanup;
	wait_for_signal(&set);
cleanup:
	if (rc < 0)
		fprintf(stderr, "flextopo-extender: %s\n", ft_error_last());
	ft_app_dispose(&app);
	return rc < 0 ? 1 : (exit_now > 0 ? exit_now : 0);
}
