//go:build !linux

package loadgen

import (
	"context"
	"net"
	"time"
)

const eventLoopSupported = false

type eventLoop struct{}

func newEventLoop(*Runner, Wire, *net.TCPAddr, time.Duration, []*WireConnStats) *eventLoop {
	return &eventLoop{}
}

func (*eventLoop) warmUp(context.Context) error               { return ErrNoEventLoop }
func (*eventLoop) run(context.Context) (time.Duration, error) { return 0, ErrNoEventLoop }
