package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

func TestRecommend(t *testing.T) {
	code, out, errs := runCmd(t, "", "recommend", "--max-failover", "60s", "--clusters", "500")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"recommended: leaseDuration=20s renewDeadline=19s retryPeriod=9s\n",
		"worst-case failover 59.6s (at most 1m0s)",
		"renewal attempts 2.11 (at least 2); survives a kube-apiserver stall of up to 19s",
		"installation: 500 fleet-agent locks + 5 Fleet controller locks",
		"181,800 lock requests per hour", // 505 × 360 at Fleet's defaults, client-go v0.30+ leaders
		"recommended on both: 202,000 lock requests per hour (+11%)",
		"Rancher's own lock left out: --rancher-replicas N",
		// pkg/locks: rancher-turtles', Cluster API's and rancher-webhook's,
		// 1,800 an hour each.
		"not counted, on Rancher v2.13+ (rancher-webhook's from v2.14): rancher-turtles cattle-turtles-system/controller-leader-election-rancher-turtles (leaseDuration=15s renewDeadline=10s retryPeriod=2s), cluster-api",
		"rancher-webhook cattle-system/rancher-webhook-leader",
		"about 5,400 requests per hour (one replica each, client-go v0.30+ leaders), which these settings do not reach",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Rancher's own lock, when its replicas are given.
	code, out, errs = runCmd(t, "", "recommend", "--max-failover", "60s", "--clusters", "500", "--rancher-replicas", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Rancher's cattle-controllers lock, 3 replica(s)",
		"Rancher leaseDuration=45s renewDeadline=30s retryPeriod=2s",
		"185,850 lock requests per hour", // 181,800 + Rancher's 4,050 at wrangler's 2s (1,800 + 2 × 1,125)
		"recommended on all three: 202,900 lock requests per hour (+9%)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("with --rancher-replicas 3, output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "left out") {
		t.Errorf("Rancher's lock said to be left out:\n%s", out)
	}
	// Leaders that get before they update (Rancher v2.8, Fleet v0.9)
	// make twice the leader requests; the deprecated v0.30 flag changes
	// nothing.
	code, out, errs = runCmd(t, "", "recommend", "--max-failover", "60s", "--clusters", "500", "--client-go-before-v030")
	if code != 0 || !strings.Contains(out, "363,600 lock requests per hour") || !strings.Contains(out, "client-go < v0.30 (leader gets and updates)") {
		t.Errorf("--client-go-before-v030: exit %d, want 505 × 720 = 363,600 requests per hour:\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd(t, "", "recommend", "--max-failover", "60s", "--clusters", "500", "--client-go-v030")
	if code != 0 || !strings.Contains(out, "181,800 lock requests per hour") {
		t.Errorf("--client-go-v030: exit %d, want the default's 181,800 requests per hour:\n%s%s", code, out, errs)
	}
	code, out, errs = runCmd(t, "", "recommend", "--max-failover", "60s", "--clusters", "500", "--client-go-v030=false")
	if code != 0 || !strings.Contains(out, "363,600 lock requests per hour") {
		t.Errorf("--client-go-v030=false: exit %d, want the old behaviour's 363,600 requests per hour:\n%s%s", code, out, errs)
	}
	if code, _, errs = runCmd(t, "", "recommend", "--max-failover", "60s", "--client-go-v030", "--client-go-before-v030"); code != 2 || !strings.Contains(errs, "contradict") {
		t.Errorf("both flags: exit %d, want 2 and a usage error: %s", code, errs)
	}
	if code, js, _ := runCmd(t, "", "recommend", "--max-failover", "60s", "-o", "json"); code != 0 || !strings.Contains(js, `"clientGo": "client-go v0.30+ (leader updates only)"`) {
		t.Errorf("-o json does not say the behaviour counted with:\n%s", js)
	}
	// Every triple printed passes check.
	row := regexp.MustCompile(`(?m)^  [* ] (\d+s)\s+(\d+s)\s+(\d+s)\s`)
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) < 3 {
		t.Fatalf("trade-off table: %d rows:\n%s", len(rows), out)
	}
	for _, r := range rows {
		if code, _, errs := runCmd(t, "", "check", "--lease-duration", r[1], "--renew-deadline", r[2], "--retry-period", r[3]); code != 0 {
			t.Errorf("%v fails check: %s", r[1:], errs)
		}
	}
}

func TestRecommendJSONAndErrors(t *testing.T) {
	code, out, _ := runCmd(t, "", "recommend", "--max-failover", "90s", "--min-renew-attempts", "3", "--output", "json")
	var r struct {
		Recommended  struct{ LeaseDuration, RenewDeadline, RetryPeriod string }
		Alternatives []struct{ RetryPeriod string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Recommended.RetryPeriod != "12s" || r.Recommended.LeaseDuration != "37s" || len(r.Alternatives) == 0 {
		t.Errorf("json: exit %d %+v\n%s", code, r, out)
	}
	if code, _, errs := runCmd(t, "", "recommend", "--max-failover", "7s"); code != 1 || !strings.Contains(errs, "shortest worst-case failover is 7.4s") {
		t.Errorf("unreachable: exit %d %q", code, errs)
	}
	for _, args := range [][]string{
		{"recommend"},
		{"recommend", "--max-failover", "1 minute"},
		{"recommend", "--max-failover", "60s", "--min-renew-attempts", "1"},
		{"recommend", "--max-failover", "60s", "--followers", "-2"},
		{"recommend", "--max-failover", "60s", "--rancher-replicas", "-1"},
	} {
		if code, _, errs := runCmd(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errs)
		}
	}
}
