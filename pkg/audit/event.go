package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"
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

// parseLine reads one line into ev. It first tries a scanner that reads
// only the fields it needs and skips the rest (strings with
// bytes.IndexByte); a line the scanner refuses is decoded again by
// encoding/json, which decides whether it is JSON at all and gives the
// error message. The scanner checks the structure (brackets, strings,
// literals), not every detail of the grammar.
//
// Unless full, it stops at errEarly as soon as it has read an Event's
// kind, apiVersion, auditID and a stage that is not final
// (RequestReceived, ResponseStarted): such a line matters only when its
// request's final stage never comes, and is then read again in full.
func parseLine(line []byte, ev *event, arena []byte, full bool) error {
	*ev = event{}
	s := scanner{b: line, arena: arena[:0], early: !full}
	if err := s.event(ev); errors.Is(err, errEarly) {
		return err
	} else if err != nil {
		*ev = event{}
		if jerr := decodeFallback(line, ev); jerr != nil {
			return jerr
		}
	}
	if string(ev.kind) != "Event" || string(ev.apiVersion) != "audit.k8s.io/v1" {
		return fmt.Errorf("%w (kind %q, apiVersion %q)", errNotEvent, ev.kind, ev.apiVersion)
	}
	if len(ev.auditID) == 0 || len(ev.stage) == 0 {
		return fmt.Errorf("%w (no auditID or stage)", errNotEvent)
	}
	return nil
}

// timestamp returns the event's requestReceivedTimestamp (the moment the
// client's request arrived, which is what a client's cadence shows), else
// its stageTimestamp, in Unix nanoseconds, and whether either parsed.
func (ev *event) timestamp() (int64, bool) {
	for _, raw := range [][]byte{ev.received, ev.stageAt} {
		if len(raw) == 0 {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, string(raw)); err == nil {
			return t.UnixNano(), true
		}
	}
	return 0, false
}

// loggedAt returns the moment the event was written (stageTimestamp),
// else its requestReceivedTimestamp, in Unix nanoseconds, and whether
// either parsed. A log covers the time its events were written in: a
// watch received half an hour before a rotated file begins completes
// inside it with its old requestReceivedTimestamp (kube-apiserver ends
// watches after --min-request-timeout, 1800s by default, to twice that).
func (ev *event) loggedAt() (int64, bool) {
	for _, raw := range [][]byte{ev.stageAt, ev.received} {
		if len(raw) == 0 {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, string(raw)); err == nil {
			return t.UnixNano(), true
		}
	}
	return 0, false
}

// leaderAnnotated reports whether the request or response object carries
// LeaderAnnotation in its metadata.
func (ev *event) leaderAnnotated() bool {
	for _, raw := range [][]byte{ev.responseObject, ev.requestObject} {
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
	return nil
}

// scanner reads one JSON line without building a tree.
type scanner struct {
	b []byte
	i int
	// arena holds unescaped strings; its capacity is at least len(b), so
	// appending never moves what earlier strings point to.
	arena []byte
	// early stops at errEarly (see parseLine).
	early bool
}

var errSyntax = errors.New("syntax")

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) expect(c byte) error {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != c {
		return errSyntax
	}
	s.i++
	return nil
}

// str reads a string and returns its content, unescaped into s.arena
// when it has escapes (the apiserver's encoder writes & as \u0026).
func (s *scanner) str() ([]byte, error) {
	raw, esc, err := s.rawStr()
	if err != nil || (!esc && utf8.Valid(raw)) {
		return raw, err
	}
	start := len(s.arena)
	if s.arena, err = unescape(s.arena, raw); err != nil {
		return nil, err
	}
	return s.arena[start:len(s.arena):len(s.arena)], nil
}

// unescape appends the JSON string content raw, unescaped, to dst; bytes
// that are not UTF-8 become U+FFFD, as encoding/json makes them.
func unescape(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+n]...)
			}
			i += n - 1
			continue
		}
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return dst, errSyntax
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return dst, errSyntax
			}
			i += 4
			if utf16.IsSurrogate(r) && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if r2, ok := hex4(raw[i+3:]); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, errSyntax
		}
	}
	return dst, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// rawStr reads a string: its raw content and whether it has escapes.
func (s *scanner) rawStr() ([]byte, bool, error) {
	if err := s.expect('"'); err != nil {
		return nil, false, err
	}
	start := s.i
	esc := false
	for {
		j := bytes.IndexByte(s.b[s.i:], '"')
		if j < 0 {
			return nil, false, errSyntax
		}
		end := s.i + j
		// An escaped quote has an odd number of backslashes before it.
		n := 0
		for k := end - 1; k >= start && s.b[k] == '\\'; k-- {
			n++
		}
		if n > 0 || bytes.IndexByte(s.b[s.i:end], '\\') >= 0 {
			esc = true
		}
		s.i = end + 1
		if n%2 == 0 {
			return s.b[start:end], esc, nil
		}
	}
}

