package sim

// The fleet speaks ADS over HTTP/2 (h2c) through this small client instead of
// grpc-go. It is written by hand because grpc-go's per-stream goroutines and
// buffers (a context watcher, receive buffers and flow-control state per
// stream, a reader, a writer and 32 KB read and write buffers per connection)
// cost more per simulated proxy than issue 22's budget of 50 KB each for
// 20,000 proxies. Here a connection costs one reader goroutine, and a stream
// costs a small struct and a queue of undelivered messages; each proxy's own
// goroutine does its sends and receives.
//
// What it implements of HTTP/2 and gRPC is what an ADS client needs: streams
// opened with gRPC's request headers, messages in gRPC's 5-byte framing,
// flow control both ways, SETTINGS and PING acknowledged, the server's
// MAX_CONCURRENT_STREAMS respected (a stream waits for a free slot, as in
// grpc-go), GOAWAY (new streams go to a new connection) and RST_STREAM, and
// grpc-status in trailers turned into errors carrying the gRPC code.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	// streamWindow and connWindow are the receive windows advertised: large,
	// so that a response of many megabytes (istiod's whole-mesh CDS is 9.4 MB
	// at 10x) flows without waiting on a round trip per 64 KB. The reader
	// returns credit as it takes DATA off the wire, so they bound nothing
	// the proxies hold; they only spare WINDOW_UPDATEs.
	streamWindow = 1 << 20
	connWindow   = 16 << 20
	// dialTimeout bounds a TCP connect, as the backoff of the proxies
	// waiting on it is meant to be the only wait between attempts.
	dialTimeout = 20 * time.Second
	readBuffer  = 4096
)

// adsConn is one of the fleet's connections to the control plane: the
// proxies sharing it open their streams on its current HTTP/2 connection,
// which is dialled when first needed and again after it fails or the server
// sends GOAWAY, as a gRPC ClientConn reconnects.
type adsConn struct {
	addr      string // host:port
	authority string

	mu     sync.Mutex
	cur    *h2Conn
	closed bool
}

func newADSConn(target string) (*adsConn, error) {
	addr := target
	for _, scheme := range []string{"dns:///", "passthrough:///", "dns:", "passthrough:"} {
		addr = strings.TrimPrefix(addr, scheme)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("control plane address %q is not host:port: %w", target, err)
	}
	return &adsConn{addr: addr, authority: addr}, nil
}

// open starts a stream for the gRPC method path (as
// "/package.Service/Method").
func (c *adsConn) open(ctx context.Context, path string) (*h2Stream, error) {
	for {
		h, err := c.conn(ctx)
		if err != nil {
			return nil, err
		}
		s, err := h.open(ctx, path)
		if errors.Is(err, errConnDraining) {
			continue // the server said GOAWAY meanwhile: dial anew
		}
		return s, err
	}
}

// conn returns the connection streams should open on, dialling if there is
// none usable.
func (c *adsConn) conn(ctx context.Context) (*h2Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, status.Error(codes.Canceled, "connection closed")
	}
	if c.cur != nil && c.cur.usable() {
		return c.cur, nil
	}
	dial, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(dial, "tcp", c.addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connecting to %s: %v", c.addr, err)
	}
	h, err := startH2Conn(nc, c.authority)
	if err != nil {
		_ = nc.Close()
		return nil, status.Errorf(codes.Unavailable, "starting HTTP/2 with %s: %v", c.addr, err)
	}
	c.cur = h
	return h, nil
}

// close ends the connection and every stream on it; no stream opens after.
func (c *adsConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cur != nil {
		c.cur.fail(status.Error(codes.Canceled, "connection closed"))
	}
}

var errConnDraining = errors.New("connection is going away")

