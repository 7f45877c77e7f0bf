package settings

import (
	"errors"
	"strings"
	"testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

func objectsWith(values map[string]string) []v3.Setting {
	var out []v3.Setting
	for _, d := range Registry {
		s := v3.Setting{Value: values[d.Name], Default: d.Default}
		s.Name = d.Name
		out = append(out, s)
	}
	return out
}

func orderString(ws []Write) string {
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
		name   string
		cur    map[string]string
		want   [3]string
		out    string
		err    string
		reason OrderReason
		field  string
	}{
		{name: "up from the defaults: lease first", want: [3]string{"60s", "50s", "20s"}, out: "lease-duration=60s,renew-deadline=50s,retry-period=20s"},
		{name: "down again: retry first", cur: up, want: [3]string{"30s", "25s", "10s"}, out: "retry-period=10s,renew-deadline=25s,lease-duration=30s"},
		{name: "the default as typed writes nothing", want: [3]string{"30s", "25s", "10s"}, out: ""},
		{name: "empty means the default", cur: up, want: [3]string{"", "", ""}, out: "retry-period=,renew-deadline=,lease-duration="},
		{name: "one field", want: [3]string{"30s", "25s", "12s"}, out: "retry-period=12s"},
		{name: "an invalid triple", want: [3]string{"30s", "25s", "999ms"}, err: "the fleet-agent triple is refused: invalid leader-election timings", reason: OrderInvalid},
		{name: "an unparsable value", want: [3]string{"30s", "25s", "10"}, err: `retryPeriod "10" is not a duration`, reason: OrderInvalid,
			field: "fleet-agent-leader-election-retry-period"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, err := WriteOrder(View{Objects: objectsWith(c.cur)}, FleetAgent, c.want)
			if c.err != "" {
				var oe *OrderError
				if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.err) || oe.Reason != c.reason || oe.Setting != c.field {
					t.Fatalf("err %#v, want %s %q on %q", err, c.reason, c.err, c.field)
				}
				return
			}
			if err != nil || orderString(ws) != c.out {
				t.Fatalf("%q %v, want %q", orderString(ws), err, c.out)
			}
		})
	}
	// An env-sourced setting kept at its env value is no change, even
	// when a user's value from before the env var is remembered.
	envObjs := objectsWith(nil)
	for i := range envObjs {
		if envObjs[i].Name == "fleet-agent-leader-election-retry-period" {
			envObjs[i].Value, envObjs[i].Source = "12s", v3.SourceEnv
		}
	}
	ws, err := WriteOrder(View{Objects: envObjs, Remembered: map[string]string{"fleet-agent-leader-election-retry-period": "20s"}},
		FleetAgent, [3]string{"40s", "25s", "12s"})
	if err != nil || orderString(ws) != "lease-duration=40s" {
		t.Fatalf("env-sourced kept: %q %v", orderString(ws), err)
	}
	// An env-sourced setting that would change: read-only, naming the env var.
	env := func(d Definition) bool { return d.Name == "fleet-agent-leader-election-retry-period" }
	_, err = WriteOrder(View{Objects: objectsWith(nil), EnvSet: env}, FleetAgent, [3]string{"30s", "25s", "12s"})
	var oe *OrderError
	if !errors.As(err, &oe) || oe.Reason != OrderReadOnly || !errors.Is(err, ErrReadOnly) ||
		!strings.Contains(err.Error(), "CATTLE_FLEET_AGENT_LEADER_ELECTION_RETRY_PERIOD") {
		t.Fatalf("env-sourced: %v", err)
	}
}
