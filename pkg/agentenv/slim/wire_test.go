package slim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// wireCluster is a fleet Cluster as the apiserver serves one: labels,
// annotations of every kind, managedFields, a spec with user env and the
// triple, and a status.
func wireCluster() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{
			"name": "c-abcde", "namespace": "fleet-default", "uid": "9f0c", "resourceVersion": "1234", "generation": int64(7),
			"creationTimestamp": "2026-01-01T00:00:00Z", "finalizers": []interface{}{"fleet.cattle.io/cluster"},
			"labels": map[string]interface{}{rancher.ClusterNameLabel: "c-abcde", "env": "prod"},
			"annotations": map[string]interface{}{
				agentenv.RecordAnnotation: `{"CATTLE_ELECTION_RETRY_PERIOD":"10s"}`, agentenv.StatusAnnotation: "ok",
				agentenv.RetryPeriodAnnotation: "5s", "objectset.rio.cattle.io/applied": "H4sI<big>", "note": "a <b> & \u2028 c",
			},
			"managedFields": []interface{}{map[string]interface{}{"manager": "rancher", "operation": "Update",
				"fieldsV1": map[string]interface{}{"f:spec": map[string]interface{}{"f:agentEnvVars": map[string]interface{}{}}}}},
		},
		"spec": map[string]interface{}{
			"agentEnvVars": []interface{}{
				map[string]interface{}{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
				map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "10s"},
			},
			"agentTolerations": []interface{}{map[string]interface{}{"key": "node-role", "operator": "Exists", "effect": "NoSchedule"}},
			"agentResources":   map[string]interface{}{"limits": map[string]interface{}{"cpu": "500m", "memory": "512Mi"}},
			"kubeConfigSecret": "c-abcde-kubeconfig",
			"paused":           false,
			"replicas":         int64(3),
			"ratio":            0.25,
		},
		"status": map[string]interface{}{"clusterName": "c-abcde", "conditions": []interface{}{map[string]interface{}{"type": "Ready", "status": "True"}}},
	}}
}

