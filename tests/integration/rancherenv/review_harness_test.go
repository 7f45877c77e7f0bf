package rancherenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	management "leasetune.io/leasetune/pkg/generated/controllers/management.cattle.io"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// envOptions are what newEnvWith changes of newEnv.
type envOptions struct {
	settle time.Duration
	env    map[string]string // leasetune's pod env (CATTLE_RANCHER_LEADER_ELECTION_*)
}

// newEnvWith is newEnv with a settle time and env overrides.
func newEnvWith(t *testing.T, o envOptions, values ...string) *env {
	t.Helper()
	e := &env{ns: cp.Namespace(t), stateNS: cp.Namespace(t), kc: kubeconfig(t)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.deployCtl = startDeploymentController(t, ctx, e.ns)
	helm(t, e.kc, e.ns, append([]string{"install", "rancher", chartDir(t)}, values...)...)
	framework.Eventually(t, "the Deployment rolled out", func() bool {
		ok, _ := rancherenv.Settled(e.get(t))
		return ok
	})
	mf, err := management.NewFactoryFromConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range settings.Of(settings.Rancher) {
		if s, err := mf.Management().V3().Setting().Get(d.Name, metav1.GetOptions{}); err == nil && s.Value != "" {
			body, _ := json.Marshal(map[string]string{"value": ""})
			_, _ = mf.Management().V3().Setting().Patch(d.Name, types.MergePatchType, body)
		}
	}
	e.mf = mf
	e.provider = settings.NewProvider(settings.ProviderOptions{
		Settings: mf.Management().V3().Setting(), ConfigMaps: cp.Client.CoreV1(), Namespace: e.stateNS,
		LookupEnv: func(k string) (string, bool) { v, ok := o.env[k]; return v, ok },
		Log:       quietLog(), Settle: o.settle,
	})
	if err := e.provider.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mf.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return e
}

// patchAs patches the Rancher Deployment as another field manager would.
func (e *env) patchAs(t *testing.T, manager string, pt types.PatchType, body string) {
	t.Helper()
	if _, err := cp.Client.AppsV1().Deployments(e.ns).Patch(context.Background(), "rancher", pt, []byte(body),
		metav1.PatchOptions{FieldManager: manager}); err != nil {
		t.Fatalf("patch as %s: %v", manager, err)
	}
}

// duplicates returns the env names of the rancher container that occur
// more than once.
func duplicates(d *appsv1.Deployment) []string {
	seen := map[string]int{}
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "rancher" {
			continue
		}
		for _, e := range c.Env {
			if seen[e.Name]++; seen[e.Name] == 2 {
				out = append(out, e.Name)
			}
		}
	}
	return out
}

// settled reports whether the Rancher Deployment is settled now.
func (e *env) settled(t *testing.T) bool {
	ok, _ := rancherenv.Settled(e.get(t))
	return ok
}

// helmErr is helm for hooks, which run off the test goroutine: it returns
// the failure instead of failing the test.
func helmErr(kc, ns string, args ...string) error {
	full := append([]string{"--kubeconfig", kc, "--namespace", ns}, args...)
	cmd := exec.Command(helmBin, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// patchErr is patchAs for hooks.
func (e *env) patchErr(manager string, pt types.PatchType, body string) error {
	_, err := cp.Client.AppsV1().Deployments(e.ns).Patch(context.Background(), "rancher", pt, []byte(body),
		metav1.PatchOptions{FieldManager: manager})
	return err
}

// plan computes `leasetune plan` against the test's namespaces.
func (e *env) plan(t *testing.T, set ...plan.Assignment) *plan.Report {
	t.Helper()
	r, err := plan.Compute(context.Background(), cp.Client, dynamic.NewForConfigOrDie(cp.Config), plan.Options{
		Namespace: e.stateNS, FleetNamespace: cp.Namespace(t), RancherNamespace: e.ns, RancherDeployment: "rancher", Set: set})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
