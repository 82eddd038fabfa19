package httpload

import (
	"strconv"
	"strings"
)

// DefaultUserAgent is the User-Agent of a run whose Options name none. The
// meshperf command sets Options.UserAgent to "meshperf/" and its version;
// this package cannot know the version of the program it is built into.
const DefaultUserAgent = "meshperf"

// userAgent is the User-Agent to send unless -H User-Agent says otherwise.
func (o Options) userAgent() string {
	if o.UserAgent != "" {
		return o.UserAgent
	}
	return DefaultUserAgent
}

// wireRequest builds the HTTP/1.x request once; every call writes the same bytes,
// so a request costs one write and no formatting.
func wireRequest(o Options, t target, hs []header) []byte {
	var b strings.Builder
	proto := "HTTP/1.1"
	if o.HTTP10 {
		proto = "HTTP/1.0"
	}
	method := o.method()
	b.WriteString(method + " " + t.requestURI + " " + proto + "\r\n")
	host, ua := t.host, o.userAgent()
	for _, h := range hs {
		switch {
		case strings.EqualFold(h.name, "Host"):
			host = h.value
		case strings.EqualFold(h.name, "User-Agent"):
			ua = h.value
		}
	}
	b.WriteString("Host: " + host + "\r\n")
	b.WriteString("User-Agent: " + ua + "\r\n")
	for _, h := range hs {
		if !strings.EqualFold(h.name, "Host") && !strings.EqualFold(h.name, "User-Agent") {
			b.WriteString(h.name + ": " + h.value + "\r\n")
		}
	}
	switch {
	case o.DisableKeepAlive && !o.HTTP10:
		b.WriteString("Connection: close\r\n")
	case !o.DisableKeepAlive && o.HTTP10:
		b.WriteString("Connection: keep-alive\r\n")
	}
	if o.ContentType != "" {
		b.WriteString("Content-Type: " + o.ContentType + "\r\n")
	}
	if len(o.Payload) > 0 || method == "POST" || method == "PUT" || method == "PATCH" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(o.Payload)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(o.Payload)
	return []byte(b.String())
}
