package service

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/topology"
)

// step is a script step ready to run: a sleep, a call, or steps run
// concurrently.
type step struct {
	sleep      time.Duration
	call       *call
	concurrent []step
}

// compileScript turns the service's script into steps whose outbound
// requests are prepared once.
func compileScript(script topology.Script, m *metrics) ([]step, error) {
	out := make([]step, 0, len(script))
	for i, s := range script {
		st, err := compileStep(s, m)
		if err != nil {
			return nil, fmt.Errorf("script step %d: %w", i+1, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func compileStep(s topology.Step, m *metrics) (step, error) {
	switch {
	case s.Call != nil:
		c, err := newCall(*s.Call, m)
		return step{call: c}, err
	case len(s.Concurrent) > 0:
		st := step{concurrent: make([]step, 0, len(s.Concurrent))}
		for _, sub := range s.Concurrent {
			if len(sub.Concurrent) > 0 {
				return step{}, errors.New("concurrent steps cannot nest")
			}
			c, err := compileStep(sub, m)
			if err != nil {
				return step{}, err
			}
			st.concurrent = append(st.concurrent, c)
		}
		return st, nil
	case s.Sleep < 0:
		return step{}, fmt.Errorf("negative sleep %s", s.Sleep)
	}
	return step{sleep: s.Sleep}, nil
}

// hasCall says whether any step calls another service.
func hasCall(steps []step) bool {
	for _, s := range steps {
		if s.call != nil || hasCall(s.concurrent) {
			return true
		}
	}
	return false
}

// run plays the step for one request; the error is what the service
// answers with.
func (s *step) run(h *Handler, trace *traceHeaders) error {
	switch {
	case s.call != nil:
		return s.call.do(h, trace)
	case s.concurrent != nil:
		return runConcurrently(s.concurrent, h, trace)
	}
	// A plain sleep, as isotope's: a caller that went away still costs
	// the script.
	time.Sleep(s.sleep)
	return nil
}

// runConcurrently runs steps at once and waits for all of them, as isotope
// does: one failed call does not cut the others short. The last step runs
// on the request's own goroutine, one goroutine fewer per request.
func runConcurrently(steps []step, h *Handler, trace *traceHeaders) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	record := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}
	}
	last := len(steps) - 1
	for i := range steps[:last] {
		wg.Go(func() { record(steps[i].run(h, trace)) })
	}
	record(steps[last].run(h, trace))
	wg.Wait()
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d errors occurred: %s", len(errs), strings.Join(errs, ", "))
}
