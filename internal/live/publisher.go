package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The publisher's bounds: a dashboard that is slow or gone costs the run
// nothing but these, and only on the publisher's own goroutine.
const (
	requestTimeout = 2 * time.Second // one POST, connection included
	queueLength    = 256             // events waiting to be sent; more are dropped
	closeWait      = 3 * time.Second // how long Close lets the last events go out
)

// TokenEnv is the environment variable that carries the dashboard's token
// to the commands that publish (and to the dashboard itself).
const TokenEnv = "MESHPERF_DASHBOARD_TOKEN"

// Config says where a publisher posts.
type Config struct {
	URL   string // the dashboard's base URL, e.g. http://127.0.0.1:8088
	Token string // sent as "Authorization: Bearer" when set
	// Session is an open session to publish into (a lab's, for the load
	// it runs); empty opens a new one described by Opening.
	Session string
	Opening Opening
	// Name starts the warning, e.g. "meshperf load"; Warn receives it.
	Name string
	Warn io.Writer
}

// CheckURL says what is wrong with a dashboard URL given on a command
// line, if anything. unix:PATH is a relay's socket (a lab's pods use one).
func CheckURL(raw string) error {
	if path, ok := strings.CutPrefix(raw, unixScheme); ok && filepath.IsAbs(path) {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not the dashboard's URL: want http://host:port", raw)
	}
	return nil
}

// Publisher posts a run's events to a dashboard from a goroutine of its
// own: Publish never waits, and a dashboard that cannot be reached is
// warned about once and otherwise ignored, its events counted as dropped.
type Publisher struct {
	cfg     Config
	base    string
	client  *http.Client
	queue   chan Event
	opened  chan struct{} // closed once the session is open, or could not be
	session string        // set before opened is closed; "" if none
	done    chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	dropped atomic.Int64
	warned  atomic.Bool
	closing sync.Once
}

// Start begins publishing to cfg.URL. The session is opened on the
// publisher's goroutine, so Start returns at once.
func Start(cfg Config) *Publisher {
	if cfg.Warn == nil {
		cfg.Warn = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, base := transport(cfg.URL)
	p := &Publisher{
		cfg: cfg, base: base,
		client: &http.Client{Timeout: requestTimeout, Transport: rt},
		queue:  make(chan Event, queueLength), opened: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	go p.run()
	return p
}

// Publish queues e to be sent, stamped with the time now if it has none;
// when the queue is full the event is dropped and counted.
func (p *Publisher) Publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	defer func() {
		// Publishing after Close is a caller's slip; it must not end the run.
		if recover() != nil {
			p.dropped.Add(1)
		}
	}()
	select {
	case p.queue <- e:
	default:
		p.dropped.Add(1)
	}
}

// Session waits until the session is open (or could not be opened, at
// most requestTimeout) and returns its id, "" if there is none.
func (p *Publisher) Session() string {
	<-p.opened
	return p.session
}

// Dropped is how many events did not reach the dashboard.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

// Close lets the queued events go out, for at most closeWait, and stops.
func (p *Publisher) Close() {
	p.closing.Do(func() {
		close(p.queue)
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			p.cancel()
			<-p.done
		}
		p.cancel()
	})
}

func (p *Publisher) run() {
	defer close(p.done)
	p.open()
	for e := range p.queue {
		// What queued up while the last POST was out goes in one request.
		batch := []Event{e}
	drain:
		for len(batch) < queueLength {
			select {
			case more, ok := <-p.queue:
				if !ok {
					p.send(batch)
					return
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		p.send(batch)
	}
}

// open opens the session unless the config names one.
func (p *Publisher) open() {
	defer close(p.opened)
	if p.cfg.Session != "" {
		p.session = p.cfg.Session
		return
	}
	var answer struct {
		ID string `json:"id"`
	}
	if err := p.post("/api/live", p.cfg.Opening, &answer); err != nil {
		p.warn(err)
		return
	}
	p.session = answer.ID
}

func (p *Publisher) send(batch []Event) {
	if p.session == "" {
		p.dropped.Add(int64(len(batch)))
		return
	}
	if err := p.post("/api/live/"+url.PathEscape(p.session)+"/events", batch, nil); err != nil {
		p.dropped.Add(int64(len(batch)))
		p.warn(err)
	}
}

// post sends body as JSON and decodes the answer into out when given; an
// answer other than 2xx is an error with the dashboard's message.
func (p *Publisher) post(path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, p.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.cfg.Token)
	}
	resp, err := p.client.Do(req)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err // the warning names the dashboard already
	} else if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(answer, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(answer))
		}
		return fmt.Errorf("%s %s: %s", resp.Status, path, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// warn says once that progress is not reaching the dashboard: the run
// goes on, and a flood of lines would bury its own output.
func (p *Publisher) warn(err error) {
	if errors.Is(err, context.Canceled) || !p.warned.CompareAndSwap(false, true) {
		return
	}
	fmt.Fprintf(p.cfg.Warn, "%s: dashboard %s: %v; the run goes on without publishing its progress\n", p.cfg.Name, p.cfg.URL, err)
}
