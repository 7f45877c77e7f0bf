package framework

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Steve is a double of the part of Rancher's steve API (/v1) that the
// dashboard's store uses for a page such as leasetune's: the schemas, one
// object by id, a PUT of one object, and the watch of one object through
// /v1/subscribe. It is written from rancher/steve v0.6.53 with
// rancher/apiserver v0.6.6 and rancher/wrangler v3.3.5, the modules Rancher
// v2.12.12's go.mod names; each behaviour it copies cites the file it comes
// from. What it leaves out is said below.
//
// Every read and write goes to the real kube-apiserver AS THE USER: the
// double impersonates the user a session names with the admin config it is
// given, as steve does with the user Rancher authenticated (steve
// pkg/client/factory.go: its clients impersonate the request's user), so
// that Kubernetes RBAC and the admission webhooks decide. What steve
// computes itself from RBAC — the methods a schema offers the user and
// the links of each object — the double computes the same way from the
// cluster's Roles and bindings (steve pkg/accesscontrol).
//
// A browser authenticates with Rancher's session cookie (SessionCookie,
// rancher/rancher v2.12.12 pkg/auth/tokens/api.go CookieName), whose value
// Login hands out; nothing else authenticates a request.
//
// Left out, because the page does not read them: lists of objects (only
// the schemas' collection is served), the summary steve adds to each
// object (metadata.state, metadata.relationships, metadata.fields), the
// schemas' resourceFields (null), PATCH, POST and DELETE (405), the
// subscription's notification mode and its 30-second pings.
type Steve struct {
	admin  *rest.Config
	rbac   kubernetes.Interface
	types  []steveType
	mu     sync.Mutex
	logins map[string]SteveUser
}

// SteveUser is a user as a session names it: the name and groups the
// double impersonates, and whose RBAC bindings it reads.
type SteveUser struct {
	Name   string
	Groups []string
}

// SessionCookie is the cookie Rancher keeps a browser's session in.
const SessionCookie = "R_SESS"

// csrfCookie and csrfHeader are rancher/apiserver v0.6.6
// pkg/server/validate.go's.
const (
	csrfCookie = "CSRF"
	csrfHeader = "X-API-CSRF"
)

// steveType is one served resource as steve's schema converter reads it
// from discovery (steve pkg/schema/converter/discovery.go refresh).
type steveType struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
	verbs      []string
	// id and plural are the schema's ID and pluralName
	// (pkg/schema/converter/k8stonorman.go GVKToSchemaID, GVRToPluralName).
	id, plural string
}

// NewSteve returns a double serving the resources gvrs, read from the
// API server's discovery with admin (which must be allowed to impersonate
// and to read RBAC objects). It fails when a resource is not served.
func NewSteve(admin *rest.Config, gvrs ...schema.GroupVersionResource) (*Steve, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("steve double: discovery client: %w", err)
	}
	rbac, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("steve double: client: %w", err)
	}
	s := &Steve{admin: rest.CopyConfig(admin), rbac: rbac, logins: map[string]SteveUser{}}
	for _, gvr := range gvrs {
		list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err != nil {
			return nil, fmt.Errorf("steve double: discovery of %s: %w", gvr.GroupVersion(), err)
		}
		found := false
		for _, r := range list.APIResources {
			if r.Name != gvr.Resource {
				continue
			}
			found = true
			t := steveType{gvr: gvr, kind: r.Kind, namespaced: r.Namespaced, verbs: r.Verbs,
				id: strings.ToLower(r.Kind), plural: gvr.Resource}
			if gvr.Group != "" {
				t.id = strings.ToLower(gvr.Group + "." + r.Kind)
				t.plural = gvr.Group + "." + gvr.Resource
			}
			s.types = append(s.types, t)
		}
		if !found {
			return nil, fmt.Errorf("steve double: %s is not served", gvr)
		}
	}
	return s, nil
}

// Login starts a session for user and returns the value of its cookie
// (SessionCookie), as Rancher's login does.
func (s *Steve) Login(user SteveUser) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("steve double: session: %w", err)
	}
	v := hex.EncodeToString(b)
	s.mu.Lock()
	s.logins[v] = user
	s.mu.Unlock()
	return v, nil
}

