package slim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/rancher"
)

// These tests try to break the stream decoder of wire.go: the slim copy it
// reads off the wire must be the one the whole-decode path (unstructured
// UnmarshalJSON, then slim) makes of the same bytes, above all the same
// fingerprint, which the revert guard compares with live reads.

// wholeSlim is the whole-decode path: the bytes decoded into an
// unstructured object as the dynamic client decodes them, then slimmed.
func wholeSlim(t *testing.T, data []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("whole decode: %v", err)
	}
	s, err := slim(u)
	if err != nil {
		t.Fatalf("slim: %v", err)
	}
	return s.(*unstructured.Unstructured)
}

// served is what the apiserver serves for obj: it decodes every object it
// reads from etcd (integers to int64, other numbers to float64) and
// encodes it with encoding/json.
func served(t *testing.T, obj map[string]interface{}) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	b, err = json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameSlim reports how a and b differ ("" when they do not).
func sameSlim(a, b *unstructured.Unstructured) string {
	if reflect.DeepEqual(a.Object, b.Object) {
		return ""
	}
	return fmt.Sprintf("stream %v\nwhole  %v", a.Object, b.Object)
}

// trickyCluster is a fleet Cluster with content that is hard to encode
// and decode: every kind of string escape, numbers of every kind, empty
// and null values, deep nesting and a large annotation.
func trickyCluster(big int) map[string]interface{} {
	deep := interface{}("bottom")
	for i := 0; i < 500; i++ {
		deep = map[string]interface{}{"d": []interface{}{deep, nil, map[string]interface{}{}}}
	}
	uni := "é ü ß 日本語 😀 \U0001F600 \u2028 \u2029 <b>&amp;</b> \\ \" / \t\n\r \x00 \x01 \x1f \x7f \b \f \ufeff \ufffd"
	return map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{
			"name": "c-tricky", "namespace": "fleet-default", "uid": "0b6e-" + uni, "resourceVersion": "991", "generation": int64(3),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"finalizers":        []interface{}{"fleet.cattle.io/cluster", "example.com/é"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
				"name": "prod", "uid": "u-1", "controller": true, "blockOwnerDeletion": true}},
			"labels": map[string]interface{}{rancher.ClusterNameLabel: "c-m-" + uni, "note": uni, "": "empty key", "empty": ""},
			"annotations": map[string]interface{}{
				agentenv.RecordAnnotation: `{"CATTLE_ELECTION_RETRY_PERIOD":"10s"}`, agentenv.StatusAnnotation: uni,
				agentenv.RetryPeriodAnnotation: "5s", "leasetune.io/" + uni: uni, "election.cattle.io/x": `<>&` + uni,
				"objectset.rio.cattle.io/applied": strings.Repeat("H4sI<&>\u2028é😀", big/16+1)[:big],
				"note":                            uni,
			},
			"managedFields": []interface{}{map[string]interface{}{"manager": "rancher", "operation": "Update",
				"fieldsV1": map[string]interface{}{"f:spec": map[string]interface{}{"f:agentEnvVars": map[string]interface{}{}}}}},
		},
		"spec": map[string]interface{}{
			"agentEnvVars": []interface{}{
				map[string]interface{}{"name": "NOTE", "value": uni},
				map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "10s"},
				map[string]interface{}{"name": "FROM", "valueFrom": map[string]interface{}{"secretKeyRef": map[string]interface{}{"name": "s", "key": "k"}}},
			},
			"templateValues": map[string]interface{}{
				"ints":    []interface{}{int64(0), int64(-1), int64(1<<53 + 1), int64(math.MaxInt64), int64(math.MinInt64)},
				"floats":  []interface{}{0.1, -2.5, 1e-7, 1e20, 1e21, 1.5e300, 5e-324, math.MaxFloat64, 0.30000000000000004, 1e6, 123456789.125},
				"beyond":  1.8446744073709552e19, // beyond int64, so a float
				"bools":   []interface{}{true, false},
				"empties": map[string]interface{}{"o": map[string]interface{}{}, "a": []interface{}{}, "s": "", "n": nil},
				"deep":    deep,
				uni:       uni,
			},
			"agentTolerations":        []interface{}{},
			"agentAffinity":           nil,
			"agentResources":          map[string]interface{}{},
			"paused":                  false,
			"redeployAgentGeneration": int64(9007199254740993),
		},
		"status":        map[string]interface{}{"clusterName": "c-" + uni, "conditions": []interface{}{map[string]interface{}{"type": "Ready"}}, "display": nil},
		"extraTopLevel": map[string]interface{}{"x": uni},
	}
}

