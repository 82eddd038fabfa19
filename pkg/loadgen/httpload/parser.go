package httpload

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/meshperf/meshperf/pkg/loadgen"
)

// maxHeaderBytes bounds a response's header (and a chunk-size or trailer line).
const maxHeaderBytes = 64 << 10

// responseParser finds where each HTTP/1.x response ends in a connection's byte
// stream, fed in whatever pieces the socket delivers, for the event loop.
//
// It is written here because the Go HTTP parsers (net/http, fasthttp) read from a
// blocking io.Reader and cannot resume on a partial buffer. It reads only what
// framing needs (status, Content-Length, Transfer-Encoding, Connection) and
// counts the body without copying it. FuzzResponseParser checks it against
// net/http on the same bytes.
type responseParser struct {
	headOnly   bool // the request was HEAD: no body follows
	forceClose bool // the request said Connection: close

	state      parseState
	line       []byte // header, chunk-size or trailer bytes not yet complete
	remaining  int64  // body bytes still to come in the current part; -1 unknown
	chunked    bool
	http11     bool // HTTP/1.1 or later: keep-alive by default, chunked allowed
	status     int
	keepAlive  bool
	size       int64 // bytes of this response so far
	header     int64 // bytes of its header
	headerDone bool  // the header just ended: its size is known after this step
}

type parseState int

const (
	stHeader     parseState = iota // status line and headers
	stBody                         // Content-Length body
	stUntilClose                   // body delimited by the server closing
	stChunkSize                    // a chunk-size line
	stChunkData                    // chunk data
	stChunkEnd                     // the CRLF after chunk data
	stTrailer                      // trailer lines after the last chunk
)

var errMalformed = errors.New("malformed HTTP response")

func (p *responseParser) Reset() {
	p.state, p.line, p.remaining, p.chunked, p.status = stHeader, p.line[:0], -1, false, 0
	p.size, p.header, p.headerDone = 0, 0, false
}

func (p *responseParser) KeepAlive() bool { return p.keepAlive && !p.forceClose }

func (p *responseParser) Sizes() (total, header int64) { return p.size, p.header }

func (p *responseParser) outcome() loadgen.Outcome {
	return loadgen.Outcome{Code: p.status, OK: p.status >= 200 && p.status <= 299}
}

func (p *responseParser) PeerClosed() (bool, loadgen.Outcome) {
	if p.state == stUntilClose {
		p.keepAlive = false
		return true, p.outcome()
	}
	return false, loadgen.Outcome{}
}

func (p *responseParser) Feed(b []byte) (int, bool, loadgen.Outcome, error) {
	used := 0
	for used < len(b) {
		n, done, err := p.step(b[used:])
		used += n
		p.size += int64(n)
		if p.headerDone {
			p.header, p.headerDone = p.size, false
		}
		if err != nil {
			return used, false, loadgen.Outcome{}, err
		}
		if done {
			return used, true, p.outcome(), nil
		}
	}
	return used, false, loadgen.Outcome{}, nil
}

// step consumes what it can of b in the current state.
func (p *responseParser) step(b []byte) (int, bool, error) {
	switch p.state {
	case stBody, stChunkData:
		n := int(min(int64(len(b)), p.remaining))
		p.remaining -= int64(n)
		if p.remaining > 0 {
			return n, false, nil
		}
		if p.state == stBody {
			return n, true, nil
		}
		p.state = stChunkEnd
		return n, false, nil
	case stUntilClose:
		return len(b), false, nil
	}
	line, n, complete, err := p.takeLine(b)
	if err != nil || !complete {
		return n, false, err
	}
	switch p.state {
	case stHeader:
		done, err := p.headerLine(line)
		return n, done, err
	case stChunkSize:
		size, err := parseChunkSize(line)
		if err != nil {
			return n, false, err
		}
		p.remaining, p.state = size, stChunkData
		if size == 0 {
			p.state = stTrailer
		}
		return n, false, nil
	case stChunkEnd:
		if len(line) != 0 {
			return n, false, fmt.Errorf("%w: chunk data longer than its size", errMalformed)
		}
		p.state = stChunkSize
		return n, false, nil
	default: // stTrailer
		return n, len(line) == 0, nil
	}
}

// takeLine gathers one CRLF-terminated line, across calls if need be. It returns
// the line without its terminator once complete.
func (p *responseParser) takeLine(b []byte) (line []byte, used int, complete bool, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(p.line)+len(b) > maxHeaderBytes {
			return nil, len(b), false, fmt.Errorf("%w: line over %d bytes", errMalformed, maxHeaderBytes)
		}
		p.line = append(p.line, b...)
		return nil, len(b), false, nil
	}
	if len(p.line) == 0 {
		line = b[:i]
	} else {
		p.line = append(p.line, b[:i]...)
		line = p.line
	}
	p.line = p.line[:0]
	return bytes.TrimSuffix(line, []byte("\r")), i + 1, true, nil
}

// headerLine handles one line of the header block; done when the response
// ends with its header.
func (p *responseParser) headerLine(line []byte) (done bool, err error) {
	if p.status == 0 {
		return false, p.statusLine(line)
	}
	if len(line) > 0 {
		p.field(line)
		return false, nil
	}
	// The blank line ends the header.
	if p.status < 200 {
		// An interim response (100 Continue): the real one follows.
		p.status, p.remaining, p.chunked = 0, -1, false
		return false, nil
	}
	p.headerDone = true
	switch {
	case p.headOnly || p.status == 204 || p.status == 304:
		return true, nil
	case p.chunked:
		p.state = stChunkSize
		return false, nil
	case p.remaining >= 0:
		p.state = stBody
		return p.remaining == 0, nil
	default:
		p.state, p.keepAlive = stUntilClose, false
		return false, nil
	}
}

// statusLine reads "HTTP/1.x NNN reason".
func (p *responseParser) statusLine(line []byte) error {
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	status, err := strconv.Atoi(string(code))
	major, minor, ok := http.ParseHTTPVersion(string(proto))
	if err != nil || len(code) != 3 || status < 100 || !ok {
		return fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	p.status, p.remaining, p.chunked = status, -1, false
	p.http11 = major > 1 || (major == 1 && minor >= 1)
	p.keepAlive = p.http11
	return nil
}

// field reads the header fields that frame the response.
func (p *responseParser) field(line []byte) {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return
	}
	value = bytes.TrimSpace(value)
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		if n, err := strconv.ParseInt(string(value), 10, 64); err == nil && n >= 0 {
			p.remaining = n
		}
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		// Before HTTP/1.1 there is no chunked coding (net/http ignores it too).
		p.chunked = p.http11 && hasToken(value, "chunked")
	case bytes.EqualFold(name, []byte("Connection")):
		if hasToken(value, "close") {
			p.keepAlive = false
		} else if hasToken(value, "keep-alive") {
			p.keepAlive = true
		}
	}
}

func hasToken(value []byte, token string) bool {
	for t := range bytes.SplitSeq(value, []byte(",")) {
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(token)) {
			return true
		}
	}
	return false
}

func parseChunkSize(line []byte) (int64, error) {
	hex, _, _ := bytes.Cut(line, []byte(";"))
	size, err := strconv.ParseInt(string(bytes.TrimSpace(hex)), 16, 64)
	if err != nil || size < 0 {
		return 0, fmt.Errorf("%w: bad chunk size %q", errMalformed, line)
	}
	return size, nil
}
