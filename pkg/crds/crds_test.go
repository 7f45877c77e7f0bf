package crds

import "testing"

// TestSettingPrinterColumns: kubectl get settings shows the value, the
// default (what applies when the value is empty) and the source.
func TestSettingPrinterColumns(t *testing.T) {
	crd, err := Setting()
	if err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions", len(crd.Spec.Versions))
	}
	want := []struct{ name, path string }{{"Value", ".value"}, {"Default", ".default"}, {"Source", ".source"}}
	got := crd.Spec.Versions[0].AdditionalPrinterColumns
	if len(got) != len(want) {
		t.Fatalf("columns %+v, want %+v", got, want)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].JSONPath != w.path || got[i].Type != "string" {
			t.Errorf("column %d: %+v, want %s %s", i, got[i], w.name, w.path)
		}
	}
}