// TestWireBreakServedBytesMatchWholeDecode: for bytes as the apiserver
// encodes them, the stream decoder gives what the whole decode gives,
// read alone, as a list page, and in a watch stream read one byte at a
// time.
func TestWireBreakServedBytesMatchWholeDecode(t *testing.T) {
	for _, big := range []int{10, 64 << 10, 1 << 20} {
		data := served(t, trickyCluster(big))
		whole := wholeSlim(t, data)
		s, err := slimFromJSON(data)
		if err != nil {
			t.Fatalf("big %d: %v", big, err)
		}
		if d := sameSlim(s, whole); d != "" {
			t.Fatalf("big %d: slimFromJSON differs from the whole decode:\n%s", big, d)
		}
		// What the controller reads, explicitly.
		env, err := agentenv.EnvVars(s)
		wenv, _ := agentenv.EnvVars(&unstructured.Unstructured{Object: trickyCluster(big)})
		if err != nil || !reflect.DeepEqual(env, wenv) {
			t.Errorf("big %d: env %v (%v), want %v", big, env, err, wenv)
		}
		o := trickyCluster(big)
		if s.GetName() != "c-tricky" || s.GetLabels()[rancher.ClusterNameLabel] != o["metadata"].(map[string]interface{})["labels"].(map[string]interface{})[rancher.ClusterNameLabel] ||
			rancher.ManagementNameOf(s) != o["status"].(map[string]interface{})["clusterName"] || len(s.GetLabels()) != 1 {
			t.Errorf("big %d: identity %v", big, s.Object["metadata"])
		}
		if len(s.GetAnnotations()) != 5 { // record, status, retry, leasetune.io/<uni>, election.cattle.io/x (the fingerprint is a top-level field)
			t.Errorf("big %d: annotations kept %v", big, s.GetAnnotations())
		}
		// Fingerprint of the original (unserved) map: the live GET path.
		if fingerprint(s) != fingerprint(&unstructured.Unstructured{Object: trickyCluster(big)}) {
			t.Errorf("big %d: fingerprint of the stream copy differs from the object's", big)
		}

		list := []byte(`{"apiVersion":"fleet.cattle.io/v1alpha1","items":[` + string(data) + `,` + string(data) + `],"kind":"ClusterList","metadata":{"continue":"c","resourceVersion":"5"}}`)
		out := &unstructured.UnstructuredList{}
		if _, _, err := readListPage(list, out); err != nil || len(out.Items) != 2 {
			t.Fatalf("big %d: list page: %v, %d items", big, err, len(out.Items))
		}
		for i := range out.Items {
			if d := sameSlim(&out.Items[i], whole); d != "" {
				t.Errorf("big %d: list item %d differs:\n%s", big, i, d)
			}
		}
		if big > 64<<10 {
			continue // a 1 MB object a byte at a time is slow under -race; the 64 KiB one crosses the buffer already
		}
		stream := `{"type":"ADDED","object":` + string(data) + "}\n" + `{"object":` + string(data) + `,"type":"MODIFIED","extra":{"a":[1,2,{"b":null}]}}` + "\n"
		d := newWatchDecoder(io.NopCloser(&oneByte{r: strings.NewReader(stream)}))
		for _, want := range []watch.EventType{watch.Added, watch.Modified} {
			typ, obj, err := d.Decode()
			if err != nil || typ != want {
				t.Fatalf("big %d: event %s: %s %v", big, want, typ, err)
			}
			if diff := sameSlim(obj.(*unstructured.Unstructured), whole); diff != "" {
				t.Errorf("big %d: %s event differs:\n%s", big, want, diff)
			}
		}
		if _, _, err := d.Decode(); !errors.Is(err, io.EOF) {
			t.Errorf("big %d: end: %v", big, err)
		}
	}
}

