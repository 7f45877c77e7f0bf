package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// RancherChartVersions are the Rancher releases whose Deployment, as
// rancher/rancher's chart renders it with default values (helm template,
// hostname set), ../shared/fixtures/rancher holds, oldest first.
var RancherChartVersions = []string{"v2.11.3", "v2.15.0"}

// rancherChartTemplate makes the rendered Deployment a chart again for
// the values the tests change, as rancher/rancher's chart/templates/
// deployment.yaml uses them: replicas, the image's repository and tag
// (rancherImage, rancherImageTag), and extraEnv appended after Rancher's
// own env of the rancher container.
const rancherChartTemplate = `{{- $d := .Files.Get "rendered/deployment.yaml" | fromYaml }}
{{- if $d.Error }}{{ fail $d.Error }}{{ end }}
{{- $_ := set $d.spec "replicas" .Values.replicas }}
{{- range $d.spec.template.spec.containers }}
{{- if eq .name "rancher" }}
{{- $_ := set . "image" (printf "%s:%s" $.Values.rancherImage $.Values.rancherImageTag) }}
{{- $_ := set . "env" (concat .env $.Values.extraEnv) }}
{{- end }}
{{- end }}
{{ toYaml $d }}
`

// RancherChart builds, in a folder of the test's, a chart whose one
// template is the Rancher Deployment of Rancher release version (one of
// RancherChartVersions) as ../shared/fixtures/rancher has it rendered, with
// that render's values as defaults, so that the real helm CLI installs and
// upgrades it as it does Rancher's own chart. It returns the chart's folder.
func RancherChart(t testing.TB, version string) string {
	t.Helper()
	p, rendered := ReadSharedFixture(t, "rancher/rancher-chart-"+version+"-deployment.yaml")
	var d appsv1.Deployment
	if err := yaml.Unmarshal(rendered, &d); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var image string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "rancher" {
			image = c.Image
		}
	}
	i := strings.LastIndex(image, ":")
	if d.Spec.Replicas == nil || i < 0 {
		t.Fatalf("%s: no replicas, or no rancher container with an image repository:tag", p)
	}
	values, err := yaml.Marshal(map[string]interface{}{
		"rancherImage": image[:i], "rancherImageTag": image[i+1:], "replicas": *d.Spec.Replicas, "extraEnv": []interface{}{},
	})
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimPrefix(version, "v")
	dir := filepath.Join(t.TempDir(), "rancher-chart")
	files := map[string]string{
		"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: rancher\nversion: %s\nappVersion: %s\n"+
			"description: the Rancher Deployment of ../shared/fixtures/rancher/%s, made a chart for tests\n", v, version, filepath.Base(p)),
		"values.yaml":               string(values),
		"rendered/deployment.yaml":  string(rendered),
		"templates/deployment.yaml": rancherChartTemplate,
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
