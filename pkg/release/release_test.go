package release

import "testing"

func TestFromImage(t *testing.T) {
	cases := map[string]struct {
		v  Version
		ok bool
	}{
		"rancher/fleet:v0.12.4":                                {Version{0, 12, 4}, true},
		"registry.example.com:5000/rancher/fleet:v0.13.0-rc.2": {Version{0, 13, 0}, true},
		"rancher/rancher:v2.11.3":                              {Version{2, 11, 3}, true},
		"rancher/fleet:v0.9.0@sha256:abc":                      {Version{0, 9, 0}, true},
		"rancher/fleet:dev":                                    {},
		"rancher/fleet:0.12.4":                                 {},
		"registry.example.com:5000/rancher/fleet":              {},
		"rancher/fleet@sha256:abc":                             {},
		"rancher/fleet:v0.12":                                  {},
	}
	for image, want := range cases {
		v, ok := FromImage(image)
		if ok != want.ok || (ok && v != want.v) {
			t.Errorf("FromImage(%q) = %v, %v; want %v, %v", image, v, ok, want.v, want.ok)
		}
	}
}

func TestAtLeast(t *testing.T) {
	v := Version{2, 8, 3}
	for _, c := range []struct {
		a, b, c int
		want    bool
	}{{2, 8, 3, true}, {2, 8, 2, true}, {2, 8, 4, false}, {2, 9, 0, false}, {1, 99, 99, true}, {3, 0, 0, false}} {
		if got := v.AtLeast(c.a, c.b, c.c); got != c.want {
			t.Errorf("%v.AtLeast(%d,%d,%d) = %v", v, c.a, c.b, c.c, got)
		}
	}
}
