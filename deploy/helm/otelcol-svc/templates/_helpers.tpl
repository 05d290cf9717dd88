{{/* Naming and labels follow the opentelemetry-collector and nats charts. */}}

{{- define "otelcol-svc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name alone when it already holds the chart's name. */}}
{{- define "otelcol-svc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "otelcol-svc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "otelcol-svc.labels" -}}
helm.sh/chart: {{ include "otelcol-svc.chart" . }}
{{ include "otelcol-svc.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: otelcol-svc
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "otelcol-svc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-svc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* A role's name and labels; called with (dict "root" $ "role" "receiver"). */}}
{{- define "otelcol-svc.roleName" -}}
{{- printf "%s-%s" (include "otelcol-svc.fullname" .root | trunc 50 | trimSuffix "-") .role }}
{{- end }}

{{- define "otelcol-svc.roleLabels" -}}
{{ include "otelcol-svc.labels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "otelcol-svc.roleSelectorLabels" -}}
{{ include "otelcol-svc.selectorLabels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "otelcol-svc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "otelcol-svc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the chart renders (for what no existingSecret names). */}}
{{- define "otelcol-svc.secretName" -}}
{{- include "otelcol-svc.fullname" . }}
{{- end }}

{{/*
An environment variable from a Secret: the user's existingSecret when named, else the
chart's. Called with (dict "root" $ "name" "NATS_URL" "cfg" .Values.nats "key" "nats-url").
*/}}
{{- define "otelcol-svc.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      {{- if .cfg.existingSecret }}
      name: {{ .cfg.existingSecret }}
      key: {{ .cfg.existingSecretKey }}
      {{- else }}
      name: {{ include "otelcol-svc.secretName" .root }}
      key: {{ .key }}
      {{- end }}
{{- end }}

{{- define "otelcol-svc.natsURL" -}}
{{- tpl .Values.nats.url . }}
{{- end }}

{{- define "otelcol-svc.hasDatabase" -}}
{{- if or .Values.postgresql.url .Values.postgresql.existingSecret }}true{{ end }}
{{- end }}

{{- define "otelcol-svc.hasRedis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* Settings as name: value pairs, in a stable order. */}}
{{- define "otelcol-svc.envMap" -}}
{{- $list := list }}
{{- range $k := keys . | sortAlpha }}
{{- $list = append $list (dict "name" $k "value" (index $ $k | toString)) }}
{{- end }}
{{- if $list }}{{ toYaml $list }}{{ end }}
{{- end }}

{{/* The image reference; called with (dict "root" $ "image" .Values.image). */}}
{{- define "otelcol-svc.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}

{{/* What makes the chart's own settings wrong together, refused before anything renders. */}}
{{- define "otelcol-svc.validate" -}}
{{- $redis := include "otelcol-svc.hasRedis" . }}
{{- if and .Values.pipeline.enabled (not $redis) }}
{{- if or (gt (int .Values.pipeline.replicas) 1) (and .Values.pipeline.autoscaling.enabled (gt (int .Values.pipeline.autoscaling.maxReplicas) 1)) }}
{{- fail "pipeline: more than one pipeline process needs Redis for window-mode windows (docs/deployment.md#2-redis-and-postgresql): set redis.url or redis.existingSecret, or keep pipeline.replicas at 1 with autoscaling off" }}
{{- end }}
{{- end }}
{{- if and .Values.controlplane.enabled (gt (int .Values.controlplane.replicas) 1) (not (include "otelcol-svc.hasDatabase" .)) }}
{{- fail "controlplane: more than one control plane needs PostgreSQL (without it each keeps its own SQLite database): set postgresql.url or postgresql.existingSecret, or keep controlplane.replicas at 1" }}
{{- end }}
{{- if and .Values.controlplane.jwtSecret (lt (len .Values.controlplane.jwtSecret) 32) }}
{{- fail "controlplane.jwtSecret must be at least 32 characters (the control plane refuses a shorter SVC_JWT_SECRET)" }}
{{- end }}
{{- if and .Values.receiver.ingestToken (lt (len .Values.receiver.ingestToken) 16) }}
{{- fail "receiver.ingestToken must be at least 16 characters" }}
{{- end }}
{{- if and (not .Values.nats.existingSecret) (not .Values.nats.url) }}
{{- fail "nats: set nats.url or nats.existingSecret: every role needs NATS" }}
{{- end }}
{{- if and .Values.receiver.autoscaling.enabled (gt (int .Values.receiver.autoscaling.minReplicas) (int .Values.receiver.autoscaling.maxReplicas)) }}
{{- fail "receiver.autoscaling: minReplicas is above maxReplicas" }}
{{- end }}
{{- if and .Values.pipeline.autoscaling.enabled (gt (int .Values.pipeline.autoscaling.minReplicas) (int .Values.pipeline.autoscaling.maxReplicas)) }}
{{- fail "pipeline.autoscaling: minReplicas is above maxReplicas" }}
{{- end }}
{{- end }}