// oneByte returns one byte a read.
type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// splitReader returns the stream in two reads cut at at, the second with
// io.EOF (as some readers do), then io.EOF.
type splitReader struct {
	data []byte
	at   int
	n    int
}

func (s *splitReader) Read(p []byte) (int, error) {
	switch s.n {
	case 0:
		s.n++
		return copy(p, s.data[:s.at]), nil
	case 1:
		s.n++
		rest := s.data[s.at:]
		if len(rest) > len(p) {
			panic("test buffer")
		}
		return copy(p, rest), io.EOF
	}
	return 0, io.EOF
}

// TestWireBreakWatchStreamSplitEverywhere: a watch stream of every kind
// of event, cut into two reads at every byte, decodes into the same
// events; cut short at every byte, it gives the complete events, then
// io.EOF when the cut is between events and io.ErrUnexpectedEOF when it is
// inside one, never a half-read event.
func TestWireBreakWatchStreamSplitEverywhere(t *testing.T) {
	obj := served(t, map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "c-é\u2028", "namespace": "ns", "uid": "u", "resourceVersion": "10",
			"labels": map[string]interface{}{rancher.ClusterNameLabel: "c-m-😀"}, "annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s", "x": "<&>"}},
		"spec": map[string]interface{}{"agentEnvVars": []interface{}{map[string]interface{}{"name": "A", "value": "\\\"/"}},
			"n": []interface{}{int64(1 << 60), 1.5e-9, -0.25}, "rkeConfig": map[string]interface{}{}},
		"status": map[string]interface{}{"clusterName": "c-m"},
	})
	whole := wholeSlim(t, obj)
	bookmark := `{"type":"BOOKMARK","object":{"kind":"Cluster","apiVersion":"fleet.cattle.io/v1alpha1","metadata":{"resourceVersion":"12","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}`
	errEv := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (12)","reason":"Expired","code":410}}`
	events := []string{
		`{"type":"ADDED","object":` + string(obj) + `}`,
		bookmark,
		`{"type":"DELETED","object":` + string(obj) + `,"ignored":[{"a":"}"},"]"]}`,
		errEv,
	}
	stream := strings.Join(events, "\n") + "\n"
	check := func(t *testing.T, d *watchDecoder, n int, wantEnd error) {
		t.Helper()
		wants := []watch.EventType{watch.Added, watch.Bookmark, watch.Deleted, watch.Error}
		for i := 0; i < n; i++ {
			typ, o, err := d.Decode()
			if err != nil || typ != wants[i] {
				t.Fatalf("event %d: %s %v, want %s", i, typ, err, wants[i])
			}
			switch typ {
			case watch.Added, watch.Deleted:
				if diff := sameSlim(o.(*unstructured.Unstructured), whole); diff != "" {
					t.Fatalf("event %d differs:\n%s", i, diff)
				}
			case watch.Bookmark:
				if o.(*unstructured.Unstructured).GetResourceVersion() != "12" {
					t.Fatalf("bookmark %v", o)
				}
			case watch.Error:
				if st, ok := o.(*metav1.Status); !ok || st.Code != 410 {
					t.Fatalf("error event %v", o)
				}
			}
		}
		if _, _, err := d.Decode(); !errors.Is(err, wantEnd) {
			t.Fatalf("after %d events: %v, want %v", n, err, wantEnd)
		}
	}
	for at := 0; at <= len(stream); at++ {
		check(t, newWatchDecoder(io.NopCloser(&splitReader{data: []byte(stream), at: at})), 4, io.EOF)
	}
	// Cut short at every byte.
	ends := []int{}
	off := 0
	for _, e := range events {
		off += len(e) + 1
		ends = append(ends, off)
	}
	for cut := 0; cut < len(stream); cut++ {
		complete := 0
		for _, e := range ends {
			if cut >= e-1 { // the newline after an event is not needed
				complete++
			}
		}
		between := cut == 0
		for _, e := range ends {
			if cut == e-1 || cut == e {
				between = true
			}
		}
		want := io.ErrUnexpectedEOF
		if between {
			want = io.EOF
		}
		check(t, newWatchDecoder(io.NopCloser(&oneByte{r: bytes.NewReader([]byte(stream[:cut]))})), complete, want)
	}
}

