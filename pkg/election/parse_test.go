package election

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Duration
		errPart string // "" means no error
	}{
		{"30s", 30 * time.Second, ""},
		{"1m30s", 90 * time.Second, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"250ms", 250 * time.Millisecond, ""},
		{"0s", 0, ""}, // parses; Validate refuses it
		{"-5s", -5 * time.Second, ""},
		{"", 0, "the value is empty"},
		{"30", 0, "missing unit"},
		{"thirty seconds", 0, "invalid duration"},
		{" 30s", 0, "leading or trailing white space"},
		{"30s ", 0, "leading or trailing white space"},
		{"30s\n", 0, "leading or trailing white space"},
		{"\t30s", 0, "leading or trailing white space"},
		{"30 s", 0, "unknown unit"},
		{"\u00a030s", 0, "leading or trailing white space"},
		{"30s\u200b", 0, "invisible characters"},
		{"\ufeff30s", 0, "invisible characters"},
	}
	for _, c := range cases {
		got, err := ParseDuration(LeaseDuration, c.in)
		if c.errPart == "" {
			if err != nil || got != c.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			continue
		}
		var perr *ParseError
		if !errors.As(err, &perr) {
			t.Fatalf("ParseDuration(%q) error = %v, want *ParseError", c.in, err)
		}
		if perr.Field != LeaseDuration || perr.Value != c.in {
			t.Errorf("ParseError = %+v, want field leaseDuration and value %q", perr, c.in)
		}
		msg := err.Error()
		if !strings.Contains(msg, c.errPart) || !strings.HasPrefix(msg, "leaseDuration ") || !strings.Contains(msg, strconv.Quote(c.in)) {
			t.Errorf("ParseDuration(%q) error %q: want field name, quoted input and %q", c.in, msg, c.errPart)
		}
	}
}

func TestParseReportsEveryBadField(t *testing.T) {
	_, err := Parse("30", "25s", " 10s")
	if err == nil {
		t.Fatal("Parse accepted bad input")
	}
	for _, want := range []string{`leaseDuration "30"`, `retryPeriod " 10s"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Parse error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "renewDeadline") {
		t.Errorf("Parse error %q mentions the good field", err)
	}

	got, err := Parse("30s", "25s", "10s")
	if err != nil || got != FleetDefaults {
		t.Errorf("Parse(30s, 25s, 10s) = %s, %v", got, err)
	}
}
