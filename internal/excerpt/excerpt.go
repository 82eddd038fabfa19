// Package excerpt bounds what a server repeats of its client's input in a
// message. A refusal that quotes what it refuses in full grows with the
// input: a name of ten thousand characters, quoted by a validator and again
// by the message around it, made one error line 20 KB. Quoting a prefix and
// the whole's size keeps every message a line a person can read, whatever a
// client sends.
package excerpt

import (
	"fmt"
	"strconv"
)

// MaxChars is how many characters of a value a message quotes: more than
// any name or host a person types, far less than what a client can send.
const MaxChars = 200

// String is s when it has at most MaxChars characters, else its first
// MaxChars characters followed by "... (N bytes)".
func String(s string) string {
	prefix, cut := clip(s)
	if !cut {
		return s
	}
	return prefix + tail(s)
}

// Quote is String in Go's double quotes: "prefix"... (N bytes) when cut.
func Quote(s string) string {
	prefix, cut := clip(s)
	if !cut {
		return strconv.Quote(s)
	}
	return strconv.Quote(prefix) + tail(s)
}

// Value formats a string as Quote under %q and as String under any other
// verb, so that a message built with fmt quotes a bounded prefix of it.
type Value string

// Format implements fmt.Formatter.
func (v Value) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = f.Write([]byte(Quote(string(v))))
		return
	}
	_, _ = f.Write([]byte(String(string(v))))
}

// clip is s's first MaxChars characters, cut at a character's boundary,
// and whether anything was left out.
func clip(s string) (string, bool) {
	n := 0
	for i := range s {
		if n == MaxChars {
			return s[:i], true
		}
		n++
	}
	return s, false
}

func tail(s string) string { return "... (" + strconv.Itoa(len(s)) + " bytes)" }
