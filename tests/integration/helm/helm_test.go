// Package helm_test installs and upgrades the chart with the real helm v3
// and helm v4 CLIs (tools/helm, tools/helm-v4) on a real kube-apiserver:
// helm v4 is what Rancher v2.15 installs and upgrades apps with, so an
// app a Rancher before v2.15 installed with helm v3 is upgraded by helm v4
// after Rancher's own upgrade. Each upgrade is counted in rollouts: an
// upgrade that changes nothing must leave the Deployment's generation
// where it was.
package helm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/tests/helmchart"
	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp    *framework.ControlPlane
	helms = map[int]string{}
)

func TestMain(m *testing.M) {
	for _, major := range helmchart.Majors {
		p, err := helmchart.PathOf(major)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		helms[major] = p
	}
	os.Exit(framework.Main(m, &cp, framework.Options{}))
}

// release is one install of the chart, with the namespaces its Roles
// live in (values fleetNamespace and rancherNamespace).
type release struct {
	kc, ns string
	values []string
}

func newRelease(t *testing.T) *release {
	t.Helper()
	kc, err := cp.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &release{kc: kc, ns: cp.Namespace(t)}
	for _, v := range []string{"fleetNamespace", "rancherNamespace"} {
		ns := cp.Namespace(t)
		r.values = append(r.values, "--set", v+"="+ns)
	}
	return r
}

// helm runs helm v<major> on the release "leasetune" and returns its
// output, failing t on an error.
func (r *release) helm(t *testing.T, major int, args ...string) string {
	t.Helper()
	full := append([]string{"--kubeconfig", r.kc, "--namespace", r.ns}, args...)
	cmd := exec.Command(helms[major], full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm v%d %s: %v\n%s", major, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func (r *release) install(t *testing.T, major int, set ...string) {
	t.Helper()
	r.helm(t, major, append(append([]string{"install", "leasetune", helmchart.Chart(t)}, r.values...), set...)...)
	t.Cleanup(func() {
		cmd := exec.Command(helms[major], "--kubeconfig", r.kc, "--namespace", r.ns, "uninstall", "leasetune")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("helm uninstall: %v\n%s", err, out)
		}
	})
}

func (r *release) upgrade(t *testing.T, major int, set ...string) {
	t.Helper()
	r.helm(t, major, append(append([]string{"upgrade", "leasetune", helmchart.Chart(t)}, r.values...), set...)...)
}

// generation is the Deployment's metadata.generation: it moves when the
// pod template (or replicas) changes, that is on a rollout.
func (r *release) generation(t *testing.T) int64 {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(r.ns).Get(context.Background(), "leasetune", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Generation
}

func (r *release) settle(t *testing.T) string {
	t.Helper()
	d, err := cp.Client.AppsV1().Deployments(r.ns).Get(context.Background(), "leasetune", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--settle="); ok {
				return v
			}
		}
	}
	return ""
}

// objects checks that what helm says it installed is in the apiserver.
func (r *release) objects(t *testing.T, major int) {
	t.Helper()
	docs, err := helmchart.Split([]byte(r.helm(t, major, "get", "manifest", "leasetune")))
	if err != nil {
		t.Fatal(err)
	}
	objs := helmchart.Objects(t, docs)
	if len(objs) < 10 {
		t.Fatalf("helm v%d get manifest: %d objects", major, len(objs))
	}
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o.Kind {
		case "ClusterRole":
			_, err = cp.Client.RbacV1().ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{})
		case "ServiceAccount":
			_, err = cp.Client.CoreV1().ServiceAccounts(r.ns).Get(ctx, o.Name, metav1.GetOptions{})
		case "Service":
			_, err = cp.Client.CoreV1().Services(r.ns).Get(ctx, o.Name, metav1.GetOptions{})
		case "ValidatingWebhookConfiguration":
			_, err = cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, o.Name, metav1.GetOptions{})
		default:
			continue
		}
		if err != nil {
			t.Errorf("helm v%d installed %s/%s, the apiserver: %v", major, o.Kind, o.Name, err)
		}
	}
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the release's namespace is gone")
	}
}

// The chart's cluster-scoped objects have fixed names: the cases run one
// after the other, each uninstalling its release when it ends.
func TestInstallAndUpgrade(t *testing.T) {
	type step struct {
		major int
		set   []string
		// rollout: the upgrade changes the pod template.
		rollout bool
		settle  string
	}
	cases := []struct {
		name    string
		install int
		steps   []step
	}{
		{"helm v3", 3, []step{{3, nil, false, "10s"}, {3, []string{"--set", "settle=20s"}, true, "20s"}, {3, []string{"--set", "settle=20s"}, false, "20s"}}},
		{"helm v4", 4, []step{{4, nil, false, "10s"}, {4, []string{"--set", "settle=20s"}, true, "20s"}, {4, []string{"--set", "settle=20s"}, false, "20s"}}},
		// Rancher v2.15 upgrading an app an earlier Rancher installed.
		{"installed by helm v3, upgraded by helm v4", 3, []step{{4, nil, false, "10s"}, {4, []string{"--set", "settle=20s"}, true, "20s"}, {4, []string{"--set", "settle=20s"}, false, "20s"}, {3, []string{"--set", "settle=20s"}, false, "20s"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRelease(t)
			r.install(t, c.install)
			r.objects(t, c.install)
			gen := r.generation(t)
			if gen != 1 {
				t.Fatalf("generation after install %d, want 1", gen)
			}
			rollouts := 0
			for i, s := range c.steps {
				r.upgrade(t, s.major, s.set...)
				r.objects(t, s.major)
				g := r.generation(t)
				if g != gen {
					rollouts++
				}
				if (g != gen) != s.rollout {
					t.Fatalf("upgrade %d (helm v%d %v): generation %d → %d, want a rollout: %v", i+1, s.major, s.set, gen, g, s.rollout)
				}
				if got := r.settle(t); got != s.settle {
					t.Fatalf("upgrade %d (helm v%d %v): --settle=%s, want %s", i+1, s.major, s.set, got, s.settle)
				}
				gen = g
			}
			if rollouts != 1 {
				t.Fatalf("%d rollouts, want the one value change's", rollouts)
			}
		})
	}
}