// h2Conn is one HTTP/2 connection. Lock order: wmu before mu. Only the
// reader goroutine reads from the framer; writers hold wmu.
type h2Conn struct {
	nc        net.Conn
	authority string

	wmu sync.Mutex // guards fr, enc and hb, and stream ID order
	fr  *http2.Framer

	br  *bufio.Reader // the reader goroutine's
	dec *hpack.Decoder
	enc *hpack.Encoder
	hb  headerBuffer

	mu        sync.Mutex
	cond      *sync.Cond // signalled when a slot, send window or settings change
	settled   bool       // the server's first SETTINGS arrived
	maxStream uint32     // the server's MAX_CONCURRENT_STREAMS
	maxFrame  uint32     // the server's MAX_FRAME_SIZE
	initWin   int64      // the server's INITIAL_WINDOW_SIZE, for new streams
	sendWin   int64      // connection send window
	active    int        // streams open or reserved
	nextID    uint32
	streams   map[uint32]*h2Stream
	draining  bool  // GOAWAY received: no new streams
	err       error // set once the connection failed
	unacked   int64 // connection bytes received and not yet credited back
}

type headerBuffer struct{ b []byte }

func (h *headerBuffer) Write(p []byte) (int, error) { h.b = append(h.b, p...); return len(p), nil }

func startH2Conn(nc net.Conn, authority string) (*h2Conn, error) {
	h := &h2Conn{
		nc: nc, authority: authority,
		maxStream: math.MaxUint32, maxFrame: 16384, initWin: 65535, sendWin: 65535,
		nextID: 1, streams: map[uint32]*h2Stream{},
	}
	h.cond = sync.NewCond(&h.mu)
	// A small read buffer: without one every frame costs two reads (its
	// header, then its payload); a larger one would cost memory per
	// connection for little more.
	h.br = bufio.NewReaderSize(nc, readBuffer)
	h.dec = hpack.NewDecoder(4096, nil)
	h.fr = http2.NewFramer(nc, nil) // for writing only; read parses frames
	h.enc = hpack.NewEncoder(&h.hb)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		return nil, err
	}
	if err := h.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
	); err != nil {
		return nil, err
	}
	if err := h.fr.WriteWindowUpdate(0, connWindow-65535); err != nil {
		return nil, err
	}
	go h.read()
	return h, nil
}

// usable says whether new streams may open on the connection.
func (h *h2Conn) usable() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err == nil && !h.draining
}

// open starts a stream once the server's stream limit leaves a slot.
func (h *h2Conn) open(ctx context.Context, path string) (*h2Stream, error) {
	h.mu.Lock()
	for h.err == nil && !h.draining && (!h.settled || uint32(h.active) >= h.maxStream) {
		h.cond.Wait()
	}
	if h.err != nil {
		defer h.mu.Unlock()
		return nil, h.err
	}
	if h.draining {
		h.mu.Unlock()
		return nil, errConnDraining
	}
	h.active++
	h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		h.release()
		return nil, status.FromContextError(err).Err()
	}

	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.mu.Lock()
	if h.err != nil || h.draining {
		err := h.err
		h.mu.Unlock()
		h.release()
		if err == nil {
			err = errConnDraining
		}
		return nil, err
	}
	s := &h2Stream{h: h, id: h.nextID, sendWin: h.initWin, notify: make(chan struct{}, 1)}
	h.nextID += 2
	h.streams[s.id] = s
	h.mu.Unlock()
	h.hb.b = h.hb.b[:0]
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", h.authority},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"user-agent", "meshperf-cpload"},
	} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: h.hb.b, EndHeaders: true}); err != nil {
		h.failLocked(err)
		return nil, s.finish(status.Errorf(codes.Unavailable, "opening a stream: %v", err))
	}
	return s, nil
}

// release frees a stream slot.
func (h *h2Conn) release() {
	h.mu.Lock()
	h.active--
	h.cond.Broadcast()
	closeNow := h.draining && h.active == 0
	h.mu.Unlock()
	if closeNow {
		_ = h.nc.Close()
	}
}

