package push

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestOptionsDefaultsAreIstiods(t *testing.T) {
	o, err := OptionsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Options{DebounceAfter: 100 * time.Millisecond, DebounceMax: 10 * time.Second, EnableEDSDebounce: true, MaxRequestsBurst: 1}
	if o != want || o != DefaultOptions() {
		t.Errorf("defaults %+v, want %+v", o, want)
	}
	auto := min(15+5*runtime.GOMAXPROCS(0), 100)
	if o.EffectiveThrottle() != auto || o.EffectiveRequestRate() != float64(auto) || o.EffectiveBurst() != 1 {
		t.Errorf("automatic throttle %d, rate %v, burst %d; want %d, %d, 1",
			o.EffectiveThrottle(), o.EffectiveRequestRate(), o.EffectiveBurst(), auto, auto)
	}
}

func TestAutomaticLimitFollowsGOMAXPROCS(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	for procs, want := range map[int]int{1: 20, 2: 25, 4: 35, 17: 100, 64: 100} {
		runtime.GOMAXPROCS(procs)
		if got := (Options{}).EffectiveThrottle(); got != want {
			t.Errorf("GOMAXPROCS=%d: throttle %d, want %d", procs, got, want)
		}
	}
}

func TestOptionsFromEnvOverrides(t *testing.T) {
	o, err := OptionsFromEnv(env(map[string]string{
		EnvDebounceAfter:        "2500ms",
		EnvDebounceMax:          "1m",
		EnvEnableEDSDebounce:    "false",
		EnvPushThrottle:         "42",
		EnvMaxRequestsPerSecond: "7.5",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if o.DebounceAfter != 2500*time.Millisecond || o.DebounceMax != time.Minute || o.EnableEDSDebounce ||
		o.EffectiveThrottle() != 42 || o.EffectiveRequestRate() != 7.5 {
		t.Errorf("got %+v", o)
	}
}

func TestOptionsFromEnvRejectsBadValues(t *testing.T) {
	for name, value := range map[string]string{
		EnvDebounceAfter:        "100",
		EnvDebounceMax:          "-1s",
		EnvEnableEDSDebounce:    "maybe",
		EnvPushThrottle:         "-3",
		EnvMaxRequestsPerSecond: "NaN",
	} {
		_, err := OptionsFromEnv(env(map[string]string{name: value}))
		if err == nil {
			t.Errorf("%s=%s accepted", name, value)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, name) || !strings.Contains(msg, value) || strings.Contains(msg, "\n") {
			t.Errorf("%s=%s: error %q should be one line naming the variable and value", name, value, msg)
		}
	}
}

func TestStreamLimiterFailsFastWhenSaturated(t *testing.T) {
	l := NewStreamLimiter(Options{MaxRequestsPerSecond: 0.001}) // one stream per 1000s, burst 1
	ctx := context.Background()
	if err := l.Wait(ctx); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	// The next slot is 1000s away, beyond the 1s wait: refused at once.
	err := l.Wait(ctx)
	if !errors.Is(err, ErrTooManyStreams) || !strings.Contains(err.Error(), EnvMaxRequestsPerSecond) {
		t.Errorf("second stream: %v, want ErrTooManyStreams naming %s", err, EnvMaxRequestsPerSecond)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
}

func TestStreamLimiterBurst(t *testing.T) {
	l := NewStreamLimiter(Options{MaxRequestsPerSecond: 0.001, MaxRequestsBurst: 3})
	for i := range 3 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatalf("stream %d within the burst: %v", i, err)
		}
	}
	if err := l.Wait(context.Background()); err == nil {
		t.Error("stream beyond the burst admitted")
	}
}
