package manager

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	statuscontroller "leasetune.io/leasetune/pkg/controllers/electionstatus"
	"leasetune.io/leasetune/pkg/crds"
)

// statusCRDServed is how long waitForStatusCRD asks discovery, once a
// second, after the CRD is Established and serves the version, before it
// looks at the CRD again (a variable for tests).
var statusCRDServed = 30 * time.Second

// waitForStatusCRD returns nil once the API server serves the
// ElectionStatus kind (statuscontroller.GVR), or ctx's error when ctx ends
// first. It watches the one CRD electionstatuses.leasetune.io by name (a
// field selector on metadata.name, which RBAC allows by resourceNames:
// the chart's ClusterRole grants list and watch of that name only) and
// asks discovery only once the CRD is Established, not being deleted, and
// serves leasetune.io/v1alpha1: while the CRD is missing it costs one
// watch, which client-go's reflector renews every 5 to 10 minutes, not a
// discovery request every settingCRDPoll (360 an hour). When discovery
// does not list the kind within statusCRDServed, it looks at the CRD
// again: gone or changed, it watches again; still there, it asks discovery
// every poll. Where leasetune may not list or watch that CRD (a
// ClusterRole older than the binary: Forbidden), it asks discovery every
// poll instead (settingCRDPoll), as leasetune did before the watch; it
// logs which (docs/footprint.md).
func waitForStatusCRD(ctx context.Context, dc discovery.DiscoveryInterface, defs apiextv1client.CustomResourceDefinitionInterface, poll time.Duration, log *slog.Logger) error {
	if served(dc, statuscontroller.GVR) {
		return nil
	}
	name := statuscontroller.GVR.GroupResource().String()
	byName := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		return o
	}
	forbidden := func(err error) error {
		log.Info("may not list and watch the ElectionStatus CRD by name (the chart's ClusterRole grants it): asking discovery for it every "+poll.String(), "error", err)
		return pollServed(ctx, dc, poll, 0)
	}
	// The rights, before a reflector would retry a refused list or watch
	// for ever.
	if _, err := defs.List(ctx, byName(metav1.ListOptions{})); apierrors.IsForbidden(err) {
		return forbidden(err)
	}
	if w, err := defs.Watch(ctx, byName(metav1.ListOptions{})); apierrors.IsForbidden(err) {
		return forbidden(err)
	} else if err == nil {
		w.Stop()
	}
	lw := &cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return defs.List(ctx, byName(o)) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return defs.Watch(ctx, byName(o)) },
	}
	ready := func(crd *apiextv1.CustomResourceDefinition) bool {
		return crd.Name == name && crd.DeletionTimestamp == nil && crds.Established(crd) && servesVersion(crd, statuscontroller.GVR.Version)
	}
	for {
		_, err := watchtools.UntilWithSync(ctx, lw, &apiextv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
			crd, ok := ev.Object.(*apiextv1.CustomResourceDefinition)
			return ok && ev.Type != watch.Deleted && ready(crd), nil
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			log.Warn("waiting for the ElectionStatus CRD: asking discovery every "+poll.String(), "error", err)
			return pollServed(ctx, dc, poll, 0)
		}
		// Established: discovery lists the kind within a moment.
		if pollServed(ctx, dc, time.Second, statusCRDServed) == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l, err := defs.List(ctx, byName(metav1.ListOptions{}))
		if err == nil && len(l.Items) == 1 && ready(&l.Items[0]) {
			log.Warn(fmt.Sprintf("the ElectionStatus CRD is established and serves %s, but discovery has not listed %s for %s: asking discovery every %s", statuscontroller.GVR.Version, statuscontroller.GVR.Resource, statusCRDServed, poll), "crd", name)
			return pollServed(ctx, dc, poll, 0)
		}
		// Gone, or changed while discovery was asked: watch it again.
	}
}

// servesVersion reports whether crd serves version v.
func servesVersion(crd *apiextv1.CustomResourceDefinition, v string) bool {
	for _, ver := range crd.Spec.Versions {
		if ver.Name == v && ver.Served {
			return true
		}
	}
	return false
}

// pollServed asks discovery every interval until it serves the
// ElectionStatus kind (nil), ctx ends, or timeout passes (0: never).
func pollServed(ctx context.Context, dc discovery.DiscoveryInterface, interval, timeout time.Duration) error {
	cond := func(context.Context) (bool, error) { return served(dc, statuscontroller.GVR), nil }
	if timeout == 0 {
		return wait.PollUntilContextCancel(ctx, interval, false, cond)
	}
	return wait.PollUntilContextTimeout(ctx, interval, timeout, true, cond)
}
