package push

import (
	"context"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// inboxSize is istiod's push channel buffer: enough to absorb a short burst
// while the debouncer is busy merging, small enough that a stuck debouncer
// pushes back on sources instead of hiding behind a queue.
const inboxSize = 10

// Inbox is where sources hand changes to the debouncer. It does istiod's
// accounting of pilot_inbound_updates on the way in.
type Inbox struct {
	ch chan *model.PushRequest
	m  *Metrics
}

// NewInbox returns an inbox counting into m (may be nil).
func NewInbox(m *Metrics) *Inbox {
	return &Inbox{ch: make(chan *model.PushRequest, inboxSize), m: m}
}

// C is the channel to pass to Debouncer.Run.
func (b *Inbox) C() <-chan *model.PushRequest { return b.ch }

// Inbound counts one change of the given kind and, if req is not nil, sends
// it to the debouncer. istiod counts the source event under its own type
// (eds, svc, svcdelete) and every request that enters the debouncer under
// config as well, so an endpoint change that needs a push counts in both eds
// and config; a service update with nothing to push (req nil) counts only in
// svc. Inbound blocks while the inbox is full and returns ctx's error if ctx
// ends first.
func (b *Inbox) Inbound(ctx context.Context, kind InboundType, req *model.PushRequest) error {
	b.m.CountInbound(kind)
	if req == nil {
		return nil
	}
	if kind != InboundConfig {
		b.m.CountInbound(InboundConfig)
	}
	select {
	case b.ch <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
