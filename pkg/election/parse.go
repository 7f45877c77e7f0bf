package election

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// ParseError reports a string that is not a valid duration for a field.
type ParseError struct {
	// Field is the field the value was meant for.
	Field Field
	// Value is the input, exactly as given.
	Value string
	// Err is the underlying reason.
	Err error
}

// Error names the field, quotes the input and gives the reason, e.g.
// `retryPeriod "10" is not a duration: time: missing unit in duration "10"`.
func (e *ParseError) Error() string {
	return fmt.Sprintf("%s %q is not a duration: %v", e.Field, e.Value, e.Err)
}

// Unwrap returns the underlying reason.
func (e *ParseError) Unwrap() error { return e.Err }

// errSurroundingSpace is the reason given for input with leading or trailing
// white space. time.ParseDuration refuses such input too, with a less
// helpful message; we never trim, because wrangler and Fleet do not either.
var errSurroundingSpace = errors.New("leading or trailing white space or invisible characters are not allowed")

// isSurroundingJunk matches what must not surround a value: white space
// and invisible format characters such as a zero-width space or a BOM.
func isSurroundingJunk(r rune) bool { return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) }

// errEmpty is the reason given for an empty string.
var errEmpty = errors.New("the value is empty")

// ParseDuration reads s as a duration for field f with time.ParseDuration,
// the parser wrangler's pkg/leader and Fleet use for CATTLE_ELECTION_* and
// FLEET_AGENT_ELECTION_*. Input with surrounding white space or an empty
// string is refused rather than trimmed or defaulted (likewise a zero-width
// space or byte-order mark, which copy and paste brings along). It returns a
// *ParseError naming the field and the input; it does not validate the
// value (see Timings.Validate).
func ParseDuration(f Field, s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, &ParseError{Field: f, Value: s, Err: errEmpty}
	case strings.TrimFunc(s, isSurroundingJunk) != s:
		return 0, &ParseError{Field: f, Value: s, Err: errSurroundingSpace}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &ParseError{Field: f, Value: s, Err: err}
	}
	return d, nil
}

// Parse reads the three strings as a Timings with ParseDuration. It returns
// every parse failure joined into one error (errors.Join of *ParseError), and
// does not validate the triple (see Timings.Validate).
func Parse(leaseDuration, renewDeadline, retryPeriod string) (Timings, error) {
	var t Timings
	var errs []error
	for i, s := range [3]string{leaseDuration, renewDeadline, retryPeriod} {
		d, err := ParseDuration(Fields[i], s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t = t.With(Fields[i], d)
	}
	return t, errors.Join(errs...)
}
