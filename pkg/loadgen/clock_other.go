//go:build !linux

package loadgen

import "time"

// fineSleep falls back to Go's timer where nanosleep is not at hand.
func fineSleep(d time.Duration) { time.Sleep(d) }
