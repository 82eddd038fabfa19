package scenario

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExpandOrderAndLabels(t *testing.T) {
	s, err := Parse("m.yaml", []byte(`
connections: [2, 8]
qps: [100, 0]
modes: [no-mesh, both-sidecars]
repetitions: 2
duration: 10s
cooldown: 1s
payloadSize: 512
`))
	if err != nil {
		t.Fatal(err)
	}
	specs := s.Expand()
	if len(specs) != 16 {
		t.Fatalf("%d runs, want 2 reps x 2 modes x 2 conn x 2 qps = 16", len(specs))
	}
	var got []string
	for _, r := range specs[:8] {
		got = append(got, r.Label("ab12"))
	}
	want := []string{
		"ab12_qps_100_c_2_512_baseline", "ab12_qps_max_c_2_512_baseline",
		"ab12_qps_100_c_8_512_baseline", "ab12_qps_max_c_8_512_baseline",
		"ab12_qps_100_c_2_512_both", "ab12_qps_max_c_2_512_both",
		"ab12_qps_100_c_8_512_both", "ab12_qps_max_c_8_512_both",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("labels\n got %q\nwant %q", got, want)
	}
	for i, r := range specs {
		if r.Index != i || r.Total != 16 || r.Repetition != 1+i/8 {
			t.Errorf("run %d: index %d total %d repetition %d", i, r.Index, r.Total, r.Repetition)
		}
		if r.MTLS != (r.Mode == BothSidecars) {
			t.Errorf("run %d (%s): MTLS %v; mTLS applies to both-sidecars only", i, r.Mode, r.MTLS)
		}
	}
	if d := s.EstimatedDuration(); d != 16*11*time.Second {
		t.Errorf("EstimatedDuration = %v, want 16 x 11s", d)
	}
	if d := Remaining(specs, 15); d != 11*time.Second {
		t.Errorf("Remaining(last) = %v", d)
	}
	if d := Remaining(specs, 99); d != 0 {
		t.Errorf("Remaining(past end) = %v", d)
	}
}

func TestModeLabels(t *testing.T) {
	want := map[Mode]string{NoMesh: "baseline", ServerSidecar: "serveronly", ClientSidecar: "clientonly", BothSidecars: "both"}
	for m, l := range want {
		if m.IstioLabel() != l {
			t.Errorf("%s -> %s, want %s", m, m.IstioLabel(), l)
		}
		c, s := m.Sidecars()
		if (c || s) != (m != NoMesh) {
			t.Errorf("%s sidecars client=%v server=%v", m, c, s)
		}
	}
}

func TestLoadArgs(t *testing.T) {
	r := RunSpec{QPS: 1000, Connections: 4, Duration: 25 * time.Second, Timeout: 3 * time.Second, Protocol: GRPC, PayloadSize: 1024}
	got := strings.Join(r.LoadArgs("L", "/tmp/x.json"), " ")
	want := "-qps 1000 -c 4 -t 25s -timeout 3s -jitter=false -uniform=false -p 50,60,70,75,80,85,90,92.5,95,96.25,97.5,98.5,99,99.25,99.5,99.75,99.9,99.925,99.95,99.975,99.99 -labels L -json /tmp/x.json -quiet -grpc -ping -payload-size 1024"
	if got != want {
		t.Errorf("LoadArgs\n got %s\nwant %s", got, want)
	}
	r.Protocol = HTTP
	if a := strings.Join(r.LoadArgs("L", "-"), " "); strings.Contains(a, "payload") || r.EchoPath() != "/echo?size=1024" {
		t.Errorf("http args %q path %q: the size belongs in the echo query", a, r.EchoPath())
	}
}
