package audit

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads one JSON line without building a tree. It accepts only
// JSON that encoding/json accepts too (strings with valid escapes and no
// control characters, numbers and literals by the grammar, brackets that
// match, nothing after the value), so that a line it reads is a line
// encoding/json would have read; what it refuses goes to encoding/json
// (parseLine), which decides.
//
// Its functions take the line and the index to read at and return the
// index after what they read, or -1 when the line is not what they
// expect (the index lives in a register, not in the scanner).
type scanner struct {
	b []byte
	// arena holds unescaped strings (keys and values), of this line and
	// of earlier ones still to be counted (block.parse). When an append
	// moves it, the strings already returned keep pointing into the old
	// array, which nothing writes again.
	arena []byte
	// early stops at errEarly (see parseLine).
	early bool
	// times parses the timestamps of the events this scanner reads.
	times timeCache
}

var errSyntax = errors.New("syntax")

// maxDepth is the deepest nesting the scanner reads; a deeper line goes
// to encoding/json.
const maxDepth = 1024

// Flags of a string's content (strEnd).
const (
	strEscaped  = 1 << iota // has backslash escapes
	strNonASCII             // has bytes ≥ 0x80, maybe not UTF-8
)

// SWAR constants: a byte repeated in each of the 8 bytes of a word.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special flags the bytes of w (8 bytes, little-endian) that end or
// interrupt the plain run of a string: '"', '\\', a control character
// (< 0x20) or a byte ≥ 0x80, in the high bit of each byte. The lowest
// flag is exact (a borrow only runs upward from a byte that matched);
// those above it may not be.
func special(w uint64) uint64 {
	q := w ^ (ones * '"')
	e := w ^ (ones * '\\')
	return (((q - ones) &^ q) | ((e - ones) &^ e) | (w - ones*0x20) | w) & highs
}

func isSpecial(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf }

// strEnd reads the string whose opening quote is at b[i] and returns the
// index after its closing quote and its flags (strEscaped, strNonASCII),
// or -1. It looks for the bytes that matter 8 at a time (special), and
// checks escapes without decoding them.
func strEnd(b []byte, i int) (int, int) {
	i++
	flags := 0
	for {
		if i+8 <= len(b) {
			m := special(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		} else {
			for i < len(b) && !isSpecial(b[i]) {
				i++
			}
			if i >= len(b) {
				return -1, 0
			}
		}
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
				i += 2
			case 'u':
				if _, ok := hex4(b[i+2:]); !ok {
					return -1, 0
				}
				i += 6
			default:
				return -1, 0
			}
		case c >= utf8.RuneSelf:
			flags |= strNonASCII
			for i++; i < len(b) && b[i] >= utf8.RuneSelf; i++ {
			}
		default: // a control character: encoding/json refuses it
			return -1, 0
		}
	}
}

// ws skips white space.
func ws(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// str reads a string at b[i] and returns its content, unescaped into
// s.arena when it has escapes (the apiserver's encoder writes & as
// \u0026) or bytes that are not UTF-8 (which encoding/json makes U+FFFD).
func (s *scanner) str(b []byte, i int) ([]byte, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, -1
	}
	end, flags := strEnd(b, i)
	if end < 0 {
		return nil, -1
	}
	raw := b[i+1 : end-1]
	if flags == 0 || (flags == strNonASCII && utf8.Valid(raw)) {
		return raw, end
	}
	return s.unescaped(raw), end
}

// unescaped returns raw (checked by strEnd) unescaped into the arena.
func (s *scanner) unescaped(raw []byte) []byte {
	start := len(s.arena)
	s.arena = unescape(s.arena, raw)
	return s.arena[start:len(s.arena):len(s.arena)]
}

// strOrNull reads a string, or null as empty.
func (s *scanner) strOrNull(b []byte, i int) ([]byte, int) {
	if i < len(b) && b[i] == 'n' {
		return nil, literal(b, i, "null")
	}
	return s.str(b, i)
}

// key reads a member's key at b[i] and its colon, and returns the key
// and the index of its value. A key with escapes is unescaped (into the
// arena), so "\u006bind" is kind, as encoding/json reads it.
func (s *scanner) key(b []byte, i int) ([]byte, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, -1
	}
	end, flags := strEnd(b, i)
	if end < 0 {
		return nil, -1
	}
	key := b[i+1 : end-1]
	if flags != 0 {
		key = s.unescaped(key)
	}
	if end < len(b) && b[end] == ':' { // as the apiserver writes it
		return key, ws(b, end+1)
	}
	if i = ws(b, end); i >= len(b) || b[i] != ':' {
		return nil, -1
	}
	return key, ws(b, i+1)
}

