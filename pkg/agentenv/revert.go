package agentenv

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/restart"
)

// Another writer that keeps removing the project's entries (a GitOps tool
// that owns spec.agentEnvVars, a script) would make every sync a write and
// every write an agent redeploy. The controller's revert guard counts such
// reverts (IsRevert) and, after a few of them within a window, stops
// writing the object until it changes in some other way, saying so in its
// StatusAnnotation (FenceMessage).

// IsRevert reports whether writing d would restore entries the project
// wrote before and someone has since removed: the record on the object
// already shows what d would write, yet the env lacks it.
func IsRevert(u *unstructured.Unstructured, d Decision) bool {
	rec := ownRecord(u)
	if len(rec) == 0 || !reflect.DeepEqual(rec, d.Record) {
		return false
	}
	env, err := EnvVars(u)
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, e := range env {
		name, _ := e["name"].(string)
		value, _ := e["value"].(string)
		if rec[name] == value {
			have[name] = true
		}
	}
	return len(have) < len(rec)
}

// FenceMessage is the StatusAnnotation and Event of a cluster whose object
// the revert guard stops writing after reverts within window; writer names
// the other field managers of spec.agentEnvVars ("" when none is
// recorded).
func FenceMessage(writer string, reverts int, window time.Duration, rt Routing) string {
	if writer == "" {
		writer = "another writer"
	}
	return fmt.Sprintf("%s removed leasetune's CATTLE_ELECTION_* entries from spec.agentEnvVars %d times within %s; %s (each write redeploys %s) until it changes otherwise; to keep other timings here, give the other writer the entries, or remove the override annotations",
		writer, reverts, window, fenced, Restarts(rt))
}

// fenced is the phrase of every FenceMessage.
const fenced = "leasetune stops writing this object"

// IsFenceMessage reports whether a StatusAnnotation value is the revert
// guard's (the object is not written until it changes otherwise).
func IsFenceMessage(status string) bool { return strings.Contains(status, fenced) }

// Restarts is what a change of a routed object's agent env redeploys.
func Restarts(rt Routing) restart.Set { return restart.OfCluster(rt.RancherManaged, rt.Replans) }
