package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"leasetune.io/leasetune/pkg/audit"
)

// auditPolicy records every request at Metadata level except those of
// system:masters (the bench's own admin user, which creates and checks the
// clusters, and the apiserver's loopback client), so the log holds the
// requests of leasetune and of the raw-PATCH floor's user, and little else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  userGroups: ["system:masters"]
- level: Metadata
`

// request is one API request (all stages of one auditID folded).
type request struct {
	user, verb, resource string
	name                 string // objectRef.name ("" for a list or a non-resource URL)
	code                 int    // 0 while only ResponseStarted was seen (an open watch)
	received, done       time.Time
}

// auditLog holds the requests of the apiserver's audit log, read as it
// grows (pkg/audit's Follower).
type auditLog struct {
	mu   sync.Mutex
	f    *audit.Follower
	reqs []*request
	byID map[string]*request
}

func newAuditLog(path string) *auditLog {
	return &auditLog{f: audit.NewFollower(path), byID: map[string]*request{}}
}

// poll reads the lines appended since the last call.
func (a *auditLog) poll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Poll(func(e audit.Event) error {
		a.add(e)
		return nil
	})
}

// add folds e into its request.
func (a *auditLog) add(e audit.Event) {
	r := a.byID[e.AuditID]
	if r == nil {
		res := "(non-resource) " + e.RequestURI
		if e.HasObjectRef {
			res = e.Resource
			if e.APIGroup != "" {
				res += "." + e.APIGroup
			}
			if e.Subresource != "" {
				res += "/" + e.Subresource
			}
			if e.Name != "" && (e.Resource == "leases" || e.Resource == "configmaps" || e.Resource == "secrets") {
				res += " " + e.Namespace + "/" + e.Name
			}
		} else if i := strings.IndexByte(res, '?'); i > 0 {
			res = res[:i]
		}
		r = &request{user: e.User, verb: e.Verb, resource: res, received: e.Received, name: e.Name}
		a.byID[e.AuditID] = r
		a.reqs = append(a.reqs, r)
	}
	if e.Final() {
		r.done = e.StageAt
		if e.Code != 0 {
			r.code = e.Code
		}
	}
}

// filter returns the requests of user received in [from, to) that match.
func (a *auditLog) filter(user string, from, to time.Time, match func(*request) bool) []*request {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*request
	for _, r := range a.reqs {
		if r.user != user || r.received.Before(from) || !r.received.Before(to) {
			continue
		}
		if match == nil || match(r) {
			out = append(out, r)
		}
	}
	return out
}

func (a *auditLog) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.f.Close()
}

// clusterPatch matches an accepted PATCH of a fleet Cluster.
func clusterPatch(r *request) bool {
	return r.verb == "patch" && r.resource == "clusters.fleet.cattle.io" && r.code >= 200 && r.code < 300
}

// patchedClusters counts the fleet Clusters user has written (accepted
// PATCHes, each cluster once) in requests received from since on.
func (a *auditLog) patchedClusters(user string, since time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]bool{}
	for _, r := range a.reqs {
		if r.user == user && !r.received.Before(since) && clusterPatch(r) {
			seen[r.name] = true
		}
	}
	return len(seen)
}

// follow polls the log every interval until ctx ends, so that the bench
// reads it as it grows in every phase alike (the floor's included).
func (a *auditLog) follow(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.poll(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: audit log:", err)
			}
		}
	}
}

// isWrite is a mutating verb.
func isWrite(r *request) bool {
	switch r.verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// lastDone is the latest completion among rs.
func lastDone(rs []*request) time.Time {
	var t time.Time
	for _, r := range rs {
		if r.done.After(t) {
			t = r.done
		}
	}
	return t
}

// firstReceived is the earliest receipt among rs.
func firstReceived(rs []*request) time.Time {
	var t time.Time
	for _, r := range rs {
		if t.IsZero() || r.received.Before(t) {
			t = r.received
		}
	}
	return t
}

// tally counts requests by "verb resource" (with the response codes that
// were not 2xx), most first.
func tally(rs []*request) []string {
	type k struct{ verb, res string }
	n := map[k]int{}
	bad := map[k]map[int]int{}
	for _, r := range rs {
		key := k{r.verb, r.resource}
		n[key]++
		if r.code != 0 && (r.code < 200 || r.code >= 300) {
			if bad[key] == nil {
				bad[key] = map[int]int{}
			}
			bad[key][r.code]++
		}
	}
	keys := make([]k, 0, len(n))
	for key := range n {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		if n[keys[i]] != n[keys[j]] {
			return n[keys[i]] > n[keys[j]]
		}
		return keys[i].verb+keys[i].res < keys[j].verb+keys[j].res
	})
	var out []string
	for _, key := range keys {
		s := fmt.Sprintf("%d %s %s", n[key], key.verb, key.res)
		for code, c := range bad[key] {
			s += fmt.Sprintf(" (%d× %d)", c, code)
		}
		out = append(out, s)
	}
	return out
}
