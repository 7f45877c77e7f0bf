package slim

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
)

// FuzzSlimFromJSON: the streaming decoder never panics; wherever
// encoding/json reads the input as an object, the decoder either refuses
// it or keeps exactly the values encoding/json reads for the fields the
// controller uses, and the fingerprint does not depend on how the same
// object is written (white space, escaping, number forms): the cached copy
// and a live read of one object must agree.
func FuzzSlimFromJSON(f *testing.F) {
	var seed bytes.Buffer
	_ = json.NewEncoder(&seed).Encode(wireCluster().Object)
	f.Add(seed.Bytes())
	f.Add([]byte(`{"metadata":{"name":"a","annotations":{"leasetune.io/agent-env":"{}"}},"spec":{"agentEnvVars":[{"name":"X","value":"\u2028"}]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"management.cattle.io/cluster-name":"c-x"}},"spec":{"rkeConfig":{}},"status":{"clusterName":"c-x"}}`))
	f.Add([]byte(`{"spec":{"agentEnvVars":null,"n":1e400}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := slimFromJSON(data)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var whole map[string]interface{}
		if dec.Decode(&whole) != nil || whole == nil || dec.More() {
			return // not one JSON object: any answer but a panic will do
		}
		if err != nil {
			return // a shape the apiserver never serves, refused
		}
		u := &unstructured.Unstructured{Object: whole}
		md, _ := whole["metadata"].(map[string]interface{})
		if _, ok := md["creationTimestamp"]; ok {
			return // the fields below are read as typed metadata, which may refuse odd timestamps
		}
		if s.GetName() != strOf(md["name"]) || s.GetNamespace() != strOf(md["namespace"]) {
			t.Fatalf("name %q/%q, encoding/json %v/%v", s.GetNamespace(), s.GetName(), md["namespace"], md["name"])
		}
		for _, a := range append(agentenv.OverrideAnnotations[:], agentenv.RecordAnnotation, agentenv.StatusAnnotation) {
			want, _ := md["annotations"].(map[string]interface{})
			if got, ok := s.GetAnnotations()[a]; ok != (want[a] != nil) || got != strOf(want[a]) {
				t.Fatalf("annotation %s: %q %v, encoding/json %v", a, got, ok, want[a])
			}
		}
		got, gerr := agentenv.EnvVars(s)
		want, werr := agentenv.EnvVars(u)
		if (gerr == nil) != (werr == nil) || (gerr == nil && !sameEnvVars(got, want)) {
			t.Fatalf("agentEnvVars %v (%v), encoding/json %v (%v)", got, gerr, want, werr)
		}
		// The same object written otherwise: indented, HTML escaped or not.
		for _, indent := range []string{"", "  "} {
			for _, html := range []bool{true, false} {
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetIndent("", indent)
				enc.SetEscapeHTML(html)
				if err := enc.Encode(whole); err != nil {
					return
				}
				again, err := slimFromJSON(b.Bytes())
				if err != nil {
					t.Fatalf("refuses the same object re-encoded: %v\n%s", err, b.Bytes())
				}
				if fa, fb := fingerprint(again), fingerprint(s); !sortedKeys(data) || fa == fb {
					continue
				}
				t.Fatalf("fingerprint differs for the same object re-encoded (indent %q, html %v):\n%s\n%s", indent, html, data, b.Bytes())
			}
		}
	})
}

// FuzzWatchDecoder: whatever a watch stream holds, the decoder never
// panics, reads each event in order and ends with an error (io.EOF at a
// clean end) within as many events as the stream has bytes.
func FuzzWatchDecoder(f *testing.F) {
	var obj bytes.Buffer
	_ = json.NewEncoder(&obj).Encode(wireCluster().Object)
	o := bytes.TrimSpace(obj.Bytes())
	f.Add(append(append([]byte(`{"type":"ADDED","object":`), o...), []byte("}\n{\"type\":\"DELETED\",\"object\":{}}\n")...))
	f.Add([]byte(`{"type":"ERROR","object":{"kind":"Status","code":410}}`))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}{"type":"RENAMED"}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		d := newWatchDecoder(io.NopCloser(bytes.NewReader(stream)))
		defer d.Close()
		for i := 0; i <= len(stream)+1; i++ {
			typ, obj, err := d.Decode()
			if err != nil {
				return
			}
			if obj == nil || typ == "" {
				t.Fatalf("event %d: type %q object %v without an error", i, typ, obj)
			}
		}
		t.Fatalf("more events than bytes in %q", stream)
	})
}

func strOf(v interface{}) string {
	s, _ := v.(string)
	return s
}

// sortedKeys reports whether every object in data has its keys in the
// order Go's encoding/json writes them (sorted), as the apiserver serves
// custom resources: the fingerprint follows the order the keys come in.
func sortedKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			last := ""
			first := true
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				key := k.(string)
				if !first && key <= last {
					return false
				}
				first, last = false, key
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		case json.Delim('['):
			for dec.More() {
				if !walk() {
					return false
				}
			}
			_, err = dec.Token()
			return err == nil
		}
		return true
	}
	return walk()
}

// sameEnvVars reports whether two decoded lists are equal, an empty list
// equal to none.
func sameEnvVars(a, b []map[string]interface{}) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
