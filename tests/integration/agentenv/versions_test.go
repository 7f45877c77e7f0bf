package agentenv_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/tests/integration/framework"
)

// useFleetCRD replaces clusters.fleet.cattle.io with the CRD of a Fleet
// release and waits until it is established.
func useFleetCRD(t *testing.T, version string) {
	t.Helper()
	path, err := framework.SharedFixture("fleet/fleet-" + version + "-clusters-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&crd); err != nil {
		t.Fatal(err)
	}
	c := apiextclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	cur, err := c.Get(context.Background(), crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.ResourceVersion = cur.ResourceVersion
	if _, err := c.Update(context.Background(), &crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CRD established", func() bool {
		got, err := c.Get(context.Background(), crd.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// TestFixtureVersions: with each Fleet release's Cluster CRD and channel,
// a cluster is written only where its agent would otherwise run another
// triple, and the agent customizations survive exactly.
func TestFixtureVersions(t *testing.T) {
	defer useFleetCRD(t, "v0.14.10") // the package's default
	cases := []struct {
		version string
		channel fleet.AgentChannel
		// want is the env written for the global Fleet defaults 30s/25s/10s
		// (nil: no write, the agent already runs them or runs no election).
		want []string
	}{
		{"v0.9.9", fleet.ChannelClusterEnvV09, []string{"HTTPS_PROXY=http://proxy:3128",
			"CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=10s"}},
		{"v0.12.0", fleet.ChannelFixedV012, nil},
		{"v0.12.0", fleet.ChannelNoElection, nil}, // the v0.10-v0.11 behaviour, on the nearest CRD
		{"v0.9.9", fleet.ChannelFixedV090, nil},   // v0.9.0 reads no env
		{"v0.14.10", fleet.ChannelAgentManagement, nil},
		{"v0.16-dev", fleet.ChannelAgentManagement, nil},
	}
	for _, c := range cases {
		t.Run(c.version+"/"+string(c.channel), func(t *testing.T) {
			useFleetCRD(t, c.version)
			ns := cp.Namespace(t)
			before := create(t, fleetGVR, fleetCluster(ns, "local", nil, nil, user))
			r := start(t, newTriples(election.FleetDefaults), c.channel)
			want := c.want
			if want == nil {
				want = []string{"HTTPS_PROXY=http://proxy:3128"}
			}
			eventually(t, "converged", func() bool {
				return strings.Join(envOf(getObj(t, fleetGVR, ns, "local")), ",") == strings.Join(want, ",")
			})
			writes := r.settle()
			if (c.want == nil) != (writes == 0) {
				t.Errorf("%d writes", writes)
			}
			if a, b := specWithoutEnv(t, before), specWithoutEnv(t, getObj(t, fleetGVR, ns, "local")); a != b {
				t.Errorf("agent customizations changed:\n%s\n%s", a, b)
			}
			r.cancel()
			time.Sleep(100 * time.Millisecond)
		})
	}
}
