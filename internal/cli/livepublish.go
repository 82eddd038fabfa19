package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/meshperf/meshperf/internal/live"
)

// publishFlags are the flags of the commands that publish their progress
// to a running `meshperf dashboard` (load, lab run).
type publishFlags struct {
	url, token, session string
}

func (f *publishFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "dashboard", "", "publish live progress to the meshperf dashboard at this `URL` (e.g. http://127.0.0.1:8088); one that cannot be reached is warned about once and the run goes on")
	fs.StringVar(&f.token, "dashboard-token", "", "the dashboard's `token`, when it has one (default $"+live.TokenEnv+")")
	fs.StringVar(&f.session, "dashboard-session", "", "publish into this open live session `id` instead of opening one (how a lab passes its session to its load runs, and the dashboard its session to a lab it starts)")
}

// check refuses a malformed URL, and a token or session without a dashboard.
func (f *publishFlags) check() error {
	if f.url == "" {
		if f.token != "" || f.session != "" {
			return errors.New("-dashboard-token and -dashboard-session need -dashboard URL")
		}
		return nil
	}
	if err := live.CheckURL(f.url); err != nil {
		return fmt.Errorf("-dashboard: %w", err)
	}
	if f.token == "" {
		f.token = os.Getenv(live.TokenEnv)
	}
	return nil
}

// start begins publishing, or returns nil without -dashboard.
func (f *publishFlags) start(name string, o live.Opening, warn io.Writer) *live.Publisher {
	if f.url == "" {
		return nil
	}
	return live.Start(live.Config{URL: f.url, Token: f.token, Session: f.session, Opening: o, Name: name, Warn: warn})
}
