// Package chart_test checks what Rancher's Apps page reads from the chart
// (Chart.yaml's catalog.cattle.io annotations, questions.yaml,
// app-readme.md, README.md) against the chart itself, and the chart's Prometheus
// Operator objects (monitoring.*), by rendering it with helm template. No
// cluster: it runs with the unit tests.
package chart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"leasetune.io/leasetune/tests/helmchart"
)

// question is one entry of questions.yaml, in Rancher's questions format
// (rancher/rancher v2.12.12 pkg/apis/management.cattle.io/v3
// cluster_template_types.go Question; rancher/dashboard v2.12.12
// shell/components/Questions/).
type question struct {
	Variable          string      `yaml:"variable"`
	Label             string      `yaml:"label"`
	Description       string      `yaml:"description"`
	Type              string      `yaml:"type"`
	Required          bool        `yaml:"required"`
	Default           interface{} `yaml:"default"`
	Group             string      `yaml:"group"`
	Min               *int        `yaml:"min"`
	Options           []string    `yaml:"options"`
	ValidChars        string      `yaml:"valid_chars"`
	ShowIf            string      `yaml:"show_if"`
	ShowSubquestionIf interface{} `yaml:"show_subquestion_if"`
	Subquestions      []question  `yaml:"subquestions"`
}

// readYAML decodes the chart's file rel into out (gopkg.in/yaml.v3: an
// integer stays an int, a boolean a bool).
func readYAML(t *testing.T, rel string, out interface{}) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(helmchart.Chart(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// questions returns every question of questions.yaml, subquestions after
// their parent (each with its parent's group when it has none).
func questions(t *testing.T) []question {
	t.Helper()
	var f struct {
		Questions []question `yaml:"questions"`
	}
	readYAML(t, "questions.yaml", &f)
	var out []question
	for _, q := range f.Questions {
		out = append(out, q)
		for _, s := range q.Subquestions {
			if s.Group == "" {
				s.Group = q.Group
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("questions.yaml has no questions")
	}
	return out
}

// TestQuestionsMatchValues: every question names a value of values.yaml
// whose type is the question's and whose default is the question's, once;
// the form shows each with a label, a description and a group, and a
// string's default passes its own valid_chars.
func TestQuestionsMatchValues(t *testing.T) {
	var values map[string]interface{}
	readYAML(t, "values.yaml", &values)
	seen := map[string]bool{}
	for _, q := range questions(t) {
		if seen[q.Variable] {
			t.Errorf("%s: asked twice", q.Variable)
		}
		seen[q.Variable] = true
		if q.Label == "" || q.Description == "" || q.Group == "" {
			t.Errorf("%s: label %q, description %q, group %q: the form needs all three", q.Variable, q.Label, q.Description, q.Group)
		}
		v, ok := helmchart.Lookup(values, q.Variable)
		if !ok {
			t.Errorf("%s: no such value in values.yaml", q.Variable)
			continue
		}
		switch q.Type {
		case "boolean":
			if _, ok := v.(bool); !ok {
				t.Errorf("%s: a boolean question, values.yaml has %T %v", q.Variable, v, v)
			}
		case "int":
			if _, ok := v.(int); !ok {
				t.Errorf("%s: an int question, values.yaml has %T %v", q.Variable, v, v)
			}
			if d, ok := q.Default.(int); ok && q.Min != nil && d < *q.Min {
				t.Errorf("%s: default %d below its min %d", q.Variable, d, *q.Min)
			}
		case "string":
			if _, ok := v.(string); !ok {
				t.Errorf("%s: a string question, values.yaml has %T %v", q.Variable, v, v)
			}
			if d, ok := q.Default.(string); ok && q.ValidChars != "" {
				// As the dashboard checks it (shell/utils/validators
				// validateChars): no character outside the class.
				if regexp.MustCompile("[^" + q.ValidChars + "]").MatchString(d) {
					t.Errorf("%s: default %q has characters outside valid_chars %q", q.Variable, d, q.ValidChars)
				}
			}
		case "enum":
			s, _ := v.(string)
			found := false
			for _, o := range q.Options {
				found = found || o == s
			}
			if !found {
				t.Errorf("%s: values.yaml's %v is not among the options %v", q.Variable, v, q.Options)
			}
		default:
			t.Errorf("%s: type %q is not one this test knows (boolean, int, string, enum)", q.Variable, q.Type)
		}
		if !reflect.DeepEqual(q.Default, v) {
			t.Errorf("%s: default %#v (%T), values.yaml %#v (%T)", q.Variable, q.Default, q.Default, v, v)
		}
	}
	// The values the brief of the form names (issue 26) are all asked.
	for _, want := range []string{"leaderElection.leaseDuration", "leaderElection.renewDeadline", "leaderElection.retryPeriod",
		"uiPlugin.enabled", "rancherElection.enabled", "agentRolloutPerMinute", "settle", "monitoring.enabled"} {
		if !seen[want] {
			t.Errorf("questions.yaml does not ask %s", want)
		}
	}
}

// setArgs turns the questions' defaults into helm --set and --set-string
// arguments, as the form would send them.
func setArgs(t *testing.T, qs []question) []string {
	t.Helper()
	var args []string
	for _, q := range qs {
		switch d := q.Default.(type) {
		case bool:
			args = append(args, "--set", fmt.Sprintf("%s=%t", q.Variable, d))
		case int:
			args = append(args, "--set", fmt.Sprintf("%s=%d", q.Variable, d))
		case string:
			// helm's strvals: a backslash escapes a comma, a backslash.
			esc := strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(d)
			args = append(args, "--set-string", fmt.Sprintf("%s=%s", q.Variable, esc))
		default:
			t.Fatalf("%s: default %#v of type %T cannot be given as --set", q.Variable, q.Default, q.Default)
		}
	}
	return args
}

// TestQuestionsDefaultsRender: the chart rendered with the form's defaults
// (every question's default as --set) is the chart rendered with
// values.yaml alone, with and without the optional kinds served, and with
// monitoring on.
func TestQuestionsDefaultsRender(t *testing.T) {
	answers := setArgs(t, questions(t))
	all := []string{"--api-versions", helmchart.UIPlugin, "--api-versions", helmchart.ServiceMonitor, "--api-versions", helmchart.PrometheusRule}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"no optional kind served", nil},
		{"UIPlugin and the Prometheus Operator's kinds served", all},
		{"monitoring on", append(append([]string{}, all...), "--set", "monitoring.enabled=true")},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, err := helmchart.Template(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			// The answers first: the case's own --set comes after them,
			// as a user's change of the form would.
			withAnswers, err := helmchart.Template(t, append(append([]string{}, answers...), c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(base, withAnswers) {
				t.Errorf("the render with the questions' defaults differs from the render with values.yaml's:\n%s", firstDiff(base, withAnswers))
			}
		})
	}
}

// firstDiff says where two renders first differ, by line.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  values.yaml: %q\n  questions:   %q", i+1, x, y)
		}
	}
	return "same lines"
}

