package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// plane answered an error or did not answer, 2 bad flags.
func Get(args []string, stdout, stderr io.Writer) int {
	return runGet(context.Background(), osPilotEnv(), args, stdout, stderr)
}

// getCommand is get's command line.
type getCommand struct {
	*command
	namespace     string
	allNamespaces bool
	output        string
	target        pilotClientFlags
}

func newGetCommand() *getCommand {
	c := &getCommand{command: newCommand("meshperf get", "KIND [NAME] [flags]",
		"Lists the objects of a kind the control plane holds, or shows one, as kubectl get does: a table by default,\n"+
			"or the YAML or JSON that meshperf apply reads back. KIND is a kind, its plural or its short name (vs, dr, se).")}
	fs := c.flags
	fs.StringVar(&c.namespace, "n", "", "the `namespace` (default: every namespace for a list, \"default\" for a name)")
	fs.StringVar(&c.namespace, "namespace", "", "same as -n")
	fs.BoolVar(&c.allNamespaces, "A", false, "every namespace (what a list shows without -n)")
	fs.BoolVar(&c.allNamespaces, "all-namespaces", false, "same as -A")
	fs.StringVar(&c.output, "o", "", "output `format`: yaml, json or name (default: a table)")
	fs.StringVar(&c.output, "output", "", "same as -o")
	c.target.define(fs)
	return c
}

// parse reads the command line: the kind and, for one object, its name.
func (c *getCommand) parse(args []string, stdout io.Writer) (config.Kind, string, error) {
	positional, err := c.command.parse(args, stdout)
	if err != nil {
		return "", "", err
	}
	switch c.output {
	case "", "yaml", "json", "name":
	default:
		return "", "", usagef("-o %q: want yaml, json or name", c.output)
	}
	if len(positional) == 0 {
		kinds := make([]string, len(config.Kinds))
		for i, k := range config.Kinds {
			kinds[i] = string(k)
		}
		return "", "", usagef("KIND is required, one of %s", strings.Join(kinds, ", "))
	}
	if len(positional) > 2 {
		return "", "", usagef("unexpected argument %q: meshperf get takes KIND and at most one NAME", positional[2])
	}
	kind, err := api.ParseKind(positional[0])
	if err != nil {
		return "", "", usageError{err.Error()}
	}
	name := ""
	if len(positional) == 2 {
		name = positional[1]
	}
	if c.allNamespaces {
		if name != "" {
			return "", "", usagef("-A lists every namespace; it does not go with a NAME")
		}
		c.namespace = ""
	}
	return kind, name, nil
}

func runGet(ctx context.Context, env pilotEnv, args []string, stdout, stderr io.Writer) int {
	cmd := newGetCommand()
	kind, name, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	c, err := newPilotClient(cmd.target, env)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	var rs []*config.Resource
	if name != "" {
		r, err := c.Get(ctx, config.Key{Kind: kind, Namespace: cmd.namespace, Name: name})
		if err != nil {
			return cmd.exit(stderr, pilotCallError(err))
		}
		rs = []*config.Resource{r}
	} else if rs, _, err = c.List(ctx, kind, cmd.namespace); err != nil {
		return cmd.exit(stderr, pilotCallError(err))
	}
	if len(rs) == 0 && cmd.output != "json" {
		where := ""
		if cmd.namespace != "" && !kind.ClusterScoped() {
			where = " in " + cmd.namespace + " namespace"
		}
		_, _ = fmt.Fprintf(stderr, "No resources found%s.\n", where)
		return exitOK
	}
	if err := printResources(stdout, cmd.output, kind, rs, name != ""); err != nil {
		return cmd.exit(stderr, err)
	}
	return exitOK
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
