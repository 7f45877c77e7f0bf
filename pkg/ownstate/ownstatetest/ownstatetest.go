// Package ownstatetest fakes the API server's ConfigMaps for tests of
// writers that use ownstate: client-go's fake clientset with optimistic
// concurrency, one clientset per writer over a shared store, and a hook
// that lets one writer write while another is between its read and its
// write.
package ownstatetest

import (
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
)

// GVR is the resource of ConfigMaps, for the tracker's methods.
var GVR = corev1.SchemeGroupVersion.WithResource("configmaps")

// NewTracker returns the store of a fake API server that several writers
// (clientsets from NewWriter) share.
func NewTracker() k8stesting.ObjectTracker {
	return k8stesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
}

// NewWriter returns a clientset on tracker whose ConfigMap writes check and
// bump resourceVersion as the API server does (client-go's fake tracker
// ignores it): an Update from a stale read is a conflict. Each writer gets
// its own clientset, so a reactor of one may call the other (a clientset
// holds its lock while its reactors run).
func NewWriter(tracker k8stesting.ObjectTracker) *fake.Clientset {
	cs := &fake.Clientset{}
	cs.AddReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		obj.ResourceVersion = "1"
		if err := tracker.Create(GVR, obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	cs.AddReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		old, err := tracker.Get(GVR, a.GetNamespace(), obj.Name)
		if err != nil {
			return true, nil, err
		}
		rv := old.(*corev1.ConfigMap).ResourceVersion
		if obj.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(GVR.GroupResource(), obj.Name, nil)
		}
		n, _ := strconv.Atoi(rv)
		obj.ResourceVersion = strconv.Itoa(n + 1)
		if err := tracker.Update(GVR, obj, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	return cs
}

// Before runs f once, just before cs handles its first ConfigMap action
// verb ("create", "update"): f is the other writer's write, interleaved
// between this writer's read and its write.
func Before(cs *fake.Clientset, verb string, f func()) {
	var once sync.Once
	cs.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(f)
		return false, nil, nil
	})
}

// Count returns how many actions verb cs has handled.
func Count(cs *fake.Clientset, verb string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}
