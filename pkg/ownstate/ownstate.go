// Package ownstate stores the small records the project keeps about itself
// (the users' setting values and last good triples, the detected Fleet agent
// channel) in ConfigMaps it owns in its own namespace. It is the only place
// that writes them.
//
// Only the leader writes, and its context ends when it loses the lease, so
// a record normally has one writer. A handover still has a window with
// two: a request in flight when the context ends, a write that raced the
// release of the lease, a paused process that resumes. Save therefore never
// writes what a writer computed from data it has not seen: every attempt
// applies the caller's mutate function to the data stored at that moment.
package ownstate

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"leasetune.io/leasetune/pkg/own"
)

// MaxAttempts bounds the writes of one Save; after that many conflicts
// Save returns the last one (apierrors.IsConflict holds) for the caller's
// work queue to retry.
const MaxAttempts = 5

// Mutate computes the data to store from the data stored now: current is
// a copy of the ConfigMap's data, nil when the ConfigMap does not exist.
// Save calls it once per attempt, each time with freshly read data, so it
// must recompute from current (a three-way merge against what the caller
// last read, for instance) rather than return data prepared beforehand;
// it must have no side effects beyond remembering its last result.
// Returning data equal to current writes nothing.
type Mutate func(current map[string]string) (map[string]string, error)

// Save stores the data mutate computes as the whole data of the ConfigMap
// ns/name and returns the object stored (the one read, when mutate changed
// nothing). cm is the object last read or stored (nil: none is known): the
// first attempt applies mutate to cm's data and creates the ConfigMap (cm
// nil) or updates a copy of cm, whose resourceVersion makes a concurrent
// write fail it with a conflict (optimistic concurrency). On a conflict,
// an AlreadyExists or a NotFound, Save rereads the ConfigMap and applies
// mutate to the fresh data, at most MaxAttempts times in all. It writes
// nothing once ctx has ended: an outgoing leader's context has.
func Save(ctx context.Context, client corev1client.ConfigMapsGetter, ns, name string, cm *corev1.ConfigMap, mutate Mutate) (*corev1.ConfigMap, error) {
	cms := client.ConfigMaps(ns)
	var err error
	for attempt := 0; attempt < MaxAttempts; attempt++ {
		if err = ctx.Err(); err != nil {
			break
		}
		var current map[string]string
		if cm != nil {
			current = maps.Clone(cm.Data)
			if current == nil {
				current = map[string]string{}
			}
		}
		var data map[string]string
		if data, err = mutate(current); err != nil {
			break
		}
		var out *corev1.ConfigMap
		switch {
		case cm == nil:
			out, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{own.ManagedByLabel: own.FieldManager}},
				Data:       data,
			}, metav1.CreateOptions{FieldManager: own.FieldManager})
		case maps.Equal(data, cm.Data):
			return cm, nil
		default:
			upd := cm.DeepCopy()
			upd.Data = data
			out, err = cms.Update(ctx, upd, metav1.UpdateOptions{FieldManager: own.FieldManager})
		}
		if err == nil {
			return out, nil
		}
		if attempt == MaxAttempts-1 || !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			break
		}
		fresh, lerr := Load(ctx, client, ns, name)
		if lerr != nil {
			err = lerr
			break
		}
		cm = fresh
	}
	return nil, fmt.Errorf("write ConfigMap %s/%s: %w", ns, name, err)
}

// Load reads the ConfigMap ns/name; a missing one is (nil, nil).
func Load(ctx context.Context, client corev1client.ConfigMapsGetter, ns, name string) (*corev1.ConfigMap, error) {
	cm, err := client.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", ns, name, err)
	}
	return cm, nil
}