// ServeHTTP serves /v1/schemas, /v1/schemas/<id>, GET and PUT of
// /v1/<pluralName>/<name> (<namespace>/<name> for namespaced types) and
// the websocket /v1/subscribe.
func (s *Steve) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &steveRequest{Steve: s, w: w, r: r, base: baseURL(r)}
	user, ok := s.session(r)
	if !ok {
		// rancher/rancher v2.12.12 pkg/auth/requests/authenticate.go:
		// ErrMustAuthenticate.
		req.error(http.StatusUnauthorized, "Unauthorized", "must authenticate")
		return
	}
	req.user = user
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if path == "subscribe" {
		s.subscribe(req)
		return
	}
	// rancher/apiserver pkg/server/server.go handleOp: the CSRF check
	// comes first, for every request.
	if !req.checkCSRF() {
		return
	}
	access, err := s.accessFor(r.Context(), user)
	if err != nil {
		req.error(http.StatusInternalServerError, "ServerError", err.Error())
		return
	}
	req.access = access
	parts := strings.Split(path, "/")
	if parts[0] == "schemas" {
		req.schemas(parts[1:])
		return
	}
	t := s.typeNamed(parts[0], access)
	if t == nil {
		// handleOp: no schema for the type (the user's schemas have none)
		// is a 404 with no body.
		w.WriteHeader(http.StatusNotFound)
		return
	}
	ns, name := "", ""
	switch {
	case len(parts) == 2 && !t.namespaced:
		name = parts[1]
	case len(parts) == 3 && t.namespaced:
		ns, name = parts[1], parts[2]
	}
	if name == "" {
		req.error(http.StatusMethodNotAllowed, "MethodNotAllowed", "the steve double serves objects by id only")
		return
	}
	switch r.Method {
	case http.MethodGet:
		req.byID(t, ns, name)
	case http.MethodPut:
		req.update(t)
	default:
		req.error(http.StatusMethodNotAllowed, "MethodNotAllowed", "the steve double serves GET and PUT only")
	}
}

// session returns the user of the request's session cookie.
func (s *Steve) session(r *http.Request) (SteveUser, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return SteveUser{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.logins[c.Value]
	return u, ok
}

// typeNamed returns the served type whose schema ID or pluralName is name
// (rancher/apiserver pkg/types/schemas.go LookupSchema) when the user has
// its schema, else nil.
func (s *Steve) typeNamed(name string, access *accessSet) *steveType {
	name = strings.ToLower(name)
	for i := range s.types {
		t := &s.types[i]
		if (t.id == name || strings.ToLower(t.plural) == name) && access.schemaFor(t) != nil {
			return t
		}
	}
	return nil
}

// as returns a dynamic client of the resource acting as the user.
func (s *Steve) as(user SteveUser, t *steveType, ns string) (dynamic.ResourceInterface, error) {
	cfg := rest.CopyConfig(s.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user.Name, Groups: user.Groups}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("steve double: client as %s: %w", user.Name, err)
	}
	if t.namespaced {
		return c.Resource(t.gvr).Namespace(ns), nil
	}
	return c.Resource(t.gvr), nil
}

// steveRequest is one request being served.
type steveRequest struct {
	*Steve
	w      http.ResponseWriter
	r      *http.Request
	base   string
	user   SteveUser
	access *accessSet
}

// baseURL is the scheme and host links are built on (rancher/apiserver
// pkg/urlbuilder/url.go: links are absolute, on the request's own URL).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// error writes an error as rancher/apiserver pkg/handlers/error.go
// toError does: {type: error, status, code, message}.
func (q *steveRequest) error(status int, code, message string) {
	q.json(status, map[string]interface{}{"type": "error", "status": status, "code": code, "message": message})
}

// apiError writes err as steve passes errors of the kube-apiserver on
// (steve pkg/stores/proxy/error_wrapper.go translateError: the Status's
// code as status, its reason as code, its message), any other error as
// rancher/apiserver's unknown error (500 ServerError with its text).
func (q *steveRequest) apiError(err error) {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		q.error(int(s.Code), string(s.Reason), s.Message)
		return
	}
	q.error(http.StatusInternalServerError, "ServerError", err.Error())
}

func (q *steveRequest) json(status int, v interface{}) {
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(status)
	_ = json.NewEncoder(q.w).Encode(v)
}

// checkCSRF is rancher/apiserver pkg/server/validate.go CheckCSRF: for a
// browser (a User-Agent with "mozilla": pkg/parse/browser.go IsBrowser)
// without the CSRF cookie, it sets one and lets the request through; with
// the cookie, a request other than GET must carry its value in the
// X-API-CSRF header (or the CSRF query parameter), or it is refused with
// 422 InvalidCSRFToken. It reports whether the request may go on.
func (q *steveRequest) checkCSRF() bool {
	if !strings.Contains(strings.ToLower(q.r.Header.Get("User-Agent")), "mozilla") {
		return true
	}
	c, err := q.r.Cookie(csrfCookie)
	if errors.Is(err, http.ErrNoCookie) {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			q.error(http.StatusInternalServerError, "ServerError", "Failed in CSRF processing")
			return false
		}
		http.SetCookie(q.w, &http.Cookie{Name: csrfCookie, Value: hex.EncodeToString(b), Path: "/", Secure: true})
		return true
	}
	if q.r.Method == http.MethodGet || c.Value == q.r.Header.Get(csrfHeader) || c.Value == q.r.URL.Query().Get(csrfCookie) {
		return true
	}
	q.error(422, "InvalidCSRFToken", "Invalid CSRF token")
	return false
}