// failLocked is fail for a caller holding wmu; closing the socket ends the
// reader, which fails the streams.
func (h *h2Conn) failLocked(err error) { _ = h.nc.Close(); h.setErr(err) }

// fail ends the connection with err for every stream on it.
func (h *h2Conn) fail(err error) {
	_ = h.nc.Close()
	for _, s := range h.setErr(err) {
		s.finish(err)
	}
}

// setErr records the connection's failure once and returns the streams it
// ends.
func (h *h2Conn) setErr(err error) []*h2Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err = err
	}
	h.cond.Broadcast()
	streams := make([]*h2Stream, 0, len(h.streams))
	for _, s := range h.streams {
		streams = append(streams, s)
	}
	return streams
}

// read is the connection's one goroutine: it takes frames off the wire and
// hands each stream its messages and its end. It parses frames itself rather
// than with http2.Framer's ReadFrame, which keeps a buffer as large as the
// largest frame read (16 KB) for the connection's life: DATA goes straight
// into the stream's message buffer and other frames are small.
func (h *h2Conn) read() {
	for {
		err := h.readFrame()
		if err == nil {
			continue
		}
		h.mu.Lock()
		prev := h.err
		h.mu.Unlock()
		var st interface{ GRPCStatus() *status.Status }
		switch {
		case prev != nil:
			err = prev
		case !errors.As(err, &st):
			err = status.Errorf(codes.Unavailable, "connection to %s: %v", h.authority, err)
		}
		h.fail(err)
		return
	}
}

// HTTP/2 frame flags this client reads (RFC 9113, section 6).
const (
	flagAck        = 0x1 // SETTINGS, PING
	flagEndStream  = 0x1 // DATA, HEADERS
	flagEndHeaders = 0x4 // HEADERS, CONTINUATION
	flagPadded     = 0x8 // DATA, HEADERS
	flagPriority   = 0x20
)

// readFrame reads and handles one frame.
func (h *h2Conn) readFrame() error {
	fh, err := http2.ReadFrameHeader(h.br)
	if err != nil {
		return err
	}
	if fh.Length > maxFrameRead {
		return fmt.Errorf("frame of %d bytes, beyond the %d allowed", fh.Length, maxFrameRead)
	}
	if fh.Type == http2.FrameData {
		return h.readData(fh)
	}
	payload := make([]byte, fh.Length)
	if _, err := io.ReadFull(h.br, payload); err != nil {
		return err
	}
	switch fh.Type {
	case http2.FrameSettings:
		if fh.Flags&flagAck != 0 {
			return nil
		}
		if len(payload)%6 != 0 {
			return errors.New("malformed SETTINGS frame")
		}
		h.mu.Lock()
		for p := payload; len(p) > 0; p = p[6:] {
			val := binary.BigEndian.Uint32(p[2:6])
			switch http2.SettingID(binary.BigEndian.Uint16(p[:2])) {
			case http2.SettingMaxConcurrentStreams:
				h.maxStream = val
			case http2.SettingMaxFrameSize:
				h.maxFrame = val
			case http2.SettingInitialWindowSize:
				delta := int64(val) - h.initWin
				h.initWin = int64(val)
				for _, st := range h.streams {
					st.sendWin += delta
				}
			}
		}
		h.settled = true
		h.cond.Broadcast()
		h.mu.Unlock()
		return h.write(func() error { return h.fr.WriteSettingsAck() })
	case http2.FramePing:
		if fh.Flags&flagAck != 0 || len(payload) != 8 {
			return nil
		}
		return h.write(func() error { return h.fr.WritePing(true, [8]byte(payload)) })
	case http2.FrameWindowUpdate:
		if len(payload) != 4 {
			return errors.New("malformed WINDOW_UPDATE frame")
		}
		inc := int64(binary.BigEndian.Uint32(payload) & 0x7fffffff)
		h.mu.Lock()
		if fh.StreamID == 0 {
			h.sendWin += inc
		} else if s := h.streams[fh.StreamID]; s != nil {
			s.sendWin += inc
		}
		h.cond.Broadcast()
		h.mu.Unlock()
	case http2.FrameGoAway:
		if len(payload) < 8 {
			return errors.New("malformed GOAWAY frame")
		}
		h.goAway(binary.BigEndian.Uint32(payload[:4])&0x7fffffff, http2.ErrCode(binary.BigEndian.Uint32(payload[4:8])))
	case http2.FrameRSTStream:
		if len(payload) != 4 {
			return errors.New("malformed RST_STREAM frame")
		}
		if s := h.stream(fh.StreamID); s != nil {
			code, errCode := codes.Unavailable, http2.ErrCode(binary.BigEndian.Uint32(payload))
			if errCode == http2.ErrCodeCancel {
				code = codes.Canceled
			} else if errCode == http2.ErrCodeEnhanceYourCalm {
				code = codes.ResourceExhausted
			}
			s.finish(status.Errorf(code, "stream reset by the server: %v", errCode))
		}
	case http2.FrameHeaders:
		return h.readHeaders(fh, payload)
	}
	return nil // PRIORITY, unknown types; PUSH_PROMISE is disabled by SETTINGS
}

