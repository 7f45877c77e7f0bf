package rancher

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names Rancher uses (rancher/rancher v2.10.3).
const (
	// pkg/capr/common.go: SystemAgentDataDirEnvVar.
	SystemAgentDataDirEnvVar = "CATTLE_AGENT_VAR_DIR"
	// pkg/controllers/provisioningv2/cluster/controller.go: administratedAnn.
	AdministratedAnnotation = "provisioning.cattle.io/administrated"
	// pkg/controllers/provisioningv2/cluster/controller.go: mgmtClusterNameAnn.
	ManagementClusterNameAnnotation = "provisioning.cattle.io/management-cluster-name"
	// v2.11.0+ pkg/controllers/provisioningv2/cluster/controller.go: mgmtClusterDisplayNameAnn.
	ManagementClusterDisplayNameAnnotation = "provisioning.cattle.io/management-cluster-display-name"
	// pkg/controllers/provisioningv2/fleetcluster/fleetcluster.go: createCluster.
	ClusterNameLabel        = "management.cattle.io/cluster-name"
	ClusterDisplayNameLabel = "management.cattle.io/cluster-display-name"
	// pkg/fleet: ClustersLocalNamespace.
	FleetLocalNamespace = "fleet-local"
)

// mgmtNameRegexp: rancher/rancher v2.8.5, v2.10.3, v2.11.3
// pkg/controllers/provisioningv2/cluster/controller.go.
var mgmtNameRegexp = regexp.MustCompile("^(c-[a-z0-9]{5}|local)$")

// IsLegacy reports whether a cluster name is a legacy management name
// (c-xxxxx or local), whose management Cluster is the source.
//
// rancher/rancher v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go: isLegacyCluster.
func IsLegacy(name string) bool { return mgmtNameRegexp.MatchString(name) }

// newManagementName returns c-m-<8 random characters>.
//
// rancher/rancher v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go:
// mgmtClusterName (randomtoken.Generate()[:8], name.SafeConcatName("c", "m", ...));
// the characters are rancher/wrangler v3.1.0 pkg/randomtoken/token.go's.
func newManagementName() (string, error) {
	const characters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 8)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(characters))))
		if err != nil {
			return "", err
		}
		b[i] = characters[n.Int64()]
	}
	return "c-m-" + string(b), nil
}

func stringMap(m map[string]string) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// setMeta adds labels/annotations to a desired object's metadata, leaving
// the key out when empty (metav1.ObjectMeta's omitempty, as wrangler's
// serialisation of Rancher's typed objects).
func setMeta(md map[string]interface{}, key string, m map[string]string) {
	delete(m, AppliedAnnotation)
	if len(m) > 0 {
		md[key] = stringMap(m)
	}
}

func hasRKEConfig(prov *unstructured.Unstructured) bool {
	v, ok, _ := unstructured.NestedFieldNoCopy(prov.Object, "spec", "rkeConfig")
	return ok && v != nil
}

func (d *Double) syncProv(ctx context.Context, namespace, name string) error {
	prov := d.get(d.prov, namespace, name)
	if prov == nil || prov.GetDeletionTimestamp() != nil {
		return nil
	}
	prov, err := d.clusterCreate(ctx, prov)
	if err != nil {
		return err
	}
	return d.fleetCluster(ctx, prov)
}

func (d *Double) syncMgmt(ctx context.Context, name string) error {
	mgmt := d.get(d.mgmt, "", name)
	if mgmt == nil || mgmt.GetDeletionTimestamp() != nil {
		return nil
	}
	if wrote, err := d.assignWorkspace(ctx, mgmt); err != nil || wrote {
		return err // the write brings the object back through the queue
	}
	if wrote, err := d.importedSystemAgent(ctx, mgmt); err != nil || wrote {
		return err
	}
	return d.legacyProvisioningCluster(ctx, mgmt)
}

// setClusterName writes status.clusterName through the status subresource
// (the provisioning CRD has one).
//
// rancher/rancher v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go:
// updateStatus (status.ClusterName = rCluster.Name), stored by the generated
// clusterStatusHandler.sync (pkg/generated/controllers/provisioning.cattle.io/v1/cluster.go,
// UpdateStatus). Rancher applies the management Cluster first and then stores
// the status (an orphan of a failed status write is pruned by apply's set
// ID); the double stores the name first, so it never leaves an orphan.
func (d *Double) setClusterName(ctx context.Context, prov *unstructured.Unstructured, mgmtName string) (*unstructured.Unstructured, error) {
	patch, _ := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"clusterName": mgmtName}})
	d.count(ProvisioningClusters, prov.GetNamespace(), prov.GetName())
	return d.dyn.Resource(ProvisioningClusters).Namespace(prov.GetNamespace()).
		Patch(ctx, prov.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
}

