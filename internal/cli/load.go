// Package cli holds meshperf's subcommands: each parses its flags into a struct,
// builds what it needs from the packages that do the work, and reports. Nothing
// here measures or serves anything itself.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/version"
	"github.com/meshperf/meshperf/pkg/loadgen"
	"github.com/meshperf/meshperf/pkg/loadgen/grpcload"
	"github.com/meshperf/meshperf/pkg/loadgen/httpload"
	"github.com/meshperf/meshperf/pkg/loadgen/tcpload"
)

// Load is `meshperf load [flags] TARGET`.
func Load(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(runLoad, args, stdout, stderr)
}

// protocolLoad is a prepared run of one protocol.
type protocolLoad interface {
	Runner() *loadgen.Runner
	run(ctx context.Context, d loadgen.Describe) (report, error)
}

// report is a finished run: its JSON value and what the text summary shows.
type report struct {
	json    any
	common  *loadgen.RunResult
	codes   map[string]int64
	sockets int
	details []string // protocol-specific summary lines
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf load", "[flags] TARGET",
		"TARGET is http://..., https://..., tcp://host:port, or host:port with -grpc.")
	var f loadFlags
	var ignored []string
	f.define(cmd.flags)
	defineIgnored(cmd.flags, &ignored)
	positional, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	f.noteGiven(cmd.flags)
	for _, name := range ignored {
		fmt.Fprintf(stderr, "meshperf load: -%s has no meaning here and is ignored\n", name)
	}
	if len(positional) != 1 {
		return cmd.exit(stderr, usagef("want exactly one TARGET, got %d", len(positional)))
	}
	target := positional[0]
	load, d, err := prepareLoad(&f, target)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if f.sweep.ranged {
		return runSweep(ctx, cmd, &f, target, stdout, stderr)
	}
	out := stdout
	if f.jsonPath == "-" {
		out = stderr // standard output carries the JSON
	}
	fmt.Fprintln(out, describeRun(&f, target))
	pub := f.publish.start("meshperf load", live.Opening{Source: live.SourceLoad, Target: target, Label: d.Labels}, stderr)
	standalone := pub != nil && f.publish.session == "" // in a lab's session, the lab starts and ends it
	if standalone {
		pub.Publish(progressEvent(live.KindStart, &f, progressSample{}))
	}
	stopProgress := startProgress(ctx, load.Runner(), &f, stderr, pub)
	rep, err := load.run(ctx, d)
	stopProgress()
	unanswered := false
	if err == nil && !f.allowInitialErrors {
		if none := load.Runner().Unanswered(); none != nil {
			err, unanswered = fmt.Errorf("%s: %w", target, none), true
		}
	}
	if standalone {
		pub.Publish(loadEndEvent(&f, load.Runner().Status(), err))
	}
	if pub != nil {
		pub.Close()
	}
	if err != nil && !unanswered {
		return cmd.exit(stderr, withRunHint(err))
	}
	// The result file is written before anything is printed, so that a reader
	// that goes away (| head) cannot cost the result. A run without a single
	// response still has one: its socket errors, under code -1.
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep.json, stdout); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	printSummary(out, rep, d.Percentiles)
	if f.jsonPath != "" && f.jsonPath != "-" {
		fmt.Fprintf(out, "JSON result written to %s\n", f.jsonPath)
	}
	if unanswered {
		return cmd.exit(stderr, withRunHint(err))
	}
	return exitOK
}

// withRunHint adds to a run's failure what the user can do about it.
func withRunHint(err error) error {
	if we := (*loadgen.WarmupError)(nil); errors.As(err, &we) {
		return fmt.Errorf("%w; -allow-initial-errors runs anyway and counts the errors", err)
	}
	if ne := (*loadgen.NoResponseError)(nil); errors.As(err, &ne) {
		return fmt.Errorf("%w; -allow-initial-errors accepts such a run", err)
	}
	return err
}

// loadEndEvent ends a load's live session: its final figures (the rate
// over the whole run), or why it failed.
func loadEndEvent(f *loadFlags, s loadgen.Status, err error) live.Event {
	p := progressSample{Status: s}
	if s.Elapsed > 0 {
		p.qps = float64(s.Calls) / s.Elapsed.Seconds()
	}
	if err != nil {
		e := progressEvent(live.KindError, f, p)
		e.Message = err.Error()
		return e
	}
	return progressEvent(live.KindEnd, f, p)
}

