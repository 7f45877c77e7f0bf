package agentenv

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Annotations.
const (
	// LeaseDurationAnnotation, RenewDeadlineAnnotation and
	// RetryPeriodAnnotation override the global agent triple for one
	// cluster; each is optional.
	LeaseDurationAnnotation = "election.cattle.io/lease-duration"
	RenewDeadlineAnnotation = "election.cattle.io/renew-deadline"
	RetryPeriodAnnotation   = "election.cattle.io/retry-period"
	// RecordAnnotation, on the written object, records the entries the
	// project wrote (JSON: env name → value).
	RecordAnnotation = "leasetune.io/agent-env"
	// StatusAnnotation, on the object that holds the overrides, says why
	// the cluster is left alone; absent when all is well.
	StatusAnnotation = "leasetune.io/agent-env-status"
)

// OverrideAnnotations lists the override annotations in the fixed field order.
var OverrideAnnotations = [3]string{LeaseDurationAnnotation, RenewDeadlineAnnotation, RetryPeriodAnnotation}

// CompactEnvKey is the field of a slim cached copy's spec (pkg/agentenv/slim)
// that holds spec.agentEnvVars as JSON text; it exists only in the cache.
// EnvVars reads either form.
const CompactEnvKey = "leasetune.io/agentEnvVars-json"

// EnvVars returns u's spec.agentEnvVars as raw items (so that fields of
// entries the project does not own survive exactly), or an error when the
// field is not a list of objects.
//
// A slim cached copy holds the list as JSON text (CompactEnvKey); it is
// decoded here, numbers as json.Number so that they are written back as
// they were.
func EnvVars(u *unstructured.Unstructured) ([]map[string]interface{}, error) {
	if text, found, _ := unstructured.NestedString(u.Object, "spec", CompactEnvKey); found {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var list []interface{}
		if err := dec.Decode(&list); err != nil {
			return nil, fmt.Errorf("spec.agentEnvVars: %w", err)
		}
		return envItemsOf(list)
	}
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "agentEnvVars")
	if err != nil || !found || raw == nil {
		return nil, err
	}
	list, ok := raw.([]interface{})
	if !ok {
		return nil, fmt.Errorf("spec.agentEnvVars is not a list")
	}
	return envItemsOf(list)
}

// envItemsOf checks that every item of an agentEnvVars list is an object.
func envItemsOf(list []interface{}) ([]map[string]interface{}, error) {
	out := make([]map[string]interface{}, 0, len(list))
	for i, it := range list {
		m, ok := it.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("spec.agentEnvVars[%d] is not an object", i)
		}
		out = append(out, m)
	}
	return out, nil
}

// ownRecord reads RecordAnnotation; a malformed one counts as no record.
func ownRecord(u *unstructured.Unstructured) map[string]string {
	v, ok := u.GetAnnotations()[RecordAnnotation]
	if !ok {
		return nil
	}
	var r map[string]string
	if json.Unmarshal([]byte(v), &r) != nil {
		return nil
	}
	return r
}

// OverridesOf reads the override annotations of u (missing ones are ""),
// in the fixed field order.
func OverridesOf(u *unstructured.Unstructured) (vals [3]string, set [3]bool) {
	ann := u.GetAnnotations()
	for i, a := range OverrideAnnotations {
		vals[i], set[i] = ann[a]
	}
	return vals, set
}

// SourceFacts is what a decision reads of a cluster's source object:
// FactsOf reads them, Decide decides from them. The zero SourceFacts are
// those of an object with no agent env, no record and no overrides.
type SourceFacts struct {
	// Entries are its CATTLE_ELECTION_* entries of spec.agentEnvVars, in
	// order (a valueFrom entry has ValueFrom set, its source dropped).
	Entries []corev1.EnvVar
	// Record is leasetune's record of what it wrote there (nil: none).
	Record map[string]string
	// Overrides and Set are its override annotations, in field order.
	Overrides [3]string
	Set       [3]bool
	// Malformed is true when spec.agentEnvVars is not a list of objects.
	Malformed bool

	// What Decide decides from is kept apart from the fields above, so
	// that a copy with those edited (a caller previewing an override)
	// still decides as the object does: env and envErr are the whole
	// spec.agentEnvVars as decoded once (rather than decoding the
	// object's JSON again), record the Record's map (read only, as the
	// object's own maps are), overrides and set copies.
	env       []map[string]interface{}
	envErr    error
	record    map[string]string
	overrides [3]string
	set       [3]bool
}

// FactsOf reads u's SourceFacts (a slim cached copy or a whole object),
// decoding its spec.agentEnvVars once. Its maps (Record, and the entries
// Decide decides from) are read only.
func FactsOf(u *unstructured.Unstructured) SourceFacts {
	f := SourceFacts{Record: ownRecord(u)}
	f.Overrides, f.Set = OverridesOf(u)
	f.record, f.overrides, f.set = f.Record, f.Overrides, f.Set
	f.env, f.envErr = EnvVars(u)
	if f.envErr != nil {
		f.Malformed = true
		return f
	}
	f.Entries = electionEntriesOf(f.env)
	return f
}