// schemas serves /v1/schemas (the collection of the user's schemas:
// rancher/apiserver pkg/store/schema/schema_store.go List, FilterSchemas;
// pkg/writer/encoding.go newCollection) and /v1/schemas/<id> (ByID: 404
// NotFound "no such schema" when the user has none of that ID).
func (q *steveRequest) schemas(rest []string) {
	if q.r.Method != http.MethodGet {
		q.error(http.StatusMethodNotAllowed, "MethodNotAllowed", "schemas are read only")
		return
	}
	if len(rest) == 1 && rest[0] != "" {
		for i := range q.types {
			if sc := q.access.schemaFor(&q.types[i]); sc != nil && q.types[i].id == strings.ToLower(rest[0]) {
				q.json(http.StatusOK, q.schemaJSON(&q.types[i], sc))
				return
			}
		}
		q.error(http.StatusNotFound, "NotFound", "no such schema")
		return
	}
	data := []interface{}{}
	for i := range q.types {
		if sc := q.access.schemaFor(&q.types[i]); sc != nil {
			data = append(data, q.schemaJSON(&q.types[i], sc))
		}
	}
	q.json(http.StatusOK, map[string]interface{}{
		"type": "collection", "resourceType": "schema", "links": map[string]string{"self": q.base + q.r.URL.RequestURI()},
		"actions": map[string]string{}, "data": data,
	})
}

// schemaJSON is a schema as the user gets it: rancher/wrangler
// pkg/schemas/types.go Schema's JSON, with steve's attributes
// (pkg/attributes: group, version, kind, resource, namespaced, verbs) but
// not the access list (schema_store.go toAPIObject deletes it), and the
// links rancher/apiserver's writer and pkg/builtin/schema.go
// SchemaFormatter give (self; collection when the collection methods
// include GET or POST).
func (q *steveRequest) schemaJSON(t *steveType, sc *userSchema) map[string]interface{} {
	links := map[string]string{"self": q.base + "/v1/schemas/" + t.id}
	if contains(sc.collectionMethods, http.MethodGet) || contains(sc.collectionMethods, http.MethodPost) {
		links["collection"] = q.base + "/v1/" + t.plural
	}
	return map[string]interface{}{
		"id": t.id, "type": "schema", "links": links, "pluralName": t.plural,
		"resourceMethods": sc.resourceMethods, "collectionMethods": sc.collectionMethods, "resourceFields": nil,
		"attributes": map[string]interface{}{"group": t.gvr.Group, "version": t.gvr.Version, "kind": t.kind,
			"resource": t.gvr.Resource, "namespaced": t.namespaced, "verbs": t.verbs},
	}
}

// byID is GET /v1/<type>/<id>: rancher/apiserver pkg/handlers/list.go
// ByIDHandler (403 PermissionDenied "can not get <id>" when the schema has
// no GET: pkg/server/access.go CanGet), then steve's store as the user
// (steve pkg/stores/sqlproxy/proxy_store.go byID: a GET with the user's
// client), its errors as translateError makes them.
func (q *steveRequest) byID(t *steveType, ns, name string) {
	sc := q.access.schemaFor(t)
	if !contains(sc.resourceMethods, http.MethodGet) {
		q.error(http.StatusForbidden, "PermissionDenied", "can not get "+t.id)
		return
	}
	c, err := q.as(q.user, t, ns)
	if err != nil {
		q.apiError(err)
		return
	}
	obj, err := c.Get(q.r.Context(), name, metav1.GetOptions{})
	if err != nil {
		q.apiError(err)
		return
	}
	q.json(http.StatusOK, q.resource(t, obj))
}