// TestWireBreakTruncatedObjectIsAnError: an object cut at any byte is an
// error, never a slim copy of what came before the cut (the io.EOF
// slimFrom lets pass must only be the end of a complete object).
func TestWireBreakTruncatedObjectIsAnError(t *testing.T) {
	o := trickyCluster(100)
	o["spec"].(map[string]interface{})["templateValues"].(map[string]interface{})["deep"] = []interface{}{[]interface{}{map[string]interface{}{"a": []interface{}{nil, true, 1.5}}}}
	data := served(t, o)
	for cut := 0; cut < len(data); cut++ {
		if s, err := slimFromJSON(data[:cut]); err == nil {
			t.Fatalf("cut at %d of %d (%q): no error, slim %v", cut, len(data), data[max(0, cut-20):cut], s.Object)
		}
	}
	list := []byte(`{"metadata":{"resourceVersion":"5"},"items":[` + string(data) + `]}`)
	for cut := 0; cut < len(list); cut++ {
		out := &unstructured.UnstructuredList{}
		if _, _, err := readListPage(list[:cut], out); err == nil {
			t.Fatalf("list cut at %d of %d (%q): no error, %d items", cut, len(list), list[max(0, cut-20):cut], len(out.Items))
		}
	}
}

// TestWireBreakNoAliasingAndIteratorReuse: a slim copy shares no memory
// with the bytes it was read from (the informer keeps it long after the
// page or event is gone), and a pooled iterator that failed reads the
// next object correctly.
func TestWireBreakNoAliasingAndIteratorReuse(t *testing.T) {
	data := served(t, trickyCluster(4096))
	want := wholeSlim(t, data)
	s, err := slimFromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if d := sameSlim(s, want); d != "" {
		t.Fatalf("the slim copy changed with its input:\n%s", d)
	}
	data = served(t, trickyCluster(4096))
	for _, bad := range []string{`{"metadata":{"labels":{"a":1}}}`, `{"spec":{"a":[[[[`, `{"a":` + strings.Repeat("[", 20000), `nul`, ``, `{"metadata":{"annotations":{"a":"\ud800`} {
		_, _ = slimFromJSON([]byte(bad))
		s, err := slimFromJSON(data)
		if err != nil {
			t.Fatalf("after %q: %v", bad, err)
		}
		if d := sameSlim(s, want); d != "" {
			t.Fatalf("after %q:\n%s", bad, d)
		}
	}
}

