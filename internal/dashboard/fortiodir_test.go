package dashboard_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// outsideLabel marks the result planted outside the data directory: no
// answer of the dashboard may carry it.
const outsideLabel = "outside the data directory"

// resultLabelled is a real Fortio result with its labels replaced.
func resultLabelled(t *testing.T, label string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "results", "testdata", "fortio-http.json"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(data), `"Labels": "127.0.0.1:18080/echo?size=1024 , vm"`, `"Labels": "`+label+`"`, 1))
}

// A FIFO and a link to a result outside the directory, planted under .json
// names, are neither listed nor served, and the FIFO does not hang the
// request; a file over the size bound is listed as such, not read.
func TestFortioDataDirectoryRefusesAFIFOAndALink(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, resultLabelled(t, outsideLabel), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A result file is tens of KB: one over 16 MiB (sparse here) is not read.
	big, err := os.Create(filepath.Join(dir, "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(16<<20 + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	srv := serveDataDir(t, dir)
	client := &http.Client{Timeout: 20 * time.Second} // a FIFO read would wait for ever
	for _, name := range []string{"link.json", "fifo.json"} {
		resp, err := client.Get(srv.URL + "/api/fortio/" + name)
		if err != nil {
			t.Fatalf("GET /api/fortio/%s: %v", name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), outsideLabel) {
			t.Errorf("GET /api/fortio/%s = %d %s, want 404", name, resp.StatusCode, body)
		}
	}
	var list []struct{ File, Error string }
	getJSON(t, srv, "/api/fortio", &list)
	if len(list) != 1 || list[0].File != "big.json" || !strings.Contains(list[0].Error, "16777217 bytes, over the 16777216") {
		t.Errorf("GET /api/fortio lists %+v, want only big.json, with its size as the error", list)
	}
	wantError(t, srv, "/api/fortio/big.json", http.StatusNotFound, `result file "big.json": 16777217 bytes, over the 16777216`)
}

// A file swapped, again and again, between a result in the directory, a
// link to a result outside it and a FIFO, while the dashboard lists and
// serves it: whatever it finds between its look and its read, it never
// answers the outside result and never hangs on the FIFO.
func TestFortioDataDirectorySwappedFileNeverServesOutside(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, resultLabelled(t, outsideLabel), 0o644); err != nil {
		t.Fatal(err)
	}
	inside := resultLabelled(t, "inside")
	target := filepath.Join(dir, "swapped.json")
	if err := os.WriteFile(target, inside, 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() { swapped <- swapAgainAndAgain(dir, target, outside, inside, stop) }()
	srv := serveDataDir(t, dir)
	client := &http.Client{Timeout: 20 * time.Second}
	for i := range 1500 {
		path := "/api/fortio/swapped.json"
		if i%3 == 0 {
			path = "/api/fortio"
		}
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			close(stop)
			t.Fatalf("GET %s: %v (hung on a FIFO?)", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), outsideLabel) {
			close(stop)
			t.Fatalf("GET %s, request %d, answered the result outside the directory: %.200s", path, i+1, body)
		}
	}
	close(stop)
	if err := <-swapped; err != nil {
		t.Fatal(err)
	}
}

// swapAgainAndAgain renames a link to outside, a FIFO and a regular file
// holding inside over target in turn until stop is closed.
func swapAgainAndAgain(dir, target, outside string, inside []byte, stop <-chan struct{}) error {
	staged := filepath.Join(dir, ".staged")
	for {
		for _, stage := range []func() error{
			func() error { return os.Symlink(outside, staged) },
			func() error { return syscall.Mkfifo(staged, 0o644) },
			func() error { return os.WriteFile(staged, inside, 0o644) },
		} {
			select {
			case <-stop:
				return nil
			default:
			}
			if err := stage(); err != nil {
				return err
			}
			if err := os.Rename(staged, target); err != nil {
				return err
			}
		}
	}
}
