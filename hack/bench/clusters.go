package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
)

// The kinds the bench writes: the product's own names for them.
var (
	fleetClusterGVR = fleet.ClusterGVR
	settingGVR      = inventory.SettingsGVR
)

// clusterNamespace is where the bench's fleet Clusters live.
const clusterNamespace = "fleet-default"

func clusterName(i int) string { return fmt.Sprintf("edge-%05d", i) }

// userEnv is cluster i's own spec.agentEnvVars: a proxy, as most
// air-gapped or edge installations set, and a per-site entry.
func userEnv(i int) []interface{} {
	return []interface{}{
		map[string]interface{}{"name": "HTTP_PROXY", "value": "http://proxy.site-" + fmt.Sprint(i%500) + ".example.internal:3128"},
		map[string]interface{}{"name": "HTTPS_PROXY", "value": "http://proxy.site-" + fmt.Sprint(i%500) + ".example.internal:3128"},
		map[string]interface{}{"name": "NO_PROXY", "value": "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,.svc,.cluster.local"},
		map[string]interface{}{"name": "SITE_ID", "value": fmt.Sprintf("site-%05d", i)},
	}
}

// electionEnv is the triple as leasetune writes it.
func electionEnv(ld, rd, rp string) []interface{} {
	return []interface{}{
		map[string]interface{}{"name": "CATTLE_ELECTION_LEASE_DURATION", "value": ld},
		map[string]interface{}{"name": "CATTLE_ELECTION_RENEW_DEADLINE", "value": rd},
		map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": rp},
	}
}

var regions = []string{"eu-west", "eu-central", "us-east", "us-west", "ap-south"}

// fleetCluster is a standalone Fleet v0.9 Cluster as an installation of
// edge sites has it: labels for targeting, an agent env, tolerations,
// resources and affinity.
func fleetCluster(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1",
		"kind":       "Cluster",
		"metadata": map[string]interface{}{
			"name":      clusterName(i),
			"namespace": clusterNamespace,
			"labels": map[string]interface{}{
				"env":                        []string{"prod", "staging", "dev"}[i%3],
				"region":                     regions[i%len(regions)],
				"site":                       fmt.Sprintf("site-%05d", i),
				"hardware":                   []string{"nuc", "xeon-d", "arm64"}[i%3],
				"fleet.cattle.io/ring":       fmt.Sprint(i % 4),
				"app.example.com/pos-stores": "true",
			},
			"annotations": map[string]interface{}{
				"example.com/owner":    "retail-platform",
				"example.com/location": fmt.Sprintf("store %d, %s", i, regions[i%len(regions)]),
			},
		},
		"spec": map[string]interface{}{
			"kubeConfigSecret": clusterName(i) + "-kubeconfig",
			"agentNamespace":   "cattle-fleet-system",
			"agentEnvVars":     userEnv(i),
			"agentTolerations": []interface{}{
				map[string]interface{}{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
				map[string]interface{}{"key": "node-role.kubernetes.io/etcd", "operator": "Exists", "effect": "NoExecute"},
				map[string]interface{}{"key": "cattle.io/os", "operator": "Equal", "value": "linux", "effect": "NoSchedule"},
			},
			"agentResources": map[string]interface{}{
				"limits":   map[string]interface{}{"cpu": "500m", "memory": "512Mi"},
				"requests": map[string]interface{}{"cpu": "50m", "memory": "128Mi"},
			},
			"agentAffinity": map[string]interface{}{
				"nodeAffinity": map[string]interface{}{
					"preferredDuringSchedulingIgnoredDuringExecution": []interface{}{
						map[string]interface{}{"weight": int64(1), "preference": map[string]interface{}{
							"matchExpressions": []interface{}{map[string]interface{}{"key": "fleet.cattle.io/agent", "operator": "In", "values": []interface{}{"true"}}},
						}},
					},
				},
			},
		},
	}}
}

// fleetStatus is the status Fleet's controllers keep on a ready cluster.
func fleetStatus(i int) map[string]interface{} {
	cond := func(t string) interface{} {
		return map[string]interface{}{"type": t, "status": "True", "lastUpdateTime": "2025-01-15T10:00:00Z"}
	}
	return map[string]interface{}{
		"namespace":               fmt.Sprintf("cluster-fleet-default-%s-%08x", clusterName(i), uint32(i)*2654435761),
		"agentDeployedGeneration": int64(1),
		"agentMigrated":           true,
		"agentNamespaceMigrated":  true,
		"cattleNamespaceMigrated": true,
		"agentEnvVarsHash":        fmt.Sprintf("%064x", i),
		"agentTolerationsHash":    fmt.Sprintf("%064x", i+1),
		"agentResourcesHash":      fmt.Sprintf("%064x", i+2),
		"agentAffinityHash":       fmt.Sprintf("%064x", i+3),
		"apiServerURL":            fmt.Sprintf("https://10.%d.%d.1:6443", (i/256)%256, i%256),
		"apiServerCAHash":         fmt.Sprintf("%064x", i+4),
		"desiredReadyGitRepos":    int64(3),
		"readyGitRepos":           int64(3),
		"agent": map[string]interface{}{
			"lastSeen":  "2025-01-15T10:00:00Z",
			"namespace": "cattle-fleet-system",
		},
		"display": map[string]interface{}{
			"readyBundles": "12/12",
			"readyNodes":   "3/3",
			"sampleNode":   "node-1",
			"state":        "",
		},
		"summary": map[string]interface{}{"desiredReady": int64(12), "ready": int64(12)},
		"resourceCounts": map[string]interface{}{
			"desiredReady": int64(45), "ready": int64(45), "missing": int64(0), "modified": int64(0),
			"notReady": int64(0), "orphaned": int64(0), "unknown": int64(0), "waitApplied": int64(0),
		},
		"conditions": []interface{}{cond("Processed"), cond("Imported"), cond("Ready"), cond("Reconciled")},
	}
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					errc <- fmt.Errorf("%s: %w", clusterName(i), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	return ctx.Err()
}
