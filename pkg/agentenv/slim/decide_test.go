package slim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// decisionText is d with its error as text, for comparing two decisions.
func decisionText(d agentenv.Decision) string {
	e := ""
	if d.Err != nil {
		e = d.Err.Error()
	}
	d.Err = nil
	return fmt.Sprintf("%#v err=%q", d, e)
}

// checkSlimDecidesAsWhole fails t where the facts of s, the slim copy of
// whole, decide otherwise than those of whole, for every channel, both
// ClusterAgentReads and a few global triples.
func checkSlimDecidesAsWhole(t *testing.T, whole, s *unstructured.Unstructured) {
	t.Helper()
	globals := []election.Timings{
		{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second},
		{LeaseDuration: 60 * time.Second, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second},
	}
	fw, fs := agentenv.FactsOf(whole), agentenv.FactsOf(s)
	for _, reads := range []bool{false, true} {
		for _, g := range globals {
			for _, ch := range fleet.Channels {
				in := agentenv.Input{Facts: fw, Global: g, Channel: ch, ClusterAgentReads: reads}
				want := decisionText(agentenv.Decide(in))
				in.Facts = fs
				if got := decisionText(agentenv.Decide(in)); got != want {
					t.Fatalf("channel %s, cluster agent reads %t, global %v:\nwhole %s\nslim  %s", ch, reads, g, want, got)
				}
			}
		}
	}
}

// slimOf is the slim copy of u as read off the wire; false where the slim
// decoder refuses its JSON.
func slimOf(t *testing.T, u *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(u.Object); err != nil {
		t.Fatal(err)
	}
	s, err := slimFromJSON(b.Bytes())
	return s, err == nil
}

// TestSlimDecidesAsWhole: the slim copy of an object decides as the whole
// object, for entries of the project's own, foreign ones, valueFrom,
// duplicates, overrides, a record, a malformed list.
func TestSlimDecidesAsWhole(t *testing.T) {
	objects := map[string]*unstructured.Unstructured{"wire": wireCluster()}
	env := func(entries ...interface{}) *unstructured.Unstructured {
		u := wireCluster()
		u.Object["spec"].(map[string]interface{})["agentEnvVars"] = entries
		return u
	}
	objects["none"] = env()
	objects["own triple"] = env(map[string]interface{}{"name": "HTTPS_PROXY", "value": "p"},
		map[string]interface{}{"name": "CATTLE_ELECTION_LEASE_DURATION", "value": "30s"},
		map[string]interface{}{"name": "CATTLE_ELECTION_RENEW_DEADLINE", "value": "25s"},
		map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "10s"})
	objects["foreign"] = env(map[string]interface{}{"name": "CATTLE_ELECTION_LEASE_DURATION", "value": "99s"})
	objects["valueFrom"] = env(map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD",
		"valueFrom": map[string]interface{}{"configMapKeyRef": map[string]interface{}{"name": "x", "key": "y"}}})
	objects["duplicate"] = env(map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "10s"},
		map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "10s"})
	malformed := wireCluster()
	malformed.Object["spec"].(map[string]interface{})["agentEnvVars"] = []interface{}{"not an object"}
	objects["malformed"] = malformed
	bad := wireCluster()
	bad.SetAnnotations(map[string]string{agentenv.LeaseDurationAnnotation: "1s", agentenv.RenewDeadlineAnnotation: "x", agentenv.RecordAnnotation: "{"})
	objects["bad overrides and record"] = bad
	for name, u := range objects {
		t.Run(name, func(t *testing.T) {
			if s, ok := slimOf(t, u); ok {
				checkSlimDecidesAsWhole(t, u, s)
			}
		})
	}
}

// FuzzSlimDecidesAsWhole: for any object the slim decoder accepts, its
// slim copy decides as the whole object.
func FuzzSlimDecidesAsWhole(f *testing.F) {
	var seed bytes.Buffer
	_ = json.NewEncoder(&seed).Encode(wireCluster().Object)
	f.Add(seed.Bytes())
	f.Add([]byte(`{"metadata":{"annotations":{"leasetune.io/agent-env":"{\"CATTLE_ELECTION_RETRY_PERIOD\":\"10s\"}"}},"spec":{"agentEnvVars":[{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"10s"}]}}`))
	f.Add([]byte(`{"spec":{"agentEnvVars":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var whole map[string]interface{}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&whole) != nil || whole == nil {
			return
		}
		if md, _ := whole["metadata"].(map[string]interface{}); md != nil {
			if _, ok := md["annotations"].(map[string]interface{}); !ok && md["annotations"] != nil {
				return // GetAnnotations of a malformed map: not a shape the apiserver serves
			}
		}
		if s, err := slimFromJSON(data); err == nil {
			checkSlimDecidesAsWhole(t, &unstructured.Unstructured{Object: whole}, s)
		}
	})
}

// TestSlimKeepsWhatReplansReads: the slim copy of a management Cluster
// keeps what agentenv.ManagementReplans reads of it (rancher.ImportedDay2Ops:
// status.driver, the provider label, the operations-enabled and
// administrated annotations).
func TestSlimKeepsWhatReplansReads(t *testing.T) {
	mgmt := func(labels, annotations map[string]string, driver string) *unstructured.Unstructured {
		m := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": "c-m-abcd1234"},
			"status":   map[string]interface{}{"driver": driver, "conditions": []interface{}{}}}}
		m.SetLabels(labels)
		m.SetAnnotations(annotations)
		m.SetResourceVersion("3")
		return m
	}
	rv, _ := rancher.Parse("v2.15.0")
	for name, m := range map[string]*unstructured.Unstructured{
		"imported rke2":                     mgmt(nil, nil, "rke2"),
		"imported k3s (provider label)":     mgmt(map[string]string{rancher.ProviderLabel: "k3s"}, nil, "imported"),
		"imported rke2, operations-enabled": mgmt(nil, map[string]string{rancher.OperationsEnabledAnnotation: "false"}, "rke2"),
		"imported rke2, administrated":      mgmt(nil, map[string]string{rancher.AdministratedAnnotation: "true"}, "rke2"),
		"imported EKS":                      mgmt(nil, nil, "EKS"),
	} {
		s, err := slim(m)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := agentenv.ManagementReplans(s.(*unstructured.Unstructured), rv), agentenv.ManagementReplans(m, rv); got != want {
			t.Errorf("%s: slim copy replans %v, the whole object %v", name, got, want)
		}
	}
}
