package kit

import (
	"encoding/json"
	"testing"
)

// ServerKept are the metadata fields the API server changes on every write,
// whoever writes: a comparison of an object before and after a write
// leaves them out. uid and creationTimestamp, which the server also keeps,
// stay in: no write changes them, so a difference there is an object
// deleted and created again.
var ServerKept = []string{"resourceVersion", "generation", "managedFields"}

// StripOption names more of an object for Stripped to leave out: what the
// project owns, so that the comparison is of everything else.
type StripOption func(obj map[string]interface{})

// WithoutAnnotations leaves out the annotations named (the project's own
// records and reports); an annotations map left empty goes too.
func WithoutAnnotations(keys ...string) StripOption {
	return func(obj map[string]interface{}) {
		md, _ := obj["metadata"].(map[string]interface{})
		a, _ := md["annotations"].(map[string]interface{})
		for _, k := range keys {
			delete(a, k)
		}
		if a != nil && len(a) == 0 {
			delete(md, "annotations")
		}
	}
}

// WithoutMetadata leaves out metadata altogether, for a comparison of
// what an object asks for (spec) alone.
func WithoutMetadata() StripOption {
	return func(obj map[string]interface{}) { delete(obj, "metadata") }
}

// WithoutSpec leaves out the spec fields named (spec.agentEnvVars of a
// cluster object).
func WithoutSpec(fields ...string) StripOption {
	return func(obj map[string]interface{}) {
		s, _ := obj["spec"].(map[string]interface{})
		for _, f := range fields {
			delete(s, f)
		}
	}
}

// WithoutEnv leaves out the env entries of a Deployment's pod template
// (spec.template.spec.containers[*].env) for which owned(container, name)
// is true.
func WithoutEnv(owned func(container, name string) bool) StripOption {
	return func(obj map[string]interface{}) {
		s, _ := obj["spec"].(map[string]interface{})
		tmpl, _ := s["template"].(map[string]interface{})
		ps, _ := tmpl["spec"].(map[string]interface{})
		cs, _ := ps["containers"].([]interface{})
		for _, it := range cs {
			c, _ := it.(map[string]interface{})
			env, ok := c["env"].([]interface{})
			if !ok {
				continue
			}
			cname, _ := c["name"].(string)
			kept := []interface{}{}
			for _, e := range env {
				m, _ := e.(map[string]interface{})
				if n, _ := m["name"].(string); !owned(cname, n) {
					kept = append(kept, e)
				}
			}
			if len(kept) == 0 {
				delete(c, "env")
			} else {
				c["env"] = kept
			}
		}
	}
}

// Stripped returns obj (a typed object or an Unstructured's content, as
// encoding/json writes it) as JSON with sorted keys, without the
// ServerKept metadata, without status, and without what opts name: two
// objects whose Stripped strings are equal differ only in fields the
// server keeps or the project owns. It fails t when obj does not encode as
// a JSON object.
func Stripped(t testing.TB, obj interface{}, opts ...StripOption) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("kit.Stripped: %v", err)
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("kit.Stripped: not a JSON object: %v", err)
	}
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		for _, f := range ServerKept {
			delete(md, f)
		}
	}
	delete(m, "status")
	for _, o := range opts {
		o(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("kit.Stripped: %v", err)
	}
	return string(out)
}