// skip skips one value of any kind.
func (s *scanner) skip(depth int) error {
	if depth > 1000 {
		return errSyntax
	}
	s.ws()
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i] {
	case '"':
		_, _, err := s.rawStr()
		return err
	case '{':
		s.i++
		return s.members(func([]byte) error { return s.skip(depth + 1) })
	case '[':
		s.i++
		return s.elements(func() error { return s.skip(depth + 1) })
	default:
		start := s.i
		for s.i < len(s.b) && isLiteralByte(s.b[s.i]) {
			s.i++
		}
		lit := s.b[start:s.i]
		switch {
		case len(lit) == 0:
			return errSyntax
		case string(lit) == "true", string(lit) == "false", string(lit) == "null":
			return nil
		case lit[0] == '-' || (lit[0] >= '0' && lit[0] <= '9'):
			return nil
		}
		return errSyntax
	}
}

func isLiteralByte(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E'
}

// members reads the members of an object whose '{' has been read,
// calling f with each key positioned at its value.
func (s *scanner) members(f func(key []byte) error) error {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		key, esc, err := s.rawStr()
		if err != nil {
			return err
		}
		if esc {
			key = nil // no key we read has escapes; skip its value
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := f(key); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return errSyntax
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// elements reads the elements of an array whose '[' has been read.
func (s *scanner) elements(f func() error) error {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := f(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return errSyntax
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errSyntax
		}
	}
}

// rawValue skips a value and returns its raw bytes.
func (s *scanner) rawValue() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// number reads an integer (an optional minus and digits) and returns its
// bytes.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.i < len(s.b) && isLiteralByte(s.b[s.i])) {
		return nil, errSyntax // not an integer: encoding/json decides
	}
	return s.b[start:s.i], nil
}

// strOrNull reads a string, or null as empty.
func (s *scanner) strOrNull() ([]byte, error) {
	s.ws()
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return nil, nil
	}
	return s.str()
}

// event reads a whole line as an Event.
func (s *scanner) event(ev *event) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	err := s.members(func(key []byte) error {
		var err error
		switch string(key) {
		case "kind":
			ev.kind, err = s.str()
		case "apiVersion":
			ev.apiVersion, err = s.str()
		case "level":
			ev.level, err = s.str()
		case "auditID":
			ev.auditID, err = s.str()
		case "stage":
			ev.stage, err = s.str()
		case "requestURI":
			ev.requestURI, err = s.str()
		case "verb":
			ev.verb, err = s.str()
		case "userAgent":
			ev.userAgent, err = s.strOrNull()
		case "requestReceivedTimestamp":
			ev.received, err = s.str()
		case "stageTimestamp":
			ev.stageAt, err = s.str()
		case "user":
			if err = s.expect('{'); err == nil {
				err = s.members(func(k []byte) error {
					if string(k) == "username" {
						var e error
						ev.username, e = s.str()
						return e
					}
					return s.skip(1)
				})
			}
		case "sourceIPs":
			if err = s.expect('['); err == nil {
				err = s.elements(func() error {
					ip, e := s.str()
					if ev.sourceIP == nil {
						ev.sourceIP = ip
					}
					return e
				})
			}
		case "objectRef":
			ev.hasObjectRef = true
			if err = s.expect('{'); err == nil {
				err = s.members(func(k []byte) error {
					var e error
					switch string(k) {
					case "resource":
						ev.resource, e = s.str()
					case "namespace":
						ev.namespace, e = s.str()
					case "name":
						ev.name, e = s.str()
					case "apiGroup":
						ev.apiGroup, e = s.str()
					case "subresource":
						ev.subresource, e = s.str()
					default:
						e = s.skip(1)
					}
					return e
				})
			}
		case "responseStatus":
			if err = s.expect('{'); err == nil {
				err = s.members(func(k []byte) error {
					if string(k) == "code" {
						var e error
						ev.code, e = s.number()
						return e
					}
					return s.skip(1)
				})
			}
		case "requestObject":
			ev.requestObject, err = s.rawValue()
		case "responseObject":
			ev.responseObject, err = s.rawValue()
		default:
			err = s.skip(0)
		}
		if err == nil && s.early && len(ev.stage) > 0 && len(ev.auditID) > 0 && !finalStage(ev.stage) &&
			string(ev.kind) == "Event" && string(ev.apiVersion) == "audit.k8s.io/v1" {
			return errEarly
		}
		return err
	})
	if err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return errSyntax
	}
	return nil
}
