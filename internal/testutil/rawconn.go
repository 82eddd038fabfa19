package testutil

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// WriteAndWaitForClose connects to addr, writes data, closes its side and
// reads until the server closes the connection: by then the server has
// read and judged all of it (a server refusing garbage answers with a
// close, or a reset when it left bytes unread).
func WriteAndWaitForClose(t testing.TB, addr string, data []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard, not a timing goal
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("waiting for %s to close the connection: %v", addr, err)
	}
}