// encode is the object as the apiserver encodes it (unstructured objects:
// Go's encoding/json).
func encode(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWireDecodeKeepsWhatTheControllerReads: read off the wire, a cluster
// object has exactly the fields the controller reads, with the values it
// would have read from the whole object.
func TestWireDecodeKeepsWhatTheControllerReads(t *testing.T) {
	whole := wireCluster()
	s, err := slimFromJSON(encode(t, whole))
	if err != nil {
		t.Fatal(err)
	}
	if s.GetName() != "c-abcde" || s.GetNamespace() != "fleet-default" || string(s.GetUID()) != "9f0c" || s.GetResourceVersion() != "1234" ||
		s.GetAPIVersion() != "fleet.cattle.io/v1alpha1" || s.GetKind() != "Cluster" {
		t.Errorf("identity: %v", s.Object["metadata"])
	}
	if !reflect.DeepEqual(s.GetLabels(), map[string]string{rancher.ClusterNameLabel: "c-abcde"}) {
		t.Errorf("labels %v", s.GetLabels())
	}
	ann := s.GetAnnotations()
	if ann[agentenv.RecordAnnotation] == "" || ann[agentenv.StatusAnnotation] != "ok" || ann[agentenv.RetryPeriodAnnotation] != "5s" || len(ann) != 3 {
		t.Errorf("annotations %v", ann)
	}
	got, err := agentenv.EnvVars(s)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := agentenv.EnvVars(whole)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("agentEnvVars %v, want %v", got, want)
	}
	if fp, ok := isSlim(s); !ok || fp == "" {
		t.Errorf("no fingerprint: %v", s.Object)
	}
	if rancher.ManagementNameOf(s) != "c-abcde" || rancher.HasRKEConfig(s) {
		t.Errorf("status.clusterName %q, rkeConfig %v", rancher.ManagementNameOf(s), rancher.HasRKEConfig(s))
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(s.Object, "status", "conditions"); found {
		t.Error("status kept")
	}
	if fingerprint(s) != fingerprint(whole) {
		t.Error("the fingerprint read off the wire differs from the whole object's")
	}

	// An env that is absent or null is absent; an rkeConfig of any value
	// but null is a marker.
	unstructured.RemoveNestedField(whole.Object, "spec", "agentEnvVars")
	whole.Object["spec"].(map[string]interface{})["rkeConfig"] = map[string]interface{}{"machinePools": []interface{}{}}
	s, err = slimFromJSON(encode(t, whole))
	if err != nil {
		t.Fatal(err)
	}
	if env, _ := agentenv.EnvVars(s); env != nil || !rancher.HasRKEConfig(s) {
		t.Errorf("env %v, rkeConfig %v", env, rancher.HasRKEConfig(s))
	}
	whole.Object["spec"].(map[string]interface{})["agentEnvVars"] = nil
	whole.Object["spec"].(map[string]interface{})["rkeConfig"] = nil
	s, _ = slimFromJSON(encode(t, whole))
	if env, _ := agentenv.EnvVars(s); env != nil || rancher.HasRKEConfig(s) {
		t.Errorf("null env %v, null rkeConfig %v", env, rancher.HasRKEConfig(s))
	}
}

// TestFingerprintCoversAllButTheProjectsFields: a change of anything but
// the env, status, server-kept metadata and the project's two annotations
// changes the fingerprint; a change of those does not.
func TestFingerprintCoversAllButTheProjectsFields(t *testing.T) {
	base := fingerprint(wireCluster())
	same := map[string]func(o map[string]interface{}){
		"resourceVersion": func(o map[string]interface{}) { meta(o)["resourceVersion"] = "99" },
		"generation":      func(o map[string]interface{}) { meta(o)["generation"] = int64(8) },
		"managedFields":   func(o map[string]interface{}) { delete(meta(o), "managedFields") },
		"record":          func(o map[string]interface{}) { ann(o)[agentenv.RecordAnnotation] = "{}" },
		"status annotation": func(o map[string]interface{}) {
			delete(ann(o), agentenv.StatusAnnotation)
		},
		"env":    func(o map[string]interface{}) { spec(o)["agentEnvVars"] = []interface{}{} },
		"status": func(o map[string]interface{}) { o["status"] = map[string]interface{}{"clusterName": "other"} },
	}
	for name, f := range same {
		u := wireCluster()
		f(u.Object)
		if fingerprint(u) != base {
			t.Errorf("%s changed the fingerprint", name)
		}
	}
	differs := map[string]func(o map[string]interface{}){
		"a label":                  func(o map[string]interface{}) { meta(o)["labels"].(map[string]interface{})["env"] = "dev" },
		"a label added":            func(o map[string]interface{}) { meta(o)["labels"].(map[string]interface{})["team"] = "x" },
		"Rancher's applied copy":   func(o map[string]interface{}) { ann(o)["objectset.rio.cattle.io/applied"] = "H4sI<other>" },
		"an override annotation":   func(o map[string]interface{}) { ann(o)[agentenv.RetryPeriodAnnotation] = "6s" },
		"a toleration":             func(o map[string]interface{}) { spec(o)["agentTolerations"] = []interface{}{} },
		"a resource limit":         func(o map[string]interface{}) { spec(o)["agentResources"] = map[string]interface{}{} },
		"a number":                 func(o map[string]interface{}) { spec(o)["replicas"] = int64(4) },
		"a bool":                   func(o map[string]interface{}) { spec(o)["paused"] = true },
		"finalizers":               func(o map[string]interface{}) { delete(meta(o), "finalizers") },
		"the name":                 func(o map[string]interface{}) { meta(o)["name"] = "c-fghij" },
		"the uid (a new object)":   func(o map[string]interface{}) { meta(o)["uid"] = "a1b2" },
		"a value moved to the key": func(o map[string]interface{}) { ann(o)["note"] = ""; ann(o)["notea <b> & \u2028 c"] = "" },
		"a top-level field":        func(o map[string]interface{}) { o["extra"] = "x" },
	}
	for name, f := range differs {
		u := wireCluster()
		f(u.Object)
		if fingerprint(u) == base {
			t.Errorf("%s left the fingerprint as it was", name)
		}
	}
}

func meta(o map[string]interface{}) map[string]interface{} {
	return o["metadata"].(map[string]interface{})
}
func ann(o map[string]interface{}) map[string]interface{} {
	return meta(o)["annotations"].(map[string]interface{})
}
func spec(o map[string]interface{}) map[string]interface{} { return o["spec"].(map[string]interface{}) }

// TestWireDecodeRefusesOtherShapes: an object the apiserver would not
// serve is an error naming the field, not a silently empty slim copy.
func TestWireDecodeRefusesOtherShapes(t *testing.T) {
	for in, want := range map[string]string{
		`[]`:                                   "not a JSON object",
		`{"metadata":[]}`:                      "metadata is not an object",
		`{"metadata":{"labels":{"a":1}}}`:      `metadata.labels["a"] is not a string`,
		`{"metadata":{"annotations":"x"}}`:     "metadata.annotations is not an object",
		`{"metadata":{"name":3}}`:              "metadata.name is not a string",
		`{"kind":{}}`:                          "kind is not a string",
		`{"metadata":{"name":"a"},"spec":{"x"`: "cluster object",
	} {
		_, err := slimFromJSON([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", in, err, want)
		}
	}
	// Nulls where the apiserver omits a field are no error.
	if _, err := slimFromJSON([]byte(`{"metadata":{"name":"a","labels":null,"annotations":null},"spec":null,"status":null}`)); err != nil {
		t.Error(err)
	}
}

// TestWatchDecoder reads a watch stream as the apiserver sends one: events
// one after another, a bookmark, an expired-resourceVersion error, then
// the end of the stream; a stream cut inside an event is an unexpected
// EOF.
func TestWatchDecoder(t *testing.T) {
	obj := string(encode(t, wireCluster()))
	stream := `{"type":"ADDED","object":` + obj + "}\n" +
		`{"type":"MODIFIED","object":` + obj + "}\n" +
		`{"type":"BOOKMARK","object":{"kind":"Cluster","apiVersion":"fleet.cattle.io/v1alpha1","metadata":{"resourceVersion":"2000","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"object":` + obj + `,"type":"DELETED"}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2000)","reason":"Expired","code":410}}` + "\n"
	d := newWatchDecoder(io.NopCloser(strings.NewReader(stream)))
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Bookmark, watch.Deleted} {
		typ, o, err := d.Decode()
		if err != nil || typ != want {
			t.Fatalf("event %s: %s %v", want, typ, err)
		}
		u := o.(*unstructured.Unstructured)
		if want == watch.Bookmark {
			if u.GetResourceVersion() != "2000" {
				t.Errorf("bookmark resourceVersion %q", u.GetResourceVersion())
			}
			continue
		}
		if u.GetName() != "c-abcde" || fingerprint(u) != fingerprint(wireCluster()) {
			t.Errorf("%s: %v", want, u.Object)
		}
	}
	typ, o, err := d.Decode()
	if err != nil || typ != watch.Error {
		t.Fatalf("error event: %s %v", typ, err)
	}
	if se := apierrors.FromObject(o); !apierrors.IsResourceExpired(se) && !apierrors.IsGone(se) {
		t.Errorf("error event %v is not the 410 the reflector relists on", se)
	}
	if _, _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Errorf("end of stream: %v, want io.EOF", err)
	}

	cut := newWatchDecoder(io.NopCloser(strings.NewReader(`{"type":"ADDED","object":` + obj[:len(obj)/2])))
	if _, _, err := cut.Decode(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut stream: %v, want io.ErrUnexpectedEOF", err)
	}
	unknown := newWatchDecoder(io.NopCloser(strings.NewReader(`{"type":"RENAMED","object":{}}`)))
	if _, _, err := unknown.Decode(); err == nil || !strings.Contains(err.Error(), `"RENAMED"`) {
		t.Errorf("unknown type: %v", err)
	}
}