// clusterCreate is the "cluster-create" generating handler: provisioning →
// management.
//
// rancher/rancher v2.8.5, v2.10.3, v2.11.3 pkg/controllers/provisioningv2/cluster/controller.go:
// generateLegacyClusterFromProvisioningCluster → createCluster.
func (d *Double) clusterCreate(ctx context.Context, prov *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	statusName, _, _ := unstructured.NestedString(prov.Object, "status", "clusterName")

	if IsLegacy(prov.GetName()) {
		// createCluster, legacy branch: the management Cluster of the same
		// name must exist; updateStatus stores its name.
		if d.get(d.mgmt, "", prov.GetName()) == nil {
			return nil, fmt.Errorf("management cluster %s not found", prov.GetName())
		}
		if statusName == prov.GetName() {
			return prov, nil
		}
		return d.setClusterName(ctx, prov, prov.GetName())
	}

	var current *unstructured.Unstructured
	if statusName != "" {
		current = d.get(d.mgmt, "", statusName)
	}
	var desired map[string]interface{}
	if d.version.importedMgmtIsSource() && !hasRKEConfig(prov) && current != nil {
		desired = importedDesired(current)
	} else {
		name := statusName
		if name == "" {
			if n := prov.GetAnnotations()[ManagementClusterNameAnnotation]; n != "" {
				name = n
			} else {
				var err error
				if name, err = newManagementName(); err != nil {
					return nil, err
				}
			}
			updated, err := d.setClusterName(ctx, prov, name)
			if err != nil {
				return nil, err
			}
			prov = updated
			current = d.get(d.mgmt, "", name)
		}
		desired = d.newClusterDesired(prov, name)
	}
	return prov, d.apply(ctx, ManagementClusters, current, desired)
}

// newClusterDesired is the management Cluster createNewCluster generates,
// reduced to the fields the double handles.
//
// rancher/rancher v2.8.5, v2.10.3 pkg/controllers/provisioningv2/cluster/controller.go: createNewCluster.
func (d *Double) newClusterDesired(prov *unstructured.Unstructured, name string) map[string]interface{} {
	rke := hasRKEConfig(prov)
	// spec.AgentEnvVars: name and value only, in order.
	var env []interface{}
	list, _, _ := unstructured.NestedSlice(prov.Object, "spec", "agentEnvVars")
	for _, e := range list {
		m, _ := e.(map[string]interface{})
		item := map[string]interface{}{"name": m["name"]}
		if v, _ := m["value"].(string); v != "" {
			item["value"] = v
		}
		env = append(env, item)
	}
	// v2.9.1+: with rkeConfig, the system-agent data dir is appended.
	if rke && d.version.systemAgentDataDir() {
		if dir, _, _ := unstructured.NestedString(prov.Object, "spec", "rkeConfig", "dataDirectories", "systemAgent"); dir != "" {
			env = append(env, map[string]interface{}{"name": SystemAgentDataDirEnvVar, "value": dir})
		}
	}
	// Annotations: administratedAnn, then every annotation of the
	// provisioning Cluster. Labels: the provisioning Cluster's.
	ann := map[string]string{AdministratedAnnotation: strconv.FormatBool(rke)}
	for k, v := range prov.GetAnnotations() {
		ann[k] = v
	}
	md := map[string]interface{}{"name": name}
	setMeta(md, "labels", prov.GetLabels())
	setMeta(md, "annotations", ann)
	// spec.DisplayName = cluster.Name; FleetWorkspaceName = the provisioning
	// namespace (the ProvisioningV2FleetWorkspaceBackPopulation feature is
	// off by default, pkg/features/feature.go).
	spec := map[string]interface{}{"displayName": prov.GetName(), "fleetWorkspaceName": prov.GetNamespace()}
	if len(env) > 0 {
		spec["agentEnvVars"] = env
	}
	return map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "metadata": md, "spec": spec}
}

// importedDesired: from v2.11.0 an imported (no rkeConfig) cluster's
// management Cluster, once it exists, is its own desired state.
//
// rancher/rancher v2.11.3 pkg/controllers/provisioningv2/cluster/controller.go:
// createNewCluster → updateImportedCluster.
func importedDesired(mgmt *unstructured.Unstructured) map[string]interface{} {
	md := map[string]interface{}{"name": mgmt.GetName()}
	setMeta(md, "labels", mgmt.GetLabels())
	setMeta(md, "annotations", mgmt.GetAnnotations())
	spec := map[string]interface{}{}
	for _, f := range []string{"displayName", "fleetWorkspaceName", "agentEnvVars"} {
		if v, ok, _ := unstructured.NestedFieldCopy(mgmt.Object, "spec", f); ok {
			spec[f] = v
		}
	}
	return map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "metadata": md, "spec": spec}
}

