package topology

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

// TestBadFiles checks every testdata/*.bad.yaml is refused with the one-line
// error its first line announces ("# want: ...").
func TestBadFiles(t *testing.T) {
	testutil.BadFiles(t, "testdata/*.bad.yaml", 40, func(name string, data []byte) error {
		_, err := Parse(data, name)
		return err
	})
}

func mustLoad(t *testing.T, path string) *Topology {
	t.Helper()
	top, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// TestEveryField reads a file that sets every field to something other
// than its default, and checks each arrived with isotope's meaning.
func TestEveryField(t *testing.T) {
	top := mustLoad(t, "testdata/every-field.yaml")
	if top.Name != "every-field" {
		t.Errorf("Name = %q", top.Name)
	}
	d := top.Defaults
	if d.Type != GRPC || d.NumReplicas != 3 || d.ErrorRate != 0.005 || d.ResponseSize != 2048 || d.RequestSize != 100 {
		t.Errorf("defaults = %+v", d)
	}
	if len(d.Script) != 1 || d.Script[0].Sleep != time.Millisecond {
		t.Errorf("defaults.script = %+v", d.Script)
	}
	gw, ok := top.Service("gateway")
	if !ok {
		t.Fatal("no gateway")
	}
	if gw.Namespace != "edge" || gw.Cluster != "east" || gw.Type != HTTP || gw.NumReplicas != 2 || !gw.IsEntrypoint ||
		gw.ErrorRate != 0.001 || gw.ResponseSize != 1572864 || gw.Labels["version"] != "v2" {
		t.Errorf("gateway = %+v", gw)
	}
	want := Script{
		{Sleep: 1500 * time.Millisecond},
		{Call: &Call{Service: "orders", Hostname: "orders:8080", Size: 100}},
		{Call: &Call{Service: "orders", Hostname: "orders.shop.svc.cluster.local:8080", ExtraHeader: map[string]string{"x-tenant": "blue"}, Size: 16384, Probability: 25}},
		{Concurrent: []Step{
			{Call: &Call{Service: "users", Hostname: "users:8080", Size: 100}},
			{Sleep: 250 * time.Microsecond},
			{Call: &Call{Service: "users", Hostname: "users:8080", Size: 0}},
		}},
	}
	if !reflect.DeepEqual(gw.Script, want) {
		t.Errorf("gateway.script =\n%s\nwant\n%s", dump(gw.Script), dump(want))
	}
	orders, _ := top.Service("orders")
	if orders.Type != GRPC || orders.NumReplicas != 3 || orders.ErrorRate != 0.005 || orders.ResponseSize != 2048 ||
		!reflect.DeepEqual(orders.Script, d.Script) || orders.IsEntrypoint {
		t.Errorf("orders did not take the defaults: %+v", orders)
	}
	if users, _ := top.Service("users"); len(users.Script) != 0 {
		t.Errorf("users set script: [] and got %+v", users.Script)
	}
	wantIgnored := []string{"defaults.computeUsage", "services[0] (gateway).memoryUsage", "services[1] (orders).numRbacPolicies"}
	if !reflect.DeepEqual(top.Ignored, wantIgnored) {
		t.Errorf("Ignored = %q, want %q", top.Ignored, wantIgnored)
	}
	if top.Pods() != 2+3+3 {
		t.Errorf("Pods = %d", top.Pods())
	}
}

func dump(s Script) string {
	var b strings.Builder
	for _, st := range s {
		fmt.Fprintf(&b, "%+v", st)
		if st.Call != nil {
			fmt.Fprintf(&b, " call=%+v", *st.Call)
		}
		for _, c := range st.Concurrent {
			if c.Call != nil {
				fmt.Fprintf(&b, " [call=%+v]", *c.Call)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestBuiltInDefaults: a file that sets nothing but names gets isotope's
// built-in defaults: http, one replica, no errors, empty answers.
func TestBuiltInDefaults(t *testing.T) {
	top, err := Parse([]byte("services:\n- name: a\n  isEntrypoint: true\n  script:\n  - call: b\n- name: b\n"), "min.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range top.Services {
		if s.Type != HTTP || s.NumReplicas != 1 || s.ErrorRate != 0 || s.ResponseSize != 0 || s.Namespace != "" || s.Labels != nil {
			t.Errorf("%s = %+v", s.Name, s)
		}
	}
	if c := top.Services[0].Script[0].Call; c.Size != 0 || c.Hostname != "b:8080" || c.Probability != 0 {
		t.Errorf("call = %+v", c)
	}
	if len(top.Ignored) != 0 {
		t.Errorf("Ignored = %q", top.Ignored)
	}
}

// TestDefaultsScriptCallsTakeRequestSize: isotope's code parses
// defaults.script before it sets defaults.requestSize, leaving those calls
// at 0 bytes; here requestSize is every call's size, as documented.
func TestDefaultsScriptCallsTakeRequestSize(t *testing.T) {
	top, err := Parse([]byte("defaults:\n  script:\n  - call: leaf\n  requestSize: 1 KB\nservices:\n- name: a\n  isEntrypoint: true\n- name: leaf\n  script: []\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c := top.Services[0].Script[0].Call; c == nil || c.Size != 1024 {
		t.Errorf("a's call from defaults.script = %+v, want 1024 bytes", c)
	}
}

func TestSizes(t *testing.T) {
	cases := map[string]int64{
		`0`: 0, `128`: 128, `"128"`: 128, `"128B"`: 128, `"128 b"`: 128,
		`"1 KB"`: 1024, `"1KB"`: 1024, `"1 KiB"`: 1024, `"1kib"`: 1024, `"1k"`: 1024, `"1K"`: 1024,
		`"16mb"`: 16 << 20, `"2 GiB"`: 2 << 30, `"1 TB"`: 1 << 40, `"1p"`: 1 << 50,
		`"1.5 KB"`: 1536, `"0.5"`: 0, `" 2 KB "`: 2048,
	}
	for in, want := range cases {
		var got int64
		if err := decodeSize([]byte(in), &got); err != nil || got != want {
			t.Errorf("size %s = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{`-1`, `"-1 KB"`, `"1 KBB"`, `"1  KB"`, `"KB"`, `"1 ib"`, `"1 kibb"`, `"1 E"`, `1.5`, `"1e3"`, `true`, `null`, `"9999999 PB"`, `{}`} {
		var got int64
		if err := decodeSize([]byte(in), &got); err == nil {
			t.Errorf("size %s accepted as %d", in, got)
		}
	}
}

func TestPercentages(t *testing.T) {
	cases := map[string]float64{
		`0`: 0, `1`: 1, `0.25`: 0.25, `"0%"`: 0, `"100%"`: 1, `"0.01%"`: 0.0001, `"5%"`: 0.05, `" 5 %"`: 0.05,
	}
	for in, want := range cases {
		var got float64
		if err := decodePercentage([]byte(in), &got); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("percentage %s = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{`-0.1`, `1.01`, `5`, `"5"`, `"101%"`, `"-1%"`, `"NaN%"`, `"5%x"`, `"%"`, `null`, `true`, `[]`} {
		var got float64
		if err := decodePercentage([]byte(in), &got); err == nil {
			t.Errorf("percentage %s accepted as %v", in, got)
		}
	}
}

func TestErrorEvery(t *testing.T) {
	cases := []struct {
		rate float64
		want int64
	}{
		{0, 0},
		{1, 1},
		{0.5, 2},
		{0.1, 10},
		{0.03, 33},       // 10000/300, in whole requests
		{0.0001, 10000},  // 0.01%: isotope's smallest step
		{0.00015, 10000}, // floor(1.5) = 1 step, as isotope
		{0.00005, 20000}, // below the step: isotope divides by zero
		{0.0000001, 1e7}, // one in ten million
		{1e-300, math.MaxInt64},
	}
	for _, c := range cases {
		if got := (Service{ErrorRate: c.rate}).ErrorEvery(); got != c.want {
			t.Errorf("ErrorEvery(%v) = %d, want %d", c.rate, got, c.want)
		}
	}
}
