// Package push is the control plane's push pipeline, istiod's shape: inbound
// changes are debounced into one merged request, the caller turns that into a
// snapshot and queues it for every connected proxy, and a throttled sender hands
// each proxy's merged request to the xDS server. It knows nothing about how
// config is generated or sent; connections are an opaque comparable key, so the
// xDS package plugs its own type in. Knobs, defaults and metric names are
// istiod's, so that operators' dashboards and tuning carry over.
package push

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"time"
)

// Istio's environment variables for the push pipeline.
const (
	EnvDebounceAfter        = "PILOT_DEBOUNCE_AFTER"
	EnvDebounceMax          = "PILOT_DEBOUNCE_MAX"
	EnvEnableEDSDebounce    = "PILOT_ENABLE_EDS_DEBOUNCE"
	EnvPushThrottle         = "PILOT_PUSH_THROTTLE"
	EnvMaxRequestsPerSecond = "PILOT_MAX_REQUESTS_PER_SECOND"
)

// Options are the push pipeline's knobs. The zero values of PushThrottle and
// MaxRequestsPerSecond mean "size to the machine", as in istiod since 1.21.
type Options struct {
	// DebounceAfter is the quiet period that closes a debounce window.
	DebounceAfter time.Duration
	// DebounceMax is the longest a window stays open under a steady trickle.
	DebounceMax time.Duration
	// EnableEDSDebounce puts endpoint-only requests through the window too;
	// when false they are pushed at once.
	EnableEDSDebounce bool
	// PushThrottle bounds concurrent pushes; 0 is automatic (EffectiveThrottle).
	PushThrottle int
	// MaxRequestsPerSecond limits how fast new xDS streams are accepted; 0 is
	// automatic (EffectiveRequestRate).
	MaxRequestsPerSecond float64
	// MaxRequestsBurst is the stream limiter's burst. istiod hard-codes 1 and
	// has no variable for it; 0 means 1.
	MaxRequestsBurst int
}

// DefaultOptions returns istiod's defaults: 100ms quiet period, 10s maximum
// window, EDS debounced, automatic throttle and stream rate, burst 1.
func DefaultOptions() Options {
	return Options{
		DebounceAfter:     100 * time.Millisecond,
		DebounceMax:       10 * time.Second,
		EnableEDSDebounce: true,
		MaxRequestsBurst:  1,
	}
}

// OptionsFromEnv starts from DefaultOptions and applies Istio's variables that
// getenv reports as set (non-empty). Values are parsed as istiod parses them
// (Go durations, strconv bools, ints and floats); where istiod would log a
// warning and fall back to the default, this returns an error instead, so a
// typo is not silently ignored. Negative values are rejected: istiod treats
// them as "automatic", which is never what someone who typed them meant.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := DefaultOptions()
	var err error
	if v := getenv(EnvDebounceAfter); v != "" {
		if o.DebounceAfter, err = parseDuration(EnvDebounceAfter, v); err != nil {
			return Options{}, err
		}
	}
	if v := getenv(EnvDebounceMax); v != "" {
		if o.DebounceMax, err = parseDuration(EnvDebounceMax, v); err != nil {
			return Options{}, err
		}
	}
	if v := getenv(EnvEnableEDSDebounce); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Options{}, fmt.Errorf("%s=%q: want true or false", EnvEnableEDSDebounce, v)
		}
		o.EnableEDSDebounce = b
	}
	if v := getenv(EnvPushThrottle); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Options{}, fmt.Errorf("%s=%q: want a whole number of concurrent pushes, 0 for automatic", EnvPushThrottle, v)
		}
		o.PushThrottle = n
	}
	if v := getenv(EnvMaxRequestsPerSecond); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) {
			return Options{}, fmt.Errorf("%s=%q: want a number of new streams per second, 0 for automatic", EnvMaxRequestsPerSecond, v)
		}
		o.MaxRequestsPerSecond = f
	}
	return o, nil
}

func parseDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a non-negative Go duration such as 100ms or 10s", name, v)
	}
	return d, nil
}

// automaticLimit is istiod's machine-size heuristic shared by the push throttle
// and the stream rate: 20 on one CPU, 35 on four, capped at 100 from 17 up.
func automaticLimit() int {
	return min(15+5*runtime.GOMAXPROCS(0), 100)
}

// EffectiveThrottle is the number of pushes allowed to run at once.
func (o Options) EffectiveThrottle() int {
	if o.PushThrottle > 0 {
		return o.PushThrottle
	}
	return automaticLimit()
}

// EffectiveRequestRate is the number of new xDS streams accepted per second.
func (o Options) EffectiveRequestRate() float64 {
	if o.MaxRequestsPerSecond > 0 {
		return o.MaxRequestsPerSecond
	}
	return float64(automaticLimit())
}

// EffectiveBurst is the stream limiter's burst.
func (o Options) EffectiveBurst() int {
	if o.MaxRequestsBurst > 0 {
		return o.MaxRequestsBurst
	}
	return 1
}