// fleetCluster is the "fleet-cluster" generating handler: management →
// fleet, keyed by the provisioning Cluster.
//
// rancher/rancher v2.8.5, v2.10.3 pkg/controllers/provisioningv2/fleetcluster/fleetcluster.go: createCluster.
func (d *Double) fleetCluster(ctx context.Context, prov *unstructured.Unstructured) error {
	mgmtName, _, _ := unstructured.NestedString(prov.Object, "status", "clusterName")
	if mgmtName == "" {
		return nil
	}
	mgmt := d.get(d.mgmt, "", mgmtName)
	if mgmt == nil {
		return nil // its creation enqueues this provisioning Cluster (clusterWatch)
	}
	ws, _, _ := unstructured.NestedString(mgmt.Object, "spec", "fleetWorkspaceName")
	if ws == "" {
		return nil
	}
	labels := cleanAnnotations(mgmt.GetLabels())
	labels[ClusterNameLabel] = mgmt.GetName()
	if dn, _, _ := unstructured.NestedString(mgmt.Object, "spec", "displayName"); len(validation.IsValidLabelValue(dn)) == 0 {
		labels[ClusterDisplayNameLabel] = dn
	}
	if internal, _, _ := unstructured.NestedBool(mgmt.Object, "spec", "internal"); internal {
		labels["name"] = "local"
	}
	md := map[string]interface{}{"name": prov.GetName(), "namespace": ws}
	setMeta(md, "labels", labels)
	// v2.9.3+: annotations := yaml.CleanAnnotationsForExport(mgmtCluster.Annotations).
	if d.version.fleetAnnotations() {
		setMeta(md, "annotations", cleanAnnotations(mgmt.GetAnnotations()))
	}
	spec := map[string]interface{}{}
	// AgentEnvVars: mgmtCluster.Spec.AgentEnvVars, whole entries.
	if env, ok, _ := unstructured.NestedFieldCopy(mgmt.Object, "spec", "agentEnvVars"); ok && env != nil {
		if l, _ := env.([]interface{}); len(l) > 0 {
			spec["agentEnvVars"] = env
		}
	}
	desired := map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster", "metadata": md, "spec": spec}
	return d.apply(ctx, FleetClusters, d.get(d.fleet, ws, prov.GetName()), desired)
}

// assignWorkspace gives a management Cluster without a workspace one.
//
// rancher/rancher v2.8.5, v2.10.3 pkg/controllers/provisioningv2/fleetcluster/fleetcluster.go:
// assignWorkspace (fleet-local for spec.internal, else the
// fleet-default-workspace-name setting).
func (d *Double) assignWorkspace(ctx context.Context, mgmt *unstructured.Unstructured) (bool, error) {
	ws, _, _ := unstructured.NestedString(mgmt.Object, "spec", "fleetWorkspaceName")
	if ws != "" {
		return false, nil
	}
	ws = d.opts.FleetDefaultWorkspace
	if internal, _, _ := unstructured.NestedBool(mgmt.Object, "spec", "internal"); internal {
		ws = FleetLocalNamespace
	}
	patch, _ := json.Marshal(map[string]interface{}{"spec": map[string]interface{}{"fleetWorkspaceName": ws}})
	d.count(ManagementClusters, "", mgmt.GetName())
	_, err := d.dyn.Resource(ManagementClusters).Patch(ctx, mgmt.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return true, err
}

// legacyProvisioningCluster is the "provisioning-cluster-create"
// generating handler: a legacy management Cluster → its provisioning
// Cluster (workspace namespace, same name, no env).
//
// rancher/rancher v2.8.5, v2.10.3, v2.11.3 pkg/controllers/provisioningv2/cluster/controller.go:
// generateProvisioningClusterFromLegacyCluster.
func (d *Double) legacyProvisioningCluster(ctx context.Context, mgmt *unstructured.Unstructured) error {
	ws, _, _ := unstructured.NestedString(mgmt.Object, "spec", "fleetWorkspaceName")
	if !IsLegacy(mgmt.GetName()) || ws == "" {
		return nil
	}
	ann := cleanAnnotations(mgmt.GetAnnotations())
	if d.version.legacyDisplayNameAnnotation() {
		dn, _, _ := unstructured.NestedString(mgmt.Object, "spec", "displayName")
		ann[ManagementClusterDisplayNameAnnotation] = dn
	}
	md := map[string]interface{}{"name": mgmt.GetName(), "namespace": ws}
	setMeta(md, "labels", cleanAnnotations(mgmt.GetLabels()))
	setMeta(md, "annotations", ann)
	desired := map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster", "metadata": md, "spec": map[string]interface{}{}}
	return d.apply(ctx, ProvisioningClusters, d.get(d.prov, ws, mgmt.GetName()), desired)
}
