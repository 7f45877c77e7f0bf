package duplicates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"leasetune.io/leasetune/tests/fleetagent"
)

// resourceOf returns the REST resource and an empty versioned object of
// the agent workload's kind.
func resourceOf(obj runtime.Object) (string, runtime.Object) {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "deployments", &appsv1.Deployment{}
	case *appsv1.StatefulSet:
		return "statefulsets", &appsv1.StatefulSet{}
	}
	panic(fmt.Sprintf("unexpected %T", obj))
}

// helmInstall creates obj in ns as helm v3.16's createResource does
// (pkg/kube/client.go: helper.Create of the manifest's object), from the
// JSON the Bundle carries (fleetagent.Manifest), field manager "helm".
func helmInstall(t testing.TB, ns string, obj runtime.Object) {
	t.Helper()
	body, err := fleetagent.Manifest(obj)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := resourceOf(obj)
	err = cp.Client.AppsV1().RESTClient().Post().Namespace(ns).Resource(res).
		Param("fieldManager", "helm").Body(body).SetHeader("Content-Type", "application/json").
		Do(context.Background()).Error()
	if err != nil {
		t.Fatalf("helm install %s: %v", res, err)
	}
}

// upgrade is the outcome of one helmUpgrade.
type upgrade struct {
	// Patch is the three-way strategic merge patch helm computed
	// ("{}" or nil: helm sends nothing).
	Patch []byte
	// CreateErr is the error of CreateThreeWayMergePatch, PatchErr the
	// apiserver's answer to the patch.
	CreateErr, PatchErr error
	// Changed: the patch changed the stored object (its resourceVersion
	// moved). A patch can be sent and change nothing: helm built against
	// apimachinery < v0.35 (Fleet ≤ v0.14) serialises an empty
	// template creationTimestamp as null, which kube-apiserver ≥ v1.35
	// no longer stores, so every upgrade sends
	// {"spec":{"template":{"metadata":{"creationTimestamp":null}}}} and the
	// apiserver keeps the object as it was.
	Changed bool
}

// helmUpgrade does what helm v3.16.4's Client.Update does for a resource
// that exists (pkg/kube/client.go:389-432): updateResource (:662-701) with
// force=false calls createPatch (:612-660) with target = the new release's
// object and current = the *old release's* object (original.Get(info),
// :418-424), then sends the patch unless it is nil or "{}" (:683-690):
//
//	oldData     = json.Marshal(original)        // :613 ("current" there: the old manifest)
//	newData     = json.Marshal(target.Object)   // :617
//	currentData = json.Marshal(helper.Get(...)) // :624-630, the live object
//	patchMeta   = strategicpatch.NewPatchMetaFromStruct(versionedObject) // :653
//	patch       = strategicpatch.CreateThreeWayMergePatch(oldData, newData, currentData, patchMeta, true) // :658
//	helper.Patch(ns, name, types.StrategicMergePatchType, patch, nil)   // :691
//
// original and target are what Fleet renders before and after the change
// (the old and new Bundle manifests, as fleetagent.Manifest serialises
// them); the live object is read raw from the apiserver.
func helmUpgrade(t testing.TB, ns string, original, target runtime.Object) upgrade {
	t.Helper()
	ctx := context.Background()
	oldData, err := fleetagent.Manifest(original)
	if err != nil {
		t.Fatal(err)
	}
	newData, err := fleetagent.Manifest(target)
	if err != nil {
		t.Fatal(err)
	}
	res, versioned := resourceOf(target)
	rc := cp.Client.AppsV1().RESTClient()
	currentData, err := rc.Get().Namespace(ns).Resource(res).Name(fleetagent.Name).DoRaw(ctx)
	if err != nil {
		t.Fatalf("get live %s: %v", res, err)
	}
	patchMeta, err := strategicpatch.NewPatchMetaFromStruct(versioned)
	if err != nil {
		t.Fatal(err)
	}
	var u upgrade
	u.Patch, u.CreateErr = strategicpatch.CreateThreeWayMergePatch(oldData, newData, currentData, patchMeta, true)
	if u.CreateErr != nil || u.Patch == nil || string(u.Patch) == "{}" {
		return u
	}
	r := rc.Patch(types.StrategicMergePatchType).Namespace(ns).Resource(res).Name(fleetagent.Name).
		Param("fieldManager", "helm").Body(u.Patch).Do(ctx)
	if u.PatchErr = r.Error(); u.PatchErr != nil {
		return u
	}
	after, err := r.Raw()
	if err != nil {
		t.Fatal(err)
	}
	u.Changed = resourceVersion(t, currentData) != resourceVersion(t, after)
	return u
}

func resourceVersion(t testing.TB, obj []byte) string {
	t.Helper()
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatal(err)
	}
	return m.ResourceVersion
}

// live reads the agent workload's pod spec from the apiserver.
func live(t testing.TB, ns string, kind runtime.Object) *corev1.PodSpec {
	t.Helper()
	ctx := context.Background()
	switch kind.(type) {
	case *appsv1.Deployment:
		d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, fleetagent.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &d.Spec.Template.Spec
	case *appsv1.StatefulSet:
		s, err := cp.Client.AppsV1().StatefulSets(ns).Get(ctx, fleetagent.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return &s.Spec.Template.Spec
	}
	panic("unreachable")
}

// envOf returns each container's env (init containers included), by
// container name, in a comparable form.
func envOf(ps *corev1.PodSpec) map[string][]string {
	out := map[string][]string{}
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			l := []string{}
			for _, e := range c.Env {
				l = append(l, envString(e))
			}
			out[c.Name] = l
		}
	}
	add(ps.Containers)
	add(ps.InitContainers)
	return out
}

func envString(e corev1.EnvVar) string {
	if e.ValueFrom != nil {
		vf := e.ValueFrom.DeepCopy()
		if vf.FieldRef != nil && vf.FieldRef.APIVersion == "v1" {
			vf.FieldRef.APIVersion = "" // the apiserver's default
		}
		b, _ := json.Marshal(vf)
		return e.Name + "<-" + string(b)
	}
	return e.Name + "=" + e.Value
}
