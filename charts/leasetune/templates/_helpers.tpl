{{- define "leasetune.name" -}}leasetune{{- end -}}

{{- define "leasetune.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "leasetune.labels" -}}
app.kubernetes.io/name: leasetune
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "leasetune.selector" -}}
app.kubernetes.io/name: leasetune
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
