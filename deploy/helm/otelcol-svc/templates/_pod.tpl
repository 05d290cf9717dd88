{{/*
What every role's pod shares: security, the data volume, scheduling. Called with
(dict "root" $ "role" "receiver" "cfg" .Values.receiver).
*/}}
{{- define "otelcol-svc.podCommon" -}}
{{- $root := .root -}}
serviceAccountName: {{ include "otelcol-svc.serviceAccountName" $root }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
{{- /* No <SERVICE>_PORT variables: the roles read their own settings only, and a
Service named like one (a "nats" Service gives NATS_PORT...) should not reach them. */}}
enableServiceLinks: false
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .cfg.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .cfg.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The volumes every role writes to: the data dir and /tmp, the root being read-only. */}}
{{- define "otelcol-svc.writableVolumes" -}}
- name: data
  emptyDir:
    {{- with .Values.dataVolume.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{- define "otelcol-svc.writableMounts" -}}
- name: data
  mountPath: {{ .Values.dataDir }}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* Pod metadata shared by every role: labels and annotations, the checksums roll pods. */}}
{{- define "otelcol-svc.podMetadata" -}}
{{- $root := .root -}}
labels:
  {{- include "otelcol-svc.roleSelectorLabels" . | nindent 2 }}
  {{- with $root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with .cfg.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
  {{- with .checksum }}
  checksum/config: {{ . }}
  {{- end }}
  {{- with $root.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with .cfg.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/* A role's PodDisruptionBudget. */}}
{{- define "otelcol-svc.pdb" -}}
{{- if .cfg.pdb.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "otelcol-svc.roleName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "otelcol-svc.roleLabels" . | nindent 4 }}
spec:
  {{- if hasKey .cfg.pdb "minAvailable" }}
  minAvailable: {{ .cfg.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ .cfg.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "otelcol-svc.roleSelectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}
