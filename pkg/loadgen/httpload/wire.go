package httpload

import "github.com/meshperf/meshperf/pkg/loadgen"

// wire is HTTP/1.x for the event loop: the pre-built request and a parser per
// connection.
type wire struct {
	request    []byte
	headOnly   bool
	forceClose bool
}

func (w wire) Request() []byte { return w.request }

func (w wire) NewParser() loadgen.ResponseParser {
	p := &responseParser{headOnly: w.headOnly, forceClose: w.forceClose}
	p.Reset()
	return p
}
