package prometheus_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// jobOf is the scrape job each metric of the dashboard must come from: the
// project's own from leasetune's /metrics, the kube-apiserver's from its
// /metrics (job "apiserver", as rancher-monitoring names it).
func jobOf(metric string) string {
	if strings.HasPrefix(metric, "leasetune_") {
		return "leasetune"
	}
	return "apiserver"
}

// operate does what makes every series of the dashboard exist, as an
// operator's first hour would: a value the controller refuses (written
// while no webhook is registered, so that it gets past the door), then set
// back; a change of the Fleet controllers' retry period (its propagation
// time is the first one measured: the start-up pass is not a change); and
// a value the admission webhook refuses once the chart's webhook
// configuration is installed (removed again when t ends).
func (e *env) operate(t *testing.T) {
	t.Helper()
	// renewDeadline 40s beyond the lease's 30s: invalid.
	if err := e.patchSettings("fleet-leader-election-renew-deadline", "40s"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the controller's TimingsRefused Event", func() bool {
		return len(events(t, "", "fleet-leader-election-renew-deadline", settings.ReasonRefused)) > 0
	})
	if err := e.patchSettings("fleet-leader-election-renew-deadline", "25s", "fleet-leader-election-retry-period", "8s"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Fleet controllers' new triple applied", func() bool {
		for _, ev := range events(t, "", "fleet-leader-election-retry-period", settings.ReasonApplied) {
			if strings.Contains(ev.message, "retryPeriod=8s") {
				return true
			}
		}
		return false
	})
	cp.InstallWebhookConfig(t, framework.RenderChart(t, "namespaceOverride="+e.ns), e.webhookAddr)
	framework.Eventually(t, "caBundle published", func() bool {
		v, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "leasetune", metav1.GetOptions{})
		return err == nil && len(v.Webhooks) > 0 && len(v.Webhooks[0].ClientConfig.CABundle) > 0
	})
	framework.Eventually(t, "the webhook refuses an invalid value", func() bool {
		err := e.patchSettings("fleet-leader-election-renew-deadline", "40s")
		return err != nil && strings.Contains(err.Error(), "denied the request")
	})
}

// TestEveryQueryAnswers: every query of the dashboard, evaluated by the
// real Prometheus over the installation (Fleet v0.9.9 with clusters, the
// Rancher Deployment, leasetune with its webhook, after one refusal by the
// controller, one change and one refusal at admission), returns a non-empty result; and every
// metric a query names is one Prometheus scraped, from leasetune's
// /metrics or the kube-apiserver's, with every label the query matches on.
func TestEveryQueryAnswers(t *testing.T) {
	e := sharedEnv(t)
	e.operate(t)
	for _, metric := range []string{"leasetune_settings_refused_total", "leasetune_admission_refused_total", "leasetune_last_propagation_duration_seconds"} {
		framework.Eventually(t, metric+" scraped", func() bool {
			s, err := e.prom.query(metric, time.Time{})
			return err == nil && len(s) > 0
		})
	}
	// Grafana's range variables set to a window Prometheus has data for
	// (it has scraped since the installation started).
	const win = 15 * time.Second
	time.Sleep(time.Until(e.promStarted.Add(win + 2*scrapeInterval)))

	var names []string
	if err := e.prom.get("/api/v1/label/__name__/values", url.Values{}, &names); err != nil {
		t.Fatal(err)
	}
	scraped := map[string]bool{}
	for _, n := range names {
		scraped[n] = true
	}
	queries := e.dash.Queries()
	if len(queries) == 0 {
		t.Fatal("the dashboard has no query")
	}
	for _, q := range queries {
		expr := expand(t, q, win)
		got, err := e.prom.query(expr, time.Time{})
		switch {
		case err != nil:
			t.Errorf("%s: %v", q, err)
			continue
		case len(got) == 0:
			t.Errorf("%s: an empty result", q)
		}
		t.Logf("%s → %d series, e.g. %v", q, len(got), got[:min(len(got), 1)])
		sels, err := e.prom.selectors(expr)
		if errors.Is(err, errNoParseQuery) {
			// Debian's Prometheus (2.42, scripts/prometheus.sh's fallback)
			// predates /api/v1/parse_query: the answers are checked, the
			// names are not.
			t.Logf("%s: %v: the metric and label names are not checked", q, err)
			continue
		}
		if err != nil {
			t.Errorf("%s: parse_query: %v", q, err)
			continue
		}
		for _, s := range sels {
			if !scraped[s.name] {
				t.Errorf("%s: Prometheus scraped no metric %s", q, s.name)
				continue
			}
			jobs, err := e.prom.byLabel("count by (job) ("+s.name+")", "job", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[jobOf(s.name)] == 0 {
				t.Errorf("%s: %s comes from the jobs %v, want %s alone", q, s.name, jobs, jobOf(s.name))
			}
			labels, err := e.prom.labelNames(s.name)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range s.labels {
				if !labels[l] {
					t.Errorf("%s: %s has no label %s (its labels: %v)", q, s.name, l, labels)
				}
			}
		}
	}
}
