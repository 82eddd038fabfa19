package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/testutil"
)

// destinationRule is a small valid namespaced object whose spec is one host.
func destinationRule(ns, name, host string) *config.Resource {
	return &config.Resource{
		Kind:       config.KindDestinationRule,
		APIVersion: "networking.istio.io/v1",
		Meta:       metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       &networking.DestinationRule{Host: host},
	}
}

func namespace(name string, labels map[string]string) *config.Resource {
	return &config.Resource{
		Kind:       config.KindNamespace,
		APIVersion: "v1",
		Meta:       metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       &corev1.NamespaceSpec{},
	}
}

func drKey(ns, name string) config.Key {
	return config.Key{Kind: config.KindDestinationRule, Namespace: ns, Name: name}
}

func hostOf(r *config.Resource) string { return r.Spec.(*networking.DestinationRule).GetHost() }

func openTemp(t testing.TB, opts ...Option) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "config.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// recorder collects a watcher's events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) get() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// hangGuard bounds every wait of these tests: a watch that never delivers
// fails the test instead of hanging it. It is not a timing goal.
const hangGuard = 10 * time.Second

// waitEvents waits until the recorder holds at least n events.
func (r *recorder) waitEvents(t *testing.T, n int) []Event {
	t.Helper()
	testutil.Eventually(t, hangGuard, func() error {
		if got := len(r.get()); got < n {
			return fmt.Errorf("%d events delivered, want %d", got, n)
		}
		return nil
	})
	return r.get()
}

// waitLine waits until the log holds a line containing substr.
func (l *logBuffer) waitLine(t *testing.T, substr string) {
	t.Helper()
	testutil.Eventually(t, hangGuard, func() error {
		if l.lines(substr) == 0 {
			return fmt.Errorf("no log line contains %q:\n%s", substr, l)
		}
		return nil
	})
}

// logBuffer is a slog destination tests can read while the store logs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) lines(substr string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
