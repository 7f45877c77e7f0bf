package rollout

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDone(t *testing.T) {
	two := int32(2)
	d := func(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Generation: gen},
			Spec:   appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}}
	}
	if err := Done(d(3, 3, 2, 2, 2)); err != nil {
		t.Errorf("rolled out: %v", err)
	}
	for name, dep := range map[string]*appsv1.Deployment{
		"not observed":    d(3, 2, 2, 2, 2),
		"old pod left":    d(3, 3, 3, 2, 2),
		"not all updated": d(3, 3, 2, 1, 2),
		"not available":   d(3, 3, 2, 2, 1),
	} {
		if err := Done(dep); err == nil || !strings.Contains(err.Error(), "ns/d: generation 3") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
