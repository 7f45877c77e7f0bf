package agentenv_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// hookRT runs hook before each request.
type hookRT struct {
	next http.RoundTripper
	hook func(*http.Request)
}

func (h *hookRT) RoundTrip(r *http.Request) (*http.Response, error) {
	h.hook(r)
	return h.next.RoundTrip(r)
}

// TestEditAfterStatusClearIsKept: a user's edit that lands while the
// controller removes its status annotation must survive the env write that
// follows (a review found the controller copied the new resourceVersion
// onto its cached copy and then wrote the stale list).
func TestEditAfterStatusClearIsKept(t *testing.T) {
	ns := cp.Namespace(t)
	create(t, fleetGVR, fleetCluster(ns, "x", nil, map[string]string{agentenv.RetryPeriodAnnotation: "30s"}, user))
	var once sync.Once
	edited := make(chan struct{})
	tweak := func(o *agentenv.Options) {
		cfg := rest.CopyConfig(cp.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return &hookRT{next: rt, hook: func(r *http.Request) {
				if r.Method != http.MethodPatch || r.Body == nil || !strings.HasSuffix(r.URL.Path, "/clusters/x") {
					return
				}
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				if !strings.Contains(string(b), `"leasetune.io/agent-env-status":null`) || strings.Contains(string(b), "agentEnvVars") {
					return
				}
				once.Do(func() {
					u := getObj(t, fleetGVR, ns, "x")
					l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
					l = append(l, map[string]interface{}{"name": "NO_PROXY", "value": "10.0.0.0/8"})
					_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
					if _, err := res(fleetGVR, ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
						t.Errorf("concurrent edit: %v", err)
					}
					close(edited)
				})
			}}
		}
		o.Client = dynamic.NewForConfigOrDie(cfg)
	}
	r := start(t, &triples{agent: election.FleetDefaults}, fleet.ChannelAgentManagement, tweak)
	eventually(t, "marked invalid", func() bool {
		_, ok := getObj(t, fleetGVR, ns, "x").GetAnnotations()[agentenv.StatusAnnotation]
		return ok
	})
	r.settle()
	annotate(t, fleetGVR, ns, "x", map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"})
	select {
	case <-edited:
	case <-time.After(20 * time.Second):
		t.Fatal("the status annotation was never removed")
	}
	eventually(t, "override applied with the user's edit kept", func() bool {
		got := strings.Join(envOf(getObj(t, fleetGVR, ns, "x")), ",")
		return strings.Contains(got, "CATTLE_ELECTION_RETRY_PERIOD=5s") && strings.Contains(got, "NO_PROXY=10.0.0.0/8")
	})
}

// TestOverridesOnTheWrongObjectAreReported: on a Rancher-managed cluster
// the annotations are read from the provisioning Cluster; the same
// annotations on its fleet or management Cluster are reported as not
// applying (a review found them silently ignored).
func TestOverridesOnTheWrongObjectAreReported(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	mgmtName := ns + "-imported"
	m := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "spec": map[string]interface{}{}}}
	m.SetName(mgmtName)
	m.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "7s"})
	create(t, mgmtGVR, m)
	p := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster", "spec": map[string]interface{}{}}}
	p.SetNamespace(ns)
	p.SetName("imported")
	p = create(t, provGVR, p)
	_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
	if _, err := res(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, fleetGVR, fleetCluster(ns, "imported", map[string]string{agentenv.MgmtNameLabel: mgmtName}, nil))
	start(t, &triples{agent: election.FleetDefaults}, fleet.ChannelAgentManagement)
	eventually(t, "reported on the management Cluster", func() bool {
		ev := events(t, "", mgmtName, "ElectionOverrideIgnored")
		return len(ev) == 1 && strings.Contains(ev[0], "clusters.provisioning.cattle.io "+ns+"/imported")
	})
	if got := envOf(getObj(t, mgmtGVR, "", mgmtName)); len(got) != 0 {
		t.Errorf("an ignored override was applied: %v", got)
	}
}