// TestWireBreakOddValidJSONNeverPanics: valid JSON the apiserver would not
// send (escapes it does not use, unsorted and duplicate keys, whitespace,
// other number spellings) never panics; where the whole decode reads the
// same object, the identity, labels, annotations, env and markers agree.
// The fingerprint may differ (the stream hashes the bytes as they come);
// TestStreamBreakTrickyContentOnTheRealAPIServer (tests/integration)
// shows the apiserver normalizes all of these (it serves what
// encoding/json writes). The differences are logged; for input that is
// already what encoding/json writes, they are an error.
func TestWireBreakOddValidJSONNeverPanics(t *testing.T) {
	base := `"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster"`
	for _, in := range []string{
		`{` + base + `,"metadata":{"name":"\u0063-\u00e9","namespace":"n\/s","labels":{"` + rancher.ClusterNameLabel + `":"\ud83d\ude00"},"annotations":{"` + agentenv.RetryPeriodAnnotation + `":"5\u0073"}},"spec":{"x":"\u00e9\/\u2028"}}`,
		`{"spec":{"b":1,"a":2},` + base + `,"metadata":{"namespace":"ns","name":"n"}}`,
		`{` + base + `,"metadata":{"name":"a","name":"b","labels":{"k":"1","k":"2"}},"spec":{"x":1,"x":2}}`,
		` { ` + base + ` , "metadata" : { "name" : "a" } , "spec" : { "x" : [ 1 , 2 ] , "agentEnvVars" : [ { "name" : "A" , "value" : "b" } ] } } `,
		`{` + base + `,"metadata":{"name":"a"},"spec":{"i":1.0,"e":1E5,"f":1e+5,"z":-0,"zf":-0.0,"big":123456789012345678901234567890,"small":1e-400}}`,
		`{` + base + `,"metadata":{"name":"a","labels":null,"annotations":null,"finalizers":null,"ownerReferences":null},"spec":null,"status":null}`,
		`{` + base + `,"metadata":{"name":"a","labels":{},"annotations":{}},"spec":{},"status":{}}`,
		`{` + base + `,"metadata":{"name":"a"},"spec":{"agentEnvVars":null,"rkeConfig":null},"status":{"clusterName":null}}`,
		`{` + base + `,"metadata":{"name":"a"},"spec":{"agentEnvVars":[],"rkeConfig":false},"status":{"clusterName":7}}`,
		`{` + base + `,"metadata":{"name":"a"},"spec":[1,2],"status":"x"}`,
		`{` + base + `,"metadata":{"name":"a"},"spec":{"x":"` + strings.Repeat(`\u00e9\ud83d\ude00\\\"`, 50000) + `"}}`,
		`{` + base + `,"metadata":{"name":"a"},"spec":{"x":` + strings.Repeat(`{"a":[`, 1500) + strings.Repeat(`]}`, 1500) + `}}`,
		`{}`,
		`{"metadata":{}}`,
	} {
		name := in
		if len(name) > 80 {
			name = name[:80]
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: panic %v", name, r)
				}
			}()
			s, err := slimFromJSON([]byte(in))
			u := &unstructured.Unstructured{}
			uerr := u.UnmarshalJSON([]byte(in))
			if uerr != nil {
				t.Logf("%s: whole decode refuses it (%v); stream: %v", name, uerr, err)
				return
			}
			w, werr := slim(u)
			if (err == nil) != (werr == nil) {
				t.Logf("%s: stream error %v, whole error %v", name, err, werr)
				return
			}
			if err != nil {
				return
			}
			ws := w.(*unstructured.Unstructured)
			fs, fw := fingerprint(s), fingerprint(ws)
			sa, wa := s.DeepCopy(), ws.DeepCopy()
			delete(sa.Object, fingerprintKey)
			delete(wa.Object, fingerprintKey)
			se, _ := agentenv.EnvVars(sa)
			we, _ := agentenv.EnvVars(wa)
			unstructured.RemoveNestedField(sa.Object, "spec", agentenv.CompactEnvKey)
			unstructured.RemoveNestedField(wa.Object, "spec", agentenv.CompactEnvKey)
			if d := sameSlim(sa, wa); d != "" || !reflect.DeepEqual(se, we) {
				t.Errorf("%s: slim copies differ beyond the fingerprint:\n%s\nenv %v / %v", name, d, se, we)
			}
			if fs != fw {
				if canon, _ := json.Marshal(u.Object); bytes.Equal(canon, []byte(in)) {
					t.Errorf("%s: fingerprint differs for bytes encoding/json writes", name)
				}
				t.Logf("%s: fingerprint differs (bytes encoding/json would not write)", name)
			}
		}()
	}
}

