package agentenv

import (
	"errors"
	"fmt"
	"reflect"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// Effective returns the cluster's triple: global, with each override
// annotation that is set replacing its field; validated. Errors name the
// annotation and its value, or list the rules broken with the numbers.
func Effective(global election.Timings, vals [3]string, set [3]bool) (election.Timings, error) {
	t := global
	var errs []error
	for i, f := range election.Fields {
		if !set[i] {
			continue
		}
		d, err := election.ParseDuration(f, vals[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", OverrideAnnotations[i], err))
			continue
		}
		t = t.With(f, d)
	}
	if len(errs) > 0 {
		return t, errors.Join(errs...)
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	return t, nil
}

// Problem says why a cluster is left alone.
type Problem string

const (
	// ProblemInvalid: the effective triple does not validate.
	ProblemInvalid Problem = "invalid"
	// ProblemForeign: an entry with one of the three names was not
	// written by the project.
	ProblemForeign Problem = "foreign"
)

// Decision is the outcome of Decide.
type Decision struct {
	// Change is true when Env or Record must be written.
	Change bool
	// Env is the new spec.agentEnvVars (nil: none).
	Env []map[string]interface{}
	// Record is the new ownership record (nil: none).
	Record map[string]string
	// Effective is the cluster's triple (valid unless Problem is ProblemInvalid).
	Effective election.Timings
	// Problem and Err say why the cluster is left as it is; Change is
	// then false.
	Problem Problem
	Err     error
}

// Decide computes a cluster's spec.agentEnvVars from its current list env,
// the project's record of what it wrote, the override annotations, the
// global agent triple and the Fleet agent channel.
//
//   - The effective triple must validate, or the cluster is left alone
//     (ProblemInvalid).
//   - An entry named CATTLE_ELECTION_* that the record does not show with
//     that value (or that takes its value from a source, or appears twice)
//     is someone else's: the cluster is left alone (ProblemForeign).
//   - Agents that run no election (fleet.ChannelNoElection): nothing is
//     written.
//   - Where the effective triple differs from the channel's baseline, the
//     three entries hold it: owned entries keep their position, missing
//     ones are appended in the fixed order. Otherwise the owned entries are
//     removed (a removed override leaves nothing behind).
//
// Entries the project does not own are copied unchanged.
func Decide(env []map[string]interface{}, rec map[string]string, vals [3]string, set [3]bool,
	global election.Timings, channel fleet.AgentChannel) Decision {
	eff, err := Effective(global, vals, set)
	if err != nil {
		return Decision{Effective: eff, Problem: ProblemInvalid, Err: err}
	}
	owned := map[string]int{} // name → index in env
	for i, e := range env {
		name, _ := e["name"].(string)
		if !election.CattlePrefix.Owns(name) {
			continue
		}
		value, isString := e["value"].(string)
		_, fromSource := e["valueFrom"]
		_, dup := owned[name]
		want, recorded := rec[name]
		if dup || fromSource || !isString || !recorded || want != value {
			return Decision{Effective: eff, Problem: ProblemForeign, Err: fmt.Errorf(
				"spec.agentEnvVars has %s=%q, which leasetune did not write: it is left as it is", name, value)}
		}
		owned[name] = i
	}
	baseline, elects := channel.Baseline(global)
	if !elects {
		return Decision{Effective: eff}
	}
	var out []map[string]interface{}
	var newRec map[string]string
	if eff != baseline {
		want := map[string]string{}
		for _, e := range election.CattlePrefix.Env(eff) {
			want[e.Name] = e.Value
		}
		newRec = want
		for i, e := range env {
			name, _ := e["name"].(string)
			if _, mine := owned[name]; mine && owned[name] == i {
				out = append(out, map[string]interface{}{"name": name, "value": want[name]})
				continue
			}
			out = append(out, e)
		}
		for _, name := range election.CattlePrefix.EnvNames() {
			if _, ok := owned[name]; !ok {
				out = append(out, map[string]interface{}{"name": name, "value": want[name]})
			}
		}
	} else {
		for i, e := range env {
			name, _ := e["name"].(string)
			if idx, mine := owned[name]; mine && idx == i {
				continue
			}
			out = append(out, e)
		}
	}
	change := !sameEnv(env, out) || !reflect.DeepEqual(normRecord(rec), normRecord(newRec))
	return Decision{Change: change, Env: out, Record: newRec, Effective: eff}
}

func sameEnv(a, b []map[string]interface{}) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func normRecord(r map[string]string) map[string]string {
	if len(r) == 0 {
		return nil
	}
	return r
}
