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

{{- /* The nine Settings leasetune defines (pkg/settings Registry), as a YAML
list; tests/integration/rbac checks the roles that name them against the
Registry. */}}
{{- define "leasetune.settingNames" -}}
- fleet-leader-election-lease-duration
- fleet-leader-election-renew-deadline
- fleet-leader-election-retry-period
- fleet-agent-leader-election-lease-duration
- fleet-agent-leader-election-renew-deadline
- fleet-agent-leader-election-retry-period
- rancher-leader-election-lease-duration
- rancher-leader-election-renew-deadline
- rancher-leader-election-retry-period
{{- end -}}