// update is PUT /v1/<type>/<id>: rancher/apiserver pkg/handlers/update.go
// UpdateHandler (403 PermissionDenied "can not update <id>" when the
// schema has no PUT: pkg/server/access.go CanUpdate), the body read as
// JSON, then steve's store (steve pkg/stores/sqlproxy/proxy_store.go
// Update: metadata.resourceVersion is required, apiVersion and kind are
// the schema's, the reserved fields are taken back from their underscore
// names (moveFromUnderscore), and the object is updated with the user's
// client), its errors as translateError makes them.
func (q *steveRequest) update(t *steveType) {
	sc := q.access.schemaFor(t)
	if !contains(sc.resourceMethods, http.MethodPut) {
		q.error(http.StatusForbidden, "PermissionDenied", "can not update "+t.id)
		return
	}
	var input map[string]interface{}
	if err := json.NewDecoder(io.LimitReader(q.r.Body, 2<<20)).Decode(&input); err != nil {
		q.error(http.StatusUnprocessableEntity, "InvalidBodyContent", fmt.Sprintf("Failed to parse body: %v", err))
		return
	}
	u := &unstructured.Unstructured{Object: moveFromUnderscore(input)}
	if u.GetResourceVersion() == "" {
		q.error(http.StatusInternalServerError, "ServerError", "metadata.resourceVersion is required for update")
		return
	}
	u.SetAPIVersion(t.gvr.GroupVersion().String())
	u.SetKind(t.kind)
	// Steve updates the object the body names, in the body's namespace
	// (types.Namespace(input)); the id in the path is not read.
	c, err := q.as(q.user, t, u.GetNamespace())
	if err != nil {
		q.apiError(err)
		return
	}
	obj, err := c.Update(q.r.Context(), u, metav1.UpdateOptions{})
	if err != nil {
		q.apiError(err)
		return
	}
	q.json(http.StatusOK, q.resource(t, obj))
}

// reserved are the fields steve's objects carry at the top level for
// themselves (rancher/apiserver pkg/types/types.go ReservedFields); an
// object's own fields of these names travel as _<name>.
var reserved = []string{"id", "type", "links", "actions"}

// moveFromUnderscore is steve pkg/stores/sqlproxy/proxy_store.go's.
func moveFromUnderscore(obj map[string]interface{}) map[string]interface{} {
	if obj == nil {
		return map[string]interface{}{}
	}
	for _, k := range reserved {
		v, ok := obj["_"+k]
		delete(obj, "_"+k)
		delete(obj, k)
		if ok {
			obj[k] = v
		}
	}
	return obj
}

// resource is an object as steve writes it: its id (namespace/name or
// name: steve pkg/stores/partition/store.go ToAPI) and type (the schema
// ID), its own fields with the reserved ones under _<name>
// (moveToUnderscore), and the links rancher/apiserver
// pkg/writer/encoding.go addLinks gives — self; update, remove and patch
// where the schema offers PUT, DELETE and PATCH — of which steve's
// formatter (pkg/resources/common/formatter.go) keeps update, remove and
// patch only where the user may update, delete and patch this very
// object, and adds view.
func (q *steveRequest) resource(t *steveType, obj *unstructured.Unstructured) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range obj.Object {
		out[k] = v
	}
	for _, k := range reserved {
		if v, ok := out[k]; ok {
			delete(out, k)
			out["_"+k] = v
		}
	}
	id := obj.GetName()
	if obj.GetNamespace() != "" {
		id = obj.GetNamespace() + "/" + id
	}
	self := q.base + "/v1/" + t.plural + "/" + id
	links := map[string]string{"self": self, "view": q.base + viewPath(t.gvr, obj.GetNamespace(), obj.GetName())}
	sc := q.access.schemaFor(t)
	gr := t.gvr.GroupResource()
	for _, l := range []struct{ link, method, verb string }{
		{"update", http.MethodPut, "update"}, {"remove", http.MethodDelete, "delete"}, {"patch", http.MethodPatch, "patch"},
	} {
		if sc != nil && contains(sc.resourceMethods, l.method) && q.access.grants(l.verb, gr, obj.GetNamespace(), obj.GetName()) {
			links[l.link] = self
		}
	}
	out["id"], out["type"], out["links"] = id, t.id, links
	return out
}

// viewPath is steve pkg/resources/common/formatter.go buildBasePath:
// /v1/<group>.<resource>[/<ns>]/<name> for management.cattle.io/v3, the
// kube-apiserver's own path otherwise.
func viewPath(gvr schema.GroupVersionResource, ns, name string) string {
	var b strings.Builder
	switch {
	case gvr.Group == "management.cattle.io" && gvr.Version == "v3":
		b.WriteString("/v1/" + gvr.Group + "." + gvr.Resource)
		if ns != "" {
			b.WriteString("/" + ns)
		}
	default:
		if gvr.Group == "" {
			b.WriteString("/api/v1/")
		} else {
			b.WriteString("/apis/" + gvr.Group + "/" + gvr.Version + "/")
		}
		if ns != "" {
			b.WriteString("namespaces/" + ns + "/")
		}
		b.WriteString(gvr.Resource)
	}
	b.WriteString("/" + url.PathEscape(name))
	return b.String()
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
