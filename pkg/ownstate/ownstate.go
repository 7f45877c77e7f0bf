// Package ownstate stores the small records the project keeps about itself
// (the users' setting values and last good triples, the detected Fleet agent
// channel) in ConfigMaps it owns in its own namespace. It is the only place
// that writes them.
package ownstate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// FieldManager is the field manager of every write of a record.
const FieldManager = "leasetune"

// Save stores data as the whole data of the ConfigMap ns/name and returns
// the stored object. cm is the object last read or stored (nil: none is
// known): Save creates the ConfigMap when cm is nil, else updates a copy
// of cm, so a concurrent writer makes it fail with a conflict (optimistic
// concurrency); on a conflict, or when the ConfigMap exists already, it
// rereads it and tries once more.
func Save(ctx context.Context, client corev1client.ConfigMapsGetter, ns, name string, cm *corev1.ConfigMap, data map[string]string) (*corev1.ConfigMap, error) {
	cms := client.ConfigMaps(ns)
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var out *corev1.ConfigMap
		if cm == nil {
			out, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "leasetune"}},
				Data:       data,
			}, metav1.CreateOptions{FieldManager: FieldManager})
		} else {
			upd := cm.DeepCopy()
			upd.Data = data
			out, err = cms.Update(ctx, upd, metav1.UpdateOptions{FieldManager: FieldManager})
		}
		if err == nil {
			return out, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			break
		}
		if cm, err = Load(ctx, client, ns, name); err != nil {
			break
		}
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