// chartAnnotations are the catalog.cattle.io annotations the chart sets,
// and no other (docs/apps.md says why each, and why not the others).
var chartAnnotations = []string{
	"catalog.cattle.io/display-name", "catalog.cattle.io/namespace", "catalog.cattle.io/release-name",
	"catalog.cattle.io/kube-version", "catalog.cattle.io/rancher-version", "catalog.cattle.io/scope",
	"catalog.cattle.io/os", "catalog.cattle.io/permits-os",
	"catalog.cattle.io/requests-cpu", "catalog.cattle.io/requests-memory",
}

var versionRE = regexp.MustCompile(`(>=|<)\s*v?(\d+)\.(\d+)\.(\d+)`)

// bounds reads a constraint of the form ">= A.B.C[-0] [< D.E.F[-0]]" as
// [lower, upper) version triples (upper nil when open).
func bounds(t *testing.T, c string) (lower, upper []int) {
	t.Helper()
	for _, m := range versionRE.FindAllStringSubmatch(c, -1) {
		v := make([]int, 3)
		for i := range v {
			v[i], _ = strconv.Atoi(m[2+i])
		}
		if m[1] == ">=" {
			lower = v
		} else {
			upper = v
		}
	}
	if lower == nil {
		t.Fatalf("constraint %q has no lower bound", c)
	}
	return lower, upper
}

