package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
)

// A fleet connecting all at once is configured whole, not turned away by
// the pilot's automatic stream limit (25 a second on 2 cores) to back off
// and retry past the wait, as it was at 1x before cpload raised the limit
// to the fleet's rate. With a limit set too low on purpose, the wait's
// error says why the proxies lack their config, from both sides.
func TestFleetConnectingAtOnceIsConfiguredOrToldWhy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mesh, err := shape.Uniform(shape.UniformOptions{Namespaces: 5, ServicesPerNamespace: 10, Replicas: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 200 proxies: at 25 new streams a second they would need 8 s and more.
	r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: mesh, Scoping: driver.ScopeNamespace, Churn: driver.ChurnNone,
		ConnectRate: -1, PilotCommand: pilotCommand(t), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Knobs.MaxRequestsPerSecond != 200 || r.Connect.AllSynced <= 0 {
		t.Errorf("PILOT_MAX_REQUESTS_PER_SECOND %v, all synced %v ms", r.Knobs.MaxRequestsPerSecond, r.Connect.AllSynced)
	}

	_, err = driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: mesh, Churn: driver.ChurnNone, ConnectRate: -1,
		Knobs: driver.Knobs{MaxRequestsPerSecond: 2}, PilotCommand: pilotCommand(t), Timeout: 2 * time.Second})
	if err == nil {
		t.Fatal("200 proxies synced within 2 s through a limit of 2 new streams a second")
	}
	for _, want := range []string{"wait for cds", "ResourceExhausted", "pilot_xds_awaiting_config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}