// maxFrameRead is the largest frame the server may send: this client leaves
// SETTINGS_MAX_FRAME_SIZE at its default.
const maxFrameRead = 16384

// unpad strips a padded frame's padding.
func unpad(fh http2.FrameHeader, payload []byte) ([]byte, error) {
	if fh.Flags&flagPadded == 0 {
		return payload, nil
	}
	if len(payload) == 0 || int(payload[0]) >= len(payload) {
		return nil, fmt.Errorf("malformed padding in a frame of type %v", fh.Type)
	}
	return payload[1 : len(payload)-int(payload[0])], nil
}

// readHeaders takes a HEADERS frame and its CONTINUATIONs and hands the
// decoded fields to the stream.
func (h *h2Conn) readHeaders(fh http2.FrameHeader, payload []byte) error {
	block, err := unpad(fh, payload)
	if err != nil {
		return err
	}
	if fh.Flags&flagPriority != 0 {
		if len(block) < 5 {
			return errors.New("malformed HEADERS priority")
		}
		block = block[5:]
	}
	endStream := fh.Flags&flagEndStream != 0
	for flags := fh.Flags; flags&flagEndHeaders == 0; {
		cont, err := http2.ReadFrameHeader(h.br)
		if err != nil {
			return err
		}
		if cont.Type != http2.FrameContinuation || cont.StreamID != fh.StreamID || cont.Length > maxFrameRead {
			return errors.New("HEADERS not followed by its CONTINUATION")
		}
		if len(block)+int(cont.Length) > 1<<20 {
			return errors.New("header block beyond 1 MB")
		}
		more := make([]byte, cont.Length)
		if _, err := io.ReadFull(h.br, more); err != nil {
			return err
		}
		block = append(block, more...)
		flags = cont.Flags
	}
	// Every block goes through the decoder, whoever it is for, since HPACK's
	// table is the connection's.
	fields, err := h.dec.DecodeFull(block)
	if err != nil {
		return fmt.Errorf("decoding headers: %w", err)
	}
	if s := h.stream(fh.StreamID); s != nil {
		s.headers(fields, endStream)
	}
	return nil
}

