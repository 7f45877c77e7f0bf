package audit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const metadataLine = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/kube-system/pods?limit=500\u0026resourceVersion=0","verb":"list","user":{"username":"system:serviceaccount:a:b","uid":"u","groups":["g1","g2"],"extra":{"k":["v"]}},"impersonatedUser":{"username":"other"},"sourceIPs":["10.0.0.1","10.0.0.2"],"userAgent":"kubectl/v1.32.0 (linux/amd64) kubernetes/\"x\"","objectRef":{"resource":"pods","namespace":"kube-system","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2024-01-01T00:00:00.123456Z","stageTimestamp":"2024-01-01T00:00:00.130000Z","annotations":{"authorization.k8s.io/decision":"allow"}}`

// fields returns the parsed fields as strings, for comparison.
func fields(ev *event) map[string]string {
	return map[string]string{
		"kind": string(ev.kind), "apiVersion": string(ev.apiVersion), "level": string(ev.level), "auditID": string(ev.auditID),
		"stage": string(ev.stage), "requestURI": string(ev.requestURI), "verb": string(ev.verb), "user": string(ev.username),
		"ua": string(ev.userAgent), "ip": string(ev.sourceIP), "resource": string(ev.resource), "namespace": string(ev.namespace),
		"name": string(ev.name), "group": string(ev.apiGroup), "sub": string(ev.subresource), "received": string(ev.received),
		"stageAt": string(ev.stageAt), "req": string(ev.requestObject), "resp": string(ev.responseObject), "code": string(ev.code),
	}
}

func TestParseLineFastMatchesEncodingJSON(t *testing.T) {
	lines := map[string]string{
		"metadata, escapes":  metadataLine,
		"keys in any order":  `{"stage":"RequestReceived","auditID":"x","apiVersion":"audit.k8s.io/v1","kind":"Event","verb":"get","objectRef":{"name":"n","resource":"leases","apiGroup":"coordination.k8s.io","namespace":"ns"},"user":{"username":"u"},"userAgent":"ua","sourceIPs":["1.2.3.4"],"requestURI":"/x","requestReceivedTimestamp":"2024-01-01T00:00:00Z"}`,
		"white space":        " { \"kind\" : \"Event\" , \"apiVersion\":\"audit.k8s.io/v1\",\t\"auditID\":\"y\",\"stage\":\"Panic\",\"level\":\"None\", \"sourceIPs\" : [ ] , \"userAgent\": null }",
		"objects and values": `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"z","stage":"ResponseComplete","level":"RequestResponse","objectRef":{"resource":"configmaps","namespace":"kube-system","name":"lock"},"requestObject":{"a":[1,-2.5e3,true,false,null,{"b":"c\\\"}"}]},"responseObject":{"metadata":{"annotations":{"control-plane.alpha.kubernetes.io/leader":"{\"holderIdentity\":\"h\"}"}}}}`,
		"unicode escapes":    `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"u","stage":"ResponseComplete","requestURI":"/a\u00e9\ud83d\ude00\/b\n","verb":"get"}`,
	}
	for name, line := range lines {
		var fast event
		s := scanner{b: []byte(line), arena: make([]byte, 0, len(line))}
		if err := s.event(&fast); err != nil {
			t.Errorf("%s: fast scanner: %v", name, err)
			continue
		}
		var slow event
		if err := decodeFallback([]byte(line), &slow); err != nil {
			t.Fatalf("%s: encoding/json: %v", name, err)
		}
		f, g := fields(&fast), fields(&slow)
		// encoding/json keeps raw objects as they are; so does the scanner.
		if !reflect.DeepEqual(f, g) {
			t.Errorf("%s:\nscanner       %v\nencoding/json %v", name, f, g)
		}
	}
	var ev event
	if err := parseLine([]byte(metadataLine), &ev, nil, true); err != nil {
		t.Fatal(err)
	}
	if got := string(ev.requestURI); got != "/api/v1/namespaces/kube-system/pods?limit=500&resourceVersion=0" {
		t.Errorf("requestURI %q", got)
	}
	var s scanner
	var q req
	s.setReq(&q, &ev)
	if !q.tsOK || q.ts%1e9 != 123456000 || !q.atOK || q.at%1e9 != 130000000 {
		t.Errorf("timestamps %d %v, %d %v", q.ts, q.tsOK, q.at, q.atOK)
	}
}

func TestParseLineRefuses(t *testing.T) {
	cases := map[string]struct {
		line     string
		notEvent bool // well-formed JSON, but not an Event
	}{
		"not JSON":          {line: "hello"},
		"truncated":         {line: metadataLine[:len(metadataLine)/2]},
		"trailing garbage":  {line: metadataLine + "x"},
		"two objects":       {line: metadataLine + metadataLine},
		"bad literal":       {line: `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"x","v":tru}`},
		"a Status":          {line: `{"kind":"Status","apiVersion":"v1","status":"Failure"}`, notEvent: true},
		"other API version": {line: strings.Replace(metadataLine, "audit.k8s.io/v1", "audit.k8s.io/v1beta1", 1), notEvent: true},
		"no auditID":        {line: `{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete"}`, notEvent: true},
		"an array":          {line: `[1,2]`, notEvent: true},
		"wrong type":        {line: `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"x","user":"u"}`, notEvent: true},
	}
	for name, c := range cases {
		var ev event
		err := parseLine([]byte(c.line), &ev, nil, true)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if got := errors.Is(err, errNotEvent); got != c.notEvent {
			t.Errorf("%s: %v: errNotEvent %v, want %v", name, err, got, c.notEvent)
		}
	}
}

