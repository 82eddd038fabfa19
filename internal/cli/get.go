package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Get runs `meshperf get KIND [NAME] [-n NS] [-o yaml|json|name] [--server
// URL]`: the objects of a kind the control plane holds, as a table by
// default, or in the YAML or JSON that `meshperf apply` reads back. Without
// -n a list covers every namespace and a name is looked up in "default", as
// kubectl does. Exit status: 0 found (an empty list included), 1 the control
// plane answered an error or could not be reached, 2 bad flags.
func Get(args []string, stdout, stderr io.Writer) int {
	return runGet(context.Background(), osPilotEnv(), args, stdout, stderr)
}

type getFlags struct {
	namespace     string
	allNamespaces bool
	output        string
	server        string
}

func parseGetFlags(args []string, stdout io.Writer) (f *getFlags, positional []string, help bool, err error) {
	f = &getFlags{}
	fs := flag.NewFlagSet("meshperf get", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.namespace, "n", "", "the `namespace` (default: every namespace for a list, \"default\" for a name)")
	fs.StringVar(&f.namespace, "namespace", "", "same as -n")
	fs.BoolVar(&f.allNamespaces, "A", false, "every namespace (what a list shows without -n)")
	fs.BoolVar(&f.allNamespaces, "all-namespaces", false, "same as -A")
	fs.StringVar(&f.output, "o", "", "output `format`: yaml, json or name (default: a table)")
	fs.StringVar(&f.output, "output", "", "same as -o")
	fs.StringVar(&f.server, "server", "", "the control plane's API `URL` (default $"+pilotServerEnv+", else "+defaultPilotServer+")")
	fs.StringVar(&f.server, "s", "", "same as --server")
	positional, err = parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintln(stdout, "usage: meshperf get KIND [NAME] [-n NAMESPACE] [-o yaml|json|name] [--server URL]")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return nil, nil, true, nil
	}
	if err != nil {
		return nil, nil, false, usageError{err.Error()}
	}
	switch f.output {
	case "", "yaml", "json", "name":
	default:
		return nil, nil, false, usagef("-o %q: want yaml, json or name", f.output)
	}
	if len(positional) == 0 {
		kinds := make([]string, len(config.Kinds))
		for i, k := range config.Kinds {
			kinds[i] = string(k)
		}
		return nil, nil, false, usagef("KIND is required, one of %s", strings.Join(kinds, ", "))
	}
	if len(positional) > 2 {
		return nil, nil, false, usagef("unexpected argument %q: meshperf get takes KIND and at most one NAME", positional[2])
	}
	if f.allNamespaces {
		if len(positional) == 2 {
			return nil, nil, false, usagef("-A lists every namespace; it does not go with a NAME")
		}
		f.namespace = ""
	}
	return f, positional, false, nil
}

func runGet(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	const cmd = "meshperf get"
	f, positional, help, err := parseGetFlags(args, stdout)
	if help || err != nil {
		return exitStatus(stderr, cmd, err)
	}
	kind, err := api.ParseKind(positional[0])
	if err != nil {
		return exitStatus(stderr, cmd, usageError{err.Error()})
	}
	c, err := newPilotClient(cmd, f.server, env)
	if err != nil {
		return exitStatus(stderr, cmd, usageError{err.Error()})
	}
	query := url.Values{}
	if f.namespace != "" {
		query.Set("namespace", f.namespace)
	}
	path := "/api/v1/resources/" + url.PathEscape(string(kind))
	var items []json.RawMessage
	if len(positional) == 2 {
		var raw []byte
		if err := c.call(ctx, "GET", path+"/"+url.PathEscape(positional[1]), query, nil, &raw); err != nil {
			return exitStatus(stderr, cmd, err)
		}
		items = []json.RawMessage{raw}
	} else {
		var list api.ListResponse
		if err := c.call(ctx, "GET", path, query, nil, &list); err != nil {
			return exitStatus(stderr, cmd, err)
		}
		items = list.Items
	}
	rs := make([]*config.Resource, len(items))
	for i, it := range items {
		decoded, err := config.Decode("answer", it)
		if err != nil || len(decoded) != 1 {
			return exitStatus(stderr, cmd, fmt.Errorf("the control plane at %s sent an object this meshperf cannot read: %v", c.base, err))
		}
		rs[i] = decoded[0]
	}
	if len(rs) == 0 && f.output != "json" {
		where := ""
		if f.namespace != "" && !kind.ClusterScoped() {
			where = " in " + f.namespace + " namespace"
		}
		_, _ = fmt.Fprintf(stderr, "No resources found%s.\n", where)
		return 0
	}
	if err := printResources(stdout, f.output, kind, rs, len(positional) == 2); err != nil {
		return exitStatus(stderr, cmd, err)
	}
	return 0
}

// printResources writes rs in the chosen format. A single object (get KIND
// NAME) is printed bare in JSON; a list is a `kind: List`, which apply
// reads back.
func printResources(w io.Writer, output string, kind config.Kind, rs []*config.Resource, single bool) error {
	switch output {
	case "yaml":
		for i, r := range rs {
			b, err := config.EncodeYAML(r)
			if err != nil {
				return err
			}
			if i > 0 {
				_, _ = io.WriteString(w, "---\n")
			}
			_, _ = w.Write(b)
		}
		return nil
	case "json":
		return printJSON(w, rs, single)
	case "name":
		for _, r := range rs {
			_, _ = fmt.Fprintf(w, "%s/%s\n", kubectlName(r.Kind), r.Meta.Name)
		}
		return nil
	}
	return printTable(w, kind, rs, time.Now())
}

func printJSON(w io.Writer, rs []*config.Resource, single bool) error {
	var compact bytes.Buffer
	if !single {
		compact.WriteString(`{"apiVersion":"v1","kind":"List","items":[`)
	}
	for i, r := range rs {
		b, err := config.Encode(r)
		if err != nil {
			return err
		}
		if i > 0 {
			compact.WriteByte(',')
		}
		compact.Write(b)
	}
	if !single {
		compact.WriteString("]}")
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact.Bytes(), "", "    "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// printTable is kubectl's default view, with the store revision that last
// changed each object, which tells which apply it came from.
func printTable(w io.Writer, kind config.Kind, rs []*config.Resource, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	if kind.ClusterScoped() {
		_, _ = fmt.Fprintln(tw, "NAME\tREVISION\tAGE")
	} else {
		_, _ = fmt.Fprintln(tw, "NAMESPACE\tNAME\tREVISION\tAGE")
	}
	for _, r := range rs {
		age := "<unknown>"
		if !r.Meta.CreationTimestamp.IsZero() {
			age = humanAge(now.Sub(r.Meta.CreationTimestamp.Time))
		}
		if kind.ClusterScoped() {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Meta.Name, r.Meta.ResourceVersion, age)
		} else {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Meta.Namespace, r.Meta.Name, r.Meta.ResourceVersion, age)
		}
	}
	return tw.Flush()
}

// humanAge prints an age the way kubectl's AGE column does: precise when
// recent, coarser as it grows.
func humanAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	m, h := s/60, s/3600
	days := h / 24
	switch {
	case s < 120:
		return strconv.FormatInt(s, 10) + "s"
	case m < 10:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s%60)
	case m < 180:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		if m%60 == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m%60)
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case h < 192:
		if h%24 == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h%24)
	case days < 365*2:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dy", days/365)
}
