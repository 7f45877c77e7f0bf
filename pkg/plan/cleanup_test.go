package plan

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

func fleetCluster(name string, ann map[string]string, env ...string) clusterObject {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"spec": map[string]interface{}{}}}
	u.SetNamespace("fleet-default")
	u.SetName(name)
	u.SetAnnotations(ann)
	var l []interface{}
	for i := 0; i < len(env); i += 2 {
		l = append(l, map[string]interface{}{"name": env[i], "value": env[i+1]})
	}
	if l != nil {
		_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
	}
	return clusterObject{gvr: fleet.ClusterGVR, obj: u}
}

// TestCleanupPrintNamesOnlyWhatIsThere: the listing names only the
// annotations an object carries, with the grammar of their number, and the
// own objects one at a time.
func TestCleanupPrintNamesOnlyWhatIsThere(t *testing.T) {
	c := &Cleanup{
		Removals: []Removal{
			{Object: fleetCluster("status-only", map[string]string{agentenv.StatusAnnotation: "unsupported: ...", "other": "x"})},
			{Object: fleetCluster("both", map[string]string{agentenv.RecordAnnotation: "{}", agentenv.StatusAnnotation: "invalid"},
				"HTTPS_PROXY", "p", "CATTLE_ELECTION_RETRY_PERIOD", "5s"),
				Env: []map[string]interface{}{{"name": "HTTPS_PROXY", "value": "p"}}, Entries: true},
			{Object: fleetCluster("record-only", map[string]string{agentenv.RecordAnnotation: "{}"},
				"CATTLE_ELECTION_RETRY_PERIOD", "5s"), Entries: true},
		},
		Own: []string{"ConfigMap leasetune-system/leasetune-state", "Lease leasetune-system/leasetune"},
	}
	for _, tc := range []struct {
		done         bool
		want, unwant []string
	}{
		{false, []string{
			"clusters.fleet.cattle.io fleet-default/status-only\n  annotation leasetune.io/agent-env-status: would be removed (no restart)\n",
			"clusters.fleet.cattle.io fleet-default/both\n  spec.agentEnvVars: HTTPS_PROXY=p CATTLE_ELECTION_RETRY_PERIOD=5s → HTTPS_PROXY=p\n  annotations leasetune.io/agent-env, leasetune.io/agent-env-status: would be removed\n  restarts: fleet-agent\n",
			"clusters.fleet.cattle.io fleet-default/record-only\n  spec.agentEnvVars: CATTLE_ELECTION_RETRY_PERIOD=5s → (none)\n  annotation leasetune.io/agent-env: would be removed\n",
			"ConfigMap leasetune-system/leasetune-state: would be deleted\n",
			"Lease leasetune-system/leasetune: would be deleted\n",
		}, []string{"status-only\n  annotations", "agent-env, leasetune.io/agent-env-status: would be removed (no restart)"}},
		{true, []string{
			"annotation leasetune.io/agent-env-status: was removed (no restart)\n",
			"annotations leasetune.io/agent-env, leasetune.io/agent-env-status: were removed\n",
			"annotation leasetune.io/agent-env: was removed\n",
			"ConfigMap leasetune-system/leasetune-state: was deleted\n",
		}, []string{"were deleted", "would be"}},
	} {
		var b bytes.Buffer
		c.Print(&b, tc.done)
		out := b.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("done=%v: output lacks %q:\n%s", tc.done, w, out)
			}
		}
		for _, u := range tc.unwant {
			if strings.Contains(out, u) {
				t.Errorf("done=%v: output has %q:\n%s", tc.done, u, out)
			}
		}
	}
}

// TestCleanupRestartsOfAManagementCluster: removing leasetune's entries
// from an imported RKE2 cluster's management Cluster says it re-plans
// every node beside Rancher v2.15 with day-2 operations on (what the
// controller says of the same write: agentenv.ManagementReplans), not
// beside v2.14 or with the operations off.
func TestCleanupRestartsOfAManagementCluster(t *testing.T) {
	mgmt := func(ann map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
			"status": map[string]interface{}{"driver": "rke2"}}}
		u.SetName("c-m-abcd1234")
		u.SetAnnotations(ann)
		return u
	}
	v := func(s string) rancher.Version { r, _ := rancher.Parse(s); return r }
	for _, c := range []struct {
		rv   rancher.Version
		ann  map[string]string
		want string
	}{
		{v("v2.15.0"), nil, "fleet-agent, cattle-cluster-agent and the system agent on every node"},
		{v("v2.15.0"), map[string]string{rancher.OperationsEnabledAnnotation: "false"}, "fleet-agent and cattle-cluster-agent"},
		{v("v2.14.4"), nil, "fleet-agent and cattle-cluster-agent"},
	} {
		o := clusterObject{gvr: rancher.ManagementClusterGVR, obj: mgmt(c.ann), rv: c.rv}
		if got := o.restarts(); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.rv, c.ann, got, c.want)
		}
	}
}

// TestCleanupUsesTheControllersLease: cleanup lists and deletes the Lease
// the controller elects on (--lease-name), not a fixed name.
func TestCleanupUsesTheControllersLease(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		leaseName, want string
	}{{"", "leasetune"}, {"leasetune-b", "leasetune-b"}} {
		cs := fake.NewSimpleClientset(
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leasetune-system", Name: "leasetune"}},
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "leasetune-system", Name: "leasetune-b"}})
		dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{electionStatusGVR: "ElectionStatusList"})
		r := &Report{snap: snapshotWith(nil)}
		opts := Options{Namespace: "leasetune-system", LeaseName: tc.leaseName}
		c, err := r.Cleanup(ctx, cs, dyn, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Own, []string{"Lease leasetune-system/" + tc.want}) {
			t.Errorf("--lease-name %q: own %v", tc.leaseName, c.Own)
		}
		if err := c.Apply(ctx, cs, dyn, opts); err != nil {
			t.Fatal(err)
		}
		l, _ := cs.CoordinationV1().Leases("leasetune-system").List(ctx, metav1.ListOptions{})
		if len(l.Items) != 1 || l.Items[0].Name == tc.want {
			t.Errorf("--lease-name %q: Leases left %v, want the other one alone", tc.leaseName, l.Items)
		}
	}
}
