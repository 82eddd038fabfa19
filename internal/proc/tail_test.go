package proc

import (
	"net/netip"
	"strings"
	"testing"
)

func TestTailBufferKeepsTheLastBytesInOrder(t *testing.T) {
	var b tailBuffer
	b.Write([]byte("hello\n"))
	if got := b.String(); got != "hello\n" {
		t.Fatalf("before wrapping: %q", got)
	}
	// Lines of a known pattern, past the buffer's size in uneven writes.
	var all strings.Builder
	for i := 0; all.Len() < 3*tailSize; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), i%97) + "\n"
		all.WriteString(line)
		b.Write([]byte(line))
	}
	want := all.String()
	want = want[len(want)-tailSize:]
	if got := b.String(); got != want {
		t.Errorf("after wrapping: %d bytes ending %q, want %d ending %q", len(got), got[len(got)-20:], len(want), want[len(want)-20:])
	}
	big := strings.Repeat("x", tailSize) + "end"
	b.Write([]byte(big))
	if got := b.String(); got != big[3:] {
		t.Errorf("one write larger than the buffer: kept %d bytes ending %q", len(got), got[len(got)-5:])
	}
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                               "",
		"one\ntwo\n\n  \n":               "two",
		"only":                           "only",
		"a\n" + strings.Repeat("y", 400): strings.Repeat("y", 300) + "...",
	} {
		if got := lastLine(in); got != want {
			t.Errorf("lastLine(%.20q) = %.20q, want %.20q", in, got, want)
		}
	}
}

func TestParseProcAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"0200A8C0:0050":                         "192.168.0.2:80",
		"00000000000000000000000001000000:3A98": "[::1]:15000",
		"0000000000000000FFFF00000100007F:1F90": "127.0.0.1:8080", // IPv4-mapped, from a dual-stack socket
		"00000000000000000000000000000000:0050": "[::]:80",
	} {
		got, err := parseProcAddr(in)
		if err != nil || got != netip.MustParseAddrPort(want) {
			t.Errorf("parseProcAddr(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0100007F", "zz00007F:1F90", "0100007F:zz", "01007F:0050"} {
		if _, err := parseProcAddr(bad); err == nil {
			t.Errorf("parseProcAddr(%q) accepted", bad)
		}
	}
}
