package statuspage

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// Files is the built page: index.html and assets/.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded at build time: a missing directory fails the build
	}
	return sub
}

// security is what every answer of the page carries: the page loads nothing but its own
// files and talks to nothing but the node that served it.
var security = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
}

// Handler serves the page: / is index.html (never cached, so a node's upgrade shows at
// once), /assets/NAME the built files (their names carry their content's hash: cached for
// a day). Any other path is not the page's.
func Handler() http.Handler {
	files := Files()
	static := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range security {
			w.Header().Set(k, v)
		}
		switch p := path.Clean(r.URL.Path); {
		case p == "/":
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, files, "index.html")
		case strings.HasPrefix(p, "/assets/"):
			w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
			static.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