func less(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// chartYAML is what the tests read of Chart.yaml.
type chartYAML struct {
	KubeVersion string            `yaml:"kubeVersion"`
	Annotations map[string]string `yaml:"annotations"`
}

func readChartYAML(t *testing.T) chartYAML {
	t.Helper()
	var c chartYAML
	readYAML(t, "Chart.yaml", &c)
	return c
}

// TestChartAnnotations: Chart.yaml has the annotations Rancher's Apps page
// reads, consistent with the chart: the namespace and release name the
// docs use, the Kubernetes lower bound of kubeVersion, a Rancher range
// that holds the UI extension's own claim's lower bound, the scope of the
// management cluster, and requests that are the pods' requests times the
// replicas.
func TestChartAnnotations(t *testing.T) {
	chart := readChartYAML(t)
	a := chart.Annotations
	var got []string
	for k := range a {
		if strings.HasPrefix(k, "catalog.cattle.io/") {
			got = append(got, k)
		}
	}
	sort.Strings(got)
	want := append([]string{}, chartAnnotations...)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("catalog.cattle.io annotations:\n got %v\nwant %v", got, want)
	}
	if a["catalog.cattle.io/namespace"] != helmchart.Namespace || a["catalog.cattle.io/release-name"] != "leasetune" {
		t.Errorf("namespace %q, release name %q: want %s and leasetune (the names of the docs)", a["catalog.cattle.io/namespace"], a["catalog.cattle.io/release-name"], helmchart.Namespace)
	}
	if a["catalog.cattle.io/scope"] != "management" {
		t.Errorf("scope %q, want management (leasetune runs in the local cluster)", a["catalog.cattle.io/scope"])
	}
	if !strings.Contains(a["catalog.cattle.io/permits-os"], "linux") || a["catalog.cattle.io/os"] != "linux" {
		t.Errorf("os %q, permits-os %q", a["catalog.cattle.io/os"], a["catalog.cattle.io/permits-os"])
	}
	kLow, _ := bounds(t, a["catalog.cattle.io/kube-version"])
	cLow, _ := bounds(t, chart.KubeVersion)
	if !reflect.DeepEqual(kLow, cLow) {
		t.Errorf("kube-version %q and kubeVersion %q start at different versions", a["catalog.cattle.io/kube-version"], chart.KubeVersion)
	}

	// The Rancher range holds the UI extension's lower bound.
	rLow, rUp := bounds(t, a["catalog.cattle.io/rancher-version"])
	r, err := helmchart.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r, "ui", "pkg", "leasetune", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Rancher struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"rancher"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	uiLow, _ := bounds(t, pkg.Rancher.Annotations["catalog.cattle.io/rancher-version"])
	if less(uiLow, rLow) || (rUp != nil && !less(uiLow, rUp)) {
		t.Errorf("the UI extension claims Rancher %v and later, outside the chart's %q", uiLow, a["catalog.cattle.io/rancher-version"])
	}

	// The requests are the pods' requests times the replicas.
	var values struct {
		ReplicaCount int `yaml:"replicaCount"`
		Resources    struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	}
	readYAML(t, "values.yaml", &values)
	for res, key := range map[string]string{"cpu": "catalog.cattle.io/requests-cpu", "memory": "catalog.cattle.io/requests-memory"} {
		per := resource.MustParse(values.Resources.Requests[res])
		total := per.DeepCopy()
		for i := 1; i < values.ReplicaCount; i++ {
			total.Add(per)
		}
		ann, err := resource.ParseQuantity(a[key])
		if err != nil {
			t.Errorf("%s %q: %v", key, a[key], err)
			continue
		}
		if ann.Cmp(total) != 0 {
			t.Errorf("%s %s, want %s (%d replicas × %s)", key, ann.String(), total.String(), values.ReplicaCount, per.String())
		}
	}
}

// TestAppReadme: app-readme.md, what the Apps page shows above the form,
// is there and short; Rancher reads it, and questions.yaml, from the
// chart's root (rancher/rancher v2.12.12 pkg/catalogv2/helm/info.go).
func TestAppReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(helmchart.Chart(t), "app-readme.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("# ")) || len(b) > 2000 {
		t.Errorf("app-readme.md: %d bytes, starts %q: want a heading and at most 2000 bytes", len(b), b[:min(len(b), 20)])
	}
}

// TestChartReadme: README.md, what the chart's page in Rancher's Apps shows
// (rancher/dashboard v2.12.12 shell/pages/c/_cluster/apps/charts/chart.vue
// renders the chart version's readme, not app-readme.md; without it the
// page is empty), has a heading, a first paragraph of plain text (the
// upstream Apps case compares it with the page), and names every top-level
// value of values.yaml in its values table, so that a value added without
// a line there fails here.
func TestChartReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(helmchart.Chart(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "\n\n", 3)
	if len(parts) < 3 || !strings.HasPrefix(parts[0], "# ") || strings.ContainsAny(parts[1], "`*[]#") {
		t.Fatalf("README.md must start with a heading and a paragraph of plain text (no markup): %q", parts[:min(len(parts), 2)])
	}
	_, table, found := strings.Cut(string(b), "\n## Values\n")
	if !found {
		t.Fatal("README.md has no ## Values section")
	}
	named := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(first, -1) {
			named[m[1]] = true
		}
	}
	var values map[string]interface{}
	readYAML(t, "values.yaml", &values)
	var missing []string
	for k := range values {
		if !named[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("README.md's values table lacks %q", missing)
	}
	for k := range named {
		if _, ok := values[k]; !ok {
			t.Errorf("README.md's values table names %q, which values.yaml does not have", k)
		}
	}
}