// readData reads a DATA frame's payload into its stream's message buffer and
// returns flow-control credit for it.
func (h *h2Conn) readData(fh http2.FrameHeader) error {
	if n := int64(fh.Length); n > 0 {
		h.mu.Lock()
		h.unacked += n
		credit := h.unacked
		if credit < connWindow/4 {
			credit = 0
		} else {
			h.unacked = 0
		}
		h.mu.Unlock()
		if credit > 0 {
			if err := h.write(func() error { return h.fr.WriteWindowUpdate(0, uint32(credit)) }); err != nil {
				return err
			}
		}
	}
	length, pad := int(fh.Length), 0
	if fh.Flags&flagPadded != 0 {
		if length == 0 {
			return errors.New("malformed padded DATA frame")
		}
		p, err := h.br.ReadByte()
		if err != nil {
			return err
		}
		pad, length = int(p), length-1
		if pad > length {
			return errors.New("malformed padded DATA frame")
		}
		length -= pad
	}
	s := h.stream(fh.StreamID)
	if s == nil {
		_, err := h.br.Discard(length + pad)
		return err
	}
	if err := s.readData(h.br, length); err != nil {
		return err
	}
	if _, err := h.br.Discard(pad); err != nil {
		return err
	}
	return s.data(int64(fh.Length), fh.Flags&flagEndStream != 0)
}

// goAway stops new streams on the connection and ends those the server
// will not serve.
func (h *h2Conn) goAway(lastStreamID uint32, code http2.ErrCode) {
	h.mu.Lock()
	h.draining = true
	var refused []*h2Stream
	for id, s := range h.streams {
		if id > lastStreamID {
			refused = append(refused, s)
		}
	}
	h.cond.Broadcast()
	closeNow := h.active == 0
	h.mu.Unlock()
	for _, s := range refused {
		s.finish(status.Errorf(codes.Unavailable, "the server sent GOAWAY (%v) before this stream started", code))
	}
	if closeNow {
		_ = h.nc.Close()
	}
}

func (h *h2Conn) stream(id uint32) *h2Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams[id]
}

func (h *h2Conn) write(fn func() error) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return fn()
}

// h2Stream is one gRPC stream: its proxy's goroutine sends and receives on
// it; the reader goroutine feeds it.
type h2Stream struct {
	h  *h2Conn
	id uint32

	sendWin int64  // guarded by h.mu
	partial []byte // the start of a message not yet complete; the reader's

	mu      sync.Mutex
	queue   [][]byte // complete messages not yet received
	unacked int64    // bytes received and not yet credited back
	err     error    // the stream's end, once known
	done    bool     // removed from the connection
	notify  chan struct{}
}

// headers takes response headers or trailers: a grpc-status in either ends
// the stream.
func (s *h2Stream) headers(fields []hpack.HeaderField, endStream bool) {
	code, msg, httpStatus := "", "", ""
	for _, hf := range fields {
		switch hf.Name {
		case "grpc-status":
			code = hf.Value
		case "grpc-message":
			msg = decodeGRPCMessage(hf.Value)
		case ":status":
			httpStatus = hf.Value
		}
	}
	switch {
	case code != "":
		c, err := strconv.ParseUint(code, 10, 32)
		if err != nil {
			s.finish(status.Errorf(codes.Internal, "malformed grpc-status %q", code))
			return
		}
		if c == uint64(codes.OK) {
			s.finish(io.EOF)
			return
		}
		s.finish(status.Error(codes.Code(c), msg))
	case httpStatus != "" && httpStatus != "200":
		s.finish(status.Errorf(codes.Unavailable, "the server answered HTTP status %s", httpStatus))
	case endStream:
		s.finish(status.Error(codes.Internal, "the server ended the stream without grpc-status"))
	}
}

// readData appends n bytes of DATA from r to the message being received.
// Only the reader goroutine touches partial.
func (s *h2Stream) readData(r io.Reader, n int) error {
	at := len(s.partial)
	s.partial = slices.Grow(s.partial, n)[:at+n]
	_, err := io.ReadFull(r, s.partial[at:])
	return err
}

