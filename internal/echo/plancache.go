package echo

import (
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The plan cache's bounds. A benchmark uses a handful of distinct URLs of
// well under a kilobyte; the bounds only matter when clients vary the
// query string per request, or make it long (a request line may be up to
// net/http's 1 MB of headers), and then parsing each time is the right
// cost anyway. Counting entries alone let 40 long queries keep 59 MB.
const (
	// maxCachedPlans bounds the entries.
	maxCachedPlans = 256
	// maxCachedPlanBytes bounds the keys and plans together (planBytes).
	maxCachedPlanBytes = 1 << 20
	// maxCachedEntryBytes leaves a longer query out of the cache, so that
	// a few long ones cannot take the room of the benchmark's URLs.
	maxCachedEntryBytes = 8 << 10
)

// planCache maps raw query strings to parsed plans. A load generator sends
// the same URL over and over, so parsing it once instead of per request
// removes the query parsing (a map and several strings) from the hot path.
// Reads are lock-free: the map is replaced, never modified, on insert.
type planCache struct {
	m     atomic.Pointer[map[string]*EchoPlan]
	mu    sync.Mutex // serialises inserts
	bytes int        // what the entries keep (planBytes), under mu
}

// plan returns the parsed plan for rawQuery, parsing and caching it on a
// miss. Parse errors are not cached.
func (c *planCache) plan(rawQuery string, lim Limits) (*EchoPlan, error) {
	if m := c.m.Load(); m != nil {
		if p, ok := (*m)[rawQuery]; ok {
			return p, nil
		}
	}
	cacheable := len(rawQuery) <= maxCachedEntryBytes
	if cacheable {
		// The key and the strings parsed from it (header values) are then
		// the cache's own, not slices of the request line it came in.
		rawQuery = strings.Clone(rawQuery)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// url.ParseQuery still returns the parts it could decode; a bad
		// escape in one parameter is a client error like any other.
		return nil, &paramError{msg: "bad query string: " + err.Error()}
	}
	parsed, err := ParseEchoParams(q, lim)
	if err != nil {
		return nil, err
	}
	p := &parsed
	if cacheable {
		c.insert(rawQuery, p)
	}
	return p, nil
}

func (c *planCache) insert(rawQuery string, p *EchoPlan) {
	size := planBytes(rawQuery, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		n = len(*old)
	}
	if n >= maxCachedPlans || size > maxCachedEntryBytes || c.bytes+size > maxCachedPlanBytes {
		return
	}
	if old != nil {
		if _, again := (*old)[rawQuery]; again {
			return // another request parsed it first
		}
	}
	next := make(map[string]*EchoPlan, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[rawQuery] = p
	c.bytes += size
	c.m.Store(&next)
}

// keptBytes is what the cache keeps, as planBytes counts it.
func (c *planCache) keptBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// planBytes is what an entry keeps: its key, its plan and the plan's
// slices and strings, and the map's share. Strings parsed from the key
// are counted again (they may be copies, when unescaped): an over-count
// errs on the side of the bound.
func planBytes(key string, p *EchoPlan) int {
	const mapEntry = int(unsafe.Sizeof(key) + unsafe.Sizeof(p))
	n := mapEntry + len(key) + int(unsafe.Sizeof(*p))
	n += cap(p.Delay.Values)*int(unsafe.Sizeof(p.Delay.Values[0])) + cap(p.Delay.Cumulative)*4
	n += cap(p.Status.Values)*int(unsafe.Sizeof(p.Status.Values[0])) + cap(p.Status.Cumulative)*4
	n += cap(p.Size.Values)*int(unsafe.Sizeof(p.Size.Values[0])) + cap(p.Size.Cumulative)*4
	n += cap(p.Headers) * int(unsafe.Sizeof(Header{}))
	for _, h := range p.Headers {
		n += len(h.Name) + len(h.Value)
	}
	n += cap(p.sizeHeader) * int(unsafe.Sizeof([]string(nil)))
	for _, v := range p.sizeHeader {
		n += cap(v) * int(unsafe.Sizeof(""))
		for _, s := range v {
			n += len(s)
		}
	}
	return n
}

// paramError is a client error that is not from ParseEchoParams.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }
func (e *paramError) Unwrap() error { return ErrBadParam }
