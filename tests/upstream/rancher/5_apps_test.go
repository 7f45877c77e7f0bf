//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"leasetune.io/leasetune/tests/helmchart"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// appsResult is what ui/test/browser/apps.js saw.
type appsResult struct {
	Steps        []string `json:"steps"`
	Cards        []string `json:"cards"`
	ChartHeader  string   `json:"chartHeader"`
	ChartReadme  string   `json:"chartReadme"`
	InstallLabel string   `json:"installButton"`
	InstallURL   string   `json:"installURL"`
	WizardText   string   `json:"wizardText"`
	// Name is the release name field, shown only for a new install.
	Name *struct {
		Value    string `json:"value"`
		Disabled bool   `json:"disabled"`
	} `json:"name"`
	Namespace string `json:"namespace"`
	Tabs      []struct {
		Name string `json:"name"`
		Rows []struct {
			Type, Variable, Text, Value string
		} `json:"rows"`
	} `json:"tabs"`
	browserSession
}

// question is an entry of the chart's questions.yaml, as far as the form
// shows it (rancher/dashboard v2.12.12, @rancher/shell 3.0.5
// components/Questions/index.vue: a tab per group, subquestions shown when
// show_subquestion_if equals the parent's answer).
type question struct {
	Variable          string      `json:"variable"`
	Label             string      `json:"label"`
	Type              string      `json:"type"`
	Default           interface{} `json:"default"`
	Group             string      `json:"group"`
	ShowSubquestionIf interface{} `json:"show_subquestion_if"`
	Subquestions      []question  `json:"subquestions"`
}

// chartFile reads the chart's file name, and its YAML as JSON values into
// v when v is not nil.
func chartFile(t *testing.T, name string, v interface{}) []byte {
	t.Helper()
	dir, err := framework.LeasetuneChart()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return b
}

