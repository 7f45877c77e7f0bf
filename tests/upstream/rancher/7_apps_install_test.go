//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"leasetune.io/leasetune/tests/helmchart"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// appsGVR is Rancher's App resource (catalog.cattle.io/v1 apps).
var appsGVR = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "apps"}

// appsInstallResult is what ui/test/browser/apps-install.js saw.
type appsInstallResult struct {
	Steps         []string          `json:"steps"`
	InstallButton string            `json:"installButton"`
	WizardText    string            `json:"wizardText"`
	Before        map[string]string `json:"before"`
	After         map[string]string `json:"after"`
	YAML          string            `json:"yaml"`
	AfterURL      string            `json:"afterURL"`
	browserSession
}

// previousVersion is the chart version just below v for the case's
// "previous release": the patch before it, or .99 of the minor before.
func previousVersion(t *testing.T, v string) string {
	t.Helper()
	sv, err := semver.NewVersion(v)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case sv.Patch() > 0:
		return fmt.Sprintf("%d.%d.%d", sv.Major(), sv.Minor(), sv.Patch()-1)
	case sv.Minor() > 0:
		return fmt.Sprintf("%d.%d.99", sv.Major(), sv.Minor()-1)
	}
	return fmt.Sprintf("%d.99.99", sv.Major()-1)
}

// releaseInfo is `helm status` of leasetune's release: its chart version
// and status, or ok false when there is none.
func releaseInfo(t *testing.T) (version, status string, ok bool) {
	t.Helper()
	out, err := in.Helm.Run("list", "--namespace", framework.LeasetuneNamespace, "--filter", "^leasetune$", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct{ Name, Chart, Status string }
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("helm list: %v: %s", err, out)
	}
	if len(rs) == 0 {
		return "", "", false
	}
	return strings.TrimPrefix(rs[0].Chart, "leasetune-"), rs[0].Status, true
}

