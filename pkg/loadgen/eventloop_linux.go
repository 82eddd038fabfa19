package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

const eventLoopSupported = true

// readBufferSize is the event loop's one read buffer, shared by its connections
// (it handles one at a time); a response larger than this takes several reads.
const readBufferSize = 64 << 10

// errTimeout is the failure of a request that outlived -timeout.
var errTimeout = errors.New("request timed out")

// stopGrace bounds how long an interrupted run waits for its requests in flight.
const stopGrace = time.Second

// eventLoop drives every connection of a run from one OS thread with epoll, as
// wrk does: sockets are non-blocking and level-triggered, a timerfd wakes the
// thread when the next request is due or a request times out, and an eventfd
// wakes it when the run is cancelled.
//
// This is written by hand because Go's runtime cannot do it: its timers wake an
// idle process at millisecond granularity, and each request through the runtime's
// network poller costs several thread hand-offs between Ms and Ps. Measured here,
// that made a paced request cost 2-3 times Fortio's CPU; the loop costs a fraction.
type eventLoop struct {
	r       *Runner
	wire    Wire
	sa      unix.Sockaddr
	family  int
	addr    string
	timeout time.Duration
	conns   []*loopConn

	epfd, timerfd, wakefd int
	armedAt               time.Duration // timer's current expiry (clock time); 0 = disarmed
	monoOffset            int64         // CLOCK_MONOTONIC ns = clock time + monoOffset
	buf                   []byte
	oob                   []byte // control data of a read (the receive timestamp)
	clock                 realClock
	wallMinusClock        int64 // wall-clock ns minus clock time, sampled at each wake-up
	warmup                bool  // making the uncounted first requests
	stopping              bool  // cancelled: no new requests
	stopAt                time.Duration
	lastDone              time.Duration
	warmOuts              []Outcome
	err                   error // the loop itself failed (see failAll)
}

type connState int

const (
	idle       connState = iota // free for a request (with or without a socket)
	connecting                  // non-blocking connect under way
	writing                     // request partly written
	reading                     // waiting for the response
)

// loopConn is one connection of the loop.
type loopConn struct {
	id       int
	fd       int // -1: no socket
	state    connState
	parser   ResponseParser
	pending  []byte       // request bytes still to write
	times    requestTimes // of the current or next request
	assigned bool         // times.due holds the next request's due time
	retired  bool         // no more requests for this connection
	deadline time.Duration
	connAt   time.Duration // when the connect started
	arrived  time.Duration // when the kernel received the response's last bytes (0: unknown)
	stats    *WireConnStats
}

func newEventLoop(r *Runner, w Wire, addr *net.TCPAddr, timeout time.Duration, stats []*WireConnStats) *eventLoop {
	l := &eventLoop{
		r: r, wire: w, addr: addr.String(), timeout: timeout,
		buf: make([]byte, readBufferSize), oob: make([]byte, rxStampSpace),
		clock: r.clock.(realClock), // NewWireRunner only allows the real clock
	}
	if ip4 := addr.IP.To4(); ip4 != nil {
		sa := &unix.SockaddrInet4{Port: addr.Port}
		copy(sa.Addr[:], ip4)
		l.sa, l.family = sa, unix.AF_INET
	} else {
		sa := &unix.SockaddrInet6{Port: addr.Port}
		copy(sa.Addr[:], addr.IP.To16())
		l.sa, l.family = sa, unix.AF_INET6
	}
	for i, s := range stats {
		l.conns = append(l.conns, &loopConn{id: i, fd: -1, parser: w.NewParser(), stats: s})
	}
	return l
}

// warmUp sends one uncounted request on every connection at once.
func (l *eventLoop) warmUp(ctx context.Context) error {
	l.warmup = true
	l.warmOuts = make([]Outcome, len(l.conns))
	l.loop(ctx)
	l.warmup, l.stopping = false, false
	for _, c := range l.conns {
		c.assigned, c.retired = false, false
	}
	if l.r.opts.AllowInitialErrors {
		return nil
	}
	return warmupFailures(l.warmOuts)
}

