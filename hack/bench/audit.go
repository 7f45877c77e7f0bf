package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
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

// event is the part of an audit event the bench reads.
type event struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received time.Time `json:"requestReceivedTimestamp"`
	StageAt  time.Time `json:"stageTimestamp"`
}

// request is one API request (all stages of one auditID folded).
type request struct {
	user, verb, resource string
	name                 string // objectRef.name ("" for a list or a non-resource URL)
	code                 int    // 0 while only ResponseStarted was seen (an open watch)
	received, done       time.Time
}

// auditLog reads the apiserver's audit log file as it grows.
type auditLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	r    *bufio.Reader
	part []byte
	reqs []*request
	byID map[string]*request
}

func newAuditLog(path string) *auditLog {
	return &auditLog{path: path, byID: map[string]*request{}}
}

// poll reads the lines appended since the last call.
func (a *auditLog) poll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		f, err := os.Open(a.path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		a.f, a.r = f, bufio.NewReaderSize(f, 1<<20)
	}
	for {
		line, err := a.r.ReadBytes('\n')
		if err == io.EOF {
			a.part = append(a.part, line...)
			return nil
		}
		if err != nil {
			return err
		}
		if len(a.part) > 0 {
			line = append(a.part, line...)
			a.part = nil
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("audit log line: %w", err)
		}
		a.add(&e)
	}
}

func (a *auditLog) add(e *event) {
	r := a.byID[e.AuditID]
	if r == nil {
		res := "(non-resource) " + e.RequestURI
		if e.ObjectRef != nil {
			res = e.ObjectRef.Resource
			if e.ObjectRef.APIGroup != "" {
				res += "." + e.ObjectRef.APIGroup
			}
			if e.ObjectRef.Subresource != "" {
				res += "/" + e.ObjectRef.Subresource
			}
			if e.ObjectRef.Name != "" && (e.ObjectRef.Resource == "leases" || e.ObjectRef.Resource == "configmaps" || e.ObjectRef.Resource == "secrets") {
				res += " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
			}
		} else if i := strings.IndexByte(res, '?'); i > 0 {
			res = res[:i]
		}
		r = &request{user: e.User.Username, verb: e.Verb, resource: res, received: e.Received}
		if e.ObjectRef != nil {
			r.name = e.ObjectRef.Name
		}
		a.byID[e.AuditID] = r
		a.reqs = append(a.reqs, r)
	}
	if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
		r.done = e.StageAt
		if e.ResponseStatus != nil {
			r.code = e.ResponseStatus.Code
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
	if a.f != nil {
		_ = a.f.Close()
	}
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
