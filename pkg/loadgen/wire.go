package loadgen

// A Wire is a request/response protocol simple enough for the event loop to
// drive on a raw socket: a fixed request, and a parser that finds where each
// response ends. HTTP/1.x and TCP echo are Wires; protocols that need a library
// on the connection (TLS, HTTP/2, gRPC) are Callers instead.
type Wire interface {
	// Request is the bytes of one request; the same for every call.
	Request() []byte
	// NewParser returns a parser for one connection's responses.
	NewParser() ResponseParser
}

// A ResponseParser follows one connection's response byte stream.
type ResponseParser interface {
	// Feed consumes bytes of the current response. It returns how many bytes it
	// used and, once the response is complete, done with its outcome. An error
	// means the stream is not a valid response (the connection is dropped).
	Feed(p []byte) (n int, done bool, out Outcome, err error)
	// PeerClosed is called when the server closes the connection; it says
	// whether that completed the response (a body delimited by the close).
	PeerClosed() (done bool, out Outcome)
	// KeepAlive says whether the connection may carry another request after the
	// response just completed.
	KeepAlive() bool
	// Sizes are the complete response's size on the wire and its header's.
	Sizes() (total, header int64)
	// Reset prepares for the next response.
	Reset()
}