// Test11AppsInstallAndUpgrade is case 11: leasetune installed and upgraded
// from Rancher's Apps pages, as an operator does, with Rancher's own helm
// operations. The chart is served at two versions from a ClusterRepo (the
// repository's chart, and the same chart as the version before it). The
// suite's release is uninstalled through Rancher's API (the App's
// uninstall action; a double of the garbage collector removes the App
// with the release), installed again at the previous version from the
// install form (the questions answered as the suite's values are, the
// replicas set in the form's YAML), then upgraded from the chart's page to
// the current version, the form keeping every answer. Rancher runs each as
// a helm operation Pod (rancher/rancher v2.15.0 pkg/catalogv2/helmop),
// which the helm operation double runs with helm v4, what Rancher v2.15's
// shell image runs (rancher/shell v0.8.1; operation.go renderArgs passes
// v4's --rollback-on-failure and --force-replace), as the user who asked
// (steve's podimpersonation). The release ends as the
// suite had it (with the operator's settle), and nothing of Fleet or
// Rancher restarts.
func Test11AppsInstallAndUpgrade(t *testing.T) {
	framework.Need(t, in)
	if !in.RancherAtLeast("2.15.0") {
		// Before v2.15 the shell image's helm v3 waits (the form's default)
		// for the Deployment's new ReplicaSet (helm v3 pkg/kube/ready.go
		// deploymentReady), which the Kubelet double does not make.
		t.Skipf("Rancher %s installs apps with helm v3, whose --wait needs ReplicaSets the Kubelet double does not make; the case runs beside Rancher v2.15+ (helm v4)", in.RancherVersion())
	}
	ctx := context.Background()
	helm, err := helmchart.PathOf(4)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := framework.StartHelmOperations(in.CP.Config, framework.RancherNamespace, helm, filepath.Join(in.Dir, "helm-operations"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ops.Stop)
	// Rancher's Apps are owned by their release's Secret (rancher/rancher
	// v2.15.0 pkg/controllers/dashboard/helm/apps.go: apply with
	// WithSetOwnerReference): the garbage collector deletes one once the
	// release is uninstalled.
	gc, err := framework.StartGarbageCollector(in.CP.Config, time.Second, appsGVR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gc.Stop()
		t.Logf("garbage collector double: deleted %v", gc.Deleted())
		for _, e := range gc.Errors() {
			t.Errorf("garbage collector double: %s", e)
		}
	})
	logRuns := func() {
		for _, r := range ops.Runs() {
			t.Logf("helm operation %s as %s %v: exit %d\n%s", r.Pod, r.User, r.Groups, r.ExitCode, r.Output)
		}
		for _, e := range ops.Errors() {
			t.Errorf("helm operation double: %s", e)
		}
	}
	t.Cleanup(logRuns)
	t.Cleanup(func() {
		t.Logf("Rancher answered the admin's token 401 %d time(s) (logged in again)", in.Admin.Relogins)
	})

	// The repository: the chart at its version and at the one before.
	var chart struct{ Name, Version string }
	chartFile(t, "Chart.yaml", &chart)
	previous := previousVersion(t, chart.Version)
	const repoName = "leasetune-install-charts"
	reposPath := chartRepo(t, repoName, previous, chart.Version)
	chartDir, err := framework.LeasetuneChart()
	if err != nil {
		t.Fatal(err)
	}
	framework.Within(t, 3*time.Minute, "Rancher lists both versions", func() bool {
		var ix struct {
			Entries map[string][]struct{ Version string }
		}
		code, body, err := in.Admin.Do(ctx, http.MethodGet, reposPath+"?link=index", nil)
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &ix) != nil {
			return false
		}
		return len(ix.Entries[chart.Name]) == 2
	})

	suiteValues := releaseValues(t)
	// Whatever fails below, the installation ends with leasetune installed
	// (the suite's values), for any case after this one.
	t.Cleanup(func() {
		if _, _, ok := releaseInfo(t); ok {
			return
		}
		b, err := yaml.Marshal(suiteValues)
		if err != nil {
			t.Error(err)
			return
		}
		values := filepath.Join(t.TempDir(), "suite-values.yaml")
		if err := os.WriteFile(values, b, 0o644); err != nil {
			t.Error(err)
			return
		}
		if err := in.Helm.Install("leasetune", chartDir, framework.LeasetuneNamespace, false, []string{values}); err != nil {
			t.Errorf("leasetune installed again after the case: %v", err)
			return
		}
		if err := in.Kubelet.WaitRunning(context.Background(), framework.LeasetuneNamespace, "leasetune"); err != nil {
			t.Errorf("leasetune installed again after the case: %v", err)
		}
	})
	rollouts := in.Kubelet.AllRollouts()
	leasetuneKey := framework.LeasetuneNamespace + "/leasetune"

	// Uninstall through Rancher: the App's uninstall action, a helm
	// operation (operation.go Uninstall, getUninstallArgs).
	code, body, err := in.Admin.Do(ctx, http.MethodPost, "/v1/catalog.cattle.io.apps/"+framework.LeasetuneNamespace+"/leasetune?action=uninstall", map[string]interface{}{})
	if err != nil || code >= 300 {
		t.Fatalf("the App's uninstall action: %d %v %s", code, err, body)
	}
	framework.Within(t, 3*time.Minute, "the release is gone", func() bool {
		_, _, ok := releaseInfo(t)
		return !ok
	}, func() string { return fmt.Sprint(ops.Runs(), ops.Errors()) })
	// Rancher's App goes with the release (its apps controller follows the
	// release Secrets); until then the dashboard offers a downgrade, not
	// an install.
	framework.Within(t, 2*time.Minute, "Rancher's App leasetune is gone", func() bool {
		code, _, err := in.Admin.Do(ctx, http.MethodGet, "/v1/catalog.cattle.io.apps/"+framework.LeasetuneNamespace+"/leasetune", nil)
		return err == nil && code == http.StatusNotFound
	})
	framework.Within(t, time.Minute, "leasetune's Deployment is gone", func() bool {
		_, err := in.CP.Client.AppsV1().Deployments(framework.LeasetuneNamespace).Get(ctx, "leasetune", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	// What the suite installed with, as a user gives it in the form: the
	// questions' answers, and the replicas in the YAML (no question).
	var questions struct{ Questions []question }
	chartFile(t, "questions.yaml", &questions)
	answers := map[string]interface{}{}
	var ask func(qs []question)
	ask = func(qs []question) {
		for _, q := range qs {
			if v, ok := helmchart.Lookup(suiteValues, q.Variable); ok {
				answers[q.Variable] = v
			}
			ask(q.Subquestions)
		}
	}
	ask(questions.Questions)
	if len(answers) == 0 {
		t.Fatalf("the suite's values %v answer no question of questions.yaml", suiteValues)
	}
	answers["settle"] = "25s" // the operator's own choice, which the upgrade must keep
	replicas, ok := helmchart.Lookup(suiteValues, "replicaCount")
	if !ok {
		t.Fatalf("the suite's values %v have no replicaCount", suiteValues)
	}
	yamlEdits := [][2]string{{`^replicaCount: \d+$`, fmt.Sprintf("replicaCount: %v", replicas)}}

	drive := func(t *testing.T, folder, version, action string, answers map[string]interface{}, edits [][2]string) appsInstallResult {
		t.Helper()
		a, _ := json.Marshal(answers)
		e, _ := json.Marshal(edits)
		out, raw := dashboardScript(t, "apps-install.js", folder, 6*time.Minute, "LT_REPO="+repoName, "LT_CHART="+chart.Name,
			"LT_VERSION="+version, "LT_ACTION="+action, "LT_ANSWERS="+string(a), "LT_YAML="+string(e))
		var r appsInstallResult
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("apps-install.js printed %q: %v", raw, err)
		}
		t.Logf("screenshots in %s; steps %v; button %q; wizard %q; form before %v; after %v; then at %s", out, r.Steps, r.InstallButton, r.WizardText, r.Before, r.After, r.AfterURL)
		r.judge(t)
		return r
	}
	// checkRelease waits for the release at version and checks the values
	// helm stores for it: the suite's answers and replicas, and the
	// operator's settle.
	checkRelease := func(t *testing.T, version string) {
		t.Helper()
		framework.Within(t, 4*time.Minute, "the release at "+version+", deployed", func() bool {
			v, s, ok := releaseInfo(t)
			return ok && v == version && s == "deployed"
		}, func() string { return fmt.Sprint(ops.Runs(), ops.Errors()) })
		got := releaseValues(t)
		for q, want := range answers {
			if v, ok := helmchart.Lookup(got, q); !ok || fmt.Sprint(v) != fmt.Sprint(want) {
				// A value equal to the chart's default is not stored (the
				// form sends what differs from the chart's values).
				if d, ok := helmchart.Lookup(chartValues(t), q); ok && fmt.Sprint(d) == fmt.Sprint(want) {
					continue
				}
				t.Errorf("release values: %s = %v, want %v (values %v)", q, v, want, got)
			}
		}
		if v, _ := helmchart.Lookup(got, "replicaCount"); fmt.Sprint(v) != fmt.Sprint(replicas) {
			t.Errorf("release values: replicaCount = %v, want %v", v, replicas)
		}
		if err := in.Kubelet.WaitRunning(ctx, framework.LeasetuneNamespace, "leasetune"); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("install-the-previous-version-from-the-form", func(t *testing.T) {
		r := drive(t, "apps-install", previous, "Install", answers, yamlEdits)
		// "Install this version" (@rancher/shell 3.0.13 chart.vue,
		// catalog.chart.chartButton.action.install); an installed release
		// would make it an upgrade, an edit or a downgrade.
		if !strings.HasPrefix(r.InstallButton, "Install") {
			t.Errorf("the chart's page offers %q, want an install (no release)", r.InstallButton)
		}
		checkRelease(t, previous)
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("upgrade-keeps-the-answers", func(t *testing.T) {
		r := drive(t, "apps-upgrade", chart.Version, "Upgrade", nil, nil)
		if !strings.HasPrefix(r.InstallButton, "Upgrade") {
			t.Errorf("the chart's page offers %q for the installed %s, want an upgrade", r.InstallButton, previous)
		}
		// The form opens with the release's answers.
		for q, want := range answers {
			if got := r.Before[q]; got != fmt.Sprint(want) {
				t.Errorf("the upgrade form shows %s = %q, want the release's %v", q, got, want)
			}
		}
		checkRelease(t, chart.Version)
	})

	t.Run("each-operation-ran-as-the-admin", func(t *testing.T) {
		runs := ops.Runs()
		var verbs []string
		for _, r := range runs {
			if len(r.Args) > 0 && len(r.Args[0]) > 0 {
				verbs = append(verbs, r.Args[0][0])
			}
			if r.ExitCode != 0 {
				t.Errorf("operation %s exited %d", r.Pod, r.ExitCode)
			}
			if r.User == "" || strings.HasPrefix(r.User, "system:") {
				t.Errorf("operation %s ran as %q %v, want the Rancher user who asked", r.Pod, r.User, r.Groups)
			}
		}
		if want := []string{"uninstall", "install", "upgrade"}; !reflect.DeepEqual(verbs, want) {
			t.Errorf("helm operations %v, want %v", verbs, want)
		}
	})

	t.Run("restarts", func(t *testing.T) {
		after := in.Kubelet.AllRollouts()
		var changed []string
		for k, n := range after {
			if k != leasetuneKey && n != rollouts[k] {
				changed = append(changed, fmt.Sprintf("%s: %d → %d", k, rollouts[k], n))
			}
		}
		sort.Strings(changed)
		if len(changed) > 0 {
			t.Errorf("the install and upgrade rolled out others: %v", changed)
		}
		// leasetune: a new Deployment at the install (a rollout for the
		// double: the same name made again); none at the upgrade, whose
		// pod template is the same (the chart's version is not in it, and
		// the values are kept).
		if got := after[leasetuneKey] - rollouts[leasetuneKey]; got != 1 {
			t.Errorf("leasetune's rollouts: %d → %d, want one (the install's new Deployment, nothing at the upgrade)", rollouts[leasetuneKey], after[leasetuneKey])
		}
	})
}

// chartValues is the chart's values.yaml.
func chartValues(t *testing.T) map[string]interface{} {
	t.Helper()
	var v map[string]interface{}
	b := chartFile(t, "values.yaml", nil)
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
