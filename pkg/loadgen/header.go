package loadgen

import (
	"fmt"
	"strings"
)

// ParseHeader splits a -H value "Name: value", rejecting what would corrupt
// a request on the wire. HTTP sends it as a header, gRPC as metadata.
func ParseHeader(h string) (name, value string, err error) {
	name, value, ok := strings.Cut(h, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	switch {
	case !ok || name == "":
		return "", "", fmt.Errorf("header %q: want Name: value", h)
	case strings.ContainsAny(name, " \t\r\n:"), strings.ContainsAny(value, "\r\n"):
		return "", "", fmt.Errorf("header %q: a name has no spaces and neither part has line breaks", h)
	}
	return name, value, nil
}
