package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/pilot/discovery"
)

// meshperf pilot's --log_output_level takes istiod's form: a comma-separated
// list of SCOPE:LEVEL pairs, where a bare LEVEL means the default scope and
// "all" names every scope. Scopes are the parts of the control plane that
// log; as in istiod, a scope this build does not have is ignored with a
// warning, so that a command line written for istiod (which has dozens)
// still starts. Unlike istiod, where every scope starts at info, the default
// scope's level is also every unnamed scope's, so that `warn` quiets the
// whole control plane as it always has.

// defaultScope is the control plane's own lines, and the level of every
// scope the flag does not name.
const defaultScope = "default"

// apiScope is the config API's lines.
const apiScope = "api"

// injectScope is the sidecar injector's lines (istiod's scope name).
const injectScope = "inject"

// pilotLogScopes are the scopes meshperf pilot has, in the order -h lists
// them.
var pilotLogScopes = []string{defaultScope, discovery.ScopeADS, discovery.ScopePush, discovery.ScopeCA, discovery.ScopeStore, discovery.ScopeKube, apiScope, injectScope}

// levelOff silences a scope (istiod's "none").
const levelOff = slog.LevelError + 100

var logLevelNames = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "warning": slog.LevelWarn,
	"error": slog.LevelError, "fatal": slog.LevelError, "none": levelOff,
}

// logLevels is a parsed --log_output_level.
type logLevels struct {
	fallback slog.Level            // the default scope's, and every unnamed scope's
	scopes   map[string]slog.Level // the scopes named
	unknown  []string              // scopes named that pilot does not have
}

// logLevelsUsage is the flag's help.
func logLevelsUsage() string {
	return "log `levels`: LEVEL, or istiod's SCOPE:LEVEL,... (levels debug, info, warn, error, none; scopes " +
		strings.Join(pilotLogScopes, ", ") + ", or all); a scope not named follows default, which a bare LEVEL sets"
}

// parseLogLevels reads istiod's --log_output_level form.
func parseLogLevels(s string) (logLevels, error) {
	l := logLevels{fallback: slog.LevelInfo, scopes: map[string]slog.Level{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		scope, name, scoped := strings.Cut(item, ":")
		if !scoped {
			scope, name = defaultScope, item
		}
		level, ok := logLevelNames[strings.ToLower(name)]
		if !ok {
			return logLevels{}, fmt.Errorf("--log_output_level %q: level %q: want debug, info, warn, error or none", s, name)
		}
		switch {
		case scope == "all":
			l.fallback = level
			for _, sc := range pilotLogScopes {
				l.scopes[sc] = level
			}
		case scope == defaultScope:
			l.fallback = level
		case slices.Contains(pilotLogScopes, scope):
			l.scopes[scope] = level
		default:
			l.unknown = append(l.unknown, scope)
		}
	}
	return l, nil
}

// level is a scope's level.
func (l logLevels) level(scope string) slog.Level {
	if lv, ok := l.scopes[scope]; ok {
		return lv
	}
	return l.fallback
}

// loggers makes one logger per scope over a single text handler on w, so
// that lines from different scopes never interleave; each line of a scope
// other than the default one says its scope.
func (l logLevels) loggers(w io.Writer) func(scope string) *slog.Logger {
	base := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	return func(scope string) *slog.Logger {
		var h slog.Handler = base
		if scope != defaultScope {
			h = h.WithAttrs([]slog.Attr{slog.String("scope", scope)})
		}
		return slog.New(scopeHandler{Handler: h, min: l.level(scope)})
	}
}

// scopeHandler applies one scope's level in front of the shared handler.
type scopeHandler struct {
	slog.Handler
	min slog.Level
}

func (h scopeHandler) Enabled(_ context.Context, level slog.Level) bool { return level >= h.min }

func (h scopeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return scopeHandler{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h scopeHandler) WithGroup(name string) slog.Handler {
	return scopeHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}
