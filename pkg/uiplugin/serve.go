package uiplugin

import (
	"bytes"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Handler serves b at b.PathPrefix(): GET or HEAD of
// <prefix>/files.txt and of each path it lists. Anything else is 404 (405
// for another method); a request for another version of the extension is
// 404 too, so a UIPlugin that names a version this binary does not carry
// fails in Rancher's cache with the status, not with the wrong code.
// Each answer carries a strong ETag (the bundle's hash and the path) and
// Cache-Control: no-cache, so a cache revalidates and gets 304 when
// nothing changed.
func Handler(b *Bundle) http.Handler {
	prefix := b.PathPrefix() + "/"
	filesTxt := b.FilesTxt()
	mod := time.Unix(0, 0)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, r.Method+" is not allowed: the extension is read-only", http.StatusMethodNotAllowed)
			return
		}
		rel, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			http.Error(w, "not found: this server has "+b.Name+" "+b.Version+" at "+prefix, http.StatusNotFound)
			return
		}
		var data []byte
		switch rel {
		case "files.txt":
			data = filesTxt
		default:
			d, found := b.Files[rel]
			if !found {
				http.Error(w, "not found: "+rel+" is not in files.txt", http.StatusNotFound)
				return
			}
			data = d
		}
		ctype := mime.TypeByExtension(path.Ext(rel))
		if ctype == "" || rel == "files.txt" {
			ctype = "text/plain; charset=utf-8"
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", `"`+b.SHA256[:16]+"-"+strings.ReplaceAll(rel, "/", "_")+`"`)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, rel, mod, bytes.NewReader(data))
	})
}
