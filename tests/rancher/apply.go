package rancher

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AppliedAnnotation is where wrangler's apply keeps the last object it
// applied (gzip, then unpadded base64).
//
// rancher/wrangler v2.1.4 (Rancher v2.8) and v3.1.0 (v2.10)
// pkg/apply/desiredset_compare.go: LabelApplied.
const AppliedAnnotation = "objectset.rio.cattle.io/applied"

// cleanAnnotations keeps the keys that neither start with
// "kubectl.kubernetes.io/" nor contain "cattle.io/".
//
// rancher/wrangler v2.1.2, v3.1.0 pkg/yaml/yaml.go: CleanAnnotationsForExport
// (cleanPrefix, cleanContains); Rancher uses it for labels too.
func cleanAnnotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, "kubectl.kubernetes.io/") || strings.Contains(k, "cattle.io/") {
			continue
		}
		out[k] = v
	}
	return out
}

// knownListKeys are the keys pruneValues keeps whole inside list items.
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: knownListKeys.
var knownListKeys = map[string]bool{
	"apiVersion": true, "containerPort": true, "devicePath": true, "ip": true, "kind": true,
	"mountPath": true, "name": true, "port": true, "topologyKey": true, "type": true,
}

// pruneValues shortens every string longer than 64 characters before the
// object goes into the annotation, except the known list keys of list
// items and plain list elements.
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: pruneValues,
// pruneList.
func pruneValues(data map[string]interface{}, isList bool) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range data {
		switch t := v.(type) {
		case map[string]interface{}:
			out[k] = pruneValues(t, false)
		case []interface{}:
			out[k] = pruneList(t)
		case string:
			if len(t) > 64 && !(isList && knownListKeys[k]) {
				t = t[:64]
			}
			out[k] = t
		default:
			out[k] = v
		}
	}
	return out
}

func pruneList(data []interface{}) []interface{} {
	out := make([]interface{}, 0, len(data))
	for _, v := range data {
		switch t := v.(type) {
		case map[string]interface{}:
			out = append(out, pruneValues(t, true))
		case []interface{}:
			out = append(out, pruneList(t))
		default:
			out = append(out, v)
		}
	}
	return out
}

// encodeApplied serialises obj (pruned) for the annotation.
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: serializeApplied,
// appliedToAnnotation.
func encodeApplied(obj map[string]interface{}) (string, error) {
	b, err := json.Marshal(pruneValues(withoutCreationTimestamp(obj), false))
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return string(b), nil
	}
	if err := w.Close(); err != nil {
		return string(b), nil
	}
	return base64.RawStdEncoding.EncodeToString(buf.Bytes()), nil
}

// decodeApplied reads the annotation back (plain JSON is accepted too).
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: appliedFromAnnotation.
func decodeApplied(s string) map[string]interface{} {
	if s == "" {
		return nil
	}
	b := []byte(s)
	if s[0] != '{' {
		z, err := base64.RawStdEncoding.DecodeString(s)
		if err != nil {
			return nil
		}
		r, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return nil
		}
		if b, err = io.ReadAll(r); err != nil {
			return nil
		}
	}
	m := map[string]interface{}{}
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

func withoutCreationTimestamp(obj map[string]interface{}) map[string]interface{} {
	obj = runtime.DeepCopyJSON(obj)
	if md, ok := obj["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	return obj
}

// prepare returns a copy of obj carrying its own serialisation in the
// applied annotation.
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: prepareObjectForCreate.
func prepare(obj map[string]interface{}) (map[string]interface{}, error) {
	enc, err := encodeApplied(obj)
	if err != nil {
		return nil, err
	}
	obj = runtime.DeepCopyJSON(obj)
	md, _ := obj["metadata"].(map[string]interface{})
	if md == nil {
		md = map[string]interface{}{}
		obj["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]interface{})
	if ann == nil {
		ann = map[string]interface{}{}
		md["annotations"] = ann
	}
	ann[AppliedAnnotation] = enc
	return obj, nil
}

// sanitize drops what apply never patches; "" means nothing to do.
//
// rancher/wrangler v3.1.0 pkg/apply/desiredset_compare.go: sanitizePatch,
// emptyMaps.
func sanitize(patch []byte) ([]byte, error) {
	m := map[string]interface{}{}
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	delete(m, "kind")
	delete(m, "apiVersion")
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
		if ann, ok := md["annotations"].(map[string]interface{}); ok && len(ann) == 0 {
			delete(md, "annotations")
		}
		if len(md) == 0 {
			delete(m, "metadata")
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

// apply makes the object desired describes exist with those fields, the
// way wrangler's apply does for a custom resource (no strategic merge
// patch for types outside client-go's scheme): create it when absent,
// otherwise a three-way JSON merge patch from the last applied object (the
// annotation), the desired one and the current one. Hence: a field the
// desired object names is put back whatever someone wrote there; a key it
// applied before and no longer names is removed; a key it never applied is
// left alone.
//
// rancher/wrangler v3.1.0 (and v2.1.4) pkg/apply/desiredset_compare.go:
// applyPatch, originalAndModified, getOriginalObject, doPatch
// (jsonmergepatch.CreateThreeWayJSONMergePatch via patch.GetMergeStyle,
// pkg/patch/style.go); desiredset_process.go creates absent objects.
func (d *Double) apply(ctx context.Context, gvr schema.GroupVersionResource, current *unstructured.Unstructured, desired map[string]interface{}) error {
	modified, err := prepare(desired)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: modified}
	client := d.dyn.Resource(gvr).Namespace(u.GetNamespace())
	if current == nil {
		d.count(gvr, u.GetNamespace(), u.GetName())
		_, err := client.Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	original := map[string]interface{}{}
	if prev := decodeApplied(current.GetAnnotations()[AppliedAnnotation]); prev != nil {
		prev = withoutCreationTimestamp(prev)
		prev["apiVersion"], prev["kind"] = desired["apiVersion"], desired["kind"]
		if original, err = prepare(prev); err != nil {
			return err
		}
	}
	ob, _ := json.Marshal(original)
	mb, _ := json.Marshal(modified)
	cb, err := json.Marshal(current.Object)
	if err != nil {
		return err
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(ob, mb, cb)
	if err != nil {
		return fmt.Errorf("patch %s %s: %w", gvr.Resource, current.GetName(), err)
	}
	if patch, err = sanitize(patch); err != nil || patch == nil {
		return err
	}
	d.count(gvr, current.GetNamespace(), current.GetName())
	_, err = client.Patch(ctx, current.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
