package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// LeaderAnnotation is the annotation older client-go versions (before
// v0.24's removal of the ConfigMap and Endpoints locks) kept the leader
// record in, on a ConfigMap or Endpoints lock.
const LeaderAnnotation = "control-plane.alpha.kubernetes.io/leader"

// event holds the fields of one audit.k8s.io/v1 Event that the analysis
// reads. Its byte slices point into the line being read (or into strings
// the fallback decoder made) and are valid until the next line.
type event struct {
	kind, apiVersion, level, auditID, stage, requestURI, verb []byte
	username, userAgent, sourceIP                             []byte
	resource, namespace, name, apiGroup, subresource          []byte
	hasObjectRef                                              bool
	received, stageAt                                         []byte
	// code is responseStatus.code, as its raw number.
	code []byte
	// requestObject and responseObject are raw JSON, read only for the
	// leader annotation of ConfigMaps and Endpoints.
	requestObject, responseObject []byte
}

// errEarly is parseLine's signal that the line is an event at a stage
// before the final one, not read further.
var errEarly = errors.New("not a final stage")

// finalStage reports whether stage is the last of a request.
func finalStage(stage []byte) bool {
	return string(stage) == "ResponseComplete" || string(stage) == "Panic"
}

// errNotEvent marks a well-formed JSON line that is not an audit Event.
var errNotEvent = errors.New("not an audit.k8s.io/v1 Event")

// parseLine reads one line into ev. It first tries a scanner (scan.go)
// that reads only the fields it needs and skips the rest, 8 bytes at a
// time through strings; a line the scanner refuses is decoded again by
// encoding/json, which decides whether it is JSON at all and gives the
// error message. The scanner accepts only what encoding/json accepts.
//
// Unless full, it stops at errEarly as soon as it has read an Event's
// kind, apiVersion, auditID and a stage that is not final
// (RequestReceived, ResponseStarted): such a line matters only when its
// request's final stage never comes, and is then read again in full.
func parseLine(line []byte, ev *event, arena []byte, full bool) error {
	s := scanner{arena: arena[:0]}
	return s.parse(line, ev, full)
}

// parse is parseLine with s's arena, which it appends to (so the strings
// of earlier lines stay valid).
func (s *scanner) parse(line []byte, ev *event, full bool) error {
	*ev = event{}
	s.b, s.early = line, !full
	if err := s.event(ev); errors.Is(err, errEarly) {
		return err
	} else if err != nil {
		*ev = event{}
		if jerr := decodeFallback(line, ev); jerr != nil {
			return jerr
		}
	}
	return checkEvent(ev)
}

// checkEvent refuses what is not an audit.k8s.io/v1 Event with an
// auditID and a stage.
func checkEvent(ev *event) error {
	if string(ev.kind) != "Event" || string(ev.apiVersion) != "audit.k8s.io/v1" {
		return fmt.Errorf("%w (kind %q, apiVersion %q)", errNotEvent, ev.kind, ev.apiVersion)
	}
	if len(ev.auditID) == 0 || len(ev.stage) == 0 {
		return fmt.Errorf("%w (no auditID or stage)", errNotEvent)
	}
	return nil
}

// timeCache parses the timestamps of audit events: the apiserver's form
// (2024-01-01T00:00:00.123456Z: UTC, up to 9 digits of fraction) by hand,
// with the Unix time of the last day seen kept, and any other form
// through time.Parse(time.RFC3339Nano), which decides.
type timeCache struct {
	day   [10]byte // "2024-01-01" of dayNs
	dayNs int64
}

