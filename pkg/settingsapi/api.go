// Package settingsapi serves a Rancher-compatible /v3/settings API for the
// project's six settings, for installations without Rancher: list, get and
// PUT, with Rancher's JSON shape (id, name, value, default, customized,
// source, type "setting", links) and error shape (norman's httperror codes,
// written by pkg/httpapi).
//
// It acts with the caller's bearer token against the kube-apiserver, never
// with the controller's own credentials, so Kubernetes RBAC decides who may
// read and change what. A PUT is validated before it is written: an invalid
// value answers 422 with the rule and the numbers, an env-sourced setting
// 405, an unknown name 404; no token 401; a user without the right 403.
package settingsapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/rancher/norman/httperror"
	"github.com/rancher/norman/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/httpapi"
	"leasetune.io/leasetune/pkg/settings"
)

// Prefix is the path the API serves.
const Prefix = "/v3/settings"

var settingsGVR = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}

// Server is the /v3/settings API.
type Server struct {
	// Base locates the kube-apiserver (host and CA); its credentials are
	// never used: each request carries the caller's token.
	Base *rest.Config
	Log  *slog.Logger
}

// Register adds the API's handlers to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc(Prefix, s.handle)
	mux.HandleFunc(Prefix+"/", s.handle)
}

// resource is a Setting in Rancher's JSON shape.
type resource struct {
	types.Resource
	BaseType   string `json:"baseType"`
	Name       string `json:"name"`
	Value      string `json:"value"`
	Default    string `json:"default"`
	Customized bool   `json:"customized"`
	Source     string `json:"source"`
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	token, ok := bearer(r)
	if !ok {
		httpapi.WriteError(w, httperror.NewAPIError(httperror.Unauthorized, "a bearer token is required"))
		return
	}
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.BearerToken = token
	cfg.UserAgent = "leasetune-settings-api"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	client := dyn.Resource(settingsGVR)
	name := strings.Trim(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	switch {
	case name == "" && r.Method == http.MethodGet:
		s.list(w, r, client)
	case name != "" && r.Method == http.MethodGet:
		s.get(w, r, client, name)
	case name != "" && r.Method == http.MethodPut:
		s.put(w, r, client, name)
	default:
		httpapi.WriteError(w, httperror.NewAPIError(httperror.MethodNotAllowed, r.Method+" is not supported on "+r.URL.Path))
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, c dynamic.NamespaceableResourceInterface) {
	objs, err := listOurs(r.Context(), c)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	coll := types.GenericCollection{Collection: types.Collection{Type: "collection", ResourceType: "setting",
		Links: map[string]string{"self": baseURL(r) + Prefix}, Actions: map[string]string{}}, Data: []interface{}{}}
	for _, o := range objs {
		coll.Data = append(coll.Data, toResource(r, o))
	}
	writeJSON(w, http.StatusOK, coll)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, c dynamic.NamespaceableResourceInterface, name string) {
	u, err := c.Get(r.Context(), name, metav1.GetOptions{})
	if _, ours := settings.Lookup(name); !ours {
		// Asked with the caller's token all the same, so a bad token is
		// 401 whatever the name.
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			err = httperror.NewAPIError(httperror.NotFound, "setting "+name+" not found")
		}
		httpapi.WriteError(w, err)
		return
	}
	respond(w, r, u, err)
}

// respond answers with the Setting u, or the error.
func respond(w http.ResponseWriter, r *http.Request, u *unstructured.Unstructured, err error) {
	var o v3.Setting
	if err == nil {
		o, err = fromUnstructured(u)
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, toResource(r, o))
}

// put validates the new value against the current values of the setting's
// component (read by name, with the caller's token: get is the only right
// needed besides patch), then writes only value.
func (s *Server) put(w http.ResponseWriter, r *http.Request, c dynamic.NamespaceableResourceInterface, name string) {
	value, err := decodeValue(r.Body)
	if err != nil {
		httpapi.WriteError(w, httperror.NewFieldAPIError(httperror.InvalidBodyContent, "value", err.Error()))
		return
	}
	d, ours := settings.Lookup(name)
	if !ours {
		s.get(w, r, c, name) // 401 for a bad token, else 404
		return
	}
	var objs []v3.Setting
	for _, od := range settings.Of(d.Component) {
		u, err := c.Get(r.Context(), od.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // counts as its default
		}
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		o, err := fromUnstructured(u)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		objs = append(objs, o)
	}
	if err := settings.CheckChange(settings.View{Objects: objs}, name, value); err != nil {
		var ce *settings.ChangeError
		switch {
		case errors.Is(err, settings.ErrReadOnly):
			httpapi.WriteError(w, httperror.NewAPIError(httperror.MethodNotAllowed, err.Error()))
		case errors.As(err, &ce):
			httpapi.WriteError(w, httperror.NewFieldAPIError(httperror.InvalidBodyContent, "value", err.Error()))
		default:
			httpapi.WriteError(w, err)
		}
		return
	}
	patch, _ := json.Marshal(map[string]string{"value": value})
	u, err := c.Patch(r.Context(), name, ktypes.MergePatchType, patch, metav1.PatchOptions{})
	if err == nil {
		s.Log.Info("setting changed through /v3", "setting", name, "value", value)
	}
	respond(w, r, u, err)
}

// decodeValue reads a PUT body: one JSON object whose "value" member (the
// exact name) is a string; other members (Rancher clients send the whole
// resource) are ignored, trailing data is not.
func decodeValue(body io.Reader) (string, error) {
	dec := json.NewDecoder(io.LimitReader(body, 1<<20))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return "", errors.New("the body must be one JSON object with a string member value")
	}
	if dec.More() {
		return "", errors.New("the body must be one JSON object, with nothing after it")
	}
	raw, ok := m["value"]
	var value string
	if !ok || string(raw) == "null" || json.Unmarshal(raw, &value) != nil {
		return "", errors.New("the body must have a string member value")
	}
	return value, nil
}

// listOurs lists the Setting objects and keeps the project's.
func listOurs(ctx context.Context, c dynamic.NamespaceableResourceInterface) ([]v3.Setting, error) {
	l, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v3.Setting
	for i := range l.Items {
		if _, ok := settings.Lookup(l.Items[i].GetName()); !ok {
			continue
		}
		o, err := fromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func fromUnstructured(u *unstructured.Unstructured) (v3.Setting, error) {
	var s v3.Setting
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s)
	return s, err
}

func toResource(r *http.Request, s v3.Setting) resource {
	self := baseURL(r) + Prefix + "/" + s.Name
	links := map[string]string{"self": self}
	if s.Source != v3.SourceEnv {
		links["update"] = self
	}
	// As Rancher's /v3 settings store shows a Setting (rancher/rancher
	// v2.10.3 pkg/api/norman/store/setting/store.go, New's Transformer):
	// env-sourced: its value, customized false, source "env"; no value: the
	// default as the value, customized false, source "default"; otherwise
	// customized true, source "db".
	value, customized, source := s.Value, true, "db"
	switch {
	case s.Source == v3.SourceEnv:
		customized, source = false, "env"
	case s.Value == "":
		value, customized, source = s.Default, false, "default"
	}
	return resource{
		Resource: types.Resource{ID: s.Name, Type: "setting", Links: links, Actions: map[string]string{}},
		BaseType: "setting", Name: s.Name, Value: value, Default: s.Default, Customized: customized, Source: source,
	}
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") || strings.TrimSpace(h[len("Bearer "):]) == "" {
		return "", false
	}
	return strings.TrimSpace(h[len("Bearer "):]), true
}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
