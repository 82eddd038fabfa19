package sim

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrTooFewFiles marks a fleet that needs more connections than a process
// may open: the command line asked for it, so callers treat it as bad input.
var ErrTooFewFiles = errors.New("too few open files allowed")

// FileMargin is the files and sockets a process keeps free beyond the
// fleet's connections: gRPC's, the metrics scrapes', the API calls', the
// data and log files a run writes.
const FileMargin = 64

// FileBudget is what a process may still open: its open-files limit
// (RLIMIT_NOFILE, the soft one, which Go raises to the hard one at start)
// and how many it holds now.
type FileBudget struct {
	Limit int
	Open  int
}

// Free is how many more files the process may open, keeping FileMargin.
func (b FileBudget) Free() int { return max(b.Limit-b.Open-FileMargin, 0) }

// OwnFiles is this process's budget.
func OwnFiles() (FileBudget, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return FileBudget{}, fmt.Errorf("reading the open-files limit: %w", err)
	}
	open, err := openFiles("self")
	if err != nil {
		return FileBudget{}, err
	}
	return FileBudget{Limit: clampLimit(lim.Cur), Open: open}, nil
}

// ProcessFiles is the budget of process pid (the control plane a run
// started), from /proc/PID/limits and /proc/PID/fd.
func ProcessFiles(pid int) (FileBudget, error) {
	dir := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + dir + "/limits")
	if err != nil {
		return FileBudget{}, fmt.Errorf("reading process %d's open-files limit: %w", pid, err)
	}
	limit := -1
	for line := range strings.SplitSeq(string(b), "\n") {
		// "Max open files            20000                20000                files"
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if fields[0] == "unlimited" {
					limit = clampLimit(^uint64(0))
				} else if n, err := strconv.ParseUint(fields[0], 10, 64); err == nil {
					limit = clampLimit(n)
				}
			}
		}
	}
	if limit < 0 {
		return FileBudget{}, fmt.Errorf("process %d's limits name no open-files limit", pid)
	}
	open, err := openFiles(dir)
	if err != nil {
		return FileBudget{}, err
	}
	return FileBudget{Limit: limit, Open: open}, nil
}

func clampLimit(n uint64) int { return int(min(n, 1<<31-1)) }

// openFiles counts the descriptors of /proc/<dir>/fd ("self" or a pid).
func openFiles(dir string) (int, error) {
	entries, err := os.ReadDir("/proc/" + dir + "/fd")
	if err != nil {
		return 0, fmt.Errorf("counting open files: %w", err)
	}
	return len(entries), nil
}

// connsFor is how many connections n proxies sharing perConn each use.
func connsFor(n, perConn int) int { return (n + perConn - 1) / perConn }

// SplitFleet is the way past a simulator's own open-files limit besides
// sharing connections.
const SplitFleet = "split the fleet over several cpload processes with -shard I/N (docs/cpload.md)"

// CheckFiles says whether a process with budget b can hold the connections
// of proxies proxies at perConn per connection (who names the process: "this
// cpload", "the control plane"). If not, it says how far off it is and what
// gets past it: the smallest -proxies-per-conn that fits, and otherwise (""
// for none) wrapping ErrTooFewFiles.
func CheckFiles(b FileBudget, proxies, perConn int, who, otherwise string) error {
	need := connsFor(proxies, perConn)
	free := b.Free()
	if need <= free {
		return nil
	}
	var ways []string
	if free > 0 {
		ways = append(ways, fmt.Sprintf("give -proxies-per-conn %d or more", (proxies+free-1)/free))
	}
	if otherwise != "" {
		ways = append(ways, otherwise)
	}
	how := strings.Join(ways, ", or ")
	if how == "" {
		how = "close files or raise the limit"
	}
	return fmt.Errorf("%w: %d simulated proxies need %d connections, but %s can open only %d more (open-files limit %d, %d open, %d kept for the run); %s",
		ErrTooFewFiles, proxies, need, who, free, b.Limit, b.Open, FileMargin, how)
}
