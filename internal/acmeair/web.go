package acmeair

import "net/http"

// mainPage is the main service's page. The reference app's main service
// serves the web front end; the load does not touch it, so one page that
// says where the API is will do.
const mainPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Acme Air</title></head>
<body><h1>Acme Air</h1>
<p>Log in with POST /auth/login (login, password); search with POST /flight/queryflights;
book with POST /booking/bookflights. See docs/acmeair.md.</p></body></html>
`

func newMain() *Service {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(mainPage))
	})
	mux.HandleFunc("GET /acmeair/status", status)
	return &Service{name: ServiceMain, handler: mux}
}
