package controllers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A key whose reconcile fails is said to be retried and handed again until
// it succeeds; a key added many times while waiting is reconciled once;
// Run returns when its context ends.
func TestQueueRetriesFailuresAndStopsWithItsContext(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	var retried []string
	done := make(chan struct{})
	q := NewQueue(func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		if key == "flaky" && calls[key] < 3 {
			return errors.New("not yet")
		}
		if key == "flaky" {
			close(done)
		}
		return nil
	}, func(key string, err error) {
		mu.Lock()
		defer mu.Unlock()
		retried = append(retried, key+": "+err.Error())
	})
	for range 5 {
		q.Add("steady")
	}
	q.Add("flaky")
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); q.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the failing key was not handed again until it succeeded")
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["steady"] != 1 || calls["flaky"] != 3 {
		t.Errorf("reconciles %v, want steady once (added while waiting) and flaky 3 times", calls)
	}
	if len(retried) != 2 || retried[0] != "flaky: not yet" {
		t.Errorf("retrying called with %q, want flaky's two failures", retried)
	}
}
