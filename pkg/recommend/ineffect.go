package recommend

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

var settingsGVR = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}

// Defaults returns the settings' defaults for each component (Fleet's
// 30s/25s/10s; wrangler's 45s/30s/2s for Rancher): what is in effect where
// nothing was set.
func Defaults() map[settings.Component]election.Timings {
	return map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults,
		settings.FleetAgent: election.FleetDefaults, settings.Rancher: election.WranglerDefaults}
}

// InEffect reads the nine Setting objects and leasetune's state ConfigMap
// in namespace and returns the triple in effect per component, as the
// controller would hold it (settings.Snapshot); a component with none
// gets the default. It is the only function of the package that makes
// API calls (reads only).
func InEffect(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, namespace string) (map[settings.Component]election.Timings, error) {
	out := Defaults()
	l, err := dyn.Resource(settingsGVR).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("list settings: %w", err)
	}
	var objs []v3.Setting
	if l != nil {
		for _, it := range l.Items {
			if _, ok := settings.Lookup(it.GetName()); !ok {
				continue
			}
			var s v3.Setting
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &s); err != nil {
				return nil, fmt.Errorf("setting %s: %w", it.GetName(), err)
			}
			objs = append(objs, s)
		}
	}
	var state map[string]string
	if cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, settings.DefaultStateName, metav1.GetOptions{}); err == nil {
		state = cm.Data
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("read %s/%s: %w", namespace, settings.DefaultStateName, err)
	}
	snap, _ := settings.Snapshot(objs, state)
	for _, c := range settings.Components {
		if st := snap[c]; st.HasEffective {
			out[c] = st.Effective
		}
	}
	return out, nil
}
