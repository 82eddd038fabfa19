package proc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadyRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready.json")
	if _, err := ReadReady(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("before it is written: %v, want not exist", err)
	}
	want := Ready{PID: 42, Listeners: map[string]string{"grpc": "127.0.0.1:40001", "http": "127.0.0.1:40002"}}
	if err := WriteReady(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReady(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := got.Listener("http"); err != nil || a != "127.0.0.1:40002" || got.PID != 42 {
		t.Errorf("read back %+v (%v), want %+v", got, err, want)
	}
	if _, err := got.Listener("tcp"); err == nil || err.Error() != `process 42 has no "tcp" listener (it has [grpc http])` {
		t.Errorf("missing listener: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%d files beside the ready file, want none (temporary file left?)", len(entries)-1)
	}
}

func TestReadyRefusesIncomplete(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready.json")
	for _, body := range []string{`{"pid":`, `{"pid":0,"listeners":{"http":"x:1"}}`, `{"pid":7,"listeners":{}}`} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadReady(path); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}