// open reads the opening bracket c of an object or array at b[i] and
// returns the index of its first member or element, and whether it is
// empty (then the index after its closing bracket end).
func open(b []byte, i int, c, end byte) (int, bool) {
	if i >= len(b) || b[i] != c {
		return -1, false
	}
	if i = ws(b, i+1); i < len(b) && b[i] == end {
		return i + 1, true
	}
	return i, false
}

// sep reads what follows a member or element: a comma (true, and the
// index of the next one) or the closing bracket end (false, and the
// index after it).
func sep(b []byte, i int, end byte) (int, bool) {
	if i = ws(b, i); i < len(b) {
		switch b[i] {
		case ',':
			return ws(b, i+1), true
		case end:
			return i + 1, false
		}
	}
	return -1, false
}

// literal reads the literal lit (true, false, null) at b[i].
func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber reads a number at b[i] by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		d := i + 1
		for i = d; i < len(b) && isDigit(b[i]); i++ {
		}
		if i == d {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for ; i < len(b) && isDigit(b[i]); i++ {
		}
		if i == d {
			return -1
		}
	}
	return i
}

// number reads an integer that fits an int64 (an optional minus and
// digits, no leading zero, not -0) at b[i] and returns its bytes;
// anything else (a fraction, an exponent, a larger number) is left to
// encoding/json.
func number(b []byte, i int) ([]byte, int) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := i
	for ; i < len(b) && isDigit(b[i]); i++ {
	}
	switch n := i - d; {
	case n == 0, n > 18, n > 1 && b[d] == '0', n == 1 && b[d] == '0' && d > start:
		return nil, -1
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return nil, -1
	}
	return b[start:i], i
}

// skip reads one value of any kind at b[i], without recursion: the kinds
// of the open containers are a bit stack (1 for an object).
func (s *scanner) skip(b []byte, i int) int {
	var stack [maxDepth / 64]uint64
	depth := 0
	for {
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			i, _ = strEnd(b, i)
		case '{':
			var empty bool
			if i, empty = open(b, i, '{', '}'); empty {
				break
			}
			if depth == maxDepth {
				return -1
			}
			stack[depth>>6] |= 1 << (depth & 63)
			depth++
			if _, i = s.key(b, i); i < 0 {
				return -1
			}
			continue
		case '[':
			var empty bool
			if i, empty = open(b, i, '[', ']'); empty {
				break
			}
			if depth == maxDepth {
				return -1
			}
			stack[depth>>6] &^= 1 << (depth & 63)
			depth++
			continue
		case 't':
			i = literal(b, i, "true")
		case 'f':
			i = literal(b, i, "false")
		case 'n':
			i = literal(b, i, "null")
		default:
			i = skipNumber(b, i)
		}
		// After a value: a comma (then the next key, in an object) or
		// the closing brackets of the containers it ends.
		for {
			if i < 0 || depth == 0 {
				return i
			}
			obj := stack[(depth-1)>>6]>>((depth-1)&63)&1 == 1
			end := byte(']')
			if obj {
				end = '}'
			}
			var more bool
			if i, more = sep(b, i, end); i < 0 {
				return -1
			}
			if more {
				if obj {
					_, i = s.key(b, i)
				}
				break
			}
			depth--
		}
		if i < 0 {
			return -1
		}
	}
}

// rawValue reads a value at b[i] and returns its raw bytes.
func (s *scanner) rawValue(b []byte, i int) ([]byte, int) {
	end := s.skip(b, i)
	if end < 0 {
		return nil, -1
	}
	return b[i:end], end
}