// parse returns the time b says, in Unix nanoseconds, and whether it
// parsed (as time.Parse(time.RFC3339Nano) parses it).
func (c *timeCache) parse(b []byte) (int64, bool) {
	if ns, ok := c.fast(b); ok {
		return ns, true
	}
	if len(b) == 0 {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

// fast reads YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z with every field in range.
func (c *timeCache) fast(b []byte) (int64, bool) {
	if len(b) < 20 || len(b) > 30 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return 0, false
	}
	var frac int64
	if len(b) > 20 {
		if b[19] != '.' || len(b) == 21 {
			return 0, false
		}
		digits := b[20 : len(b)-1]
		for _, d := range digits {
			if d < '0' || d > '9' {
				return 0, false
			}
			frac = frac*10 + int64(d-'0')
		}
		for k := len(digits); k < 9; k++ {
			frac *= 10
		}
	} else if b[19] != 'Z' {
		return 0, false
	}
	h, ok1 := num2(b[11:13])
	m, ok2 := num2(b[14:16])
	sec, ok3 := num2(b[17:19])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || sec > 59 {
		return 0, false
	}
	if string(b[:10]) != string(c.day[:]) {
		y1, ok1 := num2(b[0:2])
		y2, ok2 := num2(b[2:4])
		mon, ok3 := num2(b[5:7])
		d, ok4 := num2(b[8:10])
		if !ok1 || !ok2 || !ok3 || !ok4 || mon < 1 || mon > 12 || d < 1 {
			return 0, false
		}
		y := y1*100 + y2
		if d > 28 && d > time.Date(y, time.Month(mon)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
			return 0, false
		}
		c.dayNs = time.Date(y, time.Month(mon), d, 0, 0, 0, 0, time.UTC).UnixNano()
		copy(c.day[:], b[:10])
	}
	return c.dayNs + int64(h*3600+m*60+sec)*int64(time.Second) + frac, true
}

// num2 reads two decimal digits.
func num2(b []byte) (int, bool) {
	if b[0] < '0' || b[0] > '9' || b[1] < '0' || b[1] > '9' {
		return 0, false
	}
	return int(b[0]-'0')*10 + int(b[1]-'0'), true
}

// leaderAnnotated reports whether the response or request object (raw
// JSON, either may be empty) carries LeaderAnnotation in its metadata.
func leaderAnnotated(objects ...[]byte) bool {
	for _, raw := range objects {
		if len(raw) == 0 || !bytes.Contains(raw, []byte(LeaderAnnotation)) {
			continue
		}
		var obj struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if json.Unmarshal(raw, &obj) == nil {
			if _, ok := obj.Metadata.Annotations[LeaderAnnotation]; ok {
				return true
			}
		}
	}
	return false
}

// jsonEvent is the fallback decoder's view of an Event: the same fields,
// by their audit.k8s.io/v1 names.
type jsonEvent struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Level      string `json:"level"`
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	SourceIPs []string `json:"sourceIPs"`
	UserAgent string   `json:"userAgent"`
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
	RequestObject            json.RawMessage `json:"requestObject"`
	ResponseObject           json.RawMessage `json:"responseObject"`
	RequestReceivedTimestamp string          `json:"requestReceivedTimestamp"`
	StageTimestamp           string          `json:"stageTimestamp"`
}

func decodeFallback(line []byte, ev *event) error {
	var j jsonEvent
	if err := json.Unmarshal(line, &j); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("%w: %w", errNotEvent, err)
		}
		return err
	}
	j.event(ev)
	return nil
}

// event sets ev from j.
func (j *jsonEvent) event(ev *event) {
	b := func(s string) []byte { return []byte(s) }
	*ev = event{kind: b(j.Kind), apiVersion: b(j.APIVersion), level: b(j.Level), auditID: b(j.AuditID), stage: b(j.Stage),
		requestURI: b(j.RequestURI), verb: b(j.Verb), username: b(j.User.Username), userAgent: b(j.UserAgent),
		received: b(j.RequestReceivedTimestamp), stageAt: b(j.StageTimestamp),
		requestObject: j.RequestObject, responseObject: j.ResponseObject}
	if len(j.SourceIPs) > 0 {
		ev.sourceIP = b(j.SourceIPs[0])
	}
	if j.ResponseStatus != nil {
		ev.code = strconv.AppendInt(nil, int64(j.ResponseStatus.Code), 10)
	}
	if r := j.ObjectRef; r != nil {
		ev.hasObjectRef = true
		ev.resource, ev.namespace, ev.name, ev.apiGroup, ev.subresource = b(r.Resource), b(r.Namespace), b(r.Name), b(r.APIGroup), b(r.Subresource)
	}
}
