package agentenv_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/index"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// TestStreamedCacheIsTheLiveObjectsSlimCopy: the informer that reads the
// apiserver's lists and watches with the stream decoder (as the
// controller runs) caches, for every cluster, the fingerprint of the
// object as a live read returns it, and the same as the informer that
// decodes whole objects. So the revert guard, which compares a cached
// copy with a live read, sees "changed otherwise" exactly when something
// but the env changed, whichever path brought the object. Objects created
// before the start come by the paged list, later changes by the watch.
func TestStreamedCacheIsTheLiveObjectsSlimCopy(t *testing.T) {
	ns := cp.Namespace(t)
	for i := 0; i < 7; i++ {
		u := fleetCluster(ns, fmt.Sprintf("s%d", i),
			kit.WithLabels(map[string]string{"env": "prod", rancher.ClusterNameLabel: fmt.Sprintf("c-s%d", i)}),
			kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s", "note": `<a href="x">&` + "\u2028", "objectset.rio.cattle.io/applied": "H4sIAAAA"}),
			kit.WithEnv(user))
		u.Object["spec"].(map[string]interface{})["agentAffinity"] = nil // the schema drops it: null is what the apiserver stores
		cp.Create(t, fleetGVR, u)
	}
	streamed, whole := startIndexes(t)

	cached := func(ix *index.Index, name string) *unstructured.Unstructured {
		o, ok, _ := ix.Informer().GetStore().GetByKey(ns + "/" + name)
		if !ok {
			return nil
		}
		return o.(*unstructured.Unstructured)
	}
	// check waits until both caches hold the live object's resourceVersion,
	// then compares them with it and returns the fingerprint.
	check := func(name string) string {
		t.Helper()
		live := getObj(t, fleetGVR, ns, name)
		framework.Eventually(t, name+" cached at the live resourceVersion", func() bool {
			s, w := cached(streamed, name), cached(whole, name)
			return s != nil && w != nil && s.GetResourceVersion() == live.GetResourceVersion() && w.GetResourceVersion() == live.GetResourceVersion()
		})
		s, w := cached(streamed, name), cached(whole, name)
		fp := slim.Fingerprint(live)
		if fp == "" || slim.Fingerprint(s) != fp || slim.Fingerprint(w) != fp {
			t.Errorf("%s: fingerprints live %q, streamed %q, decoded whole %q", name, fp, slim.Fingerprint(s), slim.Fingerprint(w))
		}
		if s.GetUID() != live.GetUID() || s.GetLabels()[rancher.ClusterNameLabel] != live.GetLabels()[rancher.ClusterNameLabel] ||
			s.GetAnnotations()[agentenv.RetryPeriodAnnotation] != live.GetAnnotations()[agentenv.RetryPeriodAnnotation] {
			t.Errorf("%s: streamed copy %v, live metadata %v", name, s.Object["metadata"], live.Object["metadata"])
		}
		if _, ok := s.GetLabels()["env"]; ok {
			t.Errorf("%s: a label the controller does not read was kept", name)
		}
		return fp
	}
	fps := map[string]string{}
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("s%d", i)
		fps[name] = check(name)
	}

	// Changes by the watch: an env-only change keeps the fingerprint, a
	// change of anything else gives another.
	patch := func(name, body string) {
		t.Helper()
		if _, err := cp.Resource(fleetGVR, ns).Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch("s0", `{"spec":{"agentEnvVars":[{"name":"HTTPS_PROXY","value":"http://other:3128"}]}}`)
	patch("s1", `{"metadata":{"labels":{"env":"dev"}}}`)
	patch("s2", `{"spec":{"agentTolerations":[]}}`)
	patch("s3", `{"metadata":{"annotations":{"`+agentenv.StatusAnnotation+`":"left alone"}}}`)
	patch("s4", `{"metadata":{"annotations":{"note":null}}}`)
	patch("s5", `{"spec":{"agentResources":{"limits":{"memory":"300Mi"}}}}`)
	patch("s6", `{"spec":{"agentEnvVars":[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"7s"}]}}`)
	for name, same := range map[string]bool{"s0": true, "s1": false, "s2": false, "s3": true, "s4": false, "s5": false, "s6": true} {
		if fp := check(name); (fp == fps[name]) != same {
			t.Errorf("%s: fingerprint unchanged %v, want %v", name, fp == fps[name], same)
		}
	}
	// The env the controller reads from the streamed copy is the live one:
	// of these clusters only s6 carries an election entry, and the index
	// (which reads the cached env) finds it with its value.
	var mine []string
	for _, c := range streamed.Candidates() {
		if c.Namespace == ns {
			for _, e := range c.Env {
				mine = append(mine, c.Name+":"+e.Name+"="+e.Value)
			}
		}
	}
	if fmt.Sprint(mine) != "[s6:CATTLE_ELECTION_RETRY_PERIOD=7s]" {
		t.Errorf("clusters with election entries in the streamed cache: %v", mine)
	}
}