// get answers the admin's GET of path on Rancher as JSON in v.
func get(t *testing.T, path string, v interface{}) {
	t.Helper()
	code, body, err := in.Admin.Do(context.Background(), http.MethodGet, path, nil)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", path, code, err, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// shown is how the form shows a question's value: a string input its text,
// an int input its digits, a checkbox "true" or "false".
func shown(v interface{}) string {
	switch v := v.(type) {
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%g", v)
	default:
		return fmt.Sprint(v)
	}
}

// chartRepo serves the repository's chart as a Helm repository on
// loopback (helm package, at each of versions or at its own version, and
// helm repo index) and adds it as ClusterRepo name through Rancher's API as
// the admin (Apps → Repositories → Create); it returns the ClusterRepo's
// steve path. Both go at the end of the test.
func chartRepo(t *testing.T, name string, versions ...string) string {
	t.Helper()
	dir := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	chartDir, err := framework.LeasetuneChart()
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) == 0 {
		versions = []string{""}
	}
	for _, v := range versions {
		args := []string{"package", chartDir, "--destination", dir}
		if v != "" {
			args = append(args, "--version", v)
		}
		if _, err := in.Helm.Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Helm.Run("repo", "index", dir, "--url", srv.URL); err != nil {
		t.Fatal(err)
	}
	repo := map[string]interface{}{
		"type":     "catalog.cattle.io.clusterrepo",
		"metadata": map[string]interface{}{"name": name},
		"spec":     map[string]interface{}{"url": srv.URL},
	}
	if code, body, err := in.Admin.Do(context.Background(), http.MethodPost, "/v1/catalog.cattle.io.clusterrepos", repo); err != nil || code != http.StatusCreated {
		t.Fatalf("POST a ClusterRepo: %d %v %s", code, err, body)
	}
	t.Cleanup(func() {
		_, _, _ = in.Admin.Do(context.Background(), http.MethodDelete, "/v1/catalog.cattle.io.clusterrepos/"+name, nil)
	})
	return "/v1/catalog.cattle.io.clusterrepos/" + name
}

// Test09AppsPage is the chart in Rancher's Apps: the packaged chart served
// as a Helm repository (index.yaml and the .tgz, as `helm package` and
// `helm repo index` make them) over HTTP, added as a ClusterRepo through
// Rancher's API as the admin (what Apps → Repositories → Create does).
// Rancher downloads its index (rancher/rancher v2.12.12
// pkg/controllers/dashboard/helm/repo.go: condition Downloaded) and serves
// it filtered by the chart's catalog.cattle.io/rancher-version and
// kube-version against its own version and the cluster's
// (pkg/catalogv2/content/content.go filterReleases, on for a release
// build such as this v2.12.12), and serves the chart version's files as
// the install form's source (link=info: helm/info.go InfoFromTarball:
// values.yaml, questions.yaml, Chart.yaml, app-readme.md, README.md).
// Then Rancher's real dashboard, in headless chromium as the admin
// (apps.js): the chart's card in Apps → Charts, its page with the README,
// and the wizard with the release name and namespace the annotations fix
// and the form of questions.yaml, every question in its group's tab with
// the value it would install. The release is installed already (by helm,
// as the installation did, which Rancher lists as an App), so the wizard
// is the edit of that release (name and namespace its own, not shown) and
// the form shows the release's values: what an operator changing a
// setting there sees. Nothing is installed or upgraded here (case 11).
func Test09AppsPage(t *testing.T) {
	framework.Need(t, in)
	const repoName = "leasetune-test-charts"
	var chart struct {
		Name, Version string
		Annotations   map[string]string
	}
	chartFile(t, "Chart.yaml", &chart)
	display := chart.Annotations["catalog.cattle.io/display-name"]

	reposPath := chartRepo(t, repoName)
	var last string
	framework.Within(t, 3*time.Minute, "Rancher downloads the repository's index (condition Downloaded)", func() bool {
		var r struct {
			Status struct {
				Conditions []struct{ Type, Status, Message string }
			}
		}
		get(t, reposPath, &r)
		last = fmt.Sprint(r.Status.Conditions)
		for _, c := range r.Status.Conditions {
			if c.Type == "Downloaded" && c.Status == "True" {
				return true
			}
		}
		return false
	}, func() string { return "conditions " + last })

	t.Run("rancher-lists-the-chart-for-this-rancher-and-cluster", func(t *testing.T) {
		var version struct{ Value string }
		get(t, "/v1/management.cattle.io.settings/server-version", &version)
		if version.Value != in.RancherVersion() {
			t.Fatalf("server-version %q: Rancher filters its index only on a release build (content.go filterReleases)", version.Value)
		}
		type index struct {
			Entries map[string][]struct {
				Version     string
				Annotations map[string]string
			}
		}
		var ix index
		get(t, reposPath+"?link=index", &ix)
		versions := ix.Entries[chart.Name]
		if len(versions) != 1 || versions[0].Version != chart.Version || !reflect.DeepEqual(versions[0].Annotations, chart.Annotations) {
			t.Errorf("Rancher's index for Rancher %s and this cluster lists %+v, want %s %s with Chart.yaml's annotations %v", version.Value, versions, chart.Name, chart.Version, chart.Annotations)
		}
		// The kube-version annotation decides: for a cluster older than it
		// allows, Rancher leaves the chart out (the dashboard asks with the
		// target cluster's version, k8sVersion).
		var old index
		get(t, reposPath+"?link=index&k8sVersion=v1.27.16", &old)
		if n := len(old.Entries[chart.Name]); n != 0 {
			t.Errorf("for Kubernetes v1.27.16 Rancher lists %d versions of %s; its catalog.cattle.io/kube-version %q does not allow it", n, chart.Name, chart.Annotations["catalog.cattle.io/kube-version"])
		}
	})

	var questions struct{ Questions []question }
	chartFile(t, "questions.yaml", &questions)
	t.Run("rancher-serves-the-forms-source", func(t *testing.T) {
		var info struct {
			Readme, AppReadme string
			Values, Questions map[string]interface{}
			Chart             map[string]interface{}
		}
		get(t, reposPath+"?link=info&chartName="+url.QueryEscape(chart.Name)+"&version="+url.QueryEscape(chart.Version), &info)
		var values, qs map[string]interface{}
		chartFile(t, "values.yaml", &values)
		chartFile(t, "questions.yaml", &qs)
		if !reflect.DeepEqual(info.Questions, qs) {
			t.Errorf("Rancher serves questions that differ from questions.yaml:\n%v\nwant\n%v", info.Questions, qs)
		}
		if !reflect.DeepEqual(info.Values, values) {
			t.Errorf("Rancher serves values that differ from values.yaml")
		}
		if info.AppReadme != string(chartFile(t, "app-readme.md", nil)) {
			t.Errorf("Rancher serves an app-readme of %d bytes, not app-readme.md", len(info.AppReadme))
		}
		if info.Readme != string(chartFile(t, "README.md", nil)) {
			t.Errorf("Rancher serves a README of %d bytes, not the chart's README.md", len(info.Readme))
		}
	})

	// What the form must show: the release's values where it has them
	// (helm get values: what was set at install), the chart's defaults
	// elsewhere (questions.yaml's defaults equal values.yaml's: tests/chart).
	release := releaseValues(t)
	var app struct{ Metadata struct{ Name string } }
	get(t, "/v1/catalog.cattle.io.apps/"+framework.LeasetuneNamespace+"/leasetune", &app)

	folder, raw := dashboardScript(t, "apps.js", "apps", 6*time.Minute, "LT_CHART="+display)
	var r appsResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("apps.js printed %q: %v", raw, err)
	}
	t.Logf("screenshots in %s; steps %v; cards %q; chart %q; button %q; install at %s; wizard %q; name %v; namespace %q", folder, r.Steps, r.Cards, r.ChartHeader, r.InstallLabel, r.InstallURL, r.WizardText, r.Name, r.Namespace)
	r.judge(t)

	t.Run("the-chart-in-apps", func(t *testing.T) {
		if !contains(r.Cards, display) {
			t.Errorf("the charts' cards %q lack %q", r.Cards, display)
		}
		if !strings.Contains(r.ChartHeader, display) {
			t.Errorf("the chart's page is headed %q", r.ChartHeader)
		}
		// The README's first paragraph, as the page renders it.
		readme := string(chartFile(t, "README.md", nil))
		para := strings.Join(strings.Fields(strings.SplitN(readme, "\n\n", 3)[1]), " ")
		if !strings.Contains(r.ChartReadme, para) {
			t.Errorf("the chart's page shows %q, not README.md's first paragraph %q", r.ChartReadme, para)
		}
	})

	t.Run("the-install-form", func(t *testing.T) {
		// The release is installed (the App above), so the wizard edits it
		// (shell mixins/chart.js: the App at the chart's
		// catalog.cattle.io/namespace and release-name) and shows no name
		// or namespace field: they are the release's. A new install shows
		// them fixed to the annotations.
		if r.Name != nil {
			t.Errorf("the wizard shows a name field (%+v, namespace %q) for the installed release %s/%s", *r.Name, r.Namespace, framework.LeasetuneNamespace, app.Metadata.Name)
		}
		// The edit: @rancher/shell 3.0.5's wizard heads its first step
		// "Edit: Step 1" (components/Wizard.vue, header-mode edit);
		// 3.0.13's install page hides the step header and titles the
		// wizard "<chart>: Edit <version> (Current)" (pages/c/_cluster/
		// apps/charts/install.vue, show-step-header false).
		edit := strings.Contains(r.WizardText, "Edit: Step 1") && strings.Contains(r.WizardText, chart.Name+" "+chart.Version) ||
			strings.Contains(r.WizardText, chart.Name+": Edit "+chart.Version+" (Current)")
		if !edit {
			t.Errorf("the wizard reads %q; want the edit of %s %s", r.WizardText, chart.Name, chart.Version)
		}
		// Every question in its group's tab, in order, with the value the
		// upgrade would keep; a subquestion where its parent's answer shows
		// it.
		type row struct{ tab, variable, label, value string }
		var want []row
		var groups []string
		answer := func(q question) string {
			if v, ok := helmchart.Lookup(release, q.Variable); ok {
				return shown(v)
			}
			return shown(q.Default)
		}
		for _, q := range questions.Questions {
			if !contains(groups, q.Group) {
				groups = append(groups, q.Group)
			}
			want = append(want, row{q.Group, q.Variable, q.Label, answer(q)})
			if q.ShowSubquestionIf != nil && answer(q) == shown(q.ShowSubquestionIf) {
				for _, s := range q.Subquestions {
					want = append(want, row{q.Group, s.Variable, s.Label, answer(s)})
				}
			}
		}
		var tabs []string
		var got []row
		for _, tab := range r.Tabs {
			tabs = append(tabs, tab.Name)
			for _, w := range tab.Rows {
				got = append(got, row{tab.Name, w.Variable, w.Text, w.Value})
			}
		}
		if !reflect.DeepEqual(tabs, groups) {
			t.Errorf("the form's tabs %q, want questions.yaml's groups %q", tabs, groups)
		}
		if len(got) != len(want) {
			t.Errorf("the form shows %d questions, want %d", len(got), len(want))
		}
		for i := 0; i < len(got) && i < len(want); i++ {
			g, w := got[i], want[i]
			if g.tab != w.tab || g.variable != w.variable || !strings.Contains(g.label, w.label) || g.value != w.value {
				t.Errorf("question %d: the form shows %s %q in tab %q with %q; want %s %q in %q with %q",
					i+1, g.variable, g.label, g.tab, g.value, w.variable, w.label, w.tab, w.value)
			}
		}
	})
}
