{{/* Chart name, cut to 63 characters (a DNS label). */}}
{{- define "flextopo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the release's objects, cut to 52 characters so that suffixes
("-scheduler-config", "-auth-reader") keep names within 63.
*/}}
{{- define "flextopo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a cluster-scoped object: the release namespace is part of it. */}}
{{- define "flextopo.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "flextopo.fullname" .) | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "flextopo.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flextopo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flextopo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end -}}

{{- define "flextopo.labels" -}}
helm.sh/chart: {{ include "flextopo.chart" . }}
{{ include "flextopo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flextopo
{{- end -}}

{{- define "flextopo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flextopo.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flextopo.extenderImage" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "flextopo.schedulerImage" -}}
{{- printf "%s:%s" .Values.scheduler.image.repository (default .Chart.AppVersion .Values.scheduler.image.tag) -}}
{{- end -}}

{{/*
The kube-scheduler release flextopo-scheduler is built from (scheduler/go.mod,
k8s.io/kubernetes): the version-skew check compares it with the cluster's.
*/}}
{{- define "flextopo.kubeSchedulerVersion" -}}v1.36.3{{- end -}}

{{/* Where flextopo-scheduler serves flextopo's debug API (debugListen). */}}
{{- define "flextopo.debugListen" -}}
{{- printf "%s:%d" .Values.scheduler.debugListenHost (int .Values.scheduler.debugPort) -}}
{{- end -}}

{{/* Whether that listener is on loopback only (the probes then run inside the container). */}}
{{- define "flextopo.debugLoopback" -}}
{{- if eq .Values.scheduler.debugListenHost "127.0.0.1" -}}true{{- end -}}
{{- end -}}

{{/* The address the extender binds (extender mode). */}}
{{- define "flextopo.listenHost" -}}
{{- default "0.0.0.0" .Values.extender.listenHost -}}
{{- end -}}

{{/* The URL kube-scheduler calls (extender mode). */}}
{{- define "flextopo.urlPrefix" -}}
{{- $scheme := ternary "https" "http" .Values.tls.enabled -}}
{{- printf "%s://%s.%s.svc:%d" $scheme (include "flextopo.fullname" .) .Release.Namespace (int .Values.service.port) -}}
{{- end -}}

{{/* The name kube-scheduler verifies the extender's certificate for. */}}
{{- define "flextopo.serverName" -}}
{{- default (printf "%s.%s.svc" (include "flextopo.fullname" .) .Release.Namespace) .Values.tls.serverName -}}
{{- end -}}

{{/*
Where the containers find the TLS files (volumes from the Secrets, see
deployment.yaml). Not under /etc/flextopo or /etc/kubernetes/flextopo: those
are ConfigMap volumes, and a mount inside a ConfigMap volume cannot create
its mount point.
*/}}
{{- define "flextopo.tlsDir" -}}/etc/flextopo-tls{{- end -}}
{{- define "flextopo.clientCADir" -}}/etc/flextopo-client-ca{{- end -}}

{{/* The Secret whose ca.crt signs kube-scheduler's client certificate. */}}
{{- define "flextopo.clientCASecret" -}}
{{- default .Values.tls.secretName .Values.tls.clientAuth.caSecretName -}}
{{- end -}}

{{/*
The extenders[] entry of a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
for the cluster's own kube-scheduler: NOTES.txt prints it in extender mode.
*/}}
{{- define "flextopo.extenderEntry" -}}
- urlPrefix: {{ include "flextopo.urlPrefix" . | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  preemptVerb: preempt
  bindVerb: bind
  weight: {{ int .Values.registration.weight }}
  nodeCacheCapable: true
  enableHTTPS: {{ .Values.tls.enabled }}
{{- if .Values.tls.enabled }}
  tlsConfig:
    serverName: {{ include "flextopo.serverName" . | quote }}
    # ca.crt of Secret {{ .Values.tls.secretName }}, copied to the scheduler's host
    caFile: "/etc/kubernetes/flextopo/ca.crt"
{{- if .Values.tls.clientAuth.enabled }}
    # kube-scheduler's client certificate and key, signed by the CA in
    # ca.crt of Secret {{ include "flextopo.clientCASecret" . }}
    certFile: "/etc/kubernetes/flextopo/client.crt"
    keyFile: "/etc/kubernetes/flextopo/client.key"
{{- end }}
{{- end }}
  httpTimeout: {{ .Values.registration.httpTimeout | quote }}
  ignorable: {{ .Values.registration.ignorable }}
{{- $r := .Values.registration }}
{{- if eq (include "flextopo.registrationPods" .) "devices" }}
  # Only pods asking for these reach flextopo (registration.pods: devices).
  managedResources:
{{- range (include "flextopo.deviceResources" . | fromYamlArray) }}
    - name: {{ . | quote }}
      ignoredByScheduler: false
{{- end }}
{{- range $r.managedResources }}
{{- if not (has .name (include "flextopo.deviceResources" $ | fromYamlArray)) }}
    - name: {{ .name | quote }}
      ignoredByScheduler: {{ default false .ignoredByScheduler }}
{{- end }}
{{- end }}
{{- else if $r.managedResources }}
{{- fail "registration.managedResources must be empty with registration.pods: all" }}
{{- end }}
{{- end -}}

{{/*
registration.pods resolved (extender mode): auto is devices, since most pods
of an existing scheduler are not GPU pods and need no round trip to flextopo.
With DRA every pod goes (claims are no extended resources).
*/}}
{{- define "flextopo.registrationPods" -}}
{{- $p := .Values.registration.pods -}}
{{- if ne .Values.gpuMode "devicePlugin" -}}
{{- if eq $p "devices" -}}
{{- fail "registration.pods: devices cannot send pods with only ResourceClaims to flextopo: use auto or all with gpuMode dra or mixed" -}}
{{- end -}}
all
{{- else if eq $p "auto" -}}
devices
{{- else -}}
{{- $p -}}
{{- end -}}
{{- end -}}

{{/*
The GPU resources of extender.config, as a YAML list: whole GPUs, their
shared name, and one MIG resource per registration.migProfiles entry.
*/}}
{{- define "flextopo.deviceResources" -}}
{{- $c := .Values.extender.config }}
- {{ $c.gpuResource | quote }}
- {{ printf "%s.shared" $c.gpuResource | quote }}
{{- range .Values.registration.migProfiles }}
- {{ printf "%s%s" $c.migResourcePrefix . | quote }}
{{- end }}
{{- end -}}

{{/*
An in-container probe of flextopo's debug listener on loopback (scheduler
mode): bash builtins only (no curl in the image). Passes when the status line
says 200.
*/}}
{{- define "flextopo.loopbackProbe" -}}
exec:
  command:
    - /bin/bash
    - -c
    - >-
      exec 3<>/dev/tcp/127.0.0.1/{{ int .port }} &&
      printf 'GET {{ .path }} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
      IFS= read -r status <&3 &&
      [[ $status == "HTTP/1."?" 200"* ]]
{{- end -}}

{{/* Cross-field checks the schema cannot state with a clear message. */}}
{{- define "flextopo.validate" -}}
{{- if .Values.webhook.enabled -}}
{{- if eq .Values.gpuMode "devicePlugin" -}}
{{- fail "webhook.enabled: the webhook adds DRA constraints; it needs gpuMode dra or mixed" -}}
{{- end -}}
{{- if not .Values.webhook.secretName -}}
{{- fail "webhook.secretName: the webhook needs a kubernetes.io/tls Secret whose certificate is valid for the webhook Service (<fullname>-webhook.<namespace>.svc)" -}}
{{- end -}}
{{- if not (or .Values.webhook.caBundle .Values.webhook.certManagerCertificate) -}}
{{- fail "webhook: set webhook.caBundle or webhook.certManagerCertificate, so that kube-apiserver can verify the webhook's certificate" -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.mode "extender") (gt (int .Values.replicaCount) 1) -}}
{{- fail "replicaCount: extender mode runs exactly 1 replica: each extender keeps its own record of the GPUs and CPUs it has handed out but not yet seen bound, so replicas behind one Service could hand out the same GPU twice. Use mode=scheduler for several replicas with leader election." -}}
{{- end -}}
{{- if and (eq .Values.mode "extender") .Values.serviceMonitor.enabled (eq (int .Values.extender.metricsPort) 0) -}}
{{- fail "serviceMonitor.enabled: in extender mode it scrapes the extender's own /metrics, which extender.metricsPort: 0 turns off" -}}
{{- end -}}
{{- if and (eq .Values.mode "scheduler") (eq .Values.scheduler.name "default-scheduler") -}}
{{- fail "scheduler.name: default-scheduler is the name of the cluster's own scheduler; the second scheduler needs a name of its own (pods opt in with spec.schedulerName)" -}}
{{- end -}}
{{- if eq .Values.mode "scheduler" -}}
{{- $re := "^v?[0-9]+\\.[0-9]+\\.[0-9]+" -}}
{{- $sched := include "flextopo.kubeSchedulerVersion" . -}}
{{- $server := regexFind $re .Capabilities.KubeVersion.Version -}}
{{- if $server -}}
{{- $img := semver $sched -}}
{{- $kube := semver $server -}}
{{- if or (ne $img.Major $kube.Major) (gt $img.Minor $kube.Minor) -}}
{{- fail (printf "mode: flextopo-scheduler %s is kube-scheduler %s, newer than the cluster's Kubernetes %s; a kube-scheduler may not be newer than its API server (version skew policy). Use --set mode=extender and register the extender in the cluster's own kube-scheduler" .Chart.AppVersion $sched .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}
{{- if eq (int .Values.scheduler.debugPort) (int .Values.scheduler.securePort) -}}
{{- fail "scheduler.debugPort: flextopo's debug listener needs a port other than scheduler.securePort" -}}
{{- end -}}
{{- $taken := list (int .Values.scheduler.securePort) (int .Values.scheduler.debugPort) -}}
{{- if and .Values.extender.metricsPort (has (int .Values.extender.metricsPort) $taken) -}}
{{- fail "extender.metricsPort: flextopo's /metrics needs a port other than scheduler.securePort and scheduler.debugPort" -}}
{{- end -}}
{{- if and .Values.webhook.enabled (has (int .Values.webhook.port) (append $taken (int .Values.extender.metricsPort))) -}}
{{- fail "webhook.port: the admission webhook needs a port other than scheduler.securePort, scheduler.debugPort and extender.metricsPort" -}}
{{- end -}}
{{- end -}}
{{- if gt (int .Values.extender.config.watchBackoffInitialMs) (int .Values.extender.config.watchBackoffMaxMs) -}}
{{- fail "extender.config.watchBackoffInitialMs may not exceed extender.config.watchBackoffMaxMs" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.secretName: tls.enabled needs a kubernetes.io/tls Secret in the release namespace with tls.crt, tls.key and ca.crt (cert-manager's Certificate writes all three)" -}}
{{- end -}}
{{- if and .Values.tls.clientAuth.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.clientAuth.enabled: client certificates are asked for over TLS only; set tls.enabled=true and tls.secretName too" -}}
{{- end -}}
{{- if and .Values.tls.clientAuth.enabled (eq .Values.mode "scheduler") -}}
{{- fail "tls.clientAuth.enabled: scheduler mode has no extender to call; client certificates are for mode=extender" -}}
{{- end -}}
{{- if and .Values.tls.enabled (eq .Values.mode "scheduler") -}}
{{- fail "tls.enabled: in scheduler mode flextopo runs inside kube-scheduler and no call crosses a connection to protect; TLS is for mode=extender" -}}
{{- end -}}
{{- end -}}

{{/* Labels of the node agent's objects: component node-agent. */}}
{{- define "flextopo.nodeAgentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "flextopo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: node-agent
{{- end -}}

{{- define "flextopo.nodeAgentLabels" -}}
helm.sh/chart: {{ include "flextopo.chart" . }}
{{ include "flextopo.nodeAgentSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flextopo
{{- end -}}
