package results

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// A result written by Fortio itself: uncorrected, no p99.99 asked for.
func TestReadFortioFile(t *testing.T) {
	r, err := ReadFortioFile("testdata/fortio-http.json")
	if err != nil {
		t.Fatal(err)
	}
	if r.Connections != 2 || r.RequestedQPS != 100 || !near(r.ActualQPS, 99.95156736856433) ||
		r.Duration != 2000969122*time.Nanosecond || r.Calls != 200 || r.Errors != 0 || r.ErrorPercent != 0 {
		t.Errorf("run = %+v", r)
	}
	if r.Corrected {
		t.Error("Fortio's own result marked corrected")
	}
	if len(r.Codes) != 1 || r.Codes["200"] != 200 {
		t.Errorf("codes %v, want 200 calls answered 200", r.Codes)
	}
	if !near(r.Latency.P50, 0.5475658375634517) || !near(r.Latency.P99, 1.0) || r.ResponseSize != 1142 {
		t.Errorf("p50 %v p99 %v size %v", r.Latency.P50, r.Latency.P99, r.ResponseSize)
	}
	if math.IsNaN(r.Latency.P9999) || r.Latency.P9999 < r.Latency.P999 || r.Latency.P9999 > r.Latency.Max {
		t.Errorf("interpolated p99.99 %v outside [p99.9 %v, max %v]", r.Latency.P9999, r.Latency.P999, r.Latency.Max)
	}
	if r.Protocol != "http" || r.Provenance.Meshperf.Version != "fortio 1.75.3-0.20260710012006-45e18710810d" {
		t.Errorf("protocol %q, measured by %q; want http, fortio and its version", r.Protocol, r.Provenance.Meshperf.Version)
	}
	if r.FortioJSON != "testdata/fortio-http.json" || r.StartTime.Year() != 2026 {
		t.Errorf("path %q start %v", r.FortioJSON, r.StartTime)
	}
	if !math.IsNaN(r.SendDelayP99) {
		t.Errorf("Fortio's result has a send delay %v ms; it has no SendDelayHistogram, want NaN", r.SendDelayP99)
	}
}

// A result meshperf load wrote (-qps 200 -c 2 -t 1s -p 50,90,99): its
// send delay's P99, seconds in the file, in ms.
func TestReadMeshperfFileSendDelay(t *testing.T) {
	r, err := ReadFortioFile("testdata/meshperf-http.json")
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.SendDelayP99, 1.236991) || !r.Corrected || r.Calls != 200 {
		t.Errorf("send delay P99 %v ms, corrected %v, %d calls; want 1.236991 ms, true, 200", r.SendDelayP99, r.Corrected, r.Calls)
	}
	// Only a listed P99 counts: the buckets are not interpolated.
	js := `{"ActualDuration":1e9,"DurationHistogram":{"Count":3},"ServiceTimeHistogram":{"Count":3},
	"SendDelayHistogram":{"Count":3,"Min":0,"Max":0.002,"Data":[{"Start":0,"End":0.002,"Percent":100,"Count":3}],
	  "Percentiles":[{"Percentile":50,"Value":0.001},{"Percentile":99.9,"Value":0.002}]}}`
	if r, err := FromFortioJSON([]byte(js)); err != nil || !math.IsNaN(r.SendDelayP99) {
		t.Errorf("send delay without a listed P99: %v, %v; want NaN", r.SendDelayP99, err)
	}
}

func TestFromFortioJSONSynthetic(t *testing.T) {
	// 1000 calls, 50 errors; buckets 0-1 ms holding 90%, 1-2 ms the rest,
	// so p99.99 interpolates to 1 + (99.99-90)/10 = 1.999 ms.
	js := `{"RunType":"HTTP","Labels":"x_qps_max_c_4_1024_both","RequestedQPS":"max","ActualQPS":2000,
	"ActualDuration":5000000000,"NumThreads":4,"CoordinatedOmissionCorrected":true,
	"DurationHistogram":{"Count":1000,"Min":0.0001,"Max":0.002,"Avg":0.0006,
	  "Data":[{"Start":0,"End":0.001,"Percent":90,"Count":900},{"Start":0.001,"End":0.002,"Percent":100,"Count":100}],
	  "Percentiles":[{"Percentile":50,"Value":0.0005},{"Percentile":90,"Value":0.001}]},
	"ErrorsDurationHistogram":{"Count":50}}`
	r, err := FromFortioJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestedQPS != 0 || !r.Corrected || r.Errors != 50 || r.ErrorPercent != 5 || r.Connections != 4 {
		t.Errorf("run = %+v", r)
	}
	if !near(r.Latency.P50, 0.5) || !near(r.Latency.P9999, 1.999) || !near(r.Latency.P99, 1.9) || !near(r.Latency.Min, 0.1) {
		t.Errorf("latency = %+v", r.Latency)
	}
	// The spectrum: exact where the result has the percentile (P50, P90),
	// interpolated in the buckets elsewhere (P95: 1 + (95-90)/10 ms).
	if len(r.Spectrum) != len(SpectrumPercentiles) {
		t.Fatalf("spectrum has %d points, want %d", len(r.Spectrum), len(SpectrumPercentiles))
	}
	for _, want := range []PercentileValue{{50, 0.5}, {90, 1}, {95, 1.5}, {99.99, 1.999}} {
		i := slices.IndexFunc(r.Spectrum, func(pv PercentileValue) bool { return pv.Percentile == want.Percentile })
		if i < 0 || !near(r.Spectrum[i].Ms, want.Ms) {
			t.Errorf("spectrum %v: want P%v = %v ms", r.Spectrum, want.Percentile, want.Ms)
		}
	}
	// The histogram, in ms, bucket for bucket.
	if want := []HistogramBucket{{0, 1, 900}, {1, 2, 100}}; !reflect.DeepEqual(r.Histogram, want) {
		t.Errorf("histogram = %v, want %v", r.Histogram, want)
	}
	if _, err := FromFortioJSON([]byte(`{"foo":1}`)); err == nil {
		t.Error("accepted a JSON that is not a load result")
	}
	if _, err := FromFortioJSON([]byte(`{"RequestedQPS":"fast","ActualDuration":1}`)); err == nil {
		t.Error("accepted RequestedQPS \"fast\"")
	}
}

