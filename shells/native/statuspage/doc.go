// Package statuspage owns the status page a node serves at / (docs/contract.md §6.5): the
// built page, embedded in the binary so that a node needs nothing beyond itself (no CDN, no
// npm at build time), and the handler that serves it. The page's source is
// web/statuspage; `make page` rebuilds dist from it and its lockfile, and `make test`
// fails if the build differs from what is committed here.
//
// The page holds no data: it reads GET /v1/status and GET /v1/status/lag from the node that
// served it, and on demand one table's GET /v1/tables/{t}/changes, so it is served without
// a token even when the API requires one, and asks the user for a token that it keeps in
// the browser only.
//
// # The jobs, by file
//
// statuspage.go holds them all: Files, the embedded build (dist/index.html and
// dist/assets/), and Handler, which serves it with headers that keep the page to its own
// files and its node.
package statuspage
