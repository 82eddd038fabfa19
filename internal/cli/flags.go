package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Every count, rate, size, duration and address on meshperf's command lines
// is read by one of the flag types below, so that a value out of range is
// refused while the flags are parsed: flag.FlagSet reports it as one line,
// `invalid value "-1" for flag -proxies: must be 0 or more`, and the command
// exits 2 before anything starts. A command's own checks are left with what
// involves several flags at once.

// wholeNumber is an integer type a flag can hold.
type wholeNumber interface{ ~int | ~int64 | ~uint }

// intFlag is a whole number from min to max.
type intFlag[T wholeNumber] struct {
	p        *T
	min, max T
}

// intVar registers an integer flag that must be at least min (and at most
// max, when max > min).
func intVar[T wholeNumber](fs *flag.FlagSet, p *T, name string, value, min, max T, usage string) {
	*p = value
	fs.Var(&intFlag[T]{p: p, min: min, max: max}, name, usage)
}

// countVar registers a count: 0 or more (0 usually means "the default" or
// "all", as the usage says).
func countVar[T wholeNumber](fs *flag.FlagSet, p *T, name string, value T, usage string) {
	intVar(fs, p, name, value, 0, 0, usage)
}

// positiveVar registers a count that must be 1 or more.
func positiveVar[T wholeNumber](fs *flag.FlagSet, p *T, name string, value T, usage string) {
	intVar(fs, p, name, value, 1, 0, usage)
}

func (f *intFlag[T]) String() string {
	if f.p == nil {
		return "0"
	}
	return fmt.Sprint(*f.p)
}

func (f *intFlag[T]) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return errors.New("not a whole number")
	}
	switch {
	case f.max > f.min && (n < int64(f.min) || n > int64(f.max)):
		return fmt.Errorf("must be from %v to %v", f.min, f.max)
	case n < int64(f.min):
		return fmt.Errorf("must be %v or more", f.min)
	case n != int64(T(n)):
		return errors.New("too large")
	}
	*f.p = T(n)
	return nil
}

// rateFlag is a non-negative number, or one of the values the usage
// documents as special (Fortio's -qps -1, "as fast as possible").
type rateFlag struct {
	p       *float64
	special []float64
}

// rateVar registers a rate (or any non-negative real number); special
// lists the negative values the usage gives a meaning to.
func rateVar(fs *flag.FlagSet, p *float64, name string, value float64, usage string, special ...float64) {
	*p = value
	fs.Var(&rateFlag{p: p, special: special}, name, usage)
}

func (f *rateFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("not a number")
	}
	if v < 0 && !slices.Contains(f.special, v) {
		if len(f.special) > 0 {
			return fmt.Errorf("must be 0 or more, or %s", joinFloats(f.special))
		}
		return errors.New("must be 0 or more")
	}
	*f.p = v
	return nil
}

func joinFloats(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(s, " or ")
}

// percentFlag is a percentage, written 95 or 95%, kept as a fraction
// (0.95): a confidence level (strictly between 0 and 100) or a threshold
// (0 or more).
type percentFlag struct {
	p     *float64
	level bool // a confidence level: more than 0 and less than 100
}

// percentVar registers a percentage flag; value is in percent. level
// restricts it to a confidence level's range.
func percentVar(fs *flag.FlagSet, p *float64, name string, value float64, level bool, usage string) {
	*p = value / 100
	fs.Var(&percentFlag{p: p, level: level}, name, usage)
}

func (f *percentFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p*100, 'g', -1, 64) + "%"
}

func (f *percentFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return errors.New("not a percentage (e.g. 5 or 5%)")
	case f.level && (v <= 0 || v >= 100):
		return errors.New("must be more than 0% and less than 100%")
	case v < 0:
		return errors.New("must be 0% or more")
	}
	*f.p = v / 100
	return nil
}

// durationFlag is a duration of 0 or more.
type durationFlag struct{ p *time.Duration }

// durationVar registers a duration that must not be negative.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

func (f durationFlag) String() string {
	if f.p == nil {
		return "0s"
	}
	return f.p.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return errors.New("not a duration (e.g. 500ms, 30s, 2m)")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*f.p = d
	return nil
}

// addrForm says which spellings a listen or dial address flag takes.
type addrForm struct {
	barePort bool   // "8080" for all interfaces (Fortio's servers)
	unix     bool   // "/path/to/socket"
	optional bool   // the value off turns the listener off
	off      string // "" or Fortio's "disabled"
}

var (
	// hostPort is host:port, required (meshperf pilot's listeners, cpload's --target).
	hostPort = addrForm{}
	// optionalHostPort is host:port, or empty for off.
	optionalHostPort = addrForm{optional: true}
	// fortioPort is what Fortio's servers take: port, host:port, a Unix
	// socket path, or "disabled".
	fortioPort = addrForm{barePort: true, unix: true, off: disabled, optional: true}
)

