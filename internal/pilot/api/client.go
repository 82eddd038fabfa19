package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// DefaultAddress is where `meshperf pilot` serves this API unless told
// otherwise (--httpAddr), and so where clients look first. It is not
// istiod's 8080 because `meshperf server` takes 8080, as Fortio's server
// does, and the two run side by side on one machine.
const DefaultAddress = "127.0.0.1:15016"

// DefaultTimeout bounds one call when NewClient is given no http.Client.
// An apply is one fsynced write, so even a large mesh answers in seconds;
// the bound only keeps a wedged server from hanging the caller.
const DefaultTimeout = 2 * time.Minute

// maxErrorBody caps how much of a non-2xx answer is read: a message is one
// line, and anything longer is not this API talking.
const maxErrorBody = 64 << 10

// Client calls the control plane's HTTP API: the one way meshperf's
// commands, the lab and cpload change and read the control plane's config.
// Its errors are one line each, fit to print after a command's name: the
// server's own message (a *StatusError), or why the server could not be
// reached (an *UnreachableError).
type Client struct {
	base string // scheme://host[:port][/prefix], no trailing slash
	http *http.Client
}

// NewClient returns a client of the API at base: an http:// or https:// URL,
// or a bare host:port for http. A nil httpClient means one with
// DefaultTimeout.
func NewClient(base string, httpClient *http.Client) (*Client, error) {
	u, err := parseBase(base)
	if err != nil {
		return nil, fmt.Errorf("control plane address %q: %w", base, err)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), http: httpClient}, nil
}

func parseBase(base string) (*url.URL, error) {
	const want = "want http://host:port or https://host:port"
	if base == "" {
		return nil, errors.New("empty; " + want)
	}
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, errors.New(want)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New(want + ", without a query, fragment or user")
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		// Port 0 means "any free port" to a listener; a client cannot dial it.
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
	}
	return u, nil
}

// URL is the API's base URL, as the client's messages name it.
func (c *Client) URL() string { return c.base }

// StatusError is the control plane's refusal: a non-2xx answer and its
// one-line message ({"error": ...}). Code tells a missing object (404) or a
// read-only store (409) from bad config (400).
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return e.Message }

