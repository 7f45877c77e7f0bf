package framework

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"leasetune.io/leasetune/pkg/audit"
)

// AuditLog is the kube-apiserver's audit log (JSON lines, one event per
// request stage, level Metadata): the tests' record of who wrote what.
type AuditLog struct{ Path string }

// Mark returns the log's size now: a point in time for Since and Window.
func (a AuditLog) Mark() (int64, error) {
	st, err := os.Stat(a.Path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Request is one completed request of the audit log.
type Request struct {
	Time                                          time.Time
	User, UserAgent, Verb                         string
	Group, Resource, Subresource, Namespace, Name string
	Code                                          int
}

// Object names the object of r: "resource[/subresource] namespace/name"
// (namespace empty for a cluster-scoped object).
func (r Request) Object() string {
	res := r.Resource
	if r.Group != "" {
		res += "." + r.Group
	}
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	return res + " " + r.Namespace + "/" + r.Name
}

// Write reports whether r changed something: a create, update, patch or
// delete that succeeded.
func (r Request) Write() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return r.Code < 400
	}
	return false
}

func (r Request) String() string {
	return fmt.Sprintf("%s %s %s by %s (%d)", r.Time.Format("15:04:05.000"), r.Verb, r.Object(), r.User, r.Code)
}

type auditEvent struct {
	Stage                    string    `json:"stage"`
	Verb                     string    `json:"verb"`
	UserAgent                string    `json:"userAgent"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	User                     struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Since returns the completed requests logged after mark. An impersonated
// request counts as the impersonated user's (Rancher acts for its users
// that way).
func (a AuditLog) Since(mark int64) ([]Request, error) {
	return a.Between(mark, -1)
}

// Between returns the completed requests logged between two marks (to -1:
// up to now).
func (a AuditLog) Between(from, to int64) ([]Request, error) {
	b, err := a.read(from, to)
	if err != nil {
		return nil, err
	}
	var out []Request
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" {
			continue
		}
		r := Request{Time: e.RequestReceivedTimestamp, User: e.User.Username, UserAgent: e.UserAgent, Verb: e.Verb}
		if e.ImpersonatedUser != nil {
			r.User = e.ImpersonatedUser.Username
		}
		if e.ObjectRef != nil {
			o := e.ObjectRef
			r.Group, r.Resource, r.Subresource, r.Namespace, r.Name = o.APIGroup, o.Resource, o.Subresource, o.Namespace, o.Name
		}
		if e.ResponseStatus != nil {
			r.Code = e.ResponseStatus.Code
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// read returns the log's bytes from from to to (-1: the end), cut after
// the last whole line.
func (a AuditLog) read(from, to int64) ([]byte, error) {
	f, err := os.Open(a.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < from {
		return nil, fmt.Errorf("audit log %s is %d bytes, shorter than the mark %d: it was rotated or replaced", a.Path, st.Size(), from)
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = f
	if to >= 0 {
		r = io.LimitReader(f, to-from)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	return b, nil
}

// Report runs leasetune's own audit analysis (pkg/audit, what `leasetune
// audit` prints) on the part of the log between two marks.
func (a AuditLog) Report(from, to int64) (*audit.Report, error) {
	b, err := a.read(from, to)
	if err != nil {
		return nil, err
	}
	an := audit.NewAnalyzer()
	if err := an.Read(a.Path, bytes.NewReader(b)); err != nil {
		return nil, err
	}
	return an.Report(20), nil
}

// Count groups requests by key (those keep accepts), for messages and
// exact comparisons: "key: n" lines, sorted.
func Count(rs []Request, keep func(Request) bool, key func(Request) string) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		if keep == nil || keep(r) {
			out[key(r)]++
		}
	}
	return out
}

// Format prints a count map one "key: n" per line, sorted.
func Format(m map[string]int) string {
	keys := sortedKeys(m)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %d\n", k, m[k])
	}
	return b.String()
}

// LockRate returns the requests per hour on the lock Lease
// namespace/name among rs, and how many there were. A leader renews once
// per retry period (one update, or a get and an update: client-go before
// v0.30), so n requests cover the span from the first to the last plus
// one renewal interval (the median time between two updates): the rate is
// n over that, exact for a regular renewal whatever the window's edges.
// With fewer than three updates the rate is 0.
func LockRate(rs []Request, namespace, name string) (perHour float64, n int) {
	var all, updates []time.Time
	for _, r := range rs {
		if r.Resource != "leases" || r.Namespace != namespace || r.Name != name || r.Subresource != "" {
			continue
		}
		all = append(all, r.Time)
		if r.Verb == "update" {
			updates = append(updates, r.Time)
		}
	}
	if len(updates) < 3 {
		return 0, len(all)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Before(all[j]) })
	sort.Slice(updates, func(i, j int) bool { return updates[i].Before(updates[j]) })
	gaps := make([]time.Duration, 0, len(updates)-1)
	for i := 1; i < len(updates); i++ {
		gaps = append(gaps, updates[i].Sub(updates[i-1]))
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	span := all[len(all)-1].Sub(all[0]) + gaps[len(gaps)/2]
	return float64(len(all)) / span.Hours(), len(all)
}
