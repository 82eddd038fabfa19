package results

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCSVHeaderPinned(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, nil); err != nil {
		t.Fatal(err)
	}
	want := "Labels,StartTime,RequestedQPS,ActualQPS,NumThreads,RunType,ActualDuration,min,max,p50,p75,p90,p99,p999," +
		"cpu_mili_avg_istio_proxy_fortioclient,cpu_mili_avg_istio_proxy_fortioserver," +
		"mem_Mi_avg_istio_proxy_fortioclient,mem_Mi_avg_istio_proxy_fortioserver,errorPercent,Payload," +
		"p9999,vcpu_per_1k_rps_per_proxy,mb_per_proxy,co_corrected,mode,network,mtls,protocol,scenario,run_id,repetition,failed,failure_reason," +
		"meshperf_version,meshperf_commit,data_plane,data_plane_version,data_plane_commit," +
		"control_plane,control_plane_version,control_plane_commit,params_hash,labels,machine\n"
	if b.String() != want {
		t.Errorf("header\n got %s\nwant %s", b.String(), want)
	}
}

func TestCSVRow(t *testing.T) {
	runs := []Run{{
		RunID: "ab12", Label: "ab12_qps_1000_c_4_1024_both", Scenario: "quick", Mode: "both-sidecars",
		Protocol: "http", Repetition: 1, Connections: 4, RequestedQPS: 1000, ActualQPS: 999.6,
		Duration: 25*time.Second + 300*time.Millisecond, PayloadSize: 1024, MTLS: true,
		StartTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Network: "netns", Corrected: true,
		Latency:      Latency{Min: 0.05, Max: 3.2, P50: 0.3, P75: 0.35, P90: 0.4, P99: 0.9, P999: 1.5, P9999: 2.25},
		ErrorPercent: 0.5,
		Processes: []Process{
			{Role: RoleClientSidecar, VCPU: 0.1, RSSMB: 12.5},
			{Role: RoleServerSidecar, VCPU: 0.2, RSSMB: 13.5},
		},
		Provenance: Provenance{
			Meshperf:     Build{Version: "v0.3.0", Commit: "55537af7e2c35637efadad20dbd19787eb84170f", Modified: true},
			DataPlane:    Component{Name: "meshperf-proxy", Version: "0.1.0", Commit: "83dc9c3"},
			ControlPlane: Component{Name: "meshperf-pilot", Version: "v0.3.0", Commit: "55537af"},
			ParamsHash:   "0123456789abcdef", Labels: "before, the fix",
			Machine: Machine{Hostname: "lab1", CPUs: 2, CPUModel: "AMD EPYC", MemoryMB: 7950, Kernel: "Linux 6.1"},
		},
	}, {
		Label: "ab12_qps_max_c_4_1024_baseline", Mode: "no-mesh", Protocol: "tcp", Failed: true,
		FailureReason: "server exited, status 1", Latency: Latency{P50: math.NaN(), Min: math.NaN(), Max: math.NaN(),
			P75: math.NaN(), P90: math.NaN(), P99: math.NaN(), P999: math.NaN(), P9999: math.NaN()},
	}}
	var b bytes.Buffer
	if err := WriteCSV(&b, runs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	// 1000 qps of which each proxy: mean 0.15 vCPU / 0.9996 k rps = 0.15006.
	want1 := "ab12_qps_1000_c_4_1024_both,2026-01-02T03:04:05Z,1000,1000,4,HTTP,25,50,3200,300,350,400,900,1500," +
		"100,200,12.5,13.5,0.5,1024,2250,0.1501,13,true,both-sidecars,netns,true,http,quick,ab12,1,false,," +
		"v0.3.0,55537af7e2c35637efadad20dbd19787eb84170f-dirty,meshperf-proxy,0.1.0,83dc9c3," +
		"meshperf-pilot,v0.3.0,55537af,0123456789abcdef,\"before, the fix\",AMD EPYC/2cpu/8GiB"
	if lines[1] != want1 {
		t.Errorf("row 1\n got %s\nwant %s", lines[1], want1)
	}
	// A run without provenance (stored before it was recorded) leaves its columns empty.
	want2 := "ab12_qps_max_c_4_1024_baseline,0001-01-01T00:00:00Z,99999999,0,0,TCP,0,-,-,-,-,-,-,-," +
		"-,-,-,-,0,0,-,-,-,false,no-mesh,,false,tcp,,,0,true,\"server exited, status 1\",,,,,,,,,,,"
	if lines[2] != want2 {
		t.Errorf("row 2\n got %s\nwant %s", lines[2], want2)
	}
}

// A no-mesh run's data and control planes are "none": recorded, and absent.
func TestCSVNoMeshProvenance(t *testing.T) {
	r := Run{Mode: ModeNoMesh, Provenance: Provenance{Meshperf: Build{Version: "v0.3.0"}, ParamsHash: "00ff"}}
	var b bytes.Buffer
	if err := WriteCSV(&b, []Run{r}); err != nil {
		t.Fatal(err)
	}
	row := strings.Split(strings.TrimSpace(b.String()), "\n")[1]
	if want := ",v0.3.0,,none,,,none,,,00ff,,"; !strings.HasSuffix(row, want) {
		t.Errorf("row %s\nwant it to end %s", row, want)
	}
}
