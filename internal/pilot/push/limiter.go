package push

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
)

// ErrTooManyStreams is returned by StreamLimiter.Wait when a new stream could
// not get a slot in time. The xDS server should answer it with
// codes.ResourceExhausted so the proxy retries, or tries another replica.
var ErrTooManyStreams = errors.New("too many new xDS streams")

// streamWaitMax is how long istiod lets a new stream wait for the rate limiter
// before failing it: long enough to smooth a burst of reconnects, short enough
// that a proxy goes elsewhere instead of queueing behind a thundering herd.
const streamWaitMax = time.Second

// StreamLimiter rate-limits new xDS streams (PILOT_MAX_REQUESTS_PER_SECOND),
// so that a mass reconnect does not starve pushes to proxies already connected.
type StreamLimiter struct {
	lim *rate.Limiter
}

// NewStreamLimiter returns a limiter at o's effective rate and burst.
func NewStreamLimiter(o Options) *StreamLimiter {
	return &StreamLimiter{lim: rate.NewLimiter(rate.Limit(o.EffectiveRequestRate()), o.EffectiveBurst())}
}

// Wait blocks until a new stream may proceed, for at most one second as istiod
// does. It returns an error wrapping ErrTooManyStreams if no slot comes up in
// time, or ctx's error if ctx ends first.
func (l *StreamLimiter) Wait(ctx context.Context) error {
	wait, cancel := context.WithTimeout(ctx, streamWaitMax)
	defer cancel()
	if err := l.lim.Wait(wait); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: limit is %g per second (%s)", ErrTooManyStreams, float64(l.lim.Limit()), EnvMaxRequestsPerSecond)
	}
	return nil
}