func TestPerProxyFigures(t *testing.T) {
	r := Run{ActualQPS: 500, Processes: []Process{
		{Role: RoleClientSidecar, VCPU: 0.10, RSSMB: 20},
		{Role: RoleServerSidecar, VCPU: 0.06, RSSMB: 30},
		{Role: RoleClientApp, VCPU: 0.5, RSSMB: 100},
	}}
	// mean sidecar 0.08 vCPU at 0.5 k rps = 0.16 vCPU per 1000 rps; 25 MB.
	if v := r.VCPUPer1000RPS(); !near(v, 0.16) {
		t.Errorf("vCPU per 1000 rps = %v, want 0.16", v)
	}
	if mb, n := r.SidecarRSSMB(); mb != 25 || n != 2 {
		t.Errorf("MB per proxy = %v over %d", mb, n)
	}
	if v := (Run{ActualQPS: 500}).VCPUPer1000RPS(); !math.IsNaN(v) {
		t.Errorf("no sidecar: %v, want NaN", v)
	}
}

// Nighthawk's --output-format fortio: the same names through protobuf's
// JSON mapping (RequestedQPS a number, 64-bit counts as strings,
// ActualDuration a double), no error histogram and only 2xx answers
// counted. The file is written by hand in that shape.
func TestReadNighthawkFortioFile(t *testing.T) {
	r, err := ReadFortioFile("testdata/nighthawk-fortio.json")
	if err != nil {
		t.Fatal(err)
	}
	if r.RequestedQPS != 500 || r.ActualQPS != 499.5 || r.Connections != 4 ||
		r.Duration != 10010010010*time.Nanosecond || r.Calls != 5000 {
		t.Errorf("run = %+v", r)
	}
	if r.Errors != 10 || !near(r.ErrorPercent, 0.2) || r.Codes["200"] != 4990 || r.Corrected {
		t.Errorf("errors %d (%v%%), codes %v, corrected %v; want the 10 calls not answered 2xx", r.Errors, r.ErrorPercent, r.Codes, r.Corrected)
	}
	if !near(r.Latency.P50, 0.4) || !near(r.Latency.P99, 1) || !near(r.Latency.Max, 4) || !near(r.Latency.Avg, 0.45) {
		t.Errorf("latency = %+v", r.Latency)
	}
	if r.Provenance.Meshperf.Version != "nighthawk 0.5.0" || r.Protocol != "http" {
		t.Errorf("measured by %q over %q, want nighthawk 0.5.0 over http", r.Provenance.Meshperf.Version, r.Protocol)
	}
	if r.ResponseSize != 1024 || r.StartTime != time.Date(2026, 11, 25, 9, 30, 0, 125e6, time.UTC) {
		t.Errorf("size %v start %v", r.ResponseSize, r.StartTime)
	}
	if !math.IsNaN(r.SendDelayP99) {
		t.Errorf("Nighthawk's result has a send delay %v ms, want NaN", r.SendDelayP99)
	}
	// Its experimental_fortio_pedantic form writes RequestedQPS as a string
	// and the counts as numbers, as Fortio does.
	pedantic := `{"RequestedQPS":"500","ActualDuration":1e9,"DurationHistogram":{"Count":3},"RetCodes":{"200":3}}`
	if r, err := FromFortioJSON([]byte(pedantic)); err != nil || r.RequestedQPS != 500 || r.Calls != 3 || r.Errors != 0 {
		t.Errorf("pedantic form: run %+v, err %v", r, err)
	}
	// meshperf's load generator writes ServiceTimeHistogram; its results
	// are not another tool's, and the lab fills their provenance.
	own := `{"ActualDuration":1e9,"Version":"v0.9.0","DurationHistogram":{"Count":3},"ServiceTimeHistogram":{"Count":3}}`
	if r, err := FromFortioJSON([]byte(own)); err != nil || r.Provenance != (Provenance{}) {
		t.Errorf("meshperf's own result: provenance %+v, err %v; want none", r.Provenance, err)
	}
	if _, err := FromFortioJSON([]byte(`{"ActualDuration":1,"DurationHistogram":{"Count":"many"}}`)); err == nil {
		t.Error("a count that is not a number was accepted")
	}
}
