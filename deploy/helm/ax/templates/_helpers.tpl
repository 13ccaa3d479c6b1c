{{/* Names, labels and the pieces shared by the Deployment and the migration Job. */}}

{{- define "ax.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resource name; "ax" for `helm install ax`. */}}
{{- define "ax.fullname" -}}
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

{{- define "ax.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ax.labels" -}}
helm.sh/chart: {{ include "ax.chart" . }}
app.kubernetes.io/name: {{ include "ax.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ax
{{- end }}

{{/*
Selector labels of the serving pods. The component keeps the migration Job's
pod out of the Service, the PDB and the Deployment's selector.
*/}}
{{- define "ax.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ax.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "ax.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{- define "ax.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ax.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pods read AX_DATABASE_URL and AX_JWT_SECRET from. */}}
{{- define "ax.secretName" -}}
{{- .Values.existingSecret | default (include "ax.fullname" .) }}
{{- end }}

{{/* The short-lived copy the migration hook reads (see values.yaml, migration). */}}
{{- define "ax.migrateSecretName" -}}
{{- printf "%s-migrate" (include "ax.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret the migration Job reads AX_DATABASE_URL and AX_JWT_SECRET from. */}}
{{- define "ax.migrateCredentialsSecret" -}}
{{- .Values.existingSecret | default (include "ax.migrateSecretName" .) }}
{{- end }}

{{/* Whether the migration hook needs its own Secret: for chart-managed credentials or public keys. */}}
{{- define "ax.migrateSecretNeeded" -}}
{{- if and .Values.migration.enabled (or (not .Values.existingSecret) .Values.jwtPublicKeys) }}true{{ end }}
{{- end }}

{{/*
The HS256 secret of a chart-managed Secret: secrets.jwtSecret; else, unless
only public keys are used, the one in the release's Secret (upgrades); else a
new random one. It is stored back into .Values so that the Secret and the
migration hook's copy, rendered from different files, get the same value.
*/}}
{{- define "ax.jwtSecret" -}}
{{- if and (not .Values.secrets.jwtSecret) (not .Values.jwtPublicKeys) }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "ax.fullname" .) }}
{{- $old := "" }}
{{- if and $existing $existing.data }}
{{- $old = index $existing.data "AX_JWT_SECRET" | default "" | b64dec }}
{{- end }}
{{- $_ := set .Values.secrets "jwtSecret" ($old | default (randAlphaNum 48)) }}
{{- end }}
{{- .Values.secrets.jwtSecret }}
{{- end }}

{{/* The data of a chart-managed credentials Secret. */}}
{{- define "ax.secretData" -}}
{{- with .Values.secrets.databaseURL }}
AX_DATABASE_URL: {{ . | b64enc | quote }}
{{- end }}
{{- with include "ax.jwtSecret" . }}
AX_JWT_SECRET: {{ . | b64enc | quote }}
{{- end }}
{{- end }}

{{- define "ax.publicKeysDir" -}}/etc/ax/jwt{{- end }}
{{- define "ax.publicKeysFile" -}}public-keys.pem{{- end }}

{{/*
Environment shared by `serve` and `migrate`: the credentials from a Secret
(dict: ctx, secret).
*/}}
{{- define "ax.credentialsEnv" -}}
- name: AX_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: AX_DATABASE_URL
{{- /* Optional: with only public keys there is no HS256 secret; ax itself says when one is missing. */}}
- name: AX_JWT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: AX_JWT_SECRET
      optional: true
{{- if .ctx.Values.jwtPublicKeys }}
- name: AX_JWT_PUBLIC_KEYS
  value: {{ printf "%s/%s" (include "ax.publicKeysDir" .ctx) (include "ax.publicKeysFile" .ctx) | quote }}
{{- end }}
{{- end }}

{{- define "ax.graceSeconds" -}}
{{- $s := .Values.shutdown }}
{{- $min := add $s.preStopSleepSeconds $s.timeoutSeconds $s.softStopSeconds }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $min 10 }}
{{- else }}
{{- .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Replicas running at the least: what a PDB has to leave room under. */}}
{{- define "ax.minReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/* Fails rendering on values that cannot work, naming the value to fix. */}}
{{- define "ax.validate" -}}
{{- /*
No database: fail when installing into a cluster, but only warn (NOTES.txt)
when rendering without one (helm lint, helm template), so that the default
values render. The namespace's default ServiceAccount is found only with a
cluster connection.
*/}}
{{- if and (not .Values.existingSecret) (not .Values.secrets.databaseURL) (lookup "v1" "ServiceAccount" .Release.Namespace "default") }}
{{- fail "no database: set existingSecret (a Secret with AX_DATABASE_URL and AX_JWT_SECRET) or secrets.databaseURL" }}
{{- end }}
{{- $managed := list "AX_DATABASE_URL" "AX_JWT_SECRET" "AX_JWT_PUBLIC_KEYS" "AX_HTTP_ADDR" "AX_AUTO_MIGRATE" "AX_SHUTDOWN_TIMEOUT" "AX_SOFT_STOP_TIMEOUT" }}
{{- range $k, $v := .Values.config }}
{{- if has $k $managed }}
{{- fail (printf "config.%s: the chart sets %s itself; use secrets/existingSecret, jwtPublicKeys, migration.enabled or shutdown instead" $k $k) }}
{{- end }}
{{- if not (or (kindIs "string" $v) (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "bool" $v)) }}
{{- fail (printf "config.%s: want a string" $k) }}
{{- end }}
{{- end }}
{{- if and .Values.existingSecret (or .Values.secrets.databaseURL .Values.secrets.jwtSecret) }}
{{- fail "set either existingSecret or secrets.databaseURL/secrets.jwtSecret, not both" }}
{{- end }}
{{- if and .Values.secrets.jwtSecret (lt (len .Values.secrets.jwtSecret) 32) }}
{{- fail "secrets.jwtSecret: must be at least 32 characters (generate one with `openssl rand -base64 48`)" }}
{{- end }}
{{- $s := .Values.shutdown }}
{{- range $k := list "timeoutSeconds" "softStopSeconds" }}
{{- if not (and (get $s $k) (gt (int (get $s $k)) 0)) }}
{{- fail (printf "shutdown.%s: want a positive number of seconds" $k) }}
{{- end }}
{{- end }}
{{- $min := add $s.preStopSleepSeconds $s.timeoutSeconds $s.softStopSeconds }}
{{- if le (int (include "ax.graceSeconds" .)) (int $min) }}
{{- fail (printf "terminationGracePeriodSeconds=%v: must exceed shutdown.preStopSleepSeconds + timeoutSeconds + softStopSeconds = %d, or the kubelet kills ax mid-shutdown" .Values.terminationGracePeriodSeconds $min) }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- end }}
