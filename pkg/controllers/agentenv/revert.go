package agentenv

import (
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Another writer that keeps removing the project's entries (a GitOps tool
// that owns spec.agentEnvVars, a script) would make every sync a write and
// every write an agent redeploy. The guard counts such reverts per object
// and, after RevertLimit of them within RevertWindow, stops writing that
// object until it changes in some other way.
const (
	// RevertLimit is the number of reverts within RevertWindow after which
	// an object is no longer written.
	RevertLimit = 3
	// RevertWindow is the window reverts are counted in.
	RevertWindow = 10 * time.Minute
)

// isRevert reports whether writing d would restore entries the project
// wrote before and someone has since removed: the record on the object
// already shows what d would write, yet the env lacks it.
func isRevert(u *unstructured.Unstructured, d Decision) bool {
	rec := ownRecord(u)
	if len(rec) == 0 || !reflect.DeepEqual(rec, d.Record) {
		return false
	}
	env, err := agentEnvVars(u)
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

// fingerprintKey is the top-level field under which a slim cached copy
// carries its fingerprint; it exists only in the cache, never in a write
// (writes are merge patches built from scratch). A served object cannot be
// taken for a slim copy (isSlim): it has metadata.creationTimestamp, which
// a slim copy never has, and slimFrom hashes a served field of this name
// like any other.
const fingerprintKey = "leasetune.io/slim-fingerprint"

// isSlim reports whether u is a slim copy (slimFrom) and returns its
// fingerprint.
func isSlim(u *unstructured.Unstructured) (string, bool) {
	fp, ok := u.Object[fingerprintKey].(string)
	if !ok {
		return "", false
	}
	if ts := u.GetCreationTimestamp(); !ts.IsZero() {
		return "", false // a served object
	}
	return fp, true
}

// fingerprint hashes what of an object is not the project's business:
// everything but spec.agentEnvVars, the project's annotations, status and
// the server-kept metadata. A changed fingerprint is a change "otherwise".
//
// A slim cached copy (slim) carries the fingerprint of the whole object it
// was made from, under fingerprintKey.
func fingerprint(u *unstructured.Unstructured) string {
	if fp, ok := isSlim(u); ok {
		return fp
	}
	s, err := slim(u)
	if err != nil {
		return "" // not an object the apiserver serves; never equal to a cached one's
	}
	fp, _ := isSlim(s.(*unstructured.Unstructured))
	return fp
}

// Fingerprint is the revert guard's fingerprint of u (fingerprint): the
// hex SHA-256 of everything of the object but spec.agentEnvVars, status
// (status.driver excepted), the server-kept metadata, the project's two
// annotations and Rancher's bookkeeping of the Plans it applied
// (rancher.IsPlanBookkeeping). An object
// read whole and its slim cached copy have the same one. "" for an object
// the apiserver would not serve.
func Fingerprint(u *unstructured.Unstructured) string { return fingerprint(u) }

// envWriters names the field managers other than the project's that manage
// spec.agentEnvVars of u, latest first ("" when none is recorded).
func envWriters(u *unstructured.Unstructured) string {
	type w struct {
		name string
		at   time.Time
	}
	var ws []w
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == FieldManager || mf.FieldsV1 == nil || !strings.Contains(string(mf.FieldsV1.Raw), `"f:agentEnvVars"`) {
			continue
		}
		var at time.Time
		if mf.Time != nil {
			at = mf.Time.Time
		}
		ws = append(ws, w{mf.Manager + " (" + string(mf.Operation) + ")", at})
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.After(ws[j].at) })
	var names []string
	for _, x := range ws {
		names = append(names, x.name)
	}
	return strings.Join(names, ", ")
}