func TestLeaderAnnotated(t *testing.T) {
	var ev event
	line := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"z","stage":"ResponseComplete","responseObject":{"metadata":{"annotations":{"control-plane.alpha.kubernetes.io/leader":"{}"}}}}`
	if err := parseLine([]byte(line), &ev, nil, true); err != nil || !leaderAnnotated(ev.responseObject, ev.requestObject) {
		t.Errorf("annotation not seen: %v", err)
	}
	// The annotation's name in the data is not the annotation.
	line = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"z","stage":"ResponseComplete","responseObject":{"metadata":{},"data":{"note":"control-plane.alpha.kubernetes.io/leader"}}}`
	if err := parseLine([]byte(line), &ev, nil, true); err != nil || leaderAnnotated(ev.responseObject, ev.requestObject) {
		t.Errorf("annotation seen in data: %v", err)
	}
}

// FuzzParseLine: the scanner reads no line that encoding/json refuses;
// wherever both read a line, they read the same fields; where only
// encoding/json does, parseLine still reads it (through the fallback).
func FuzzParseLine(f *testing.F) {
	f.Add(metadataLine)
	f.Add(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"z","stage":"ResponseComplete","objectRef":{"resource":"configmaps","name":"a\u0041"},"responseObject":{"metadata":{"annotations":{"control-plane.alpha.kubernetes.io/leader":"{}"}}}}`)
	f.Add(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"RequestReceived","requestURI":"/x?a=1\u0026b=2"}`)
	f.Add(`{"responseStatus":{}}`) // encoding/json reads code 0
	keys := []string{"kind", "apiVersion", "level", "auditID", "stage", "requestURI", "verb", "user", "username", "sourceIPs", "userAgent",
		"objectRef", "resource", "namespace", "name", "apiGroup", "subresource", "responseStatus", "code", "requestObject", "responseObject",
		"requestReceivedTimestamp", "stageTimestamp"}
	f.Fuzz(func(t *testing.T, line string) {
		// encoding/json matches keys case-insensitively; the apiserver
		// writes them as declared, and so the scanner reads them.
		lower := strings.ToLower(line)
		for _, k := range keys {
			if q := `"` + k + `"`; strings.Count(lower, strings.ToLower(q)) != strings.Count(line, q) {
				t.Skip("a key in other case")
			}
		}
		var slow event
		jerr := decodeFallback([]byte(line), &slow)
		var fast event
		s := scanner{b: []byte(line), arena: make([]byte, 0, len(line))}
		serr := s.event(&fast)
		if serr == nil && jerr != nil {
			t.Fatalf("the scanner reads a line encoding/json refuses (%v)", jerr)
		}
		if jerr == nil && serr == nil {
			if f, g := fields(&fast), fields(&slow); !reflect.DeepEqual(f, g) {
				t.Fatalf("scanner %v\nencoding/json %v", f, g)
			}
		}
		if jerr == nil {
			var ev event
			if err := parseLine([]byte(line), &ev, nil, true); err != nil && !errors.Is(err, errNotEvent) {
				t.Fatalf("encoding/json reads it, parseLine says %v", err)
			}
		}
	})
}
