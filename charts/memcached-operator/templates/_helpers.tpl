{{/* The operator's image: by digest when one is given, else by tag (v<appVersion> by default). */}}
{{- define "memcached-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}
{{- end }}

{{/* The labels of every object the chart installs, besides app.kubernetes.io/name. */}}
{{- define "memcached-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The webhook Service, the CRD's conversion and the certificates name memcached-operator-system: the chart installs there only. */}}
{{- define "memcached-operator.namespace-check" -}}
{{- if ne .Release.Namespace "memcached-operator-system" -}}
{{- fail "memcached-operator installs into the namespace memcached-operator-system only (the CRD in crds/, which Helm does not template, names its webhook Service there): helm install --namespace memcached-operator-system --create-namespace" -}}
{{- end -}}
{{- end }}
