package rancher

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// UnknownSettingLabel marks a Setting Rancher v2.8.3–v2.8.x does not know.
//
// rancher/rancher v2.8.5 pkg/controllers/dashboardapi/settings/settings.go: unknownSettingLabelKey.
const UnknownSettingLabel = "cattle.io/unknown"

// RestartSettings does to the Setting objects (management.cattle.io/v3
// settings) whose names are not in known what a Rancher replica of the
// double's version does when it starts (every replica: settings.Register is
// called from rancher.New through dashboardapi.Register, before leader
// election):
//
//   - v2.8.0–v2.8.2: nothing (SetAll has no cleanupUnknownSettings).
//   - v2.8.3–v2.8.x: an Update of each, with the label cattle.io/unknown:
//     "true" (markSettingAsUnknown, retry on conflict; already-labelled ones
//     are updated again).
//   - v2.9.0 and later (checked to v2.12.x): a Delete of each
//     (cleanupUnknownSettings).
//
// Errors on single Settings are logged by Rancher and skipped; here they are
// collected and returned. The creation of missing known Settings and the
// default/env refresh of SetAll are not done.
//
// rancher/rancher v2.8.2, v2.8.3, v2.8.5, v2.9.0, v2.10.3, v2.11.3
// pkg/controllers/dashboardapi/settings/settings.go: SetAll,
// cleanupUnknownSettings, markSettingAsUnknown.
func (d *Double) RestartSettings(ctx context.Context, known []string) error {
	action := d.version.unknownSettings()
	if action == unknownKeep {
		return nil
	}
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	client := d.dyn.Resource(Settings)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		if isKnown[s.GetName()] {
			continue
		}
		switch action {
		case unknownDelete:
			d.count(Settings, "", s.GetName())
			if err := client.Delete(ctx, s.GetName(), metav1.DeleteOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("delete unknown setting %s: %w", s.GetName(), err))
			}
		case unknownLabel:
			first := true
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if !first {
					got, err := client.Get(ctx, s.GetName(), metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return nil
					} else if err != nil {
						return err
					}
					s = got
				}
				first = false
				labels := s.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels[UnknownSettingLabel] = "true"
				s.SetLabels(labels)
				d.count(Settings, "", s.GetName())
				_, err := client.Update(ctx, s, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("label unknown setting %s: %w", s.GetName(), err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}