// prepareLoad turns the flags into a ready run, checking everything that can be
// checked before the network is touched.
func prepareLoad(f *loadFlags, target string) (protocolLoad, loadgen.Describe, error) {
	var d loadgen.Describe
	if err := f.checkCombinations(); err != nil {
		return nil, d, err
	}
	ps, err := parsePercentiles(f.percentiles)
	if err != nil {
		return nil, d, err
	}
	if f.sweep.ranged {
		ps = withSweepPercentiles(ps)
	}
	payload, err := f.body()
	if err != nil {
		return nil, d, err
	}
	prov, err := f.loadProvenance(target, ps, len(payload))
	if err != nil {
		return nil, d, err
	}
	d = loadgen.Describe{Labels: f.labels, Version: version.String(), Percentiles: ps, RunID: f.runID, Provenance: prov}
	if d.Labels == "" {
		host, _ := os.Hostname()
		d.Labels = strings.TrimPrefix(strings.TrimPrefix(target, "http://"), "https://") + " , " + host
	}
	lo := loadgen.Options{
		QPS: f.qps, Connections: f.connections, Duration: f.duration, Exactly: f.exactly,
		Uniform: f.uniform, Jitter: f.jitter, NoCatchUp: f.noCatchUp,
		AllowInitialErrors: f.allowInitialErrors, AbortOn: f.abortOn,
	}
	tlsOpts := loadgen.TLSOptions{Insecure: f.insecure, CACert: f.caCert, Cert: f.cert, Key: f.key}
	switch {
	case f.grpc:
		l, err := grpcload.New(grpcload.Options{
			Target: target, Ping: f.ping, Payload: payload, Headers: f.headers, PingDelay: f.pingDelay,
			HealthService: f.healthService, Streams: f.streams, Timeout: f.timeout, TLS: tlsOpts,
			UseTLS: f.insecure || f.caCert != "" || f.cert != "",
		}, lo)
		if err != nil {
			return nil, d, err
		}
		return grpcRun{l}, d, nil
	case strings.HasPrefix(target, "tcp://"):
		l, err := tcpload.New(tcpload.Options{Target: target, Payload: payload, Timeout: f.timeout}, lo)
		if err != nil {
			return nil, d, err
		}
		return tcpRun{l}, d, nil
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		l, err := httpload.New(httpload.Options{
			URL: target, Method: f.method, Headers: f.headers, Payload: payload,
			ContentType: f.contentType, HTTP10: f.http10, H2: f.h2,
			DisableKeepAlive: !f.keepAlive, Timeout: f.timeout, TLS: tlsOpts,
			UserAgent: "meshperf/" + version.String(),
		}, lo)
		if err != nil {
			return nil, d, err
		}
		return httpRun{l}, d, nil
	default:
		return nil, d, fmt.Errorf("target %q: want http://, https://, tcp://host:port, or host:port with -grpc", target)
	}
}

// httpRun adapts an HTTP load to the CLI's report.
type httpRun struct{ *httpload.Load }

func (h httpRun) run(ctx context.Context, d loadgen.Describe) (report, error) {
	r, err := h.Run(ctx, d)
	if err != nil {
		return report{}, err
	}
	codes := map[string]int64{}
	for c, n := range r.RetCodes {
		codes[fmt.Sprint(c)] = n
	}
	return report{
		json: r, common: &r.RunResult, codes: codes, sockets: r.SocketCount,
		details: []string{
			fmt.Sprintf("Response sizes: %s headers, %s in all (avg)",
				formatBytes(r.HeaderSizes.Avg), formatBytes(r.Sizes.Avg)),
		},
	}, nil
}

// tcpRun adapts a TCP load to the CLI's report.
type tcpRun struct{ *tcpload.Load }

func (t tcpRun) run(ctx context.Context, d loadgen.Describe) (report, error) {
	r, err := t.Run(ctx, d)
	if err != nil {
		return report{}, err
	}
	return report{
		json: r, common: &r.RunResult, codes: r.RetCodes, sockets: r.SocketCount,
		details: []string{fmt.Sprintf("Bytes sent: %d, received: %d", r.BytesSent, r.BytesReceived)},
	}, nil
}

// grpcRun adapts a gRPC load to the CLI's report.
type grpcRun struct{ *grpcload.Load }

func (g grpcRun) run(ctx context.Context, d loadgen.Describe) (report, error) {
	r, err := g.Run(ctx, d)
	if err != nil {
		return report{}, err
	}
	return report{json: r, common: &r.RunResult, codes: r.RetCodes, sockets: -1}, nil
}

// writeJSON writes v indented, to path or ("-") to stdout.
func writeJSON(path string, v any, stdout io.Writer) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JSON result: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing the JSON result: %w", err)
	}
	return nil
}
