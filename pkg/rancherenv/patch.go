package rancherenv

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/rancher"
)

// PatchBody builds the JSON patch (RFC 6902) that makes dec on d: the
// rancher container's name and whole env list, and the Deployment's uid
// and generation, are tested against d, the copy dec was computed from (a
// concurrent edit, a spec change or a new object fails the patch and the
// decision is made again); each of the three names present gets its value
// in place, a missing one is appended after the existing entries, or, with
// dec.Remove, leasetune's entries are removed; RecordAnnotation is set (or
// removed) in the same patch. Nothing else is touched.
func PatchBody(d *appsv1.Deployment, dec Decision) ([]byte, error) {
	type op = map[string]interface{}
	ci := rancher.ContainerIndex(d)
	if ci < 0 {
		return nil, fmt.Errorf("deployment %s/%s has no container %q", d.Namespace, d.Name, rancher.Container)
	}
	base := fmt.Sprintf("/spec/template/spec/containers/%d", ci)
	env := d.Spec.Template.Spec.Containers[ci].Env
	var seen interface{}
	if env != nil {
		seen = env
	}
	ops := []op{{"op": "test", "path": base + "/name", "value": rancher.Container}, {"op": "test", "path": base + "/env", "value": seen}}
	// The write was judged on d, settled: it must also fail when the
	// Deployment is another one since (deleted and created again, not
	// rolled out yet: a new uid) or its spec changed since (a helm upgrade
	// of the image, a scale: a new generation, a rollout starting), though
	// the env list is the same. A missing field tests as null.
	orNull := func(v interface{}, zero bool) interface{} {
		if zero {
			return nil
		}
		return v
	}
	ops = append(ops, op{"op": "test", "path": "/metadata/uid", "value": orNull(d.UID, d.UID == "")},
		op{"op": "test", "path": "/metadata/generation", "value": orNull(d.Generation, d.Generation == 0)})
	annPath := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(RecordAnnotation, "~", "~0"), "/", "~1")
	if dec.Remove {
		var at []int
		for i, e := range env {
			if election.CattlePrefix.Owns(e.Name) {
				at = append(at, i)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(at)))
		for _, i := range at {
			ops = append(ops, op{"op": "remove", "path": fmt.Sprintf("%s/env/%d", base, i)})
		}
		if _, ok := d.Annotations[RecordAnnotation]; ok {
			ops = append(ops, op{"op": "remove", "path": annPath})
		}
		return json.Marshal(ops)
	}
	rec := map[string]string{}
	if env == nil {
		var entries []op
		for _, e := range dec.Env {
			entries = append(entries, op{"name": e.Name, "value": e.Value})
		}
		ops = append(ops, op{"op": "add", "path": base + "/env", "value": entries})
	}
	for _, e := range dec.Env {
		rec[e.Name] = e.Value
		if env == nil {
			continue
		}
		found := false
		for i, cur := range env {
			if cur.Name == e.Name {
				found = true
				ops = append(ops, op{"op": "add", "path": fmt.Sprintf("%s/env/%d/value", base, i), "value": e.Value})
			}
		}
		if !found {
			ops = append(ops, op{"op": "add", "path": base + "/env/-", "value": op{"name": e.Name, "value": e.Value}})
		}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if d.Annotations == nil {
		// Adding the map replaces any: it must still be absent, or the
		// annotations another writer added meanwhile would go. (A
		// Deployment's generation also moves with its annotations,
		// k8s.io/kubernetes pkg/registry/apps/deployment/strategy.go.)
		ops = append(ops, op{"op": "test", "path": "/metadata/annotations", "value": nil},
			op{"op": "add", "path": "/metadata/annotations", "value": map[string]string{RecordAnnotation: string(raw)}})
	} else {
		ops = append(ops, op{"op": "add", "path": annPath, "value": string(raw)})
	}
	return json.Marshal(ops)
}
