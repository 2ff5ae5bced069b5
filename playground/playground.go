// Package playground serves GraphiQL with every asset embedded in the
// binary: the page makes no request to any other origin, so it works on a
// closed network and under a self-only Content-Security-Policy. The assets
// come from the npm registry through scripts/fetch-playground.
package playground

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed index.html init.js playground.css favicon.svg assets
var files embed.FS

// CSP is the Content-Security-Policy of the page and its assets: everything
// from this origin only, no inline script or style. The subscriptions'
// WebSocket needs no connect-src of its own: 'self' also matches the
// WebSocket schemes at the page's host and port (CSP Level 3, as Chromium
// implements it; the browser test checks both ways), so no origin taken
// from a request's Host is ever written into the header. The one inline
// style allowed, by its hash, is the scroll lock GraphiQL's dialogs
// (settings, short keys) write while open: react-remove-scroll-bar's, for
// a body with no margin and no scroll bar, as playground.css makes it.
// The browser test opens the settings and fails on a blocked style.
const CSP = "default-src 'self'; style-src 'self' 'sha256-Y/huXlwoYkVyQlxwSVcCi1RCDGDCSVBzDt0hYP9qlTc='; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

// Handler serves the page at / and its files under /playground/; a file
// it does not have (or a folder) goes to notFound.
func Handler(notFound http.Handler) http.Handler {
	static, err := fs.Sub(files, ".")
	if err != nil {
		panic(err)
	}
	assets := http.StripPrefix("/playground/", http.FileServerFS(static))
	index, err := files.ReadFile("index.html")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		header(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(index)
	})
	icon, err := files.ReadFile("favicon.svg")
	if err != nil {
		panic(err)
	}
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		header(w)
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Write(icon)
	})
	mux.HandleFunc("GET /playground/", func(w http.ResponseWriter, r *http.Request) {
		if info, err := fs.Stat(static, strings.TrimPrefix(r.URL.Path, "/playground/")); err != nil || info.IsDir() {
			notFound.ServeHTTP(w, r)
			return
		}
		header(w)
		w.Header().Set("Cache-Control", "public, max-age=3600")
		assets.ServeHTTP(w, r)
	})
	return mux
}

func header(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", CSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}
