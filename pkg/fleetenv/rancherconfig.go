package fleetenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// Rancher keeps the values it installs the Fleet chart with under this key
// of the ConfigMap cattle-system/rancher-config.
const (
	RancherConfigName = "rancher-config"
	RancherConfigKey  = "fleet"
	// DefaultRancherNamespace is Rancher's namespace.
	DefaultRancherNamespace = "cattle-system"
)

// chart value keys of a triple, in the order election.Fields.
var valueKeys = [3]string{"leaseDuration", "renewDeadline", "retryPeriod"}

// chartDefaults is what Fleet's chart renders for a triple the values leave
// out: leaderElection and agent.leaderElection are 30s/25s/10s in
// charts/fleet/values.yaml at v0.13.14 and v0.14.10 (v0.10 to v0.12 for
// leaderElection). A triple at those values whose three keys are all
// absent is left absent: adding them would change nothing the chart
// renders (seen beside the real Rancher v2.12.12, tests/upstream: a write
// of rancher-config at the settings' defaults, right after leasetune's
// install). Otherwise the three are written together.
var chartDefaults = election.FleetDefaults

// noneOf reports whether the mapping under path in m, if any, holds none
// of the three keys of a triple.
func noneOf(m *yaml.Node, path ...string) bool {
	for _, key := range path {
		var next *yaml.Node
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				next = m.Content[i+1]
			}
		}
		if next == nil || next.Kind != yaml.MappingNode {
			return next == nil || (next.Kind == yaml.ScalarNode && next.Tag == "!!null")
		}
		m = next
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		for _, k := range valueKeys {
			if m.Content[i].Value == k {
				return false
			}
		}
	}
	return true
}

// MergeChartValues sets leaderElection.* to ctrl and agent.leaderElection.*
// to agent (each only when its ok flag is set) in the Fleet chart values
// YAML doc, and touches nothing else: other keys, their order and comments
// stay. A key whose value already parses to the right duration is kept as
// written. It returns the new document and whether anything changed; an
// error when doc is not a YAML mapping (then it must not be touched).
func MergeChartValues(doc string, ctrl election.Timings, ctrlOK bool, agent election.Timings, agentOK bool) (string, bool, error) {
	dec := yaml.NewDecoder(strings.NewReader(doc))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("%s: %s is not YAML: %w", RancherConfigName, RancherConfigKey, err)
	}
	var second yaml.Node
	if err := dec.Decode(&second); !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("%s: %s holds more than one YAML document", RancherConfigName, RancherConfigKey)
	}
	if root.Kind == 0 {
		root = yaml.Node{Kind: yaml.DocumentNode}
	}
	// An empty, comment-only or null document is an empty mapping.
	if len(root.Content) == 0 || (root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null") {
		root.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return "", false, fmt.Errorf("%s: %s is not a YAML mapping", RancherConfigName, RancherConfigKey)
	}
	changed := false
	set := func(m *yaml.Node, t election.Timings) error {
		c, err := setTriple(m, t)
		changed = changed || c
		return err
	}
	if ctrlOK && ctrl == chartDefaults && noneOf(top, "leaderElection") {
		ctrlOK = false
	}
	if agentOK && agent == chartDefaults && noneOf(top, "agent", "leaderElection") {
		agentOK = false
	}
	if ctrlOK {
		le, err := child(top, "leaderElection")
		if err != nil {
			return "", false, err
		}
		if err := set(le, ctrl); err != nil {
			return "", false, err
		}
	}
	if agentOK {
		ag, err := child(top, "agent")
		if err != nil {
			return "", false, err
		}
		le, err := child(ag, "leaderElection")
		if err != nil {
			return "", false, err
		}
		if err := set(le, agent); err != nil {
			return "", false, err
		}
	}
	if !changed {
		return doc, false, nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return "", false, err
	}
	var check interface{}
	if err := yaml.Unmarshal(buf.Bytes(), &check); err != nil {
		return "", false, fmt.Errorf("%s: merging into %s would not give valid YAML (%w): left alone", RancherConfigName, RancherConfigKey, err)
	}
	return buf.String(), true, nil
}

// child returns the mapping under key in m, adding an empty one at the end
// when key is missing or null; an error when it holds something else.
func child(m *yaml.Node, key string) (*yaml.Node, error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				*v = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			}
			if v.Anchor != "" || v.Kind == yaml.AliasNode {
				return nil, fmt.Errorf("%s: %s.%s is a YAML anchor or alias, shared with other keys: left alone", RancherConfigName, RancherConfigKey, key)
			}
			if v.Kind != yaml.MappingNode {
				return nil, fmt.Errorf("%s: %s.%s is not a mapping", RancherConfigName, RancherConfigKey, key)
			}
			return v, nil
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v, nil
}

// setTriple sets the three duration keys of m to t, keeping a key whose
// value already parses to the right duration and passes Fleet v0.16's
// values schema; it reports a change. A value
// to change that is a YAML anchor or alias is an error: other keys may
// share it, so changing it would change them too.
func setTriple(m *yaml.Node, t election.Timings) (bool, error) {
	changed := false
	for i, f := range election.Fields {
		want := election.FormatDuration(t.Get(f))
		found := false
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value != valueKeys[i] {
				continue
			}
			found = true
			v := m.Content[j+1]
			// Kept as written only where Fleet v0.16's chart accepts it too.
			if d, err := election.ParseDuration(f, v.Value); err == nil && v.Kind == yaml.ScalarNode && d == t.Get(f) &&
				fleet.ChartDurationError(valueKeys[i], v.Value) == nil {
				continue
			}
			if v.Anchor != "" || v.Kind == yaml.AliasNode {
				return false, fmt.Errorf("%s: %s value %s is a YAML anchor or alias, shared with other keys: left alone", RancherConfigName, RancherConfigKey, valueKeys[i])
			}
			*v = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: want, LineComment: v.LineComment}
			changed = true
		}
		if !found {
			m.Content = append(m.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: valueKeys[i]},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: want})
			changed = true
		}
	}
	return changed, nil
}

// ChartValueProblems lists the leaderElection.* and agent.leaderElection.*
// values of rancher-config's fleet document doc that Fleet v0.16's values
// schema refuses (fleet.ChartDurationError), each naming the key, the value
// and the pattern; none when doc is not a YAML mapping (MergeChartValues
// says so).
func ChartValueProblems(doc string) []string {
	var values map[string]interface{}
	if yaml.Unmarshal([]byte(doc), &values) != nil {
		return nil
	}
	var out []string
	check := func(prefix string, m map[string]interface{}) {
		le, _ := m["leaderElection"].(map[string]interface{})
		for _, k := range valueKeys {
			if v, ok := le[k]; ok {
				if err := fleet.ChartDurationError(prefix+"leaderElection."+k, v); err != nil {
					out = append(out, RancherConfigName+" "+RancherConfigKey+" "+err.Error())
				}
			}
		}
	}
	check("", values)
	if ag, ok := values["agent"].(map[string]interface{}); ok {
		check("agent.", ag)
	}
	return out
}
