/*
 * Events the extender posts about pods: a core/v1 Event through the same
 * client, as kube-scheduler's event recorder writes one (involvedObject the
 * pod, a source and reporting component, first and last timestamp in
 * seconds, count 1). Names and messages go through cJSON, so that any text
 * is escaped; the API server names the Event (generateName).
 */
#include "client.h"

#include <flextopo/error.h>
#include <flextopo/kube.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COMPONENT "flextopo-extender"

static bool fill_involved(cJSON *o, const ft_kube_event_t *e)
{
	return cJSON_AddStringToObject(o, "apiVersion", "v1") &&
	       cJSON_AddStringToObject(o, "kind", "Pod") &&
	       cJSON_AddStringToObject(o, "namespace", e->ns) &&
	       cJSON_AddStringToObject(o, "name", e->name) &&
	       (!e->uid || cJSON_AddStringToObject(o, "uid", e->uid));
}

static bool fill_meta(cJSON *o, const ft_kube_event_t *e)
{
	char prefix[300];

	snprintf(prefix, sizeof(prefix), "%.250s.", e->name);
	return cJSON_AddStringToObject(o, "generateName", prefix) &&
	       cJSON_AddStringToObject(o, "namespace", e->ns);
}

static bool fill_times(cJSON *root)
{
	char now[32];
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return cJSON_AddStringToObject(root, "firstTimestamp", now) &&
	       cJSON_AddStringToObject(root, "lastTimestamp", now) &&
	       cJSON_AddNumberToObject(root, "count", 1);
}

static bool fill_source(cJSON *root)
{
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	return cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "source"),
				       "component", COMPONENT) &&
	       cJSON_AddStringToObject(root, "reportingComponent", COMPONENT) &&
	       cJSON_AddStringToObject(root, "reportingInstance", host);
}

static char *event_body(const ft_kube_event_t *e)
{
	cJSON *root = cJSON_CreateObject();
	char *body = NULL;

	if (cJSON_AddStringToObject(root, "apiVersion", "v1") &&
	    cJSON_AddStringToObject(root, "kind", "Event") &&
	    fill_meta(cJSON_AddObjectToObject(root, "metadata"), e) &&
	    fill_involved(cJSON_AddObjectToObject(root, "involvedObject"), e) &&
	    cJSON_AddStringToObject(root, "type", e->type) &&
	    cJSON_AddStringToObject(root, "reason", e->reason) &&
	    cJSON_AddStringToObject(root, "message", e->message) &&
	    fill_times(root) && fill_source(root))
		body = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return body;
}

int ft_kube_post_pod_event(ft_kube_client_t *client, const ft_kube_event_t *e)
{
	char *ns = NULL, *path = NULL, *body = NULL, *reply = NULL, msg[256];
	long status = 0;
	int rc = 0;

	if (!e->ns || !*e->ns || !e->name || !*e->name) {
		rc = ft_error_set(FT_EINVAL,
				  "event: pod namespace and name required");
		goto cleanup;
	}
	if (!(ns = ft_kube_escape(e->ns)) ||
	    asprintf(&path, "/api/v1/namespaces/%s/events", ns) < 0) {
		path = NULL;
		rc = ft_error_set(FT_ENOMEM, "event: out of memory");
		goto cleanup;
	}
	if (!(body = event_body(e))) {
		rc = ft_error_set(FT_ENOMEM, "event: out of memory");
		goto cleanup;
	}
	if ((rc = ft_kube_request(client, "POST", path, "application/json",
				  body, strlen(body), &status, &reply)) < 0)
		goto cleanup;
	if (status < 200 || status >= 300) {
		ft_kube_status_message(msg, sizeof(msg), reply);
		rc = ft_error_set(FT_EIO, "event on pod %s/%s: HTTP %ld%s%s",
				  e->ns, e->name, status, msg[0] ? ": " : "",
				  msg);
	}
cleanup:
	free(reply);
	free(body);
	free(path);
	free(ns);
	return rc;
}
