package rancher

import "testing"

func TestImportedDay2Ops(t *testing.T) {
	for _, c := range []struct {
		name        string
		labels, ann map[string]string
		driver      string
		want        bool
	}{
		{"c-m-1", nil, nil, "rke2", true},
		{"c-m-1", nil, nil, "k3s", true},
		{"c-m-1", map[string]string{ProviderLabel: "rke2"}, nil, "imported", true},
		{"c-m-1", nil, map[string]string{OperationsEnabledAnnotation: "true"}, "k3s", true},
		{"c-m-1", nil, map[string]string{OperationsEnabledAnnotation: "system-default"}, "k3s", true},
		{"c-m-1", nil, map[string]string{OperationsEnabledAnnotation: "false"}, "k3s", false},
		{"c-m-1", nil, map[string]string{AdministratedAnnotation: "true"}, "rke2", false},
		{"local", nil, nil, "rke2", false},
		{"c-m-1", nil, nil, "EKS", false},
		{"c-m-1", nil, nil, "", false},
	} {
		if got := ImportedDay2Ops(c.name, c.labels, c.ann, c.driver); got != c.want {
			t.Errorf("%s %v %v %q: %v, want %v", c.name, c.labels, c.ann, c.driver, got, c.want)
		}
	}
}

func TestImportedPlansReadAgentEnv(t *testing.T) {
	for v, want := range map[string]bool{"v2.14.4": false, "v2.15.0": true, "v2.16.0": true} {
		r, _ := Parse(v)
		if r.ImportedPlansReadAgentEnv() != want {
			t.Errorf("%s: want %v", v, want)
		}
	}
	if !(Version{}).ImportedPlansReadAgentEnv() {
		t.Error("unknown: want true")
	}
}
