package kit

import "testing"

func TestRequired(t *testing.T) {
	for _, c := range []struct {
		value, suite string
		want         bool
	}{
		{"", "browser", false},
		{"all", "promtool", true},
		{"browser,prometheus", "prometheus", true},
		{" browser , operator ", "operator", true},
		{"browser", "prometheus", false},
		{"browsers", "browser", false},
	} {
		if got := Required(c.value, c.suite); got != c.want {
			t.Errorf("Required(%q, %q) = %v, want %v", c.value, c.suite, got, c.want)
		}
	}
}
