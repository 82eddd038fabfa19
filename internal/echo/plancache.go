package echo

import (
	"net/url"
	"sync"
	"sync/atomic"
)

// maxCachedPlans bounds the plan cache. A benchmark uses a handful of
// distinct URLs; the bound only matters when clients vary the query string
// per request, and then parsing each time is the right cost anyway.
const maxCachedPlans = 256

// planCache maps raw query strings to parsed plans. A load generator sends
// the same URL over and over, so parsing it once instead of per request
// removes the query parsing (a map and several strings) from the hot path.
// Reads are lock-free: the map is replaced, never modified, on insert.
type planCache struct {
	m  atomic.Pointer[map[string]*EchoPlan]
	mu sync.Mutex // serialises inserts
}

// plan returns the parsed plan for rawQuery, parsing and caching it on a
// miss. Parse errors are not cached.
func (c *planCache) plan(rawQuery string, lim Limits) (*EchoPlan, error) {
	if m := c.m.Load(); m != nil {
		if p, ok := (*m)[rawQuery]; ok {
			return p, nil
		}
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
	c.insert(rawQuery, p)
	return p, nil
}

func (c *planCache) insert(rawQuery string, p *EchoPlan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		n = len(*old)
	}
	if n >= maxCachedPlans {
		return
	}
	next := make(map[string]*EchoPlan, n+1)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[rawQuery] = p
	c.m.Store(&next)
}

// paramError is a client error that is not from ParseEchoParams.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }
func (e *paramError) Unwrap() error { return ErrBadParam }
