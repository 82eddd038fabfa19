package perfcheck

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/meshperf/meshperf/internal/proc"
)

// command runs a tool perfcheck drives (go, cargo, git) through proc, the
// project's one process runner: in its own process group, so that stopping
// perfcheck (ctx cancelled) stops a benchmark binary the tool started too.
// Output goes to logPath when given (benchmark output can be long), else it
// is kept in memory (the last 64 KiB). It returns the output and an error
// naming the command and its last line when the command fails.
func command(ctx context.Context, dir, logPath, name string, args ...string) (string, error) {
	spec := proc.Spec{Name: name + " " + strings.Join(args, " "), Path: name, Args: args, Dir: dir, LogPath: logPath}
	p, err := proc.Start(spec)
	if err != nil {
		return "", err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Stop()
		return "", fmt.Errorf("%s: %w", spec.Name, ctx.Err())
	}
	out := p.Tail()
	if logPath != "" {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return "", err
		}
		out = string(b)
	}
	if err := p.Wait(); err != nil {
		return out, fmt.Errorf("%s", p.ExitReason())
	}
	return out, nil
}
