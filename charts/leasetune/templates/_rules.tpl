{{- /*
leasetune.durationSeconds: a Go duration, in the format leasetune reads its
own timings and --settle with (time.ParseDuration: "30s", "1m30s", "1.5s",
"500ms"; "0"), as a number of seconds (a decimal). It fails, naming the
value, when the value is not one: the alerts' "for" durations below are made
from the chart's values, and Prometheus reads neither fractions ("1.5s") nor
microseconds, so they are given to it in whole seconds.
*/}}
{{- define "leasetune.durationSeconds" -}}
{{- $d := toString . -}}
{{- $num := "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" -}}
{{- $units := "(ns|us|µs|μs|ms|s|m|h)" -}}
{{- if eq $d "0" -}}
0
{{- else -}}
{{- if not (regexMatch (printf "^(%s%s)+$" $num $units) $d) -}}
{{- fail (printf "%q is not a duration such as 30s, 1m30s or 1.5s (Go's time.ParseDuration format)" $d) -}}
{{- end -}}
{{- $perUnit := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll (printf "%s%s" $num $units) $d -1 -}}
{{- $n := regexFind (printf "^%s" $num) . -}}
{{- $total = addf $total (mulf (float64 $n) (get $perUnit (trimPrefix $n .))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}
{{- end -}}

{{- /*
leasetune.rules: the rule group of leasetune's alerts, the one place they
are written. prometheusrule.yaml renders it as the PrometheusRule's
spec.groups; tests/promrules takes that spec from helm template and runs
promtool's rule tests (tests/promrules/rules_test.yaml) and checks on it.
docs/alerts.md has a runbook for each alert (the anchor is the alert's name
in lower case). Every expression selects the series of this release's
replicas: job leasetune-metrics (the Service the ServiceMonitor scrapes;
prometheus-operator names the job after it) and this namespace.

Durations made from values:
- LeasetuneSettingRefused waits the settle time (value settle): a triple
  refused for longer than it takes an edit to settle.
- LeasetuneNoLeader waits as long as a new leader may take to take over
  after the old one died without releasing the Lease: leaseDuration +
  4.4 x retryPeriod of leasetune's own election (values leaderElection.*;
  client-go's followers look every 1 to 2.2 retry periods, and one counts
  the lease from its last observation: docs/design.md, "How the timings
  reach each process").
*/}}
{{- define "leasetune.rules" -}}
{{- $ns := include "leasetune.namespace" . -}}
{{- $sel := printf "job=\"leasetune-metrics\",namespace=\"%s\"" $ns -}}
{{- $settle := include "leasetune.durationSeconds" .Values.settle | float64 | ceil | int -}}
{{- $lease := include "leasetune.durationSeconds" .Values.leaderElection.leaseDuration | float64 -}}
{{- $retry := include "leasetune.durationSeconds" .Values.leaderElection.retryPeriod | float64 -}}
{{- $takeover := addf $lease (mulf 4.4 $retry) | ceil | int -}}
- name: leasetune
  rules:
    - alert: LeasetuneDown
      expr: sum by (namespace) (up{ {{- $sel -}} }) == 0 or absent(up{ {{- $sel -}} })
      for: 5m
      labels:
        severity: critical
      annotations:
        summary: No leasetune replica can be scraped.
        description: >-
          Prometheus has scraped no leasetune replica in namespace {{ $ns }} for 5 minutes.
          Nothing propagates the leader-election timings, and the admission webhook
          (failurePolicy Fail) refuses every write of the nine leader-election settings.
        runbook: docs/alerts.md#leasetunedown
    - alert: LeasetuneReplicaDown
      expr: up{ {{- $sel -}} } == 0
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: A leasetune replica cannot be scraped.
        description: >-
          Prometheus has not scraped leasetune's pod {{`{{ $labels.pod }}`}} in namespace
          {{ $ns }} for 10 minutes: it is not running, or its metrics port cannot be reached.
        runbook: docs/alerts.md#leasetunereplicadown
    - alert: LeasetuneServerDown
      expr: leasetune_server_up{ {{- $sel -}} } == 0
      for: 5m
      labels:
        severity: warning
      annotations:
        summary: A server of a leasetune replica does not answer.
        description: >-
          The {{`{{ $labels.server }}`}} server of leasetune's pod {{`{{ $labels.pod }}`}} has not
          answered for 5 minutes (webhook: no serving certificate, or stopped; ui: stopped).
        runbook: docs/alerts.md#leasetuneserverdown
    - alert: LeasetuneNoLeader
      expr: max by (namespace) (leasetune_leader{ {{- $sel -}} }) == 0
      for: {{ $takeover }}s
      labels:
        severity: warning
      annotations:
        summary: No leasetune replica leads.
        description: >-
          No leasetune replica in namespace {{ $ns }} has held the Lease {{ $ns }}/leasetune for
          {{ $takeover }}s, longer than a new leader takes to take over: settings are
          not resolved, nothing is propagated, deleted Settings are not restored.
        runbook: docs/alerts.md#leasetunenoleader
    - alert: LeasetuneSettingRefused
      expr: max by (namespace, component, reason) (leasetune_setting_refused{ {{- $sel -}} }) == 1
      for: {{ $settle }}s
      labels:
        severity: warning
      annotations:
        summary: A leader-election triple does not take effect.
        description: >-
          The {{`{{ $labels.component }}`}} settings ask for a triple that does not take
          effect ({{`{{ $labels.reason }}`}}) for longer than the settle time; the last good
          triple stays in effect.
        runbook: docs/alerts.md#leasetunesettingrefused
    - alert: LeasetuneClustersLeftAlone
      expr: max by (namespace, reason) (leasetune_clusters_left_alone{ {{- $sel -}},reason=~"foreign|reverted|invalid"}) > 0
      for: 15m
      labels:
        severity: warning
      annotations:
        summary: Downstream clusters are left with timings leasetune does not set.
        description: >-
          {{`{{ $value }}`}} downstream cluster(s) have been left alone
          ({{`{{ $labels.reason }}`}}) for 15 minutes: their agents do not run the timings
          the settings ask for.
        runbook: docs/alerts.md#leasetuneclustersleftalone
    - alert: LeasetunePropagationBehind
      expr: leasetune_propagation_pending{ {{- $sel -}} } > 0 and time() > leasetune_propagation_deadline_timestamp_seconds{ {{- $sel -}} }
      for: 10m
      labels:
        severity: warning
      annotations:
        summary: A timing change is not propagated at its expected pace.
        description: >-
          The {{`{{ $labels.controller }}`}} controller still owes {{`{{ $value }}`}} object(s) a
          sync, 10 minutes after the change should have been done at the configured pace.
        runbook: docs/alerts.md#leasetunepropagationbehind
{{- end -}}
