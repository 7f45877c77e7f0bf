// Package slim keeps cluster objects in the informers' caches as slim
// copies: only what pkg/agentenv reads of them (the agent env as JSON text
// under agentenv.CompactEnvKey, the record, status and override
// annotations, what routing reads) and a fingerprint of the rest
// (Fingerprint, for the agentenv controller's revert guard). NewInformer
// lists in pages and, with a REST client (NewRESTClient), reads lists and
// watches off the wire straight into that form (wire.go), so that the
// caches of the agentenv controller and of the judgement index
// (pkg/agentenv/index) grow with those fields, not with whole objects.
package slim

import (
	"context"
	"encoding/json"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// slim is the informers' transform (client-go SetTransform): it keeps of a
// cluster object only what the controller reads, so the caches grow with
// those fields, not with whole objects (a management Cluster carries a
// large status; Rancher's apply annotation holds a whole copy of the
// object). Kept: apiVersion, kind, name, namespace, uid, resourceVersion,
// the label rancher.ClusterNameLabel, the annotations of the leasetune.io and
// election.cattle.io domains (the record, the status, the overrides),
// spec.agentEnvVars, spec.rkeConfig only as a marker, status.clusterName,
// what Rancher v2.15's imported day-2 operations read of a management
// Cluster (status.driver, the provider.cattle.io label,
// rancher.io/operations-enabled, provisioning.cattle.io/administrated:
// rancher.ImportedDay2Ops), and the object's fingerprint (fingerprint.go),
// computed here from the whole object, under the top-level field
// fingerprintKey. Everything else is dropped: at 10,000 clusters the other
// labels and annotations were a fifth of the cache.
// Writes never start from the slim copy alone: a conflict is retried from
// a live read.
func slim(obj interface{}) (interface{}, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	if _, done := isSlim(u); done {
		return u, nil // already slim (read by the stream decoder, or a relist of the cache's own copy)
	}
	// One implementation for both paths: the object as the apiserver
	// encodes it (Go's encoding/json), read by slimFrom (wire.go).
	b, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	return slimFromJSON(b)
}

// Transform makes the slim copy of a cluster object as the informers of
// NewInformer do (their client-go transform), for a cache filled by hand.
func Transform(obj interface{}) (interface{}, error) { return slim(obj) }

// internTable holds one copy of the strings the slim objects repeat across
// clusters (the agent env as JSON text, the ownership record, override
// values): the JSON decoder allocates each anew, for every object. It
// takes at most internMax strings of at most internLen bytes (16 MiB at
// most) and then stops growing, so a value unique to each cluster costs no
// more than without it.
type internTable struct {
	mu sync.Mutex
	m  map[string]string
}

const (
	internMax = 4096
	internLen = 4096
)

var interned = &internTable{m: map[string]string{}}

func (t *internTable) of(s string) string {
	if len(s) > internLen {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.m[s]; ok {
		return c
	}
	if len(t.m) < internMax {
		t.m[s] = s
	}
	return s
}

// listPage is how many objects one page of an informer's initial list
// holds.
const listPage = 500

// NewInformer returns an informer of the cluster kind gvr whose cache
// holds slim objects (slim) and whose initial list is read in pages of
// listPage, each page slimmed before the next is read: a whole list
// decoded at once (the apiserver serves an informer's usual first list,
// resourceVersion "0", from its watch cache in one piece) held every full
// object in memory at the same time, over 1 GiB at 10,000 clusters. The
// paged list is a consistent read at one resourceVersion; the watch
// decodes one object at a time.
//
// With stream (NewRESTClient) the lists and watches are read by the
// streaming decoder of wire.go, which never builds the whole object;
// without (nil), through client, decoded whole and then slimmed.
func NewInformer(client dynamic.Interface, stream rest.Interface, gvr schema.GroupVersionResource, indexers cache.Indexers) cache.SharedIndexInformer {
	var lw *cache.ListWatch
	if stream != nil {
		lw = streamListWatch(stream, gvr)
	} else {
		res := client.Resource(gvr)
		lw = &cache.ListWatch{
			ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) {
				out := &unstructured.UnstructuredList{}
				opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", listPage, ""
				for {
					page, err := res.List(context.Background(), opts)
					if err != nil {
						return nil, err
					}
					if out.GetResourceVersion() == "" {
						out.SetResourceVersion(page.GetResourceVersion())
					}
					for i := range page.Items {
						s, err := slim(&page.Items[i])
						if err != nil {
							return nil, err
						}
						out.Items = append(out.Items, *s.(*unstructured.Unstructured))
					}
					if page.GetContinue() == "" {
						return out, nil
					}
					opts.Continue = page.GetContinue()
				}
			},
			WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(context.Background(), opts)
			},
		}
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, indexers)
	utilruntime.Must(inf.SetTransform(slim))
	return inf
}

// NewRESTClient returns an unversioned REST client of cfg for /apis (its
// QPS and burst apply), for patch.RawPatcher and for NewInformer's stream.
// It asks for and sends JSON whatever cfg says (the stream decoder reads
// JSON only; custom resources have no protobuf). Error answers are
// decoded into StatusErrors.
func NewRESTClient(cfg *rest.Config) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = nil
	c.AcceptContentTypes, c.ContentType = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.UnversionedRESTClientFor(c)
}
