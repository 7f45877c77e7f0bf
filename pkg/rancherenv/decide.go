package rancherenv

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/value"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
)

// RecordAnnotation is the annotation on the Rancher Deployment that records
// the three CATTLE_ELECTION_* entries leasetune wrote on its rancher
// container, as a JSON object of name to value, written in the same patch
// as the entries. Entries of those names that do not match it are someone
// else's (the Helm release's extraEnv, an edit) and are never touched.
const RecordAnnotation = "leasetune.io/rancher-election-env"

// Problem says why the Rancher Deployment is left as it is.
type Problem string

const (
	// ProblemNone: nothing stands in the way.
	ProblemNone Problem = ""
	// ProblemNoContainer: the Deployment has no container named rancher.
	ProblemNoContainer Problem = "no-container"
	// ProblemVersionUnknown: the image tag tells no release version.
	ProblemVersionUnknown Problem = "version-unknown"
	// ProblemUnsupported: Rancher 2.8.0-2.8.2 (or older) reads no election env.
	ProblemUnsupported Problem = "unsupported"
	// ProblemForeign: another writer set one of the three names.
	ProblemForeign Problem = "foreign"
	// ProblemNotReady: a write is due but the Deployment is mid-rollout or
	// not available; it is made once it is.
	ProblemNotReady Problem = "not-ready"
	// ProblemUnsafeStrategy: the Deployment's strategy would stop every
	// Rancher replica at once (Recreate, or a rolling update whose
	// maxUnavailable covers every replica): a write would take Rancher
	// down, so none is made.
	ProblemUnsafeStrategy Problem = "unsafe-strategy"
)

// Input is what Decide needs besides the Deployment.
type Input struct {
	// Triple is the effective Rancher triple; OK is false when none is
	// known (then nothing is written).
	Triple election.Timings
	OK     bool
	// Version, when Known, replaces reading the image (--rancher-version).
	Version rancher.Version
	// PendingUntil, when not zero, is when a new Rancher triple waiting in
	// the settle time takes effect: until then nothing is written, not
	// even the triple still in effect (one rollout for a triple the
	// operator has already replaced, then another).
	PendingUntil time.Time
}

// Decision is what to do with the Rancher Deployment.
type Decision struct {
	// Env is the three entries to hold, in field order; Remove is true when
	// leasetune's entries go (the triple is back at Rancher's built-in
	// defaults). Write is false when the Deployment already holds what it
	// should, or Problem stands in the way.
	Env    []corev1.EnvVar
	Remove bool
	Write  bool
	// Problem and Reason say why nothing is written; Reason is one
	// sentence naming what was found. Pending is true when the write waits
	// for a triple pending in the settle time (Problem is then
	// ProblemNotReady).
	Problem Problem
	Reason  string
	Pending bool
	// Version is the Rancher version the decision followed.
	Version rancher.Version
}

// Decide computes, without side effects, the CATTLE_ELECTION_* entries the
// rancher container of d must hold for the Rancher triple (docs/design.md,
// "How the timings reach each process": Rancher 2.8.3+ reads them for its lock
// kube-system/cattle-controllers through wrangler's pkg/leader, rancher/
// rancher pkg/wrangler/context.go leader.NewManager("", "cattle-controllers"),
// wrangler v2.1.4 and v3.2.1 pkg/leader/leader.go computeConfig; Rancher's
// chart renders none, chart/templates/deployment.yaml at v2.11.3, so they
// come only from its extraEnv value).
//
// The rules, in order: no container "rancher", or a version that is not
// known or reads no env (before 2.8.3), write nothing; entries of the
// three names that are not exactly leasetune's record (RecordAnnotation)
// belong to someone else and the Deployment is left alone (a second entry
// of a name would be a duplicate); with no entries, the built-in defaults
// (45s/30s/2s, election.WranglerDefaults) need no write, so installing
// leasetune restarts nothing; leasetune's own entries follow the triple and
// go when it is back at the defaults (one or two of them removed by hand
// are completed again: never a partial triple). A due write waits while
// the Deployment is not Settled, and while another triple is pending in
// the settle time (in.PendingUntil).
func Decide(d *appsv1.Deployment, in Input) Decision {
	v := in.Version
	if !v.Known {
		v, _ = rancher.Detect(d)
	}
	out := Decision{Version: v}
	ci := rancher.ContainerIndex(d)
	if ci < 0 {
		return out.problem(ProblemNoContainer, fmt.Sprintf("Deployment %s/%s has no container %q", d.Namespace, d.Name, rancher.Container))
	}
	if !v.Known {
		image := d.Spec.Template.Spec.Containers[ci].Image
		return out.problem(ProblemVersionUnknown, fmt.Sprintf("the image %q has no release tag, so the Rancher version is not known (set --rancher-version, chart value rancherVersion)", image))
	}
	if !v.AtLeast(2, 8, 3) {
		return out.problem(ProblemUnsupported, fmt.Sprintf("Rancher %s builds with wrangler v1, whose leader election reads no CATTLE_ELECTION_* (45s/30s/2s hardcoded); Rancher 2.8.3 and later read them", v))
	}
	if !in.OK || in.Triple.Validate() != nil {
		return out
	}
	env := d.Spec.Template.Spec.Containers[ci].Env
	found, foreign := owned(d, env)
	if foreign != "" {
		return out.problem(ProblemForeign, foreign)
	}
	atDefaults := in.Triple == election.WranglerDefaults
	switch {
	case len(found) == 0 && atDefaults:
		return out // Rancher's built-in triple, nothing to write
	case len(found) > 0 && atDefaults:
		out.Remove, out.Write = true, true
	default:
		out.Env = election.CattlePrefix.Env(in.Triple)
		out.Write = len(found) == 0 || !holds(env, in.Triple)
	}
	if out.Write {
		if p, why := WriteProblem(d); p != ProblemNone {
			return out.problem(p, why)
		}
		if !in.PendingUntil.IsZero() {
			out = out.problem(ProblemNotReady, fmt.Sprintf("another Rancher triple is pending in the settle time, until %s, and nothing is written before then", in.PendingUntil.UTC().Format(time.RFC3339)))
			out.Pending = true
			return out
		}
	}
	return out
}

