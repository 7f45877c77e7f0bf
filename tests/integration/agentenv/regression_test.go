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