// TestReadListPage reads a list page's items, resourceVersion and
// continue token, in whatever order the fields come.
func TestReadListPage(t *testing.T) {
	obj := string(encode(t, wireCluster()))
	out := &unstructured.UnstructuredList{}
	rv, cont, err := readListPage([]byte(`{"apiVersion":"fleet.cattle.io/v1alpha1","items":[`+obj+`,`+obj+`],"kind":"ClusterList","metadata":{"continue":"abc","resourceVersion":"77","remainingItemCount":3}}`), out)
	if err != nil || rv != "77" || cont != "abc" || len(out.Items) != 2 || out.Items[1].GetName() != "c-abcde" {
		t.Fatalf("rv %q cont %q items %d err %v", rv, cont, len(out.Items), err)
	}
	rv, cont, err = readListPage([]byte(`{"metadata":{"resourceVersion":"78"},"items":[]}`), out)
	if err != nil || rv != "78" || cont != "" || len(out.Items) != 2 {
		t.Fatalf("last page: rv %q cont %q items %d err %v", rv, cont, len(out.Items), err)
	}
	if _, _, err := readListPage([]byte(`{"items":[{"metadata":[]}]}`), out); err == nil {
		t.Error("a bad item was no error")
	}
}

// BenchmarkDecodeCluster compares the generic decode (the whole object
// into an unstructured map, then the slim transform) with the stream
// decoder, for one realistic fleet Cluster.
func BenchmarkDecodeCluster(b *testing.B) {
	data, _ := json.Marshal(wireCluster().Object)
	b.Run("unstructured+slim", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
			if _, err := slim(u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := slimFromJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestStreamAsksForJSON: the stream's lists and watches ask for JSON even
// when the client's config prefers protobuf, and pass the list options as
// query parameters (a page of listPage, the watch's resourceVersion and
// bookmarks).
func TestStreamAsksForJSON(t *testing.T) {
	obj := string(encode(t, wireCluster()))
	var accepts, queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accepts = append(accepts, r.Header.Get("Accept"))
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" {
			_, _ = io.WriteString(w, `{"type":"MODIFIED","object":`+obj+"}\n")
			return
		}
		_, _ = io.WriteString(w, `{"kind":"ClusterList","apiVersion":"fleet.cattle.io/v1alpha1","metadata":{"resourceVersion":"5"},"items":[`+obj+`]}`)
	}))
	defer srv.Close()
	rc, err := NewRESTClient(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	lw := streamListWatch(rc, fleet.ClusterGVR)
	l, err := lw.List(metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if items := l.(*unstructured.UnstructuredList).Items; len(items) != 1 || items[0].GetName() != "c-abcde" {
		t.Fatalf("list: %v", items)
	}
	w, err := lw.Watch(metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	w.Stop()
	if ev.Type != watch.Modified || ev.Object.(*unstructured.Unstructured).GetName() != "c-abcde" {
		t.Fatalf("watch event %s %v", ev.Type, ev.Object)
	}
	for _, a := range accepts {
		if a != "application/json" {
			t.Errorf("Accept %q, want application/json", a)
		}
	}
	if want := "/apis/fleet.cattle.io/v1alpha1/clusters?limit=500"; queries[0] != want {
		t.Errorf("list request %q, want %q (a consistent read, in pages)", queries[0], want)
	}
	if q := queries[1]; !strings.Contains(q, "watch=true") || !strings.Contains(q, "resourceVersion=5") || !strings.Contains(q, "allowWatchBookmarks=true") {
		t.Errorf("watch request %q", q)
	}
}
