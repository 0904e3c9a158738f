{{/*
Labels on every object the chart installs. The operator's pods keep the selector labels of
config/default (app.kubernetes.io/name, control-plane), which `kubectl dolphin report` and
the metrics Service select on.
*/}}
{{- define "dolphin-operator.labels" -}}
app.kubernetes.io/name: dolphin-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dolphin-operator.selectorLabels" -}}
app.kubernetes.io/name: dolphin-operator
control-plane: controller-manager
{{- end }}

{{/*
The operator's image: the tag defaults to v<appVersion>; a digest, when given, wins.
*/}}
{{- define "dolphin-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}
{{- end }}
