// Package promrules_test tests leasetune's alerts as the chart ships them:
// the spec of the PrometheusRule that helm template renders (the rules of
// charts/leasetune/templates/_rules.tpl) goes to promtool check rules and to
// promtool test rules with rules_test.yaml's synthetic series. promtool
// comes from scripts/promtool.sh (built from tools/promtool, once); the
// tests skip, saying why, only when no promtool can be had.
package promrules_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"

	"leasetune.io/leasetune/tests/helmchart"

	"leasetune.io/leasetune/tests/kit"
)

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  string
)

// promtool returns the path of promtool, or skips t when
// scripts/promtool.sh can have none (its stderr says why).
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() {
		r, err := helmchart.Root()
		if err != nil {
			promtoolErr = err.Error()
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(r, "scripts", "promtool.sh"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			promtoolErr = fmt.Sprintf("scripts/promtool.sh: %v\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		promtoolPath = lines[len(lines)-1]
	})
	if promtoolPath == "" {
		kit.SkipUnlessRequired(t, "promtool", "no promtool can be had, so the alert rules are not tested: "+promtoolErr)
	}
	return promtoolPath
}

// ruleFile renders the chart with monitoring on and the PrometheusRule kind
// served, with the extra helm arguments args, and returns its one
// PrometheusRule's spec: a Prometheus rule file.
func ruleFile(t *testing.T, args ...string) []byte {
	t.Helper()
	all := append([]string{"--set", "monitoring.enabled=true", "--api-versions", helmchart.PrometheusRule}, args...)
	rules := helmchart.Find(helmchart.Objects(t, helmchart.Render(t, all...)), "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules rendered, want 1", len(rules))
	}
	b, err := yaml.Marshal(rules[0].Doc["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run runs promtool with args in dir and fails t with its output on an
// error.
func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRules: promtool accepts the rules the chart ships (check rules) and
// every case of rules_test.yaml passes on them (test rules).
func TestRules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleFile(t), 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), cases, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(run(t, dir, "check", "rules", "rules.yaml")))
	t.Log(strings.TrimSpace(run(t, dir, "test", "rules", "rules_test.yaml")))
}

type ruleFileDoc struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			For         string            `yaml:"for"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alerts returns the alerts of a rule file by name: their "for" and
// annotations.
func alerts(t *testing.T, b []byte) map[string]struct {
	For         string
	Annotations map[string]string
} {
	t.Helper()
	var f ruleFileDoc
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		For         string
		Annotations map[string]string
	}{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = struct {
					For         string
					Annotations map[string]string
				}{r.For, r.Annotations}
			}
		}
	}
	return out
}

// TestEveryAlertTestedAndDocumented: each alert has, in rules_test.yaml, a
// case where it fires and one where it does not, and a runbook section in
// docs/alerts.md that its runbook annotation names.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	as := alerts(t, ruleFile(t))
	if len(as) == 0 {
		t.Fatal("no alert rendered")
	}
	b, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cases struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string        `yaml:"alertname"`
				ExpAlerts []interface{} `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range cases.Tests {
		for _, a := range tc.AlertRuleTest {
			if _, ok := as[a.Alertname]; !ok {
				t.Errorf("rules_test.yaml tests %s, which the chart does not ship", a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	r, err := helmchart.Root()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(r, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range as {
		if !fires[name] || !quiet[name] {
			t.Errorf("%s: a firing case %v, a quiet case %v in rules_test.yaml; want both", name, fires[name], quiet[name])
		}
		if !regexp.MustCompile(`(?m)^## ` + name + `$`).Match(doc) {
			t.Errorf("%s: no section \"## %s\" in docs/alerts.md", name, name)
		}
		if want := "docs/alerts.md#" + strings.ToLower(name); a.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", name, a.Annotations["runbook"], want)
		}
	}
}

// TestDurationsFollowValues: LeasetuneNoLeader waits leaseDuration + 4.4 x
// retryPeriod of leasetune's own election and LeasetuneSettingRefused the
// settle time, in whole seconds rounded up, whatever Go duration the
// values hold; a value that is not a duration fails the render, naming it.
func TestDurationsFollowValues(t *testing.T) {
	for _, c := range []struct {
		name              string
		args              []string
		noLeader, refused string
	}{
		{"defaults", nil, "74s", "10s"},
		{"1m30s/1m/2.5s, settle 1m", []string{"--set-string", "leaderElection.leaseDuration=1m30s,leaderElection.renewDeadline=1m,leaderElection.retryPeriod=2.5s,settle=1m"}, "101s", "60s"},
		{"milliseconds, settle 0", []string{"--set-string", "leaderElection.leaseDuration=15000ms,leaderElection.renewDeadline=10s,leaderElection.retryPeriod=1500ms,settle=0"}, "22s", "0s"},
		{"settle 1.2s", []string{"--set-string", "settle=1.2s"}, "74s", "2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := ruleFile(t, c.args...)
			as := alerts(t, b)
			if got := as["LeasetuneNoLeader"].For; got != c.noLeader {
				t.Errorf("LeasetuneNoLeader for %q, want %q", got, c.noLeader)
			}
			if got := as["LeasetuneSettingRefused"].For; got != c.refused {
				t.Errorf("LeasetuneSettingRefused for %q, want %q", got, c.refused)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			run(t, dir, "check", "rules", "rules.yaml")
		})
	}
	_, err := helmchart.Template(t, "--set", "monitoring.enabled=true", "--api-versions", helmchart.PrometheusRule, "--set-string", "settle=ten seconds")
	if err == nil || !strings.Contains(err.Error(), `"ten seconds" is not a duration`) {
		t.Errorf("a settle time that is not a duration: %v, want a failed render naming it", err)
	}
}