func (l *eventLoop) run(ctx context.Context) (time.Duration, error) {
	defer l.closeAll()
	start := l.r.dispatch.start
	for _, c := range l.conns {
		c.times.free = start
	}
	l.loop(ctx)
	if l.err != nil {
		return 0, fmt.Errorf("event loop: %w", l.err)
	}
	return l.lastDone, nil
}

// yieldEvery is how often the loop passes through Go's scheduler. The loop only
// makes system calls, so without this its goroutine would never be rescheduled:
// after 10 ms Go's sysmon takes it for a runaway, preempts it and takes its P
// away during epoll_wait, and then polls every 20 µs. Measured here that doubled
// the loop's CPU per request at 1000 qps. Each Gosched costs a wake-up of an
// idle thread (the scheduler's wakep), so it is done just often enough: sysmon's
// limit is 10 ms. (The goroutine is deliberately not locked to its thread, which
// would turn each reschedule into a hand-off between threads.)
const yieldEvery = 8 * time.Millisecond

// loop runs until every connection is retired and idle.
func (l *eventLoop) loop(ctx context.Context) {
	if err := l.open(); err != nil {
		l.failAll(err)
		return
	}
	defer l.closeFDs()
	stop := context.AfterFunc(ctx, l.wake)
	defer stop()
	events := make([]unix.EpollEvent, len(l.conns)+2)
	var yielded time.Duration
	for {
		now := l.now()
		if now-yielded >= yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		l.expire(now)
		l.assign(now)
		if l.finished() {
			return
		}
		l.arm()
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.failAll(err)
			return
		}
		for _, ev := range events[:max(n, 0)] {
			l.handle(ev)
		}
	}
}

// assign gives free connections their next request and sends the ones that are
// due.
func (l *eventLoop) assign(now time.Duration) {
	for _, c := range l.conns {
		if c.state != idle || c.retired {
			continue
		}
		if l.stopping {
			c.retired = true
			continue
		}
		if !c.assigned {
			if l.warmup {
				c.times = requestTimes{due: now, free: now}
			} else if due, more := l.r.dispatch.take(c.times.free, now); more {
				c.times.due = due
			} else {
				c.retired = true
				continue
			}
			c.assigned = true
		}
		if c.times.due <= now {
			l.send(c, now)
		}
	}
}

// send starts the connection's request: connect if it has no socket, then write.
func (l *eventLoop) send(c *loopConn, now time.Duration) {
	c.times.sent = now
	if l.timeout > 0 {
		c.deadline = now + l.timeout
	}
	c.pending = l.wire.Request()
	if c.fd < 0 {
		l.connect(c, now)
		return
	}
	l.write(c)
}

