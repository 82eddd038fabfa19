package echo

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Many distinct long queries, as a client that varies them per request
// sends: the plan cache keeps at most maxCachedPlanBytes of keys and plans
// (entries counting alone once let 40 long queries keep 59 MB), a query
// too long for an entry is not cached at all, and every one of them is
// still answered as it asks.
func TestPlanCacheIsBoundedInBytes(t *testing.T) {
	s := startServer(t, Config{HTTPAddr: "127.0.0.1:0"})
	base := "http://" + s.HTTPAddr() + "/?"
	c := h1Client()
	pad := strings.Repeat("p", 3000) // an entry of about 6 KB: 300 of them are 1.8 MB
	for i := range 300 {
		value := fmt.Sprintf("%d-%s", i, pad)
		resp, _ := do(t, c, http.MethodGet, base+"header=X-Pad:"+value, "")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Pad") != value {
			t.Fatalf("query %d answered %d with X-Pad of %d bytes, want 200 and the header asked for", i, resp.StatusCode, len(resp.Header.Get("X-Pad")))
		}
	}
	kept, entries := s.plans.keptBytes(), len(*s.plans.m.Load())
	if kept > maxCachedPlanBytes || kept < maxCachedPlanBytes-maxCachedEntryBytes || entries >= 300 {
		t.Errorf("the cache keeps %d entries in %d bytes, want it full to its %d bytes, not every query", entries, kept, maxCachedPlanBytes)
	}
	keys := 0
	for k := range *s.plans.m.Load() {
		keys += len(k)
	}
	if kept < 2*keys {
		t.Errorf("the cache counts %d bytes for %d bytes of keys alone, and as much again of header values", kept, keys)
	}

	// A query of 200 KB (net/http takes request lines up to 1 MB) is
	// answered, and takes no room.
	long := strings.Repeat("q", 200<<10)
	resp, _ := do(t, c, http.MethodGet, base+"status=202&header=X-Long:"+long, "")
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Long") != long {
		t.Errorf("a 200 KB query answered %d, want 202 with its header", resp.StatusCode)
	}
	if got := s.plans.keptBytes(); got != kept || len(*s.plans.m.Load()) != entries {
		t.Errorf("after a 200 KB query the cache keeps %d bytes in %d entries, want %d in %d: it is not cached", got, len(*s.plans.m.Load()), kept, entries)
	}
}