// TestWireBreakOlderAPIServerEscapes: a kube-apiserver built with Go
// before 1.22 (Kubernetes 1.28 and 1.29 releases, still run under
// Rancher) escapes U+0008 and U+000C as \u0008 and \u000c; Go 1.22 and
// later, as this controller's encoding/json does, as \b and \f. The
// stream decoder hashes the served bytes of every part but labels,
// annotations, name, namespace and uid, so the cached fingerprint of such
// an object is not the one of a live read (slim re-encodes with this
// process's encoding/json): the revert guard sees "changed otherwise" on
// every read of a live object (a fence set after a conflict retry, from
// the live object, is lifted at the next sync from the cache).
func TestWireBreakOlderAPIServerEscapes(t *testing.T) {
	newer := `{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","metadata":{"name":"a","namespace":"n","uid":"u"},"spec":{"templateValues":{"banner":"line\bone\fpage"}}}`
	older := strings.NewReplacer(`\b`, `\u0008`, `\f`, `\u000c`).Replace(newer)
	live := wholeSlim(t, []byte(older)) // the live GET, decoded whole: the same object
	s, err := slimFromJSON([]byte(older))
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(s) != fingerprint(live) {
		t.Errorf("the same object: streamed fingerprint %s, live %s", fingerprint(s), fingerprint(live))
	}
}

// TestWireBreakFingerprintAnnotationOnTheObject: an object that carries
// the cache-only annotation leasetune.io/cache-fingerprint itself (copied
// from a dump of the cache, or set by anyone who can edit the object) gets
// three different fingerprints: the stream path hashes the object (and
// overwrites the annotation), while fingerprint() of a live read, and
// slim() in the whole-decode informer, take the annotation's value as the
// fingerprint (slim keeps such an object whole, as "already slim"). The
// revert guard's fence, set from a live read after a conflict, is then
// lifted at the next sync from the cache; an object fenced from the
// cache can never be unfenced by a change that leaves the annotation.
func TestWireBreakFingerprintAnnotationOnTheObject(t *testing.T) {
	obj := wireCluster()
	ann := obj.GetAnnotations()
	ann[fingerprintKey] = "spoofed"
	obj.SetAnnotations(ann)
	data := encode(t, obj)
	s, err := slimFromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	live := &unstructured.Unstructured{}
	if err := live.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	if fingerprint(s) != fingerprint(live) {
		t.Errorf("streamed %q, live %q", fingerprint(s), fingerprint(live))
	}
	w, _ := slim(live)
	if len(w.(*unstructured.Unstructured).GetManagedFields()) != 0 {
		t.Errorf("the whole-decode informer caches the object whole (managedFields and all)")
	}
}

// TestWireBreakBuffersAreReleased: neither a list page's body nor a watch
// event's bytes outlive the read beyond json-iterator's iterator pool
// (sync.Pool: at most two garbage collections), although a pooled
// iterator keeps its last input: the informer's slim copies keep none of
// it.
func TestWireBreakBuffersAreReleased(t *testing.T) {
	obj := string(encode(t, wireCluster()))
	var page, event atomic.Bool
	var kept []unstructured.Unstructured
	func() {
		body := []byte(`{"metadata":{"resourceVersion":"1"},"items":[` + strings.Repeat(obj+",", 2000) + obj + `]}`)
		runtime.SetFinalizer(&body[0], func(*byte) { page.Store(true) })
		out := &unstructured.UnstructuredList{}
		if _, _, err := readListPage(body, out); err != nil || len(out.Items) != 2001 {
			t.Fatal(err, len(out.Items))
		}
		kept = out.Items
		raw := []byte(strings.Repeat(" ", 1<<20) + obj)
		runtime.SetFinalizer(&raw[0], func(*byte) { event.Store(true) })
		u, err := slimFromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, *u)
	}()
	for i := 0; i < 6 && !(page.Load() && event.Load()); i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run in their own goroutine
	}
	if !page.Load() || !event.Load() {
		t.Errorf("retained after 6 collections: page %v, event %v", !page.Load(), !event.Load())
	}
	runtime.KeepAlive(kept)
}
