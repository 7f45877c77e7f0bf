package audit

import (
	"encoding/json"
	"maps"
	"math/rand"
	"strings"
	"testing"
)

// strEndBytewise is strEnd one byte at a time: the reference.
func strEndBytewise(b []byte, i int) (int, int) {
	flags := 0
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, flags
		case c == '\\':
			flags |= strEscaped
			if i+1 >= len(b) {
				return -1, 0
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if _, ok := hex4(b[i+2:]); !ok {
					return -1, 0
				}
				i += 5
			default:
				return -1, 0
			}
		case c >= 0x80:
			flags |= strNonASCII
		case c < 0x20:
			return -1, 0
		}
	}
	return -1, 0
}

func TestStrEnd(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	alphabet := []byte("ab\"\\u0f/nx\x00\x1f\x20\x21\x7f\x80\xc3\xa9\xff0123456789")
	for n := 0; n < 20000; n++ {
		b := make([]byte, rnd.Intn(40))
		for i := range b {
			if rnd.Intn(4) == 0 {
				b[i] = alphabet[rnd.Intn(len(alphabet))]
			} else {
				b[i] = byte('a' + rnd.Intn(26))
			}
		}
		for i := 0; i < len(b); i++ {
			gotEnd, gotFlags := strEnd(b, i)
			wantEnd, wantFlags := strEndBytewise(b, i)
			if gotEnd != wantEnd || gotFlags != wantFlags {
				t.Fatalf("strEnd(%q, %d) = %d, %b; want %d, %b", b, i, gotEnd, gotFlags, wantEnd, wantFlags)
			}
		}
	}
}

func FuzzStrEnd(f *testing.F) {
	f.Add([]byte(metadataLine), 0)
	f.Add([]byte(`"abcdefgh\"ijk\u00e9lmnop"`+"\x01\x80"), 0)
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i >= len(b) {
			return
		}
		gotEnd, gotFlags := strEnd(b, i)
		wantEnd, wantFlags := strEndBytewise(b, i)
		if gotEnd != wantEnd || gotFlags != wantFlags {
			t.Fatalf("strEnd(%q, %d) = %d, %b; want %d, %b", b, i, gotEnd, gotFlags, wantEnd, wantFlags)
		}
	})
}

// TestScannerRefusesWhatJSONRefuses: lines encoding/json refuses are
// refused by the scanner too (and so reported as bad lines with
// encoding/json's error), also where the scanner only skips the value.
func TestScannerRefusesWhatJSONRefuses(t *testing.T) {
	const head = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"ResponseComplete",`
	cases := map[string]string{
		"control character in a string":         head + `"requestURI":"/a` + "\x01" + `b"}`,
		"control character in a skipped string": head + `"x":"a` + "\t" + `"}`,
		"bad escape in a skipped string":        head + `"x":"\x41"}`,
		"short \\u escape":                      head + `"x":"\u12"}`,
		"leading zero":                          head + `"x":01}`,
		"fraction without digits":               head + `"x":1.}`,
		"exponent without digits":               head + `"x":1e}`,
		"plus sign":                             head + `"x":+1}`,
		"lone minus":                            head + `"x":-}`,
		"bare word":                             head + `"x":nul}`,
		"true with more letters":                head + `"x":truth}`,
		"missing colon in an object":            head + `"x":{"a" 1}}`,
		"number as a key":                       head + `"x":{1:2}}`,
		"bracket mismatch":                      head + `"x":[1}`,
		"trailing comma":                        head + `"x":[1,]}`,
		"missing comma":                         head + `"x":[1 2]}`,
		"comma after the last member":           head + `"x":1,}`,
	}
	for name, line := range cases {
		var v any
		if json.Unmarshal([]byte(line), &v) == nil {
			t.Fatalf("%s: encoding/json accepts %s", name, line)
		}
		var ev event
		s := scanner{b: []byte(line), arena: make([]byte, 0, len(line))}
		if err := s.event(&ev); err == nil {
			t.Errorf("%s: the scanner accepts %s", name, line)
		}
		if err := parseLine([]byte(line), &ev, nil, true); err == nil {
			t.Errorf("%s: parseLine accepts %s", name, line)
		}
	}
}

// TestScannerReadsAsJSONDoes: corners where the scanner must read what
// encoding/json reads (or leave the line to it).
func TestScannerReadsAsJSONDoes(t *testing.T) {
	const head = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"ResponseComplete"`
	cases := map[string]string{
		"escaped key":           `{"\u006bind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a","stage":"ResponseComplete","verb":"get"}`,
		"second sourceIPs":      head + `,"sourceIPs":["1.1.1.1"],"sourceIPs":["2.2.2.2","3.3.3.3"]}`,
		"empty second sourceIP": head + `,"sourceIPs":["1.1.1.1"],"sourceIPs":[]}`,
		"code -0":               head + `,"responseStatus":{"code":-0}}`,
		"code 007":              head + `,"responseStatus":{"code":7}}`,
		"negative code":         head + `,"responseStatus":{"code":-5}}`,
		"numbers":               head + `,"x":[0,-0,1.5e+3,2E-2,-0.25,10]}`,
		"non-UTF-8 in a string": head + `,"requestURI":"/a` + "\xff" + `b"}`,
		"UTF-8 in a string":     head + `,"requestURI":"/é"}`,
		"deep nesting":          head + `,"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		"white space":           " \t" + head + " , \"verb\" : \"get\" \r\n}\n ",
	}
	for name, line := range cases {
		var slow event
		if err := decodeFallback([]byte(line), &slow); err != nil {
			t.Fatalf("%s: encoding/json: %v", name, err)
		}
		var ev event
		if err := parseLine([]byte(line), &ev, nil, true); err != nil {
			t.Errorf("%s: parseLine: %v", name, err)
			continue
		}
		if f, g := fields(&ev), fields(&slow); !maps.Equal(f, g) {
			t.Errorf("%s:\nparseLine     %v\nencoding/json %v", name, f, g)
		}
	}
}
