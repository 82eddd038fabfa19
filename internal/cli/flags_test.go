package cli

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// Every command refuses a value out of range while parsing its flags: exit
// 2, one line on stderr naming the flag, nothing started.
func TestBadValuesAreUsageErrorsEverywhere(t *testing.T) {
	commands := map[string]func([]string, io.Writer, io.Writer) int{
		"load": Load, "server": Server, "pilot": Pilot, "cpload": Cpload, "lab": Lab, "get": Get, "apply": Apply,
	}
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"cpload", []string{"run", "-proxies", "-1"}, `"-1" for flag -proxies: must be 0 or more`},
		{"cpload", []string{"run", "-shape", "uniform", "-services", "-5"}, "flag -services: must be 0 or more"},
		{"cpload", []string{"run", "-namespaces", "-1"}, "flag -namespaces"},
		{"cpload", []string{"run", "-replicas", "x"}, "flag -replicas: not a whole number"},
		{"cpload", []string{"run", "-connect-rate", "-5"}, "flag -connect-rate: must be 0 or more, or -1"},
		{"cpload", []string{"run", "-proxies-per-conn", "0"}, "flag -proxies-per-conn: must be 1 or more"},
		{"cpload", []string{"run", "-push-throttle", "-1"}, "flag -push-throttle"},
		{"cpload", []string{"run", "-rate", "NaN"}, "flag -rate: not a number"},
		{"cpload", []string{"run", "-duration", "-1s"}, "flag -duration: must not be negative"},
		{"cpload", []string{"run", "-target", "127.0.0.1:99999"}, `port "99999" is not a number from 0 to 65535`},
		{"cpload", []string{"run", "-metrics-url", "ftp://x/metrics"}, "flag -metrics-url: want an http:// or https:// URL"},
		{"cpload", []string{"lab", "-reps", "-1"}, "flag -reps: must be 1 or more"},
		{"load", []string{"-c", "-1", "http://127.0.0.1:1/"}, "flag -c: must be 1 or more"},
		{"load", []string{"-qps", "-5", "http://127.0.0.1:1/"}, "flag -qps: must be 0 or more, or -1"},
		{"load", []string{"-n", "-1", "http://127.0.0.1:1/"}, "flag -n"},
		{"load", []string{"-payload-size", "-1", "http://127.0.0.1:1/"}, "flag -payload-size"},
		{"load", []string{"-t", "-1s", "http://127.0.0.1:1/"}, "flag -t: must not be negative"},
		{"server", []string{"-http-port", "99999"}, `flag -http-port: port "99999" is not a number from 0 to 65535`},
		{"server", []string{"-grpc-port", "-1"}, "flag -grpc-port"},
		{"server", []string{"-tcp-port", "127.0.0.1:abc"}, "flag -tcp-port"},
		{"server", []string{"-maxpayloadsizekb", "-1"}, "flag -maxpayloadsizekb: must be from 0 to 1048576"},
		{"pilot", []string{"-grpcAddr", "127.0.0.1:99999"}, "flag -grpcAddr"},
		{"pilot", []string{"-httpAddr", ""}, "--httpAddr: an address is required, e.g. 127.0.0.1:15016"},
		{"pilot", []string{"-monitoringAddr", "nocolon"}, "flag -monitoringAddr: want host:port"},
		{"pilot", []string{"-pushThrottle", "-1"}, "flag -pushThrottle: must be 0 or more"},
		{"pilot", []string{"-maxRequestsPerSecond", "-1"}, "flag -maxRequestsPerSecond"},
		{"lab", []string{"run", "-conn", "-1"}, "-conn"},
		{"lab", []string{"run", "-qps", "-5"}, "-qps"},
		{"lab", []string{"run", "-size", "-1"}, "-size"},
		{"get", []string{"--server", "http://127.0.0.1:99999", "services"}, `port "99999"`},
		{"apply", []string{"--server", "http://127.0.0.1:70000", "-f", "-"}, `port "70000"`},
	} {
		t.Run(tc.cmd+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := commands[tc.cmd](tc.args, &stdout, &stderr)
			if code != exitBadInput {
				t.Errorf("exit %d, want %d", code, exitBadInput)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q; want nothing", stdout.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "meshperf "+tc.cmd) || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q; want one line from meshperf %s mentioning %q", msg, tc.cmd, tc.want)
			}
		})
	}
}

func TestFlagTypesKeepGoodValuesAndDefaults(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		n     int
		calls int64
		qps   float64
		d     time.Duration
		port  string
		url   string
		kb    int
	)
	countVar(fs, &n, "n", 7, "")
	positiveVar(fs, &calls, "calls", 1, "")
	rateVar(fs, &qps, "qps", 8, "", -1)
	durationVar(fs, &d, "t", 5*time.Second, "")
	addrVar(fs, &port, "port", "8080", fortioPort, "")
	urlVar(fs, &url, "url", "")
	intVar(fs, &kb, "kb", 256, 0, 1024, "")
	if n != 7 || calls != 1 || qps != 8 || d != 5*time.Second || port != "8080" || kb != 256 {
		t.Fatalf("defaults not set: %v %v %v %v %q %v", n, calls, qps, d, port, kb)
	}
	err := fs.Parse([]string{"-n", "0", "-calls", "3", "-qps", "-1", "-t", "0s", "-port", "disabled", "-url", "https://h:443/x", "-kb", "1024"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || calls != 3 || qps != -1 || d != 0 || port != "disabled" || url != "https://h:443/x" || kb != 1024 {
		t.Errorf("parsed %v %v %v %v %q %q %v", n, calls, qps, d, port, url, kb)
	}
	for _, good := range []string{"0", "65535", ":8080", "127.0.0.1:0", "[::1]:9", "/tmp/echo.sock"} {
		if err := checkAddr(good, fortioPort); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	for _, bad := range []string{"", "65536", "-1", "host:", "host:http", "[::1]"} {
		if err := checkAddr(bad, hostPort); err == nil {
			t.Errorf("%q accepted as host:port", bad)
		}
	}
}

// A value refused leaves the destination as it was (nothing half-applied).
func TestRefusedValueLeavesDefault(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var n int
	var q float64
	countVar(fs, &n, "n", 5, "")
	rateVar(fs, &q, "q", 2, "")
	if fs.Parse([]string{"-n", "-3"}) == nil || n != 5 {
		t.Errorf("-n -3: n = %d, want the default 5 and an error", n)
	}
	if fs.Parse([]string{"-q", "-1"}) == nil || q != 2 {
		t.Errorf("-q -1 without -1 as a special value: q = %v, want 2 and an error", q)
	}
}
