package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// The watch the dashboard's store keeps of what it has found: one
// websocket, /v1/subscribe, over which the store sends a subscription per
// type and id and steve sends the changes (rancher/apiserver v0.6.6
// pkg/subscribe: handler.go, watcher.go; the dashboard's side is
// rancher/dashboard shell/plugins/steve/subscribe.js).

// subscription is a message of the store (pkg/subscribe/handler.go
// Subscribe).
type subscription struct {
	Mode            string `json:"mode,omitempty"`
	Stop            bool   `json:"stop,omitempty"`
	ResourceType    string `json:"resourceType,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	ID              string `json:"id,omitempty"`
	Selector        string `json:"selector,omitempty"`
	DebounceMs      int    `json:"debounceMs,omitempty"`
}

// key is Subscribe.key: one watch per type, namespace, id, selector and mode.
func (s subscription) key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s/%d", s.ResourceType, s.Namespace, s.ID, s.Selector, s.Mode, s.DebounceMs)
}

// event is a message of steve (pkg/types/server_types.go APIEvent): name
// is resource.start, resource.create, resource.change, resource.remove,
// resource.error or resource.stop; data the object as GET returns it, or
// {error} for resource.error.
type event struct {
	Name         string      `json:"name,omitempty"`
	Namespace    string      `json:"namespace,omitempty"`
	ResourceType string      `json:"resourceType,omitempty"`
	ID           string      `json:"id,omitempty"`
	Selector     string      `json:"selector,omitempty"`
	Revision     string      `json:"revision,omitempty"`
	Mode         string      `json:"mode,omitempty"`
	Data         interface{} `json:"data,omitempty"`
}

// subscribe serves /v1/subscribe for the user of q. The websocket's
// origin must be the server's own (gorilla/websocket's default CheckOrigin,
// which the Upgrader of pkg/subscribe/handler.go keeps).
func (s *Steve) subscribe(q *steveRequest) {
	srv := websocket.Server{
		Handshake: func(cfg *websocket.Config, r *http.Request) error {
			o, err := url.Parse(r.Header.Get("Origin"))
			if err != nil || !strings.EqualFold(o.Host, r.Host) {
				return fmt.Errorf("steve double: websocket origin %q is not %s", r.Header.Get("Origin"), r.Host)
			}
			return nil
		},
		Handler: func(ws *websocket.Conn) { s.watchSession(q, ws) },
	}
	srv.ServeHTTP(q.w, q.r)
}

// watchSession is pkg/subscribe/watcher.go WatchSession: each subscription
// not yet watched starts a watch, a stop message ends it (resource.stop),
// and one writer sends every event in order.
func (s *Steve) watchSession(q *steveRequest, ws *websocket.Conn) {
	ctx, cancel := context.WithCancel(q.r.Context())
	defer cancel()
	out := make(chan event, 100)
	var (
		mu       sync.Mutex
		watchers = map[string]context.CancelFunc{}
		wg       sync.WaitGroup
	)
	send := func(e event) {
		select {
		case out <- e:
		case <-ctx.Done():
		}
	}
	stop := func(sub subscription) {
		mu.Lock()
		defer mu.Unlock()
		if c, ok := watchers[sub.key()]; ok {
			c()
			delete(watchers, sub.key())
			send(event{Name: "resource.stop", ResourceType: sub.ResourceType, Namespace: sub.Namespace, ID: sub.ID, Selector: sub.Selector, Mode: sub.Mode})
		}
	}
	go func() {
		defer cancel()
		for {
			var sub subscription
			if err := websocket.JSON.Receive(ws, &sub); err != nil {
				return
			}
			if sub.Stop {
				stop(sub)
				continue
			}
			mu.Lock()
			if _, ok := watchers[sub.key()]; !ok {
				wctx, wcancel := context.WithCancel(ctx)
				watchers[sub.key()] = wcancel
				wg.Add(1)
				go func(sub subscription) {
					defer wg.Done()
					defer stop(sub)
					if err := s.stream(wctx, q, sub, send); err != nil {
						send(event{Name: "resource.error", ResourceType: sub.ResourceType, Namespace: sub.Namespace, ID: sub.ID,
							Selector: sub.Selector, Mode: sub.Mode, Data: map[string]interface{}{"error": err.Error()}})
					}
				}(sub)
			}
			mu.Unlock()
		}
	}()
	for {
		select {
		case e := <-out:
			if err := websocket.JSON.Send(ws, e); err != nil {
				cancel()
				wg.Wait()
				return
			}
		case <-ctx.Done():
			wg.Wait()
			return
		}
	}
}

// stream is pkg/subscribe/watcher.go stream for one subscription: the
// user's schema of the type (else "failed to find schema"), the right to
// watch it (steve's CanWatch), a watch as the user from the given
// revision — of the one object named by the subscription's id, which is
// what steve's own watch sends a user who may watch that name (steve
// pkg/stores/proxy/rbac_store.go generatePartitionsByID, WatchNames) — then
// resource.start and each change: resource.create, resource.change,
// resource.remove with the object as GET gives it (steve
// pkg/stores/partition/store.go ToAPIEvent; pkg/subscribe/convert.go
// MarshallObject), resource.error with the message of an error event.
// It returns when the watch ends or ctx is done.
func (s *Steve) stream(ctx context.Context, q *steveRequest, sub subscription, send func(event)) error {
	access, err := s.accessFor(ctx, q.user)
	if err != nil {
		return err
	}
	var t *steveType
	for i := range s.types {
		if s.types[i].id == strings.ToLower(sub.ResourceType) {
			t = &s.types[i]
		}
	}
	var sc *userSchema
	if t != nil {
		sc = access.schemaFor(t)
	}
	if sc == nil {
		return fmt.Errorf("failed to find schema %s", sub.ResourceType)
	}
	if !sc.canWatch() {
		return fmt.Errorf("can not list %s", t.id)
	}
	ns, name := sub.Namespace, sub.ID
	if i := strings.LastIndex(name, "/"); i >= 0 {
		ns, name = name[:i], name[i+1:]
	}
	c, err := s.as(q.user, t, ns)
	if err != nil {
		return err
	}
	opts := metav1.ListOptions{ResourceVersion: sub.ResourceVersion, LabelSelector: sub.Selector, AllowWatchBookmarks: false}
	if name != "" {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	w, err := c.Watch(ctx, opts)
	if err != nil {
		return err
	}
	defer w.Stop()
	req := &steveRequest{Steve: s, r: q.r, base: q.base, user: q.user, access: access}
	send(event{Name: "resource.start", ResourceType: sub.ResourceType, Namespace: sub.Namespace, ID: sub.ID, Selector: sub.Selector, Mode: sub.Mode})
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			ev := event{ResourceType: sub.ResourceType, Namespace: sub.Namespace, ID: sub.ID, Selector: sub.Selector, Mode: sub.Mode}
			switch e.Type {
			case watch.Added:
				ev.Name = "resource.create"
			case watch.Modified:
				ev.Name = "resource.change"
			case watch.Deleted:
				ev.Name = "resource.remove"
			case watch.Error:
				st, _ := e.Object.(*metav1.Status)
				msg := "watch error"
				if st != nil {
					msg = st.Message
				}
				send(event{Name: "resource.error", ResourceType: sub.ResourceType, Namespace: sub.Namespace, ID: sub.ID,
					Selector: sub.Selector, Mode: sub.Mode, Data: map[string]interface{}{"error": msg}})
				continue
			default:
				continue
			}
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				return errors.New("steve double: a watch event without an object")
			}
			ev.Revision = u.GetResourceVersion()
			ev.Data = req.resource(t, u)
			send(ev)
		}
	}
}
