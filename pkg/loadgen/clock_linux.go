package loadgen

import (
	"time"

	"golang.org/x/sys/unix"
)

// fineSleep sleeps in the kernel's nanosleep, which wakes within the timer slack
// instead of Go's millisecond-rounded poller timeout. An EINTR (a signal) ends
// it early; the caller sleeps again for what is left.
func fineSleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}
