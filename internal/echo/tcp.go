package echo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
)

// connSet tracks live connections that no library server closes for us
// (TCP echo, and HTTP connections hijacked for the h2c upgrade), so that
// Close really closes everything.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// add registers c; it returns false (and closes c) if the set is closed.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
	clear(s.conns)
}

// tcpEcho writes every byte it reads back to the sender until the sender
// closes (Fortio's tcp-echo).
type tcpEcho struct {
	ln    net.Listener
	conns connSet
	log   *slog.Logger
	done  sync.WaitGroup
}

func serveTCP(ln net.Listener, log *slog.Logger) *tcpEcho {
	t := &tcpEcho{ln: ln, log: log}
	t.done.Add(1)
	go t.acceptLoop()
	return t
}

func (t *tcpEcho) acceptLoop() {
	defer t.done.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.log.Error("TCP echo accept failed, stopping", "addr", t.ln.Addr().String(), "err", err)
			}
			return
		}
		if !t.conns.add(c) {
			return
		}
		go t.echo(c)
	}
}

func (t *tcpEcho) echo(c net.Conn) {
	defer func() {
		t.conns.remove(c)
		_ = c.Close()
	}()
	bp := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(bp)
	// A plain loop, not io.Copy: io.Copy would pick splice(2) for a
	// TCP-to-TCP copy, which batches differently from what a client sending
	// small messages expects of an echo server.
	buf := *bp
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if tc, ok := c.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite() // pass the client's half-close on
			}
			return
		}
	}
}

func (t *tcpEcho) close() error {
	err := t.ln.Close()
	t.conns.closeAll()
	t.done.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close TCP echo: %w", err)
	}
	return nil
}
