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
// second, after the CRD is Established, before it goes back to asking
// every settingCRDPoll (a CRD of that name that does not serve
// leasetune.io/v1alpha1).
const statusCRDServed = 30 * time.Second

// waitForStatusCRD returns nil once the API server serves the
// ElectionStatus kind (statuscontroller.GVR), or ctx's error when ctx ends
// first. It watches the one CRD electionstatuses.leasetune.io by name (a
// field selector on metadata.name, which RBAC allows by resourceNames:
// the chart's ClusterRole grants get, list and watch of that name only)
// and asks discovery only once the CRD is Established: while the CRD is
// missing it costs one watch, which client-go's reflector renews every 5
// to 10 minutes, not a discovery request every settingCRDPoll (360 an
// hour). Where leasetune may not list that CRD (a ClusterRole older than
// the binary: the List answers Forbidden), it asks discovery every poll
// instead (settingCRDPoll), as leasetune did before the watch.
func waitForStatusCRD(ctx context.Context, dc discovery.DiscoveryInterface, defs apiextv1client.CustomResourceDefinitionInterface, poll time.Duration, log *slog.Logger) error {
	if served(dc, statuscontroller.GVR) {
		return nil
	}
	name := statuscontroller.GVR.GroupResource().String()
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	probe := metav1.ListOptions{}
	byName(&probe)
	if _, err := defs.List(ctx, probe); apierrors.IsForbidden(err) {
		log.Info("may not watch the ElectionStatus CRD by name (the chart's ClusterRole grants it): asking discovery for it every "+poll.String(), "error", err)
		return pollServed(ctx, dc, poll, 0)
	}
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			byName(&o)
			return defs.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			byName(&o)
			return defs.Watch(ctx, o)
		},
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &apiextv1.CustomResourceDefinition{}, nil, func(ev watch.Event) (bool, error) {
		crd, ok := ev.Object.(*apiextv1.CustomResourceDefinition)
		return ok && ev.Type != watch.Deleted && crd.Name == name && crds.Established(crd), nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		// Established: discovery lists the kind within a moment.
		if pollServed(ctx, dc, time.Second, statusCRDServed) == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = fmt.Errorf("%s is Established but discovery does not list %s within %s", name, statuscontroller.GVR, statusCRDServed)
	}
	log.Warn("waiting for the ElectionStatus CRD: asking discovery every "+poll.String(), "error", err)
	return pollServed(ctx, dc, poll, 0)
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