// WriteProblem says what stops a write of d's env whatever the triple,
// were one due (Decide's last two rules): ProblemUnsafeStrategy when its
// rollout strategy would stop every Rancher replica at once,
// ProblemNotReady when it is not Settled; ProblemNone and "" otherwise.
func WriteProblem(d *appsv1.Deployment) (Problem, string) {
	if why := unsafeStrategy(d); why != "" {
		return ProblemUnsafeStrategy, why
	}
	if ok, why := Settled(d); !ok {
		return ProblemNotReady, why
	}
	return ProblemNone, ""
}

func (d Decision) problem(p Problem, reason string) Decision {
	d.Problem, d.Reason, d.Write, d.Env, d.Remove = p, reason, false, nil, false
	return d
}

// Record reads RecordAnnotation; nil when absent or unreadable.
func Record(d *appsv1.Deployment) map[string]string {
	raw, ok := d.Annotations[RecordAnnotation]
	if !ok {
		return nil
	}
	var m map[string]string
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m
}

// owned returns the entries of the three names in env when all of them are
// leasetune's (each name once, a literal value equal to the record), or a
// sentence naming the entries that are someone else's and who set them.
func owned(d *appsv1.Deployment, env []corev1.EnvVar) (found []corev1.EnvVar, foreign string) {
	rec := Record(d)
	_, hasRec := d.Annotations[RecordAnnotation]
	count := map[string]int{}
	var theirs []string
	mine := false // an entry only leasetune's field manager set, not as recorded
	for _, e := range env {
		if !election.CattlePrefix.Owns(e.Name) {
			continue
		}
		count[e.Name]++
		found = append(found, e)
		if e.ValueFrom == nil && rec != nil && rec[e.Name] == e.Value && count[e.Name] == 1 {
			continue
		}
		v := e.Value
		if e.ValueFrom != nil {
			v = "(valueFrom)"
		}
		who := "another writer"
		if m := Managers(d, e.Name); len(m) > 0 {
			who = "field manager " + strings.Join(m, ", ")
		} else if managedBy(d, own.FieldManager, e.Name) {
			who, mine = "field manager "+own.FieldManager, true
		}
		theirs = append(theirs, fmt.Sprintf("%s=%s, set by %s", e.Name, v, who))
	}
	// Fewer than three, each exactly leasetune's record: the others were
	// removed by hand. They are completed (or, at the defaults, the rest
	// removed), so that no partial triple stays.
	if len(theirs) == 0 {
		return found, ""
	}
	record := "not leasetune's"
	switch {
	case !mine:
	case rec != nil:
		record = fmt.Sprintf("not known to be leasetune's (its record of what it wrote, the annotation %s, does not match: edited by hand?)", RecordAnnotation)
	case hasRec:
		record = fmt.Sprintf("not known to be leasetune's (its record of what it wrote, the annotation %s, is unreadable)", RecordAnnotation)
	default:
		record = fmt.Sprintf("not known to be leasetune's (its record of what it wrote, the annotation %s, is missing: removed by hand?)", RecordAnnotation)
	}
	return nil, fmt.Sprintf("the rancher container has %s, %s; a second entry of a name would be a duplicate, so leasetune leaves the Deployment alone (to set Rancher's timings, use the Helm release's extraEnv, or remove those entries and let leasetune own all three)",
		strings.Join(theirs, "; "), record)
}

