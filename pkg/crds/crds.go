// Package crds holds the CustomResourceDefinitions the project needs in an
// installation without Rancher, and installs those that are missing. It
// never replaces or updates an existing CRD: in a Rancher installation
// Rancher owns them.
package crds

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"leasetune.io/leasetune/pkg/own"
)

//go:embed setting.yaml
var settingYAML []byte

// SettingPath is the repository path of the Setting CRD, for tests and the chart.
const SettingPath = "pkg/crds/setting.yaml"

// Setting returns the management.cattle.io/v3 Setting CRD.
func Setting() (*apiextv1.CustomResourceDefinition, error) {
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(settingYAML, &crd); err != nil {
		return nil, fmt.Errorf("embedded %s: %w", SettingPath, err)
	}
	return &crd, nil
}

// EnsureSetting creates the Setting CRD when it does not exist and waits
// until it is established. An existing CRD (Rancher's) is left as it is.
// It reports whether it created the CRD.
func EnsureSetting(ctx context.Context, c apiextclient.Interface) (created bool, err error) {
	crd, err := Setting()
	if err != nil {
		return false, err
	}
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{FieldManager: own.FieldManager}); err == nil {
		created = true
	} else if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return Established(got), nil
	})
	if err != nil {
		return created, fmt.Errorf("CRD %s not established: %w", crd.Name, err)
	}
	return created, nil
}

// Established reports whether crd's Established condition is True: the
// API server serves its kind (discovery lists it a moment later).
func Established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}