func (l *eventLoop) connect(c *loopConn, now time.Duration) {
	fd, err := unix.Socket(l.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		l.fail(c, fmt.Errorf("socket: %w", err))
		return
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	enableRxTimestamps(fd)
	c.fd, c.connAt = fd, now
	connErr := unix.Connect(fd, l.sa)
	if connErr != nil && !errors.Is(connErr, unix.EINPROGRESS) {
		l.fail(c, fmt.Errorf("connect %s: %w", l.addr, connErr))
		return
	}
	if err := l.watch(c, unix.EPOLL_CTL_ADD, true); err != nil {
		l.fail(c, err)
		return
	}
	c.state = connecting
	if connErr == nil { // connected at once (possible on loopback)
		l.connected(c)
	}
}

func (l *eventLoop) connected(c *loopConn) {
	soErr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soErr != 0 {
		err = unix.Errno(soErr)
	}
	if err != nil {
		l.fail(c, fmt.Errorf("connect %s: %w", l.addr, err))
		return
	}
	c.stats.opened(l.addr, l.r.clock.Now()-c.connAt)
	if err := l.watch(c, unix.EPOLL_CTL_MOD, false); err != nil {
		l.fail(c, err)
		return
	}
	l.write(c)
}

func (l *eventLoop) write(c *loopConn) {
	for len(c.pending) > 0 {
		n, err := unix.Write(c.fd, c.pending)
		if errors.Is(err, unix.EAGAIN) {
			c.state = writing
			if err := l.watch(c, unix.EPOLL_CTL_MOD, true); err != nil {
				l.fail(c, err)
			}
			return
		}
		if err != nil {
			l.fail(c, fmt.Errorf("write to %s: %w", l.addr, err))
			return
		}
		c.pending = c.pending[n:]
	}
	if c.state == writing {
		if err := l.watch(c, unix.EPOLL_CTL_MOD, false); err != nil {
			l.fail(c, err)
			return
		}
	}
	c.state = reading
}

// handle reacts to one epoll event.
func (l *eventLoop) handle(ev unix.EpollEvent) {
	switch int(ev.Fd) {
	case l.timerfd:
		// Edge-triggered: each expiry is one event, and its count is never
		// read (timerfd_settime resets it), which saves a read per wake-up.
		l.armedAt = 0
		return
	case l.wakefd:
		var b [8]byte
		_, _ = unix.Read(l.wakefd, b[:])
		if !l.stopping {
			l.stopping, l.stopAt = true, l.r.clock.Now()
		}
		return
	}
	c := l.conns[ev.Pad] // Pad carries the connection's index
	if int(ev.Fd) != c.fd {
		return // about a socket closed earlier in this batch of events
	}
	switch c.state {
	case connecting:
		l.connected(c)
	case writing:
		l.write(c)
	case reading:
		l.read(c)
	case idle:
		// An idle socket is readable only when the server closed it (or sent
		// something unasked): either way it cannot carry the next request.
		l.closeSocket(c)
	}
}

func (l *eventLoop) read(c *loopConn) {
	n, oobn, _, _, err := unix.Recvmsg(c.fd, l.buf, l.oob, 0)
	c.arrived = 0
	if ts, ok := rxTimestamp(l.oob[:max(oobn, 0)]); ok {
		c.arrived = time.Duration(ts - l.wallMinusClock)
	}
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return
	case err != nil:
		l.fail(c, fmt.Errorf("read from %s: %w", l.addr, err))
		return
	case n == 0:
		if done, out := c.parser.PeerClosed(); done {
			l.complete(c, out)
			return
		}
		l.fail(c, fmt.Errorf("%s closed the connection before the response was complete", l.addr))
		return
	}
	for p := l.buf[:n]; len(p) > 0; {
		used, done, out, err := c.parser.Feed(p)
		if err != nil {
			l.fail(c, fmt.Errorf("response from %s: %w", l.addr, err))
			return
		}
		p = p[used:]
		if done {
			if len(p) > 0 { // bytes past the response we asked for: the stream is off
				out.OK, out.Code = false, SocketError
			}
			l.complete(c, out)
			return
		}
		if used == 0 {
			l.fail(c, fmt.Errorf("response from %s: the parser made no progress", l.addr))
			return
		}
	}
}

// complete records a finished response and frees the connection.
func (l *eventLoop) complete(c *loopConn, out Outcome) {
	done := l.r.clock.Now()
	if c.arrived > c.times.sent && c.arrived < done {
		done = c.arrived // the kernel's receive time; see rxstamp_linux.go
	}
	total, header := c.parser.Sizes()
	keep := c.parser.KeepAlive() && out.Code != SocketError
	c.parser.Reset()
	if !keep {
		l.closeSocket(c)
	}
	l.finish(c, done, out)
	if !l.warmup {
		c.stats.Sizes.Record(total)
		c.stats.HeaderSizes.Record(header)
	}
}

// fail ends the connection's request as a socket error and drops its socket.
func (l *eventLoop) fail(c *loopConn, err error) {
	l.closeSocket(c)
	c.parser.Reset()
	l.finish(c, l.r.clock.Now(), Outcome{Code: SocketError, Err: err})
}

func (l *eventLoop) finish(c *loopConn, done time.Duration, out Outcome) {
	c.state, c.assigned, c.deadline = idle, false, 0
	c.times.done = done
	if l.warmup {
		c.retired = true
		l.warmOuts[c.id] = out
		return
	}
	l.r.record(c.times, out)
	c.times.free = done
	l.lastDone = max(l.lastDone, done)
}

