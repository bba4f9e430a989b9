/*
 * The mutating admission webhook of a DRA cluster (docs/dra.md, "Alignment
 * DRA can enforce"): POST /mutate takes an AdmissionReview
 * (admission.k8s.io/v1) of a ResourceClaim or ResourceClaimTemplate being
 * created and answers with the matchAttribute constraint of its guaranteed
 * numa or pcie-switch affinity (ft_codec_admission_mutate, codec.h). It
 * always allows the object; a body that is no AdmissionReview gets 400.
 * The chart registers it with failurePolicy Ignore, so a stopped extender
 * delays no claim (its claims then get no constraint; bind still refuses
 * a guaranteed pod whose GPUs DRA put apart).
 */
#ifndef FLEXTOPO_WEBHOOK_H
#define FLEXTOPO_WEBHOOK_H

#include "app.h"
#include "server.h"

void ft_app_mutate(ft_http_response_t *out, const ft_http_request_t *req,
		   void *payload);

/*
 * Serve POST /mutate on webhookListen over HTTPS (webhookCertFile and
 * webhookKeyFile) into app->webhook_server; nothing when webhookListen is
 * "". Errors of ft_server_new and ft_server_start.
 */
int ft_app_webhook_start(ft_app_t *app);

#endif