// data completes the messages the DATA just read finishes, queues them for
// the proxy and credits the stream's window back at once, since a message
// may be larger than the window.
func (s *h2Stream) data(n int64, end bool) error {
	var complete [][]byte
	for len(s.partial) >= 5 {
		if s.partial[0] != 0 {
			s.finish(status.Error(codes.Internal, "the server sent a compressed message, which was not asked for"))
			return nil
		}
		size := binary.BigEndian.Uint32(s.partial[1:5])
		if uint64(len(s.partial)-5) < uint64(size) {
			break
		}
		complete = append(complete, s.partial[5:5+size:5+size])
		s.partial = s.partial[5+size:]
	}
	if len(s.partial) == 0 {
		s.partial = nil // let the buffer of a large message go
	} else if cap(s.partial) > 2*len(s.partial) && cap(s.partial) > 4096 {
		s.partial = append([]byte(nil), s.partial...)
	}
	s.mu.Lock()
	s.queue = append(s.queue, complete...)
	s.unacked += n
	credit := int64(0)
	if s.unacked >= streamWindow/4 && !end {
		credit, s.unacked = s.unacked, 0
	}
	s.mu.Unlock()
	if len(complete) > 0 {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
	if end {
		s.finish(status.Error(codes.Internal, "the server ended the stream without trailers"))
		return nil
	}
	if credit > 0 {
		return s.h.write(func() error { return s.h.fr.WriteWindowUpdate(s.id, uint32(credit)) })
	}
	return nil
}

// finish records the stream's end (the first one counts), removes it from
// the connection and wakes its proxy.
func (s *h2Stream) finish(err error) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	err = s.err
	removed := s.done
	s.done = true
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	if !removed {
		h := s.h
		h.mu.Lock()
		delete(h.streams, s.id)
		h.cond.Broadcast()
		h.mu.Unlock()
		h.release()
	}
	return err
}

// Send writes one message, waiting for send window as the server grants it.
func (s *h2Stream) Send(m proto.Message) error {
	b, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 5, 5+proto.Size(m)), m)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding a request: %v", err)
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	h := s.h
	for len(b) > 0 {
		h.mu.Lock()
		for {
			if err := s.ended(); err != nil {
				h.mu.Unlock()
				return err
			}
			if h.err != nil {
				defer h.mu.Unlock()
				return h.err
			}
			if h.sendWin > 0 && s.sendWin > 0 {
				break
			}
			h.cond.Wait()
		}
		n := min(int64(len(b)), h.sendWin, s.sendWin, int64(h.maxFrame))
		h.sendWin -= n
		s.sendWin -= n
		h.mu.Unlock()
		if err := h.write(func() error { return h.fr.WriteData(s.id, false, b[:n]) }); err != nil {
			h.fail(status.Errorf(codes.Unavailable, "writing to %s: %v", h.authority, err))
			return s.finish(status.Errorf(codes.Unavailable, "writing to %s: %v", h.authority, err))
		}
		b = b[n:]
	}
	return nil
}

// ended is the stream's error if it ended.
func (s *h2Stream) ended() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return s.err
	}
	return nil
}

// Recv decodes the next message into m, waiting for it until ctx ends.
func (s *h2Stream) Recv(ctx context.Context, m proto.Message) error {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			b := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			if len(s.queue) == 0 {
				s.queue = nil
			}
			s.mu.Unlock()
			if err := proto.Unmarshal(b, m); err != nil {
				return status.Errorf(codes.Internal, "decoding a response: %v", err)
			}
			return nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// Close ends the stream from the client's side, resetting it if it is still
// open, and frees its slot.
func (s *h2Stream) Close() {
	s.mu.Lock()
	open := !s.done
	s.mu.Unlock()
	if !open {
		return
	}
	_ = s.h.write(func() error { return s.h.fr.WriteRSTStream(s.id, http2.ErrCodeCancel) })
	s.finish(status.Error(codes.Canceled, "stream closed"))
}

// decodeGRPCMessage undoes grpc-message's percent-encoding.
func decodeGRPCMessage(v string) string {
	if d, err := url.PathUnescape(v); err == nil {
		return d
	}
	return v
}
