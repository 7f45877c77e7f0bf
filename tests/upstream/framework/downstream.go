package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	itfw "leasetune.io/leasetune/tests/integration/framework"
)

// UpgradePlans are system-upgrade-controller's Plans, which Rancher
// v2.15.0 applies in an imported RKE2/K3s cluster with day-2 operations
// (pkg/controllers/management/systemagent/controller.go:99 upgradePlanGVR).
var UpgradePlans = schema.GroupVersionResource{Group: "upgrade.cattle.io", Version: "v1", Resource: "plans"}

// Downstream is a second real kube-apiserver and etcd: the cluster an
// imported cluster's agent runs in. Its kube-apiserver reports RKE2's
// version (scripts/controlplane.sh LEASETUNE_KUBE_FLAVOUR=rke2), which
// Rancher's provider detection takes for RKE2. It has no kubelet: nothing
// runs there, the objects are what is measured.
type Downstream struct {
	CP *itfw.ControlPlane
	// Kubeconfig is an admin kubeconfig file of it.
	Kubeconfig string
	kubectl    string
}

// StartDownstream starts it for Kubernetes kube (LEASETUNE_KUBE) and
// flavour (LEASETUNE_KUBE_FLAVOUR: rke2), in dir; make test-upstream builds
// the binaries beforehand (the network namespace reaches no module proxy).
// It installs the CRD of system-upgrade-controller's Plan (what its chart
// brings; UpgradePlanCRD).
func StartDownstream(kube, flavour, dir string) (*Downstream, error) {
	assets, err := itfw.AssetsOf(kube, flavour)
	if err != nil {
		return nil, err
	}
	cp, err := itfw.Start(itfw.Options{Assets: assets})
	if err != nil {
		return nil, err
	}
	d := &Downstream{CP: cp, kubectl: filepath.Join(assets, "kubectl")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.Stop()
		return nil, err
	}
	if d.Kubeconfig, err = cp.Kubeconfig(dir); err != nil {
		d.Stop()
		return nil, err
	}
	ext, err := apiextclient.NewForConfig(cp.Config)
	if err == nil {
		_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), UpgradePlanCRD(), metav1.CreateOptions{})
	}
	if err == nil {
		err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := cp.Dynamic.Resource(UpgradePlans).Namespace("default").List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
	}
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("downstream: the Plan CRD: %w", err)
	}
	return d, nil
}

// UpgradePlanCRD is a double of system-upgrade-controller's Plan CRD:
// its group, version, kind and names (rancher/system-upgrade-controller
// pkg/apis/upgrade.cattle.io/v1 types.go: Plan, namespaced, a status
// subresource), with a schema that keeps every field.
func UpgradePlanCRD() *apiextv1.CustomResourceDefinition {
	keep := true
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "plans.upgrade.cattle.io"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "upgrade.cattle.io",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "plans", Singular: "plan", Kind: "Plan", ListKind: "PlanList"},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema:       &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &keep}},
				Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// ApplyImportManifest does what the import command Rancher shows does:
// fetch the manifest at manifestURL (the ClusterRegistrationToken's
// status.manifestUrl; Rancher's self-signed certificate taken as the
// dashboard's insecureCommand, curl --insecure, takes it) and kubectl apply it in the downstream. It returns the
// registration token and server URL of the cattle-credentials Secret it
// holds (rancher/rancher v2.15.0 pkg/systemtemplate/template.go: url,
// token; the agent reads them from /cattle-credentials,
// pkg/agent/cluster/cluster.go TokenAndURL).
func (d *Downstream) ApplyImportManifest(ctx context.Context, manifestURL string) (token, server string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, manifestURL, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := insecureClient(time.Minute).Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("GET %s: %s", manifestURL, resp.Status)
	}
	cmd := exec.CommandContext(ctx, d.kubectl, "--kubeconfig", d.Kubeconfig, "apply", "-f", "-")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("kubectl apply of the import manifest: %w: %s", err, out)
	}
	secrets, err := d.CP.Client.CoreV1().Secrets("cattle-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", "", err
	}
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, "cattle-credentials-") {
			return string(s.Data["token"]), string(s.Data["url"]), nil
		}
	}
	return "", "", fmt.Errorf("the import manifest made no cattle-credentials Secret in cattle-system")
}

// AgentParams are what the agent tells Rancher (TunnelParams): the
// kube-apiserver's address and CA, and a token of the ServiceAccount
// cattle-system/cattle the import manifest binds to cattle-admin. The
// agent takes the token of a Secret the token controller fills
// (pkg/agent/cluster/cluster.go getTokenFromAPI); no controller manager
// runs here, so it is a TokenRequest's.
func (d *Downstream) AgentParams(ctx context.Context) (TunnelParams, error) {
	tr, err := d.CP.Client.CoreV1().ServiceAccounts("cattle-system").CreateToken(ctx, "cattle",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: int64ptr(24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return TunnelParams{}, fmt.Errorf("a token of cattle-system/cattle: %w", err)
	}
	addr, err := HostPort(d.CP.Config.Host)
	if err != nil {
		return TunnelParams{}, err
	}
	return TunnelParams{Address: addr, Token: tr.Status.Token, CA: d.CP.Config.CAData}, nil
}

// PlanEnv is the env of the upgrade container of the Plan ns/name
// (spec.upgrade.envs: Rancher's digest annotation on the Plan names it),
// and whether the Plan exists.
func (d *Downstream) PlanEnv(ctx context.Context, ns, name string) ([]string, bool, error) {
	u, err := d.CP.Dynamic.Resource(UpgradePlans).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	env, _, _ := unstructured.NestedSlice(u.Object, "spec", "upgrade", "envs")
	var out []string
	for _, e := range env {
		m, _ := e.(map[string]interface{})
		n, _ := m["name"].(string)
		v, _ := m["value"].(string)
		out = append(out, n+"="+v)
	}
	return out, true, nil
}

// WriteSteveAggregation writes the Secret cattle-system/stv-aggregation
// with the keys the agent writes once connected, its CA checksum and
// ca.crt left out (Rancher's own self-signed CA here) (rancher/rancher v2.15.0
// pkg/agent/rancher/rancher.go setupSteveAggregation: CATTLE_SERVER,
// CATTLE_TOKEN, CATTLE_CA_CHECKSUM, url, token, CATTLE_CACERTS_VALID: pkg/controllers/managementuser/cavalidator); the
// system-agent-upgrader Plan takes its env from it (envFrom).
func (d *Downstream) WriteSteveAggregation(ctx context.Context, server, token string) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-system", Name: "stv-aggregation"}, Data: map[string][]byte{
		"CATTLE_SERVER": []byte(server), "CATTLE_TOKEN": []byte(token), "CATTLE_CA_CHECKSUM": nil,
		"url": []byte(server + "/v3/connect"), "token": []byte("stv-cluster-" + token), "CATTLE_CACERTS_VALID": []byte("false"),
	}}
	_, err := d.CP.Client.CoreV1().Secrets("cattle-system").Create(ctx, s, metav1.CreateOptions{})
	return err
}

// Stop stops the control plane.
func (d *Downstream) Stop() {
	if d.CP != nil {
		_ = d.CP.Stop()
	}
}
