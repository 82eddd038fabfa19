package scenario

import (
	"reflect"
	"testing"
	"time"
)

func TestApplyOverrides(t *testing.T) {
	quick := mustGet(t, "quick")
	conn, err := ParseIntList("-conn", "8, 16")
	if err != nil {
		t.Fatal(err)
	}
	qps, _ := ParseIntList("-qps", "500")
	ms, err := ParseModes("-modes", "no-mesh,both")
	if err != nil {
		t.Fatal(err)
	}
	d := 5 * time.Second
	out, err := quick.Apply(Overrides{Connections: conn, QPS: qps, Modes: ms, Duration: &d})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Connections, []int{8, 16}) || !reflect.DeepEqual(out.QPS, []int{500}) ||
		!reflect.DeepEqual(out.Modes, []Mode{NoMesh, BothSidecars}) || out.Duration.D() != d {
		t.Errorf("overlaid = %+v", out)
	}
	if out.Warmup.D() != time.Second {
		t.Errorf("warm-up %v: quick's 5s does not fit in 5s, want the default 1s", out.Warmup.D())
	}
	if quick.Connections[0] != 4 || quick.Duration.D() != 25*time.Second {
		t.Errorf("Apply changed the original: %+v", quick)
	}
	conn[0] = 99
	if out.Connections[0] != 8 {
		t.Error("Apply kept a reference to the caller's slice")
	}
}

func TestApplyErrorsNameFlags(t *testing.T) {
	quick := mustGet(t, "quick")
	w := 30 * time.Second
	zero := 0
	cases := []struct {
		o    Overrides
		want string
	}{
		{Overrides{Connections: []int{4, 0}}, "flag -conn: connections[1]: must be at least 1, got 0"},
		{Overrides{QPS: []int{-1}}, "flag -qps: qps[0]: must be at least 0, got -1"},
		{Overrides{Warmup: &w}, "flag -warmup: warmup: must be shorter than duration (25s), got 30s"},
		{Overrides{Repetitions: &zero}, "flag -repetitions: repetitions: must be 1 to 100, got 0"},
	}
	for _, c := range cases {
		_, err := quick.Apply(c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("Apply(%+v) = %v\nwant %s", c.o, err, c.want)
		}
	}
}

func TestParseListErrors(t *testing.T) {
	cases := []struct {
		fn   func() error
		want string
	}{
		{func() error { _, err := ParseIntList("-conn", "4,,8"); return err }, "flag -conn: item 2 is empty"},
		{func() error { _, err := ParseIntList("-qps", "1k"); return err }, `flag -qps: item 1 ("1k"): not a whole number`},
		{func() error { _, err := ParseIntList("-qps", " "); return err }, "flag -qps: empty list"},
		{func() error { _, err := ParseModes("-modes", "no-mesh,sidecarless"); return err },
			`flag -modes: item 2 ("sidecarless"): not one of no-mesh, server-sidecar, client-sidecar, both-sidecars, ambient, ambient-waypoint, ambient-ztunnel, ambient-waypoint-ztunnel`},
		{func() error { _, err := ParseProtocol("-protocol", "udp"); return err }, `flag -protocol: "udp" is not one of http, h2, grpc, tcp`},
	}
	for _, c := range cases {
		if err := c.fn(); err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	if p, err := ParseProtocol("-protocol", "H2"); err != nil || p != H2 {
		t.Errorf("ParseProtocol(H2) = %v, %v", p, err)
	}
}
