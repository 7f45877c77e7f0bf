package footprint_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// restWindow is how long the controller is watched at rest. Its own Lease
// (default 30s/25s/10s) renews every 10s: about 2 × 12 = 24 requests (get
// and update) in 2 minutes; nothing else may appear.
const restWindow = 2 * time.Minute

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// requestsSince reads the audit log from offset and returns leasetune's
// completed requests as "verb resource namespace/name".
func requestsSince(t *testing.T, offset int64) []string {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || !strings.HasPrefix(e.UserAgent, manager.UserAgent) {
			continue
		}
		what := e.Verb
		if e.ObjectRef != nil {
			what += " " + e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		}
		out = append(out, what)
	}
	return out
}

func logSize(t *testing.T) int64 {
	t.Helper()
	st, err := os.Stat(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestAtRestOnlyItsLease: the whole controller (leader election, webhook
// server, the controllers, the agent judgement index, the UI extension's
// bundle server, the Rancher Deployment's env) beside a Fleet
// v0.14.10 installation with clusters, converged, sends the kube-apiserver
// nothing but its own Lease's get and update for restWindow: everything else
// is watched, not polled (docs/footprint.md).
func TestAtRestOnlyItsLease(t *testing.T) {
	ctx := context.Background()
	ns, fleetNS, rancherNS, clusterNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	cp.InstallFleet(t, fleetNS, framework.FleetDeployments(t, "v0.14.10"))
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	for i, name := range []string{"edge-1", "edge-2", "edge-3"} {
		fc := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
			"spec": map[string]interface{}{"agentEnvVars": []interface{}{map[string]interface{}{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}}}}}
		fc.SetNamespace(clusterNS)
		fc.SetName(name)
		if i == 2 {
			fc.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"}) // reported once, then at rest too
		}
		if _, err := dyn.Resource(fleet.ClusterGVR).Namespace(clusterNS).Create(ctx, fc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dyn.Resource(fleet.ClusterGVR).Namespace(clusterNS).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	addr := "127.0.0.1:0"
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- manager.Run(mctx, cp.Config, manager.Config{
			Namespace: ns, FleetNamespace: fleetNS, RancherNamespace: rancherNS, QPS: 100, Burst: 200, Workers: 2,
			Settle: time.Second, LeaderElection: true, LeaseName: "leasetune", Identity: "footprint-test",
			Timings:     manager.DefaultTimings,
			WebhookAddr: addr, WebhookService: "leasetune-webhook", WebhookHosts: []string{"127.0.0.1"},
			WebhookConfigName: "leasetune", ServiceAccount: "system:serviceaccount:" + ns + ":leasetune",
			// As the chart runs it: the Rancher Deployment's env kept (its
			// Deployment watched by name) and the UI extension's bundle
			// served (its UIPlugin is the chart's, not the process's).
			RancherEnv: true, UI: manager.UIConfig{Addr: framework.FreeAddr(t)},
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager.Run after cancel: %v", err)
		}
	})

	settingsRes := dyn.Resource(framework.SettingsGVR)
	framework.Eventually(t, "settings created", func() bool {
		l, err := settingsRes.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == len(settings.Registry)
	})
	if _, err := settingsRes.Patch(ctx, "fleet-leader-election-retry-period", types.MergePatchType, []byte(`{"value":"5s"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "converged", func() bool {
		d, err := cp.Client.AppsV1().Deployments(fleetNS).Get(ctx, "gitjob", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "CATTLE_ELECTION_RETRY_PERIOD" {
				return e.Value == "5s"
			}
		}
		return false
	})
	// The ElectionStatus, kept by the leader, shows the change too; at rest
	// it is not written (a status write would show below).
	framework.Eventually(t, "the ElectionStatus shows the Fleet controllers' 5s", func() bool {
		return framework.InEffect(ctx, dyn, "fleet-controller", "retryPeriod") == "5s"
	})
	time.Sleep(10 * time.Second) // the settle time, the last writes, the report of edge-3's override
	offset := logSize(t)
	time.Sleep(restWindow)
	got := requestsSince(t, offset)

	lease := map[string]bool{"get leases " + ns + "/leasetune": true, "update leases " + ns + "/leasetune": true}
	counts := map[string]int{}
	var other []string
	for _, r := range got {
		counts[r]++
		if !lease[r] && !strings.HasPrefix(r, "watch ") {
			other = append(other, r)
		}
	}
	var lines []string
	for r, n := range counts {
		lines = append(lines, r+" ×"+strconv.Itoa(n))
	}
	sort.Strings(lines)
	t.Logf("leasetune's requests in %s at rest: %s", restWindow, strings.Join(lines, "; "))
	if len(other) > 0 {
		t.Errorf("requests other than its Lease (and long-running watches) at rest: %v", other)
	}
	// Lease: the leader gets and updates once per retry period (10s).
	want := int(restWindow / (10 * time.Second))
	if n := counts["update leases "+ns+"/leasetune"]; n < want/2 || n > want+2 {
		t.Errorf("%d Lease updates in %s, want about %d", n, restWindow, want)
	}
}
