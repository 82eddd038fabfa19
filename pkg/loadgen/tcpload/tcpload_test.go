package tcpload

import "testing"

func TestEchoParserNeedsTheSameBytesBack(t *testing.T) {
	w := echoWire{payload: []byte("hello world")}
	p := w.NewParser()
	// In pieces, as a socket may deliver them.
	for i, piece := range []string{"hel", "lo w", "orld"} {
		n, done, out, err := p.Feed([]byte(piece))
		if err != nil || n != len(piece) || done != (i == 2) {
			t.Fatalf("piece %d: n %d done %v err %v", i, n, done, err)
		}
		if done && (!out.OK || CodeName(out.Code) != "OK") {
			t.Errorf("outcome %+v", out)
		}
	}
	if total, _ := p.Sizes(); total != 11 {
		t.Errorf("size %d", total)
	}
	p.Reset()
	if _, _, _, err := p.Feed([]byte("HELLO")); err == nil {
		t.Error("a different echo was accepted")
	}
	p.Reset()
	if n, done, _, _ := p.Feed([]byte("hello worldEXTRA")); n != 11 || !done {
		t.Errorf("consumed %d (done %v); the response ends after 11 bytes", n, done)
	}
}

func TestParseTarget(t *testing.T) {
	if addr, err := ParseTarget("tcp://127.0.0.1:8078"); err != nil || addr != "127.0.0.1:8078" {
		t.Errorf("got %q, %v", addr, err)
	}
	for _, bad := range []string{"tcp://", "tcp://host", "tcp://host:0", "tcp://host:99999", "http://h:1", "tcp://h:1/path"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
