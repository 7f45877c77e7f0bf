package rancher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AppliedPlanHashAnnotation is where Rancher records the hash of the
// system-agent upgrade objects it applied to an imported cluster
// (rancher/rancher v2.15.0 pkg/controllers/management/systemagent/
// controller.go:53, AppliedSystemAgentUpgraderHashAnnotation).
const AppliedPlanHashAnnotation = "management.cattle.io/applied-system-agent-upgrader-hash"

// day2Ops is the handler's scope and switch, written from v2.15.0
// systemagent/controller.go: shouldInstall :155-183 (not "local", not
// provisioning.cattle.io/administrated=true, status.driver k3s or rke2 or
// the label provider.cattle.io rke2 or k3s) and OperationsEnabledForCluster
// :72-91 (the annotation rancher.io/operations-enabled "true" or "false",
// else the setting imported-cluster-day2-ops-enabled, default "true":
// the double takes the default). The feature imported-day-2-ops is on by
// default (pkg/features/feature.go:201-205); the double takes it on.
func day2Ops(mgmt *unstructured.Unstructured) bool {
	if mgmt.GetName() == "local" || mgmt.GetAnnotations()["provisioning.cattle.io/administrated"] == "true" {
		return false
	}
	driver, _, _ := unstructured.NestedString(mgmt.Object, "status", "driver")
	provider := mgmt.GetLabels()["provider.cattle.io"]
	if driver != "k3s" && driver != "rke2" && provider != "rke2" && provider != "k3s" {
		return false
	}
	switch mgmt.GetAnnotations()["rancher.io/operations-enabled"] {
	case "true":
		return true
	case "false":
		return false
	}
	return true
}

// planEnv is v2.15.0 systemagent/controller.go planEnv :1196-1230 with
// installPlanEnv :1168-1179 (UNINSTALL=false first): every
// spec.agentEnvVars entry but CATTLE_ROLE_NONE (name and value only),
// STRICT_VERIFY unless the user set it (the agent-tls-mode setting's
// default, system-store: "false"), then CATTLE_ROLE_NONE=true.
func planEnv(mgmt *unstructured.Unstructured) []corev1.EnvVar {
	env := []corev1.EnvVar{{Name: "UNINSTALL", Value: "false"}}
	strict := false
	raw, _, _ := unstructured.NestedSlice(mgmt.Object, "spec", "agentEnvVars")
	for _, r := range raw {
		m, _ := r.(map[string]interface{})
		name, _ := m["name"].(string)
		value, _ := m["value"].(string)
		if name == "CATTLE_ROLE_NONE" || name == "UNINSTALL" || name == "SYSTEM_AGENT_UPGRADER_RUN_ID" {
			continue
		}
		strict = strict || name == "STRICT_VERIFY"
		env = append(env, corev1.EnvVar{Name: name, Value: value})
	}
	if !strict {
		env = append(env, corev1.EnvVar{Name: "STRICT_VERIFY", Value: "false"})
	}
	return append(env, corev1.EnvVar{Name: "CATTLE_ROLE_NONE", Value: "true"})
}

// importedSystemAgent is reconcileImportedInstall (v2.15.0
// systemagent/controller.go:258-373) as far as a change of the Plans
// goes: the hash of what it would apply (:301-311; the double hashes the
// Plans' env, the only input tests change) against the annotation
// (:313-322); when they differ it applies the Plans to the downstream
// cluster (:330-345) — which the system-upgrade-controller there runs
// as a job on every node: counted as one plan run of the cluster — and
// stores the hash with an Update of the management Cluster (:354-370).
// It returns whether it wrote.
func (d *Double) importedSystemAgent(ctx context.Context, mgmt *unstructured.Unstructured) (bool, error) {
	if !d.version.importedSystemAgentPlans() || !day2Ops(mgmt) {
		return false, nil
	}
	b, _ := json.Marshal(planEnv(mgmt))
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	if mgmt.GetAnnotations()[AppliedPlanHashAnnotation] == hash {
		return false, nil
	}
	// The system-upgrade-controller runs a Plan's job again only when the
	// Plan changed: applying the same Plans again (after a failed Update
	// of the annotation) runs nothing.
	d.mu.Lock()
	if d.planApplied[mgmt.GetName()] != hash {
		d.planApplied[mgmt.GetName()] = hash
		d.planRuns[mgmt.GetName()]++
	}
	d.mu.Unlock()
	u := mgmt.DeepCopy()
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AppliedPlanHashAnnotation] = hash
	u.SetAnnotations(ann)
	d.count(ManagementClusters, "", u.GetName())
	_, err := d.dyn.Resource(ManagementClusters).Update(ctx, u, metav1.UpdateOptions{})
	return true, err
}

// PlanRuns is how many times the double applied changed system-agent
// Plans to the imported cluster of management Cluster name (the first
// apply, at import, included): each is a job on every node of it.
func (d *Double) PlanRuns(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.planRuns[name]
}
