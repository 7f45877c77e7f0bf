package election

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestEnvNames(t *testing.T) {
	want := map[EnvPrefix][3]string{
		CattlePrefix:     {"CATTLE_ELECTION_LEASE_DURATION", "CATTLE_ELECTION_RENEW_DEADLINE", "CATTLE_ELECTION_RETRY_PERIOD"},
		FleetAgentPrefix: {"FLEET_AGENT_ELECTION_LEASE_DURATION", "FLEET_AGENT_ELECTION_RENEW_DEADLINE", "FLEET_AGENT_ELECTION_RETRY_PERIOD"},
	}
	for p, names := range want {
		if got := p.EnvNames(); got != names {
			t.Errorf("%s.EnvNames() = %v, want %v", p, got, names)
		}
		for _, n := range names {
			if !p.Owns(n) {
				t.Errorf("%s.Owns(%s) = false", p, n)
			}
		}
	}
	if CattlePrefix.Owns("FLEET_AGENT_ELECTION_RETRY_PERIOD") || CattlePrefix.Owns("CATTLE_ELECTION") {
		t.Error("CattlePrefix owns a name it should not")
	}
}

func TestEnvRoundTrip(t *testing.T) {
	in := tm(37*time.Second, 1500*time.Millisecond+time.Nanosecond, 90*time.Minute/100)
	env := FleetAgentPrefix.Env(in)
	want := []corev1.EnvVar{
		{Name: "FLEET_AGENT_ELECTION_LEASE_DURATION", Value: "37s"},
		{Name: "FLEET_AGENT_ELECTION_RENEW_DEADLINE", Value: "1.500000001s"},
		{Name: "FLEET_AGENT_ELECTION_RETRY_PERIOD", Value: "54s"},
	}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("Env = %v, want %v", env, want)
	}
	got, found, err := FleetAgentPrefix.FromEnv(env)
	if err != nil || !found || got != in {
		t.Fatalf("FromEnv(Env(%s)) = %s, %v, %v", in, got, found, err)
	}
}

func TestFromEnv(t *testing.T) {
	other := corev1.EnvVar{Name: "NAMESPACE", Value: "cattle-fleet-system"}
	full := append([]corev1.EnvVar{other}, CattlePrefix.Env(FleetDefaults)...)

	if _, found, err := CattlePrefix.FromEnv([]corev1.EnvVar{other}); found || err != nil {
		t.Errorf("no entries: found=%v err=%v, want false, nil", found, err)
	}
	if _, found, err := FleetAgentPrefix.FromEnv(full); found || err != nil {
		t.Errorf("other prefix: found=%v err=%v, want false, nil", found, err)
	}

	// The last duplicate wins, as in a container's env.
	dup := append(append([]corev1.EnvVar{}, full...), corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "5s"})
	got, found, err := CattlePrefix.FromEnv(dup)
	if err != nil || !found || got.RetryPeriod != 5*time.Second {
		t.Errorf("duplicate: %s, %v, %v; want retryPeriod 5s", got, found, err)
	}

	_, found, err = CattlePrefix.FromEnv(full[:3])
	if !found || !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "CATTLE_ELECTION_RETRY_PERIOD") {
		t.Errorf("partial: found=%v err=%v, want ErrIncomplete naming the missing env", found, err)
	}

	bad := append([]corev1.EnvVar{}, full...)
	bad[2].Value = "25"
	_, _, err = CattlePrefix.FromEnv(bad)
	var perr *ParseError
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), `CATTLE_ELECTION_RENEW_DEADLINE: renewDeadline "25"`) {
		t.Errorf("unparsable: err=%v, want a ParseError naming env and value", err)
	}

	from := append([]corev1.EnvVar{}, full...)
	from[3] = corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}
	if _, _, err = CattlePrefix.FromEnv(from); err == nil || !strings.Contains(err.Error(), "valueFrom") {
		t.Errorf("valueFrom: err=%v, want an error", err)
	}
}
