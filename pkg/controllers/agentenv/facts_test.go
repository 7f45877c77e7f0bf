package agentenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// decisionText is d with its error as text, for comparing two decisions.
func decisionText(d Decision) string {
	e := ""
	if d.Err != nil {
		e = d.Err.Error()
	}
	d.Err = nil
	return fmt.Sprintf("%#v err=%q", d, e)
}

// checkDecideFacts fails t where Routing.DecideFacts, given the facts
// FactsOf read of u, decides otherwise than Routing.Decide reading u, for
// every channel, both ClusterAgentReads and a few global triples.
func checkDecideFacts(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	globals := []election.Timings{
		{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second},
		{LeaseDuration: 60 * time.Second, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second},
	}
	channels := []fleet.AgentChannel{fleet.ChannelAgentManagement, fleet.ChannelFixedV012, fleet.ChannelClusterEnvV09,
		fleet.ChannelFixedV090, fleet.ChannelNoElection}
	facts := FactsOf(u)
	for _, reads := range []bool{false, true} {
		rt := Routing{Target: u, ClusterAgentReads: reads}
		for _, g := range globals {
			for _, ch := range channels {
				want, got := decisionText(rt.Decide(g, ch)), decisionText(rt.DecideFacts(facts, g, ch))
				if want != got {
					t.Fatalf("channel %s, cluster agent reads %t, global %v:\nDecide      %s\nDecideFacts %s", ch, reads, g, want, got)
				}
			}
		}
	}
}

// TestDecideFactsIsDecide: deciding from the facts read once is deciding
// from the object, for the objects of this package's tests (entries of its
// own, foreign ones, valueFrom, overrides, a record, a malformed list), in
// their whole and slim forms; facts not from FactsOf fall back to the
// object.
func TestDecideFactsIsDecide(t *testing.T) {
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
	bad.SetAnnotations(map[string]string{LeaseDurationAnnotation: "1s", RenewDeadlineAnnotation: "x", RecordAnnotation: "{"})
	objects["bad overrides and record"] = bad
	for name, u := range objects {
		t.Run(name, func(t *testing.T) {
			checkDecideFacts(t, u)
			var b bytes.Buffer
			if err := json.NewEncoder(&b).Encode(u.Object); err != nil {
				t.Fatal(err)
			}
			if s, err := slimFromJSON(b.Bytes()); err == nil {
				checkDecideFacts(t, s)
			}
		})
	}
	// A copy of the facts with its exported fields edited (a caller
	// previewing an override) still decides as the object does. (Found by
	// a reviewer: the first version decided from the edited fields.)
	wire := wireCluster()
	edited := FactsOf(wire)
	edited.Overrides[2], edited.Set[2], edited.Malformed, edited.Record = "3s", true, true, map[string]string{}
	g0 := election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second}
	wrt := Routing{Target: wire}
	if got, want := decisionText(wrt.DecideFacts(edited, g0, fleet.ChannelClusterEnvV09)), decisionText(wrt.Decide(g0, fleet.ChannelClusterEnvV09)); got != want {
		t.Fatalf("an edited copy of the facts:\nDecideFacts %s\nDecide      %s", got, want)
	}
	u := objects["own triple"]
	rt := Routing{Target: u}
	g := election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second}
	if got, want := rt.DecideFacts(SourceFacts{}, g, fleet.ChannelClusterEnvV09), rt.Decide(g, fleet.ChannelClusterEnvV09); !reflect.DeepEqual(got, want) {
		t.Fatalf("facts not from FactsOf: %s, want %s", decisionText(got), decisionText(want))
	}
}

// FuzzDecideFacts: for any object the slim decoder accepts, and for its
// whole form, DecideFacts on FactsOf's facts is Decide.
func FuzzDecideFacts(f *testing.F) {
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
		checkDecideFacts(t, &unstructured.Unstructured{Object: whole})
		if s, err := slimFromJSON(data); err == nil {
			checkDecideFacts(t, s)
		}
	})
}
