package topology

import (
	"io/fs"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, and must
// give a one-line error or a graph that validates, whose pods and hops are
// sane (every service at least one pod, every entrypoint's chain at least
// one hop and no longer than the graph has services).
func FuzzParse(f *testing.F) {
	entries, _ := fs.ReadDir(shippedFS, "shipped")
	for _, e := range entries {
		data, _ := shippedFS.ReadFile("shipped/" + e.Name())
		f.Add(data)
	}
	f.Add([]byte("services:\n- name: a\n  isEntrypoint: true\n  errorRate: 0.00001%\n  script:\n  - call: {service: a, size: 1 PB}\n"))
	f.Add([]byte("defaults:\n  script: [[{sleep: 1ms}, {call: b}]]\nservices: [{name: a, isEntrypoint: true}, {name: b, script: []}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		top, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if err := top.Validate(); err != nil {
			t.Errorf("Parse accepted what Validate refuses: %v", err)
		}
		if top.Pods() < len(top.Services) || top.Pods() > len(top.Services)*MaxReplicas {
			t.Errorf("%d pods for %d services", top.Pods(), len(top.Services))
		}
		for _, e := range top.Entrypoints() {
			if h := top.Hops(e.Name); h < 1 || h > len(top.Services) {
				t.Errorf("Hops(%s) = %d for %d services", e.Name, h, len(top.Services))
			}
		}
		for _, s := range top.Services {
			if s.ErrorEvery() < 0 || (s.ErrorRate > 0) != (s.ErrorEvery() > 0) {
				t.Errorf("%s: ErrorEvery %d for rate %v", s.Name, s.ErrorEvery(), s.ErrorRate)
			}
		}
	})
}
