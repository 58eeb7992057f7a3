package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
)

// The status console: a page at /ui/ that shows the replica, the primary,
// ZooKeeper, the store, recent handovers, every sequence and small charts
// of the history ring. It is plain HTML, CSS and JavaScript embedded in
// the binary and loads nothing from anywhere else (air-gapped sites work),
// so the Content-Security-Policy allows this origin only. The files are
// open, like the probes: they hold no data. Everything the page shows it
// reads from the /v1 routes, which need the token when one is configured;
// the page asks for it on a 401 and keeps it in sessionStorage.

//go:embed ui
var uiFiles embed.FS

// consoleCSP allows scripts, styles, images and requests from this origin
// only: no inline script, no CDN, no framing.
const consoleCSP = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleHandler serves the embedded files under /ui/.
func consoleHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	files := http.StripPrefix("/ui", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Embedded files carry no modification time: revalidate so a
		// new binary's page is not shadowed by a cached old one.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// redirectToConsole sends GET /ui to /ui/.
func redirectToConsole(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
}