// holds reports whether env gives the three names exactly t.
func holds(env []corev1.EnvVar, t election.Timings) bool {
	got, found, err := election.CattlePrefix.FromEnv(env)
	return found && err == nil && got == t
}

// unsafeStrategy says why d's rollout strategy would stop every Rancher
// replica at once, or "" when it keeps some serving. Rancher's chart
// renders RollingUpdate with maxSurge 1 and maxUnavailable 0 for one
// replica, 1 otherwise (rancher/rancher v2.11.3 chart/templates/
// deployment.yaml); the API defaults an unset strategy to RollingUpdate
// 25%/25% (k8s.io/kubernetes v1.32.13 pkg/apis/apps/v1/defaults.go).
// maxUnavailable is scaled as the Deployment controller scales it:
// a percentage rounded down (pkg/controller/deployment/util.ResolveFenceposts).
func unsafeStrategy(d *appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if want == 0 {
		return ""
	}
	st := d.Spec.Strategy
	if st.Type == appsv1.RecreateDeploymentStrategyType {
		return "the Deployment's strategy is Recreate: a new env would stop every Rancher replica before starting new ones; use RollingUpdate (as Rancher's chart does)"
	}
	if st.RollingUpdate == nil || st.RollingUpdate.MaxUnavailable == nil {
		return ""
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(st.RollingUpdate.MaxUnavailable, int(want), false)
	if err != nil {
		return fmt.Sprintf("the Deployment's maxUnavailable %q is not readable: %v", st.RollingUpdate.MaxUnavailable.String(), err)
	}
	if n >= int(want) {
		return fmt.Sprintf("the Deployment's maxUnavailable %s lets a rollout stop all %d Rancher replica(s) at once; lower it (Rancher's chart uses 1, or 0 for one replica)", st.RollingUpdate.MaxUnavailable.String(), want)
	}
	return ""
}

// Settled reports whether d is available and not mid-rollout: the
// controller has seen its last spec (observedGeneration), every replica
// runs the current template and is available, no old replica is left, and
// it is not paused. A write to a Deployment that is not settled would
// start a rollout on top of one in progress, or roll a Rancher that is
// already short of replicas.
func Settled(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case d.Spec.Paused:
		return false, "the Deployment is paused"
	case s.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("the Deployment controller has not yet seen generation %d (observed %d)", d.Generation, s.ObservedGeneration)
	case s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want || s.UnavailableReplicas != 0:
		return false, fmt.Sprintf("a rollout is in progress or replicas are unavailable: %d wanted, %d updated, %d total, %d available", want, s.UpdatedReplicas, s.Replicas, s.AvailableReplicas)
	}
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status != corev1.ConditionTrue {
			return false, "the Deployment is not Available: " + c.Message
		}
	}
	return true, ""
}

// Managers returns the field managers (managedFields) other than leasetune
// that own the rancher container's env entry name or its value, sorted,
// for reports.
func Managers(d *appsv1.Deployment, name string) []string {
	seen := map[string]bool{}
	for _, m := range managers(d, name) {
		if m != own.FieldManager {
			seen[m] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// managedBy reports whether manager owns the rancher container's env entry
// name or its value.
func managedBy(d *appsv1.Deployment, manager, name string) bool {
	for _, m := range managers(d, name) {
		if m == manager {
			return true
		}
	}
	return false
}

// managers lists the field managers (leasetune included) that own the
// rancher container's env entry name or its value.
func managers(d *appsv1.Deployment, name string) []string {
	var out []string
	for _, mf := range d.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if set.FromJSON(strings.NewReader(string(mf.FieldsV1.Raw))) != nil {
			continue
		}
		if set.Has(envPath(name)) || set.Has(append(envPath(name), fieldpath.PathElement{FieldName: strptr("value")})) {
			out = append(out, mf.Manager)
		}
	}
	return out
}

func strptr(s string) *string { return &s }

// envPath is the managedFields path of the rancher container's env entry
// name: .spec.template.spec.containers[name=rancher].env[name=NAME].
func envPath(name string) fieldpath.Path {
	key := func(v string) *value.FieldList {
		return &value.FieldList{{Name: "name", Value: value.NewValueInterface(v)}}
	}
	return fieldpath.Path{
		{FieldName: strptr("spec")}, {FieldName: strptr("template")}, {FieldName: strptr("spec")},
		{FieldName: strptr("containers")}, {Key: key(rancher.Container)},
		{FieldName: strptr("env")}, {Key: key(name)},
	}
}
