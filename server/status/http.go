package status

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

//go:embed assets
var assets embed.FS

// Auth decides who may read the status. It returns what the request may
// see, or ok false when it presents no valid credentials.
type Auth func(r *http.Request) (v View, ok bool)

// Handler serves the status page and its data:
//
//	GET /            the page (HTML; its script and style under /assets/)
//	GET /api/status  the Status as JSON, for the page and `quiver status`
//
// The page itself holds no data: with auth, only /api/status asks for a
// token (the page prompts for one). auth nil lets everyone see everything.
func (b *Board) Handler(auth Auth) http.Handler {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		var view View
		if auth != nil {
			v, ok := auth(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="quiver"`)
				http.Error(w, "status: a bearer token of auth.tokens is required (Authorization: Bearer <token>)", http.StatusUnauthorized)
				return
			}
			view = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		_ = enc.Encode(b.Snapshot(view)) // a failed write is the client gone
	})
	return secureHeaders(mux)
}

// secureHeaders forbids the page any origin but the server's own (no CDN,
// no beacon, no framing).
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}
