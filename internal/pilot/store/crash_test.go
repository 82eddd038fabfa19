package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// crashChildEnv makes the test binary act as the writer that the durability
// test kills: it applies batches to the store named by the variable and
// prints each acknowledged revision.
const crashChildEnv = "MESHPERF_STORE_CRASH_CHILD"

// crashBatch is how many objects each of the child's applies writes; a batch
// must survive a crash whole or not at all.
const crashBatch = 10

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		if err := crashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashBatchFor is the child's i-th apply: crashBatch new objects in
// namespace b<i>.
func crashBatchFor(i int) []*config.Resource {
	rs := make([]*config.Resource, crashBatch)
	for j := range rs {
		rs[j] = destinationRule(fmt.Sprint("b", i), fmt.Sprint("r", j), fmt.Sprintf("h%d-%d.example.com", i, j))
	}
	return rs
}

func crashChild(path string) error {
	db, err := Open(path)
	if err != nil {
		return err
	}
	for i := 0; i < 1_000_000; i++ {
		rev, err := db.Apply(context.Background(), crashBatchFor(i))
		if err != nil {
			return err
		}
		// os.Stdout is unbuffered: once this line is in the pipe, the
		// parent may count the write as acknowledged.
		fmt.Printf("%d %d\n", i, rev)
	}
	return nil
}

// TestAcknowledgedWritesSurviveKill9 SIGKILLs a writer mid-stream and checks
// that every write it reported is in the reopened file, that no batch is
// there in part, and that the file passes bbolt's consistency check.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	path := filepath.Join(t.TempDir(), "config.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := make(map[int]int64) // batch -> revision
	lines := bufio.NewScanner(out)
	killed := false
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) != 2 {
			t.Fatalf("child printed %q", lines.Text())
		}
		i, _ := strconv.Atoi(f[0])
		rev, _ := strconv.ParseInt(f[1], 10, 64)
		acked[i] = rev
		if len(acked) == 40 && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true // keep reading what it wrote before dying
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended on its own: %v\n%s", err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL: %v\n%s", err, stderr.String())
	}

	db, err := Open(path)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer db.Close()
	checkBolt(t, db)
	maxAcked := int64(0)
	for i, rev := range acked {
		maxAcked = max(maxAcked, rev)
		if rev != int64(i)+1 {
			t.Errorf("batch %d acknowledged at revision %d", i, rev)
		}
		for _, r := range crashBatchFor(i) {
			got, ok := db.Get(r.Key())
			if !ok || got.Meta.ResourceVersion != strconv.FormatInt(rev, 10) || hostOf(got) != hostOf(r) {
				t.Fatalf("acknowledged %s (revision %d) lost after kill -9", r.Key(), rev)
			}
		}
	}
	// Every committed batch is whole, and nothing else is there: at most
	// one batch beyond the last acknowledged one (committed, not yet printed).
	rev := db.Revision()
	if rev < maxAcked || rev > maxAcked+1 {
		t.Errorf("store revision %d, last acknowledged %d", rev, maxAcked)
	}
	all := db.List(config.KindDestinationRule, "")
	if int64(len(all)) != rev*crashBatch {
		t.Errorf("%d objects at revision %d, want %d: a batch is in part", len(all), rev, rev*crashBatch)
	}
	for i := range int(rev) {
		if got := db.List(config.KindDestinationRule, fmt.Sprint("b", i)); len(got) != crashBatch {
			t.Errorf("batch %d has %d of its %d objects", i, len(got), crashBatch)
		}
	}
	if _, err := db.Apply(context.Background(), crashBatchFor(int(rev))); err != nil {
		t.Errorf("apply after recovery: %v", err)
	}
	t.Logf("killed after %d acknowledged batches; store at revision %d", len(acked), rev)
}

// checkBolt runs bbolt's own consistency check on the store's file.
func checkBolt(t *testing.T, db *DB) {
	t.Helper()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