type addrFlag struct {
	p    *string
	form addrForm
}

// addrVar registers an address flag whose port must be a number from 0 to
// 65535, so that an unusable address is a usage error, not a failed bind.
func addrVar(fs *flag.FlagSet, p *string, name, value string, form addrForm, usage string) {
	*p = value
	fs.Var(&addrFlag{p: p, form: form}, name, usage)
}

func (f *addrFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f *addrFlag) Set(s string) error {
	if err := checkAddr(s, f.form); err != nil {
		return err
	}
	*f.p = s
	return nil
}

func checkAddr(s string, form addrForm) error {
	switch {
	case s == form.off && form.optional:
		return nil
	case s == "":
		return errors.New("an address is needed (host:port)")
	case form.unix && strings.HasPrefix(s, "/"):
		return nil
	case form.barePort && !strings.Contains(s, ":"):
		return checkPort(s)
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		// The *net.AddrError repeats the value; its Err alone says what is
		// wrong with it ("missing port in address").
		var addrErr *net.AddrError
		if errors.As(err, &addrErr) {
			return fmt.Errorf("want host:port (%s)", addrErr.Err)
		}
		return fmt.Errorf("want host:port (%v)", err)
	}
	return checkPort(port)
}

// checkPort accepts a port number from 0 (any free port) to 65535.
func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkURL checks an http(s) URL given on the command line: scheme, host,
// and a usable port when it names one.
func checkURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("want an http:// or https:// URL")
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if err := checkPort(p); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// urlFlag is an optional http(s) URL.
type urlFlag struct{ p *string }

// urlVar registers an optional URL flag (empty: not given).
func urlVar(fs *flag.FlagSet, p *string, name, usage string) {
	fs.Var(urlFlag{p}, name, usage)
}

func (f urlFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f urlFlag) Set(s string) error {
	if s != "" {
		if _, err := checkURL(s); err != nil {
			return err
		}
	}
	*f.p = s
	return nil
}

// stringsFlag collects a repeatable flag such as -H or -f, in order.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ", ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// ignoredFlagUsage is the usage of the Fortio flags a command accepts, so
// that Fortio's command lines run, and ignores; the help leaves them out.
const ignoredFlagUsage = "accepted for Fortio compatibility and ignored"

// printUsage writes a command's help: the usage line, what it does, and its
// flags with their value names and defaults, leaving out the Fortio flags
// accepted only for compatibility. A flag whose usage is "same as -X" is
// listed on X's line ("-n, -namespace"), short names first.
func printUsage(w io.Writer, fs *flag.FlagSet, usage, about string) {
	fmt.Fprintf(w, "usage: %s\n%s\n", usage, about)
	aliases := map[string][]string{}
	fs.VisitAll(func(fl *flag.Flag) {
		if target, ok := aliasOf(fs, fl); ok {
			aliases[target] = append(aliases[target], fl.Name)
		}
	})
	listed := 0
	fs.VisitAll(func(fl *flag.Flag) {
		if _, ok := aliasOf(fs, fl); ok || fl.Usage == ignoredFlagUsage {
			return
		}
		if listed++; listed == 1 {
			fmt.Fprint(w, "\nflags:\n")
		}
		names := append([]string{fl.Name}, aliases[fl.Name]...)
		slices.SortStableFunc(names, func(a, b string) int { return len(a) - len(b) })
		valueName, usage := flag.UnquoteUsage(fl)
		if v, ok := fl.Value.(interface{ valueName() string }); ok && valueName == "value" {
			valueName = v.valueName()
		}
		fmt.Fprintf(w, "  -%s\n    \t%s", strings.TrimSpace(strings.Join(names, ", -")+" "+valueName), usage)
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && fl.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", fl.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// aliasOf returns the name of the flag fl is another name for, when its
// usage says "same as -X" (or --X) and fs has X.
func aliasOf(fs *flag.FlagSet, fl *flag.Flag) (string, bool) {
	target, ok := strings.CutPrefix(fl.Usage, "same as -")
	target = strings.TrimPrefix(target, "-")
	if !ok || fs.Lookup(target) == nil {
		return "", false
	}
	return target, true
}

// The value names printUsage shows for flags whose usage names none.
func (f *intFlag[T]) valueName() string  { return "int" }
func (f *rateFlag) valueName() string    { return "number" }
func (f durationFlag) valueName() string { return "duration" }
func (f *percentFlag) valueName() string { return "percent" }
func (f *addrFlag) valueName() string    { return "address" }
func (f urlFlag) valueName() string      { return "URL" }
