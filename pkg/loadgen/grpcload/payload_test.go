package grpcload

import (
	"crypto/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// The ping payload keeps its length and becomes valid UTF-8 as Fortio makes
// it: invalid sequences dropped, 'X' padding at the end, valid text
// unchanged.
func TestPingPayload(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"hello", "hello"},
		{"héllo ✓", "héllo ✓"},
		{"a\xffb", "abX"},
		{"\xc3\x28ok", "(okX"},         // a lead byte without its continuation is dropped alone
		{"ok\xe2\x82", "okXX"},         // a truncated sequence at the end
		{"\xff\xfe\xfd", "XXX"},        // nothing valid at all
		{"\xed\xa0\x80x", "xXXX"},      // a surrogate is not valid UTF-8
		{"x\xf4\x90\x80\x80", "xXXXX"}, // above U+10FFFF
	} {
		if got := pingPayload([]byte(tc.in)); got != tc.want {
			t.Errorf("pingPayload(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	b := make([]byte, 1024)
	_, _ = rand.Read(b)
	got := pingPayload(b)
	if len(got) != 1024 || !utf8.ValidString(got) {
		t.Fatalf("random 1024 bytes: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if kept := strings.TrimRight(got, "X"); !strings.HasPrefix(strings.ToValidUTF8(string(b), ""), kept) {
		t.Error("the valid part of the payload was changed")
	}
}

func FuzzPingPayload(f *testing.F) {
	f.Add([]byte("hello"))
	f.Add([]byte("\xff\xfe ping \xc3\x28"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := pingPayload(b)
		if len(got) != len(b) || !utf8.ValidString(got) {
			t.Fatalf("pingPayload(%q) = %q: %d bytes for %d, valid %v", b, got, len(got), len(b), utf8.ValidString(got))
		}
	})
}
