package uiapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/rancher/norman/httperror"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/settings"
)

// PlanRequest is the body of POST /plan: a component and the three values
// the user wants for it ("" means the default, as for a Setting).
type PlanRequest struct {
	Component string `json:"component"`
	Values    Triple `json:"values"`
}

// Write is one Setting write, in the order to make it.
type Write struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PlanResponse is what POST /plan answers.
type PlanResponse struct {
	Component string `json:"component"`
	// Writes are the settings to write, in an order in which each write
	// is accepted (every intermediate triple valid); empty when the values
	// are what the settings already say.
	Writes []Write `json:"writes"`
	// Before and After are the component's triple in effect now and once
	// the writes have taken effect (after the settle time).
	Before *Triple `json:"before"`
	After  *Triple `json:"after"`
	// Changes, Totals and LeftAlone are `leasetune plan --set` for Writes:
	// every write the controllers would make, what each restarts, the
	// totals (rollouts, agent redeploys, lock requests per hour before and
	// after) and what they would leave alone.
	Changes   []plan.Change `json:"changes"`
	Totals    plan.Totals   `json:"totals"`
	LeftAlone []string      `json:"leftAlone"`
}

func (s *Server) plan(ctx context.Context, c *clients, req PlanRequest) (*PlanResponse, error) {
	comp := settings.Component(req.Component)
	if _, ok := Titles[comp]; !ok {
		return nil, httperror.NewFieldAPIError(httperror.InvalidBodyContent, "component",
			fmt.Sprintf("component %q: want one of fleet-controller, fleet-agent, rancher", req.Component))
	}
	// Everything `leasetune plan` reads. Only leasetune's record may be
	// missing; what else the caller may not read fails the request, but
	// after the proposed values are judged.
	optional := inventory.All &^ inventory.Settings
	inv, err := s.read(ctx, c, inventory.All, optional)
	if err != nil {
		return nil, err
	}
	view := settings.View{Objects: inv.Settings, Remembered: settings.RememberedValues(inv.StateData()), EnvSet: s.EnvSet}
	writes, err := WriteOrder(view, comp, req.Values)
	if err != nil {
		return nil, err
	}
	if err := inv.Missing(optional &^ inventory.State); err != nil {
		return nil, err
	}
	var set []plan.Assignment
	for _, w := range writes {
		set = append(set, plan.Assignment{Name: w.Name, Value: w.Value})
	}
	rep := plan.FromSnapshot(inv, set)
	out := &PlanResponse{Component: string(comp), Writes: writes, Changes: rep.Changes, Totals: rep.Totals(), LeftAlone: rep.LeftAlone}
	if len(rep.Refused) > 0 {
		// WriteOrder checked every step as CheckChange does; a refusal
		// here means the settings changed in between.
		return nil, httperror.NewAPIError(httperror.Conflict, "the settings changed while the plan was made: "+rep.Refused[0]+"; reload and try again")
	}
	before := rep.Before
	if before == nil {
		before = rep.Triples
	}
	if st := before[comp]; st.HasEffective {
		out.Before = tripleOf(st.Effective)
	}
	if st := rep.Triples[comp]; st.HasEffective {
		out.After = tripleOf(st.Effective)
	}
	if out.Writes == nil {
		out.Writes = []Write{}
	}
	if out.Changes == nil {
		out.Changes = []plan.Change{}
	}
	if out.LeftAlone == nil {
		out.LeftAlone = []string{}
	}
	return out, nil
}

// WriteOrder returns the writes that take component comp's settings to
// want, in an order in which each is accepted by settings.CheckChange (the
// webhook's and /v3/settings' check) given the ones before it: a value
// that resolves to what the setting already resolves to is not written
// (no write when nothing changes). Errors, in Rancher's error shape with
// the setting as fieldName: the proposed triple does not parse or validate
// (422, the rule and the numbers); a setting that would change is set by
// env (405); no order is accepted (422, with CheckChange's message for the
// first write of the closest order).
func WriteOrder(v settings.View, comp settings.Component, want Triple) ([]Write, error) {
	defs := settings.Of(comp)
	byName := map[string]v3.Setting{}
	for _, o := range v.Objects {
		byName[o.Name] = o
	}
	// The proposed triple as a whole first: its own message is clearer
	// than a refusal of one write on the way.
	var next [3]settings.Resolved
	for i, d := range defs {
		next[i] = settings.Resolve(d, settings.Input{Object: &v3.Setting{Value: want.get(d.Field)}})
	}
	if _, err := settings.Evaluate(comp, next); err != nil {
		field := ""
		var pe *election.ParseError
		if errors.As(err, &pe) {
			for _, d := range defs {
				if d.Field == pe.Field {
					field = d.Name
				}
			}
		}
		return nil, httperror.NewFieldAPIError(httperror.InvalidBodyContent, field, fmt.Sprintf("the %s triple is refused: %v", comp, err))
	}
	var changed []settings.Definition
	for i, d := range defs {
		cur := byName[d.Name]
		in := settings.Input{}
		if _, ok := byName[d.Name]; ok {
			in.Object = &cur
		}
		in.Remembered, in.RememberedSet = v.Remembered[d.Name]
		if settings.Resolve(d, in).Value != next[i].Value {
			changed = append(changed, d)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	var firstErr error
	for _, order := range orders(changed) {
		objs := append([]v3.Setting{}, v.Objects...)
		var writes []Write
		var stepErr error
		for _, d := range order {
			value := want.get(d.Field)
			if err := settings.CheckChange(settings.View{Objects: objs, Remembered: v.Remembered, EnvSet: v.EnvSet}, d.Name, value); err != nil {
				stepErr = err
				if errors.Is(err, settings.ErrReadOnly) {
					return nil, httperror.NewFieldAPIError(httperror.MethodNotAllowed, d.Name, err.Error())
				}
				break
			}
			objs = withValue(objs, d.Name, value)
			writes = append(writes, Write{Name: d.Name, Value: value})
		}
		if stepErr == nil {
			return writes, nil
		}
		if firstErr == nil {
			firstErr = stepErr
		}
	}
	var ce *settings.ChangeError
	field := ""
	if errors.As(firstErr, &ce) {
		field = ce.Setting
	}
	return nil, httperror.NewFieldAPIError(httperror.InvalidBodyContent, field, "no order of the writes is accepted: "+firstErr.Error())
}

// withValue returns objs with setting name's value set (added when missing).
func withValue(objs []v3.Setting, name, value string) []v3.Setting {
	for i := range objs {
		if objs[i].Name == name {
			objs[i].Value = value
			return objs
		}
	}
	s := v3.Setting{Value: value}
	s.Name = name
	return append(objs, s)
}

// orders returns every order of defs (at most 3! = 6), the fixed field
// order first.
func orders(defs []settings.Definition) [][]settings.Definition {
	if len(defs) <= 1 {
		return [][]settings.Definition{defs}
	}
	var out [][]settings.Definition
	for i := range defs {
		rest := append(append([]settings.Definition{}, defs[:i]...), defs[i+1:]...)
		for _, p := range orders(rest) {
			out = append(out, append([]settings.Definition{defs[i]}, p...))
		}
	}
	return out
}
