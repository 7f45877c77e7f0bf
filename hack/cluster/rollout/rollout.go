// Package rollout says whether a Deployment's rollout is over, for
// hack/cluster and tests/cluster (the same rule kubectl rollout status
// applies, for the fields they need).
package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
)

// Done returns nil when the Deployment controller has seen d's latest
// generation and every replica is updated and available, with none of an
// older ReplicaSet left; else what is missing.
func Done(d *appsv1.Deployment) error {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
		return fmt.Errorf("%s/%s: generation %d observed %d, %d updated, %d available, %d in all, of %d",
			d.Namespace, d.Name, d.Generation, s.ObservedGeneration, s.UpdatedReplicas, s.AvailableReplicas, s.Replicas, want)
	}
	return nil
}
