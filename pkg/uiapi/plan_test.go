package uiapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/rancher/norman/httperror"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/settings"
)

func objs(values map[string]string) []v3.Setting {
	var out []v3.Setting
	for _, d := range settings.Registry {
		s := v3.Setting{Value: values[d.Name], Default: d.Default}
		s.Name = d.Name
		out = append(out, s)
	}
	return out
}

func order(ws []Write) string {
	var n []string
	for _, w := range ws {
		n = append(n, strings.TrimPrefix(w.Name, "fleet-agent-leader-election-")+"="+w.Value)
	}
	return strings.Join(n, ",")
}

func TestWriteOrder(t *testing.T) {
	up := map[string]string{"fleet-agent-leader-election-lease-duration": "60s", "fleet-agent-leader-election-renew-deadline": "50s",
		"fleet-agent-leader-election-retry-period": "20s"}
	for _, c := range []struct {
		name string
		cur  map[string]string
		want Triple
		out  string
		err  string
		code int
	}{
		{name: "up from the defaults: lease first", want: Triple{"60s", "50s", "20s"}, out: "lease-duration=60s,renew-deadline=50s,retry-period=20s"},
		{name: "down again: retry first", cur: up, want: Triple{"30s", "25s", "10s"}, out: "retry-period=10s,renew-deadline=25s,lease-duration=30s"},
		{name: "the default as typed writes nothing", want: Triple{"30s", "25s", "10s"}, out: ""},
		{name: "empty means the default", cur: up, want: Triple{"", "", ""}, out: "retry-period=,renew-deadline=,lease-duration="},
		{name: "one field", want: Triple{"30s", "25s", "12s"}, out: "retry-period=12s"},
		{name: "an invalid triple", want: Triple{"30s", "25s", "999ms"}, err: "retryPeriod 999ms must be at least 1s", code: 422},
		{name: "an unparsable value", want: Triple{"30s", "25s", "10"}, err: `retryPeriod "10" is not a duration`, code: 422},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := WriteOrder(settings.View{Objects: objs(c.cur)}, settings.FleetAgent, c.want)
			if c.err != "" {
				var ae *httperror.APIError
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ae) || ae.Code.Status != c.code {
					t.Fatalf("err %v, want %d %q", err, c.code, c.err)
				}
				return
			}
			if err != nil || order(ws) != c.out {
				t.Fatalf("%q %v, want %q", order(ws), err, c.out)
			}
		})
	}
	// An env-sourced setting that would change: 405, naming the env var.
	env := func(d settings.Definition) bool { return d.Name == "fleet-agent-leader-election-retry-period" }
	_, err := WriteOrder(settings.View{Objects: objs(nil), EnvSet: env}, settings.FleetAgent, Triple{"30s", "25s", "12s"})
	var ae *httperror.APIError
	if !errors.As(err, &ae) || ae.Code.Status != 405 || !strings.Contains(err.Error(), "CATTLE_FLEET_AGENT_LEADER_ELECTION_RETRY_PERIOD") {
		t.Fatalf("env-sourced: %v", err)
	}
}