// expire fails requests past their deadline, and, once stopping, those still in
// flight after the grace period.
func (l *eventLoop) expire(now time.Duration) {
	for _, c := range l.conns {
		if c.state == idle {
			continue
		}
		if (c.deadline > 0 && now >= c.deadline) || (l.stopping && now-l.stopAt >= stopGrace) {
			l.fail(c, errTimeout)
		}
	}
}

// finished says whether the loop has nothing left to do.
func (l *eventLoop) finished() bool {
	for _, c := range l.conns {
		if !c.retired || c.state != idle {
			return false
		}
	}
	return true
}

// deadlineGrain is the precision of request timeouts. Deadlines move with every
// request; arming the timer for each exactly would cost a timerfd_settime per
// request. Rounded up to this grain, the armed time rarely changes, and a timeout
// fires at most this late.
const deadlineGrain = 50 * time.Millisecond

// arm sets the timer to the earliest time something is due: a request to send,
// a request's deadline, or the end of the stop grace.
func (l *eventLoop) arm() {
	var next time.Duration
	earliest := func(t time.Duration) {
		if t > 0 && (next == 0 || t < next) {
			next = t
		}
	}
	for _, c := range l.conns {
		if c.state == idle && c.assigned && !c.retired {
			earliest(max(c.times.due, 1))
		}
		if c.deadline > 0 {
			earliest((c.deadline/deadlineGrain + 1) * deadlineGrain)
		}
	}
	if l.stopping {
		earliest(l.stopAt + stopGrace)
	}
	if next == l.armedAt {
		return
	}
	l.armedAt = next
	spec := unix.ItimerSpec{}
	if next > 0 {
		spec.Value = unix.NsecToTimespec(int64(next) + l.monoOffset)
	}
	_ = unix.TimerfdSettime(l.timerfd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// watch registers (or changes) a connection's socket in epoll; write asks for
// writability too (connect and partial writes).
func (l *eventLoop) watch(c *loopConn, op int, write bool) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd), Pad: int32(c.id)}
	if write {
		ev.Events |= unix.EPOLLOUT
	}
	return unix.EpollCtl(l.epfd, op, c.fd, &ev)
}

func (l *eventLoop) closeSocket(c *loopConn) {
	if c.fd >= 0 {
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
		_ = unix.Close(c.fd)
		c.fd = -1
	}
}

func (l *eventLoop) closeAll() {
	for _, c := range l.conns {
		if c.fd >= 0 {
			_ = unix.Close(c.fd)
			c.fd = -1
		}
	}
}

// open creates the epoll set, timer and wake-up descriptors, and ties the
// monotonic clock to the runner's.
func (l *eventLoop) open() error {
	var err error
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return err
	}
	if l.timerfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		return err
	}
	if l.wakefd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return err
	}
	for _, fd := range []int{l.timerfd, l.wakefd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd), Pad: -1}
		if fd == l.timerfd {
			ev.Events |= unix.EPOLLET
		}
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return err
		}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	l.monoOffset = ts.Nano() - int64(l.r.clock.Now())
	l.armedAt = 0
	// Sockets of the warm-up stay open for the run: re-register them.
	for _, c := range l.conns {
		if c.fd >= 0 {
			if err := l.watch(c, unix.EPOLL_CTL_ADD, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *eventLoop) closeFDs() {
	for _, fd := range []int{l.timerfd, l.wakefd, l.epfd} {
		_ = unix.Close(fd)
	}
}

// now reads the clock and refreshes the wall-to-clock offset used to place
// kernel receive timestamps (wall clock) on the run's monotonic clock. Sampled at
// every wake-up, so a wall-clock step moves at most the reads of one wake-up.
func (l *eventLoop) now() time.Duration {
	t := time.Now()
	now := t.Sub(l.clock.origin)
	l.wallMinusClock = t.UnixNano() - int64(now)
	return now
}

// wake interrupts epoll_wait from another goroutine (cancellation).
func (l *eventLoop) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(l.wakefd, one[:])
}

// failAll ends the loop on an error of the loop itself (not of a connection).
func (l *eventLoop) failAll(err error) {
	l.err = err
	for _, c := range l.conns {
		if l.warmup {
			l.warmOuts[c.id] = Outcome{Code: SocketError, Err: err}
		}
		c.retired = true
		l.closeSocket(c)
		c.state = idle
	}
}
