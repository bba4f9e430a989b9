/*
 * The mutating admission webhook (POST /mutate on webhookListen, HTTPS):
 * kube-apiserver sends each ResourceClaim and ResourceClaimTemplate as it
 * is created, and flextopo answers with a JSONPatch that makes a
 * guaranteed numa or pcie-switch affinity DRA's own constraint
 * (ft_codec_admission_mutate, codec.h). Claim specs are immutable, so this
 * is the only moment to add it. The GPU and MIG DeviceClasses come from the
 * watch; the handler never calls the API server.
 */
#include <flextopo/app.h>
#include <flextopo/error.h>
#include <flextopo/log.h>
#include <flextopo/webhook.h>

#include <stdlib.h>
#include <string.h>

/* DeviceClasses of GPUs and MIG devices a patch covers, at most. */
#define WEBHOOK_CLASSES_MAX 32
#define WEBHOOK_THREADS	    2

void ft_app_mutate(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload)
{
	ft_app_t *app = payload;
	ft_class_name_t names[WEBHOOK_CLASSES_MAX];
	const char *classes[WEBHOOK_CLASSES_MAX];
	ft_admission_t a;
	unsigned n;
	char *body = NULL;

	if (ft_codec_admission_decode(&a, req->body, req->body_len) < 0) {
		ft_http_reply_error(out, 400, "bad_json", "%s",
				    ft_error_last());
		return;
	}
	n = ft_state_gpu_classes(app->state, names, WEBHOOK_CLASSES_MAX);
	for (unsigned i = 0; i < n; i++)
		classes[i] = names[i].name;
	if (ft_codec_admission_mutate(&body, &a, &app->opts, classes, n) < 0) {
		ft_http_reply_error(out, 500, "internal", "%s",
				    ft_error_last());
	} else {
		out->status = 200;
		out->content_type = "application/json";
		out->body = body;
		out->body_len = strlen(body);
		ft_log(FT_LOG_DEBUG, "webhook", NULL, NULL, NULL,
		       "%s %s/%s reviewed", a.kind, a.ns ? a.ns : "", a.uid);
	}
	ft_admission_dispose(&a);
}

int ft_app_webhook_start(ft_app_t *app)
{
	ft_server_options_t opts = {
	    .listen = app->cfg.webhook_listen,
	    .max_body_bytes = app->cfg.max_request_bytes,
	    .threads = WEBHOOK_THREADS,
	    .tls_cert_file = app->cfg.webhook_cert_file,
	    .tls_key_file = app->cfg.webhook_key_file,
	    .max_connections_per_client = app->cfg.max_connections_per_client,
	    .connection_timeout_s = app->cfg.connection_timeout_s,
	};
	int rc;

	if (!app->cfg.webhook_listen || !app->cfg.webhook_listen[0])
		return 0;
	if ((rc = ft_server_new(&app->webhook_server, &opts)) < 0 ||
	    (rc = ft_server_route(app->webhook_server, "POST", "/mutate",
				  ft_app_mutate, app)) < 0 ||
	    (rc = ft_server_start(app->webhook_server)) < 0)
		return rc;
	FT_LOG_INFO_MSG("serving the admission webhook on %s (port %u)",
			app->cfg.webhook_listen,
			ft_server_port(app->webhook_server));
	return 0;
}
