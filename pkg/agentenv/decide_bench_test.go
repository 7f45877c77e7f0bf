package agentenv

import (
	"testing"

	"leasetune.io/leasetune/pkg/fleet"
)

// BenchmarkDecide measures the pure decision for one cluster with a
// realistic env list (user entries plus the three owned ones) and an
// override: the CPU a global change costs per cluster, apart from the API
// calls. Run: go test -run '^$' -bench Decide ./pkg/agentenv
func BenchmarkDecide(b *testing.B) {
	env := []map[string]interface{}{user, fromRef, e("NO_PROXY", "10.0.0.0/8"), e(L, "1m0s"), e(D, "50s"), e(P, "20s")}
	vals, set := over("-", "-", "5s")
	facts := factsOf(env, rec6050, vals, set)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d := Decide(Input{Facts: facts, Global: global, Channel: fleet.ChannelClusterEnvV09, ClusterAgentReads: true})
		if !d.Change {
			b.Fatal("no change decided")
		}
	}
}
