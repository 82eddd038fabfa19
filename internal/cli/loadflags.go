package cli

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// loadFlags are `meshperf load`'s flags, with Fortio's names, defaults and
// meanings so that scripts written for `fortio load` run unchanged.
type loadFlags struct {
	qps                float64
	connections        int
	duration           time.Duration
	exactly            int64
	uniform            bool
	jitter             bool
	noCatchUp          bool
	percentiles        string
	jsonPath           string
	labels             string
	headers            stringsFlag
	payload            string
	payloadSize        int
	payloadFile        string
	contentType        string
	method             string
	timeout            time.Duration
	keepAlive          bool
	http10             bool
	h2                 bool
	abortOn            int
	allowInitialErrors bool
	insecure           bool
	caCert, cert, key  string
	grpc               bool
	ping               bool
	streams            int
	healthService      string
	pingDelay          time.Duration
	runID              int64
	quiet              bool
	// The mesh the target is behind, which the load generator cannot see
	// (-mesh-name, -mesh-version), or a whole provenance object from a
	// caller that knows more (-provenance, what meshperf lab passes).
	meshName, meshVersion string
	provenance            string
	publish               publishFlags
	sweep                 sweepFlags
}

func (f *loadFlags) define(fs *flag.FlagSet) {
	f.defineQPS(fs)
	positiveVar(fs, &f.connections, "c", 4, "number of connections")
	durationVar(fs, &f.duration, "t", 5*time.Second, "how long to run; 0 runs until interrupted")
	countVar(fs, &f.exactly, "n", 0, "run exactly this many calls instead of for a duration")
	fs.BoolVar(&f.uniform, "uniform", false, "spread the connections' requests evenly instead of starting them together")
	fs.BoolVar(&f.jitter, "jitter", false, "move each request by up to ±10% of a connection's period")
	fs.BoolVar(&f.noCatchUp, "nocatchup", false, "skip requests that are late instead of sending them as soon as a connection is free")
	fs.StringVar(&f.percentiles, "p", "50,75,90,99,99.9", "comma-separated `percentiles` to report")
	fs.StringVar(&f.jsonPath, "json", "", "write the JSON result to this `file` (- for standard output)")
	fs.StringVar(&f.labels, "labels", "", "labels for the result (default: the target and this host's name)")
	fs.Var(&f.headers, "H", "add a request header `Name: value` (repeatable)")
	fs.StringVar(&f.payload, "payload", "", "request body (HTTP: switches to POST), or the TCP echo payload")
	countVar(fs, &f.payloadSize, "payload-size", 0, "send this many random `bytes` instead of -payload")
	fs.StringVar(&f.payloadFile, "payload-file", "", "send this `file`'s contents instead of -payload")
	fs.StringVar(&f.contentType, "content-type", "", "Content-Type of the request (switches to POST)")
	fs.StringVar(&f.method, "X", "", "HTTP `method` instead of GET/POST")
	durationVar(fs, &f.timeout, "timeout", 3*time.Second, "connect and request timeout")
	fs.BoolVar(&f.keepAlive, "keepalive", true, "reuse connections (HTTP/1.x); -keepalive=false opens one per request")
	fs.BoolVar(&f.http10, "http1.0", false, "speak HTTP/1.0")
	fs.BoolVar(&f.h2, "h2", false, "speak HTTP/2: over TLS with ALPN for https://, cleartext h2c for http://")
	fs.IntVar(&f.abortOn, "abort-on", 0, "stop the run when a call returns this `code` (-1: socket error)")
	fs.BoolVar(&f.allowInitialErrors, "allow-initial-errors", false, "keep going when a connection's warm-up call fails")
	fs.BoolVar(&f.insecure, "k", false, "do not verify the server's certificate")
	fs.BoolVar(&f.insecure, "https-insecure", false, "same as -k")
	fs.StringVar(&f.caCert, "cacert", "", "trust the CAs in this PEM `file` instead of the system's")
	fs.StringVar(&f.cert, "cert", "", "client certificate PEM `file`, for mutual TLS")
	fs.StringVar(&f.key, "key", "", "client private key PEM `file`, for mutual TLS")
	fs.BoolVar(&f.grpc, "grpc", false, "gRPC load: the grpc.health.v1 Check of TARGET (host:port)")
	fs.BoolVar(&f.ping, "ping", false, "with -grpc: call the echo server's ping service instead of health")
	positiveVar(fs, &f.streams, "s", 1, "gRPC streams per connection")
	fs.StringVar(&f.healthService, "healthservice", "", "service name for the gRPC health check")
	durationVar(fs, &f.pingDelay, "grpc-ping-delay", 0, "with -ping: ask the server to delay each reply this long")
	fs.Int64Var(&f.runID, "runid", 0, "run id to put in the JSON result")
	fs.BoolVar(&f.quiet, "quiet", false, "no live status")
	fs.StringVar(&f.meshName, "mesh-name", "", "the mesh `name` the target is behind, e.g. istio, for the result's provenance (the load generator cannot see it; default none)")
	fs.StringVar(&f.meshVersion, "mesh-version", "", "that mesh's `version`, e.g. 1.24.0 (default: unknown)")
	fs.StringVar(&f.provenance, "provenance", "", "record this provenance `JSON` object instead of one from the flags (how meshperf lab passes what it knows of the mesh)")
	f.publish.define(fs)
}

