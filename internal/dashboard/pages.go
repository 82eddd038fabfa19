package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"strings"
	"time"
)

// web holds the pages' templates and their static assets, embedded so that
// the one binary serves the UI with no network at run time.
//
//go:embed web
var web embed.FS

// pageRoute is one browser page: the handler gathers what the page shows,
// the template (web/NAME, rendered inside web/layout.html) draws it. Pages
// are built on the same functions as the JSON API, so that a page and its
// /api/ twin cannot disagree.
type pageRoute struct {
	pattern  string   // net/http's ServeMux pattern
	params   []string // the query parameters it accepts; any other is refused
	template string   // web/NAME
	handle   func(s *server, r *http.Request) (view, error)
}

// view is what a page handler answers: the page's title, the navigation
// section it belongs to, and the data its template reads as .Data.
type view struct {
	title   string
	section string
	data    any
}

// The sections of the navigation bar, in order; a page names its own.
const (
	sectionRuns    = "runs"
	sectionCompare = "compare"
	sectionTrends  = "trends"
	sectionLive    = "live"
	sectionFortio  = "fortio"
	sectionAPI     = "api"
)

var pageRoutes = []pageRoute{
	{pattern: "GET /live", template: "live_list.html", handle: (*server).liveListPage},
	{pattern: "GET /live/{id}", template: "live_session.html", handle: (*server).liveSessionPage},
	{pattern: "GET /{$}", params: runsPageParams, template: "runs.html", handle: (*server).runsPage},
	{pattern: "GET /compare", params: comparePageParams, template: "compare.html", handle: (*server).comparePage},
	{pattern: "GET /trends", params: trendsPageParams, template: "trends.html", handle: (*server).trendsPage},
	{pattern: "GET /runs/{id}", template: "run.html", handle: (*server).runPage},
	{pattern: "GET /cpruns/{label}", params: []string{"start"}, template: "cprun.html", handle: (*server).controlPlaneRunPage},
	{pattern: "GET /fortio/{$}", template: "fortio.html", handle: (*server).fortioDirPage},
	{pattern: "GET /fortio/{file}", template: "fortiofile.html", handle: (*server).fortioFilePage},
}

// layoutData is what web/layout.html reads.
type layoutData struct {
	Title   string
	Section string
	Data    any
	Now     time.Time
}

// pageFuncs are the helpers every page template may call.
var pageFuncs = template.FuncMap{
	"ms":   formatMs,
	"num":  formatNumber,
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"date": func(t time.Time) string { return t.UTC().Format(time.DateOnly) },
	"join": strings.Join,
	"svg":  func(s string) template.HTML { return template.HTML(s) }, // drawn by gonum/plot from stored figures, never user text
	"deref": func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	},
}

// parsePages parses each page template with its own copy of the layout, so
// that every page defines "content" (and "title") for itself.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("layout.html").Funcs(pageFuncs).ParseFS(web, "web/layout.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	names, err := fs.Glob(web, "web/*.html")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "web/")
		if base == "layout.html" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(web, name)
		if err != nil {
			return nil, err
		}
		pages[base] = t
	}
	return pages, nil
}

// pages are parsed once; a template that does not parse is a build
// mistake, caught by every test of this package.
var pages = func() map[string]*template.Template {
	p, err := parsePages()
	if err != nil {
		panic(fmt.Sprintf("dashboard templates: %v", err))
	}
	return p
}()

// servePage runs p's handler after refusing query parameters it does not
// take, and renders its view; errors are pages too, with the API's status
// codes and messages.
func (s *server) servePage(p pageRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v view
		err := checkParams(r, p.params)
		if err == nil {
			v, err = p.handle(s, r)
		}
		if err != nil {
			status, msg := s.failure(r, err)
			s.writeErrorPage(w, status, msg)
			return
		}
		s.render(w, http.StatusOK, p.template, v)
	})
}

// render writes a page: the whole page is rendered before anything is
// sent, so that a template error is a 500, not half a page.
func (s *server) render(w http.ResponseWriter, status int, name string, v view) {
	t, ok := pages[name]
	if !ok {
		s.log.Error("no such page template", "template", name)
		http.Error(w, "no such page template "+name, http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", layoutData{Title: v.title, Section: v.section, Data: v.data, Now: time.Now()}); err != nil {
		s.log.Error("render page", "template", name, "error", err)
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (s *server) writeErrorPage(w http.ResponseWriter, status int, msg string) {
	s.render(w, status, "error.html", view{title: http.StatusText(status), data: msg})
}

// staticFiles serves web/static (the style sheet, the live page's script).
func staticFiles() http.Handler {
	sub, err := fs.Sub(web, "web/static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// formatMs writes a latency in milliseconds with the precision it
// deserves, "–" for unknown.
func formatMs(v float64) string {
	switch {
	case v != v: // NaN
		return "–"
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// formatNumber writes a figure with three significant digits or whole, "–"
// for unknown.
func formatNumber(v float64) string {
	switch {
	case v != v:
		return "–"
	case v >= 100 || v <= -100: // %.3g would write 999.7 as 1e+03
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
