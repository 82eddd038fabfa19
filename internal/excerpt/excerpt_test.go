package excerpt

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShortValuesAreQuotedWhole(t *testing.T) {
	for _, s := range []string{"", "reviews", strings.Repeat("a", MaxChars), strings.Repeat("é", MaxChars)} {
		if got := String(s); got != s {
			t.Errorf("String(%d bytes) = %q, want it unchanged", len(s), got)
		}
		if got, want := fmt.Sprintf("%q", Value(s)), fmt.Sprintf("%q", s); got != want {
			t.Errorf("%%q of Value(%d bytes) = %s, want %s", len(s), got, want)
		}
	}
}

func TestLongValuesAreCutToAPrefixAndTheirSize(t *testing.T) {
	long := strings.Repeat("a", 10000)
	want := strings.Repeat("a", MaxChars) + "... (10000 bytes)"
	if got := String(long); got != want {
		t.Errorf("String = %.40q... (%d bytes), want %d bytes", got, len(got), len(want))
	}
	if got, want := Quote(long), `"`+strings.Repeat("a", MaxChars)+`"... (10000 bytes)`; got != want {
		t.Errorf("Quote = %.40s... (%d bytes), want the quoted prefix then the size", got, len(got))
	}
	msg := fmt.Sprintf("metadata.name: %q: must be no more than 253 characters", Value(long))
	if len(msg) > 300 {
		t.Errorf("a message quoting a 10,000-byte name is %d bytes, want under 300", len(msg))
	}
	if got := fmt.Sprintf("%s|%v", Value(long), Value(long)); got != want+"|"+want {
		t.Errorf("%%s and %%v of a long Value: %.60s..., want String's form", got)
	}
}

func TestACutNeverSplitsACharacter(t *testing.T) {
	s := strings.Repeat("€", MaxChars+1)
	got := String(s)
	if !utf8.ValidString(got) || !strings.HasPrefix(got, strings.Repeat("€", MaxChars)+"...") {
		t.Errorf("String of %d three-byte characters = %q, want %d whole characters then the size", MaxChars+1, got, MaxChars)
	}
}