// ignoredFortioFlags are Fortio flags that have no meaning for meshperf's load
// (its histogram needs no resolution, its client is always the fast one, ...).
// They are accepted, so that Fortio command lines work, and ignored with a notice.
var ignoredFortioFlags = map[string]bool{ // name -> takes a value
	"r": true, "a": false, "stdclient": false, "httpbufferkb": true, "connection-reuse": true,
	"sequential-warmup": false, "log-errors": false, "loglevel": true, "data-dir": true,
	"access-log-file": true, "access-log-format": true, "compression": false,
	"grpc-compression": false, "offset": true, "no-reresolve": false, "halfclose": false,
	"calc-qps": false, "gomaxprocs": true, "profile": true, "logger-json": false,
	"logger-no-color": false, "logger-force-color": false, "logger-timestamp": false,
	"logger-file-line": false, "logger-goroutine": false, "resolve-ip-type": true,
	"dns-method": true, "httpccch": false, "L": false, "user": true, "unix-socket": true,
	"resolve": true, "grpc-max-streams": true, "mtls": false, "stream": false,
	"grpc-method": true, "sync": true, "sync-interval": true,
}

// ignoredFlag accepts any value (or none) and records that it was given.
type ignoredFlag struct {
	name     string
	boolFlag bool
	seen     *[]string
}

func (f ignoredFlag) String() string     { return "" }
func (f ignoredFlag) IsBoolFlag() bool   { return f.boolFlag }
func (f ignoredFlag) Set(v string) error { *f.seen = append(*f.seen, f.name); return nil }

func defineIgnored(fs *flag.FlagSet, seen *[]string) {
	for name, takesValue := range ignoredFortioFlags {
		fs.Var(ignoredFlag{name: name, boolFlag: !takesValue, seen: seen}, name, ignoredFlagUsage)
	}
}

// parsePercentiles reads -p: a comma-separated list of numbers in (0, 100].
func parsePercentiles(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p), "p"))
		if p == "" {
			continue
		}
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return nil, fmt.Errorf("-p %q: %q is not a percentile between 0 and 100", s, p)
		}
		out = append(out, v)
	}
	return out, nil
}

// checkCombinations rejects flags that do not go together (each value
// alone was checked by its flag type).
func (f *loadFlags) checkCombinations() error {
	if f.ping && !f.grpc {
		return errors.New("-ping needs -grpc")
	}
	if f.provenance != "" && (f.meshName != "" || f.meshVersion != "") {
		return errors.New("-provenance names the mesh itself; give it without -mesh-name and -mesh-version")
	}
	if f.meshVersion != "" && f.meshName == "" {
		return errors.New("-mesh-version needs -mesh-name (the mesh it is the version of)")
	}
	if err := f.publish.check(); err != nil {
		return err
	}
	return f.checkSweep()
}

// body returns the request payload: -payload-file, else -payload-size random
// bytes, else -payload.
func (f *loadFlags) body() ([]byte, error) {
	switch {
	case f.payloadFile != "":
		b, err := os.ReadFile(f.payloadFile)
		if err != nil {
			return nil, fmt.Errorf("-payload-file: %w", err)
		}
		return b, nil
	case f.payloadSize > 0:
		b := make([]byte, f.payloadSize)
		_, _ = rand.Read(b)
		return b, nil
	default:
		return []byte(f.payload), nil
	}
}