// event reads the line s.b as an Event.
func (s *scanner) event(ev *event) error {
	b := s.b
	i, empty := open(b, ws(b, 0), '{', '}')
	for more := !empty; i >= 0 && more; {
		var key []byte
		if key, i = s.key(b, i); i < 0 {
			break
		}
		check := false // a field the early stop looks at
		switch string(key) {
		case "kind":
			ev.kind, i = s.str(b, i)
			check = true
		case "apiVersion":
			ev.apiVersion, i = s.str(b, i)
			check = true
		case "level":
			ev.level, i = s.str(b, i)
		case "auditID":
			ev.auditID, i = s.str(b, i)
			check = true
		case "stage":
			ev.stage, i = s.str(b, i)
			check = true
		case "requestURI":
			ev.requestURI, i = s.str(b, i)
		case "verb":
			ev.verb, i = s.str(b, i)
		case "userAgent":
			ev.userAgent, i = s.strOrNull(b, i)
		case "requestReceivedTimestamp":
			ev.received, i = s.str(b, i)
		case "stageTimestamp":
			ev.stageAt, i = s.str(b, i)
		case "user":
			i = s.user(b, i, ev)
		case "sourceIPs":
			i = s.sourceIPs(b, i, ev)
		case "objectRef":
			i = s.objectRef(b, i, ev)
		case "responseStatus":
			i = s.responseStatus(b, i, ev)
		case "requestObject":
			ev.requestObject, i = s.rawValue(b, i)
		case "responseObject":
			ev.responseObject, i = s.rawValue(b, i)
		default:
			i = s.skip(b, i)
		}
		if i < 0 {
			break
		}
		if check && s.early && len(ev.stage) > 0 && len(ev.auditID) > 0 && !finalStage(ev.stage) &&
			string(ev.kind) == "Event" && string(ev.apiVersion) == "audit.k8s.io/v1" {
			return errEarly
		}
		i, more = sep(b, i, '}')
	}
	if i < 0 || ws(b, i) != len(b) {
		return errSyntax
	}
	return nil
}

// user reads the user object at b[i]: its username.
func (s *scanner) user(b []byte, i int, ev *event) int {
	i, empty := open(b, i, '{', '}')
	for more := !empty; i >= 0 && more; {
		var key []byte
		if key, i = s.key(b, i); i < 0 {
			return -1
		}
		if string(key) == "username" {
			ev.username, i = s.str(b, i)
		} else {
			i = s.skip(b, i)
		}
		if i >= 0 {
			i, more = sep(b, i, '}')
		}
	}
	return i
}

// sourceIPs reads the sourceIPs array at b[i]: its first element. A
// second sourceIPs member replaces the first, as in encoding/json.
func (s *scanner) sourceIPs(b []byte, i int, ev *event) int {
	ev.sourceIP = nil
	i, empty := open(b, i, '[', ']')
	for first, more := true, !empty; i >= 0 && more; first = false {
		var ip []byte
		if ip, i = s.str(b, i); i < 0 {
			return -1
		}
		if first {
			ev.sourceIP = ip
		}
		i, more = sep(b, i, ']')
	}
	return i
}

// objectRef reads the objectRef object at b[i].
func (s *scanner) objectRef(b []byte, i int, ev *event) int {
	ev.hasObjectRef = true
	i, empty := open(b, i, '{', '}')
	for more := !empty; i >= 0 && more; {
		var key []byte
		if key, i = s.key(b, i); i < 0 {
			return -1
		}
		switch string(key) {
		case "resource":
			ev.resource, i = s.str(b, i)
		case "namespace":
			ev.namespace, i = s.str(b, i)
		case "name":
			ev.name, i = s.str(b, i)
		case "apiGroup":
			ev.apiGroup, i = s.str(b, i)
		case "subresource":
			ev.subresource, i = s.str(b, i)
		default:
			i = s.skip(b, i)
		}
		if i >= 0 {
			i, more = sep(b, i, '}')
		}
	}
	return i
}

var zeroCode = []byte("0")

// responseStatus reads the responseStatus object at b[i]: its code, "0"
// when it has none (as encoding/json reads it into an int).
func (s *scanner) responseStatus(b []byte, i int, ev *event) int {
	i, empty := open(b, i, '{', '}')
	if i >= 0 && ev.code == nil {
		ev.code = zeroCode
	}
	for more := !empty; i >= 0 && more; {
		var key []byte
		if key, i = s.key(b, i); i < 0 {
			return -1
		}
		if string(key) == "code" {
			ev.code, i = number(b, i)
		} else {
			i = s.skip(b, i)
		}
		if i >= 0 {
			i, more = sep(b, i, '}')
		}
	}
	return i
}

// unescape appends the JSON string content raw, unescaped, to dst; bytes
// that are not UTF-8 become U+FFFD, as encoding/json makes them. raw's
// escapes must be valid (strEnd checked them).
func unescape(dst, raw []byte) []byte {
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
		if c != '\\' || i+1 >= len(raw) {
			dst = append(dst, c)
			continue
		}
		i++
		switch raw[i] {
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
			r, _ := hex4(raw[i+1:])
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
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
	}
	return dst
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