// UnreachableError is a call that got no answer: the server is down, the
// address is wrong, or the call timed out.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the control plane at %s (is meshperf pilot running?): %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Apply creates or updates the objects in docs (multi-document YAML or
// JSON) in one write: all of them or, on any error, none. source names the
// documents in the server's error messages ("bookinfo.yaml: document 2
// ..."); empty, they are called "request".
func (c *Client) Apply(ctx context.Context, source string, docs []byte) (*ApplyResponse, error) {
	var resp ApplyResponse
	if err := c.call(ctx, http.MethodPost, "/api/v1/apply", sourceQuery(source), docs, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// ApplyResources is Apply of decoded objects. They travel in their
// canonical form (config.Encode), so the server decodes exactly what the
// caller holds.
func (c *Client) ApplyResources(ctx context.Context, rs []*config.Resource) (*ApplyResponse, error) {
	docs := make([][]byte, len(rs))
	for i, r := range rs {
		b, err := config.Encode(r)
		if err != nil {
			return nil, err
		}
		docs[i] = b
	}
	return c.Apply(ctx, "", joinDocuments(docs))
}

// Delete deletes the objects docs name, in one write: all of them or, if
// one does not exist or any error occurs, none. Only kind, metadata.name and
// metadata.namespace are read, so a file that no longer validates still
// names what to delete.
func (c *Client) Delete(ctx context.Context, source string, docs []byte) (*DeleteResponse, error) {
	var resp DeleteResponse
	if err := c.call(ctx, http.MethodPost, "/api/v1/delete", sourceQuery(source), docs, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DeleteKeys is Delete of the objects keys name.
func (c *Client) DeleteKeys(ctx context.Context, keys []config.Key) (*DeleteResponse, error) {
	type meta struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	}
	type identity struct {
		Kind     config.Kind `json:"kind"`
		Metadata meta        `json:"metadata"`
	}
	docs := make([][]byte, len(keys))
	for i, k := range keys {
		b, err := json.Marshal(identity{Kind: k.Kind, Metadata: meta{Name: k.Name, Namespace: k.Namespace}})
		if err != nil {
			return nil, err
		}
		docs[i] = b
	}
	return c.Delete(ctx, "", joinDocuments(docs))
}

// List returns the objects of kind in namespace (every namespace when
// empty; ignored for cluster-scoped kinds), and the store's revision when
// they were read.
func (c *Client) List(ctx context.Context, kind config.Kind, namespace string) ([]*config.Resource, int64, error) {
	var resp ListResponse
	if err := c.call(ctx, http.MethodGet, "/api/v1/resources/"+url.PathEscape(string(kind)), namespaceQuery(namespace), nil, &resp); err != nil {
		return nil, 0, err
	}
	rs := make([]*config.Resource, len(resp.Items))
	for i, item := range resp.Items {
		r, err := c.decodeObject(item)
		if err != nil {
			return nil, 0, err
		}
		rs[i] = r
	}
	return rs, resp.Revision, nil
}

// Get returns the object key names. An empty namespace of a namespaced kind
// means "default", as kubectl has it; a missing object is a *StatusError
// with Code 404.
func (c *Client) Get(ctx context.Context, key config.Key) (*config.Resource, error) {
	var raw []byte
	path := "/api/v1/resources/" + url.PathEscape(string(key.Kind)) + "/" + url.PathEscape(key.Name)
	if err := c.call(ctx, http.MethodGet, path, namespaceQuery(key.Namespace), nil, &raw); err != nil {
		return nil, err
	}
	return c.decodeObject(raw)
}

// ConfigDump returns a connected proxy's configuration as Envoy's admin
// config dump (JSON); an unknown proxy is a *StatusError with Code 404.
func (c *Client) ConfigDump(ctx context.Context, proxyID string) ([]byte, error) {
	var raw []byte
	err := c.call(ctx, http.MethodGet, "/debug/config_dump", url.Values{"proxyID": {proxyID}}, nil, &raw)
	return raw, err
}

// SyncStatus returns each xDS connection's sent and acknowledged versions
// (/debug/syncz).
func (c *Client) SyncStatus(ctx context.Context) ([]ProxySync, error) {
	var out []ProxySync
	err := c.call(ctx, http.MethodGet, "/debug/syncz", nil, nil, &out)
	return out, err
}

// PushStatus returns the description of the last pushes
// (/debug/push_status), as the server's JSON: its shape is the xDS
// server's, not this API's.
func (c *Client) PushStatus(ctx context.Context) (json.RawMessage, error) {
	var raw []byte
	err := c.call(ctx, http.MethodGet, "/debug/push_status", nil, nil, &raw)
	return raw, err
}

// PushTrace returns recent pushes' stage timestamps (/debug/push_trace),
// as the server's JSON (discovery.PushTrace, oldest first).
func (c *Client) PushTrace(ctx context.Context) (json.RawMessage, error) {
	var raw []byte
	err := c.call(ctx, http.MethodGet, "/debug/push_trace", nil, nil, &raw)
	return raw, err
}

// Ready returns nil once the API answers.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/ready", nil, nil, nil)
}

func sourceQuery(source string) url.Values {
	if source == "" {
		return nil
	}
	return url.Values{"file": {source}}
}

func namespaceQuery(namespace string) url.Values {
	if namespace == "" {
		return nil
	}
	return url.Values{"namespace": {namespace}}
}

// joinDocuments makes one multi-document stream of JSON documents.
func joinDocuments(docs [][]byte) []byte {
	return bytes.Join(docs, []byte("\n---\n"))
}

func (c *Client) decodeObject(b []byte) (*config.Resource, error) {
	rs, err := config.Decode("answer", b)
	if err == nil && len(rs) != 1 {
		err = fmt.Errorf("%d objects where one was expected", len(rs))
	}
	if err != nil {
		return nil, fmt.Errorf("the control plane at %s sent an object this meshperf cannot read: %w", c.base, err)
	}
	return rs[0], nil
}

// call sends one request and decodes a 2xx answer into out: skipped when
// out is nil, the raw body for a *[]byte, JSON otherwise.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	if body == nil {
		return c.send(ctx, method, path, query, nil, "", out)
	}
	// JSON documents are YAML too.
	return c.send(ctx, method, path, query, bytes.NewReader(body), "application/yaml", out)
}

// send is call with the body's content type said.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body io.Reader, contentType string, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its "Post URL:" prefix repeats what the message says
		}
		return &UnreachableError{URL: c.base, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return &StatusError{Code: resp.StatusCode, Message: e.Error}
		}
		return &StatusError{Code: resp.StatusCode, Message: fmt.Sprintf(
			"the control plane at %s answered %s: %s (is that meshperf pilot's API address, its --httpAddr?)",
			c.base, resp.Status, firstLine(data))}
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return &UnreachableError{URL: c.base, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the control plane at %s sent an answer this meshperf cannot read: %w", c.base, err)
		}
	}
	return nil
}

// firstLine is the start of a body that is not the API's JSON, to quote in
// one line.
func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
