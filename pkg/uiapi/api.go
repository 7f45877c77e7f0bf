// Package uiapi serves the data of the Rancher UI extension's "Leader
// election" page that Rancher's own Setting API does not have, under
// /leasetune/v1 on the HTTPS port beside /v3/settings:
//
//   - GET  /leasetune/v1/overview: each component's three settings with
//     their default, the value in effect and its source (default, user,
//     env), which are read-only and why, the triple in effect, a pending
//     or refused one, and the Fleet agent channel;
//   - POST /leasetune/v1/plan: for a proposed triple of one component, the
//     order in which to write its three settings so that every step is
//     accepted (settings.CheckChange, as the webhook and /v3/settings
//     check it) and what that change would write and restart (pkg/plan,
//     `leasetune plan --set`);
//   - GET  /leasetune/v1/tradeoff: lock requests per hour of the
//     installation and worst-case failover against the retry period
//     (pkg/election's cost model), the triple in effect on that curve, and
//     pkg/recommend's triple for a failover target;
//   - GET  /leasetune/v1/clusters: the downstream clusters whose agents run
//     something other than the global agent triple (override annotations,
//     the effective triple, clusters left alone with the reason from
//     leasetune.io/agent-env-status), routed as the agentenv controller
//     routes them.
//
// Like pkg/settingsapi it acts with the caller's own bearer token, never
// with leasetune's credentials, so Kubernetes RBAC decides what a user may
// see: no token is 401, a read the user may not make is 403 (or, for the
// parts of the overview that are only context, a note saying what could
// not be read). The token comes in the Authorization header, or in
// X-Leasetune-Token when the request came through a proxy that consumes
// Authorization itself (Rancher's, inside Rancher's UI): that token is then
// used against Upstream. Answers are JSON; errors have Rancher's error
// shape (type "error", status, code, message, fieldName).
package uiapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/rancher/norman/httperror"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/controllers/fleetsettings"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/httpapi"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/settings"
)

// Prefix is the path the API serves.
const Prefix = "/leasetune/v1"

// TokenHeader carries the caller's token where Authorization cannot.
const TokenHeader = "X-Leasetune-Token"

// Server is the page's API.
type Server struct {
	// Base locates the kube-apiserver (host and CA); its credentials are
	// never used: each request carries the caller's token.
	Base *rest.Config
	// Upstream, when set, is where a token from TokenHeader is used
	// instead of Base (e.g. Rancher's http://rancher.cattle-system.svc/k8s/clusters/local,
	// which takes Rancher tokens and acts as the Rancher user on the local
	// cluster). Its credentials are never used either.
	Upstream *rest.Config
	// Plan names the namespaces and the Rancher Deployment as the
	// controller's flags do (Set is ignored).
	Plan plan.Options
	// EnvSet reports whether a setting's env var is set on leasetune's pod
	// (such a setting is read-only); nil: only the objects' source counts.
	EnvSet func(settings.Definition) bool
	// Log receives structured logs.
	Log *slog.Logger
}

// Register adds the API's handlers to mux.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc(Prefix+"/", s.handle)
}

// readTimeout bounds the reads one request makes.
const readTimeout = 20 * time.Second

// clients are a request's API clients, acting with the caller's token.
type clients struct {
	cs  kubernetes.Interface
	dyn dynamic.Interface
}

func (s *Server) clientsFor(r *http.Request) (*clients, error) {
	base, token := s.Base, ""
	if t := strings.TrimSpace(r.Header.Get(TokenHeader)); t != "" {
		token = strings.TrimPrefix(t, "Bearer ")
		if s.Upstream != nil {
			base = s.Upstream
		}
	} else if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		token = strings.TrimSpace(h[len("Bearer "):])
	}
	if token == "" {
		return nil, httperror.NewAPIError(httperror.Unauthorized, "a bearer token is required (Authorization: Bearer <token>, or "+TokenHeader+")")
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = token
	cfg.UserAgent = "leasetune-ui-api"
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{cs: cs, dyn: dyn}, nil
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	c, err := s.clientsFor(r)
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	route := strings.TrimPrefix(r.URL.Path, Prefix)
	var out interface{}
	switch {
	case route == "/overview" && r.Method == http.MethodGet:
		out, err = s.overview(ctx, c)
	case route == "/plan" && r.Method == http.MethodPost:
		var req PlanRequest
		if err = decodeBody(r.Body, &req); err == nil {
			out, err = s.plan(ctx, c, req)
		}
	case route == "/tradeoff" && r.Method == http.MethodGet:
		out, err = s.tradeoff(ctx, c, r.URL.Query().Get("component"), r.URL.Query().Get("maxFailover"))
	case route == "/clusters" && r.Method == http.MethodGet:
		out, err = s.clusters(ctx, c)
	case route == "/overview" || route == "/plan" || route == "/tradeoff" || route == "/clusters":
		err = httperror.NewAPIError(httperror.MethodNotAllowed, r.Method+" is not supported on "+r.URL.Path)
	default:
		err = httperror.NewAPIError(httperror.NotFound, r.URL.Path+" is not part of the API (overview, plan, tradeoff, clusters)")
	}
	if err != nil {
		httpapi.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Triple is a timing triple as strings (durations in Go's syntax).
type Triple struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

func tripleOf(t election.Timings) *Triple {
	f := election.FormatDuration
	return &Triple{LeaseDuration: f(t.LeaseDuration), RenewDeadline: f(t.RenewDeadline), RetryPeriod: f(t.RetryPeriod)}
}

// get returns the value of field f.
func (t Triple) get(f election.Field) string {
	switch f {
	case election.LeaseDuration:
		return t.LeaseDuration
	case election.RenewDeadline:
		return t.RenewDeadline
	}
	return t.RetryPeriod
}

// Source names where a value comes from, as the page shows it.
type Source string

const (
	// SourceDefault: the setting's default (its value is empty).
	SourceDefault Source = "default"
	// SourceUser: a value a user set (the Setting's value, or leasetune's
	// record of it while the object is missing).
	SourceUser Source = "user"
	// SourceEnv: the env var on leasetune's pod; the setting is read-only.
	SourceEnv Source = "env"
	// SourceOverride: a cluster's override annotation (clusters only).
	SourceOverride Source = "override"
)

func sourceOf(o settings.Origin) Source {
	switch o {
	case settings.OriginEnv:
		return SourceEnv
	case settings.OriginDefault:
		return SourceDefault
	}
	return SourceUser
}

// SettingView is one setting as the page shows it.
type SettingView struct {
	Name        string `json:"name"`
	Field       string `json:"field"`
	Description string `json:"description"`
	Default     string `json:"default"`
	// Value is the Setting object's value ("" means the default); Exists
	// is false when there is no object (leasetune recreates it).
	Value  string `json:"value"`
	Exists bool   `json:"exists"`
	// Resolved is the value that counts (the env var, the object's value,
	// the remembered value, else the default), and Source where it is from.
	Resolved string `json:"resolved"`
	Source   Source `json:"source"`
	// Remembered is true when Resolved is leasetune's record of a user's
	// value because the object is missing.
	Remembered bool `json:"remembered,omitempty"`
	// ReadOnly is true when an env var sets the setting; ReadOnlyReason
	// says which and where to change it.
	ReadOnly       bool   `json:"readOnly"`
	ReadOnlyReason string `json:"readOnlyReason,omitempty"`
	EnvVar         string `json:"envVar"`
}

// ComponentView is one component's triple.
type ComponentView struct {
	Component string `json:"component"`
	// Title names the component for a person; Restarts says what a change
	// restarts.
	Title    string         `json:"title"`
	Restarts string         `json:"restarts"`
	Settings [3]SettingView `json:"settings"`
	// InEffect is the triple leasetune holds in effect (nil: none yet);
	// InEffectFrom says whether that is leasetune's record ("record") or
	// computed from the settings alone ("settings", when the record cannot
	// be read with the caller's rights).
	InEffect     *Triple `json:"inEffect"`
	InEffectFrom string  `json:"inEffectFrom"`
	// Pending is a valid triple that waits for the settle time (nil: none).
	Pending *Triple `json:"pending"`
	// Refused is why the settings as they are do not take effect ("": they do).
	Refused string `json:"refused,omitempty"`
}

// Overview is GET /overview.
type Overview struct {
	Components []ComponentView `json:"components"`
	// Channel is the Fleet agent channel and Explain what it means ("" when unknown).
	Channel        string `json:"channel"`
	ChannelExplain string `json:"channelExplain,omitempty"`
	// Notes say what could not be read with the caller's rights, and what
	// the page shows instead.
	Notes []string `json:"notes"`
}

// Titles are the components' names for a person.
var Titles = map[settings.Component]string{
	settings.FleetController: "Fleet controllers",
	settings.FleetAgent:      "Fleet agents",
	settings.Rancher:         "Rancher server",
}

// read reads the parts of the installation a request needs
// (inventory.Read) with the caller's clients: the Settings by name (get
// rights on them suffice), and the parts in optional, which only add
// context, as Unread (a note) when the caller may not read them.
func (s *Server) read(ctx context.Context, c *clients, parts, optional inventory.Part) (*inventory.Snapshot, error) {
	opts := s.Plan.Inventory()
	opts.Parts, opts.Optional, opts.SettingsByName = parts, optional, true
	return inventory.Read(ctx, c.cs, c.dyn, opts)
}

// channelParts are the parts the Fleet agent channel is read from: none
// when the flag sets it.
func (s *Server) channelParts() inventory.Part {
	if s.Plan.ChannelOverride != "" {
		return 0
	}
	return inventory.ChannelRecord | inventory.FleetDeployments
}

// notes say what could not be read with the caller's rights (the
// snapshot's Unread parts) and what the page shows instead.
func notes(snap *inventory.Snapshot) []string {
	o := snap.Options
	out := []string{}
	for _, n := range []struct {
		part inventory.Part
		text string
	}{
		{inventory.State, fmt.Sprintf("leasetune's record (ConfigMap %s/%s) could not be read with your rights (%%s): the triples in effect are computed from the settings alone",
			o.Namespace, settings.DefaultStateName)},
		{inventory.ChannelRecord, fmt.Sprintf("leasetune's record of the Fleet agent channel (ConfigMap %s/%s) could not be read with your rights (%%s): the channel is detected without it",
			o.Namespace, fleetsettings.ChannelConfigMapName)},
		{inventory.FleetDeployments, fmt.Sprintf("the Fleet Deployments in %s could not be read with your rights (%%s)", o.FleetNamespace)},
		{inventory.RancherDeployment, fmt.Sprintf("the Rancher Deployment %s/%s could not be read with your rights (%%s): the clusters are routed as for an unknown Rancher version",
			o.RancherNamespace, o.RancherDeployment)},
	} {
		if err := snap.Unread[n.part]; err != nil {
			out = append(out, fmt.Sprintf(n.text, reason(err)))
		}
	}
	return out
}

func (s *Server) overview(ctx context.Context, c *clients) (*Overview, error) {
	inv, err := s.read(ctx, c, inventory.Settings|inventory.State|s.channelParts(), inventory.State|inventory.ChannelRecord|inventory.FleetDeployments)
	if err != nil {
		return nil, err
	}
	snap, _ := inv.Triples()
	record := lastInEffect(inv.StateData())
	byName := map[string]*v3.Setting{}
	for i := range inv.Settings {
		byName[inv.Settings[i].Name] = &inv.Settings[i]
	}
	out := &Overview{Notes: notes(inv)}
	from := "record"
	if inv.StateData() == nil {
		from = "settings"
	}
	for _, comp := range settings.Components {
		st := snap[comp]
		cv := ComponentView{Component: string(comp), Title: Titles[comp], Restarts: comp.Restarts(), InEffectFrom: from}
		for i, d := range settings.Of(comp) {
			obj := byName[d.Name]
			sv := SettingView{Name: d.Name, Field: string(d.Field), Description: d.Description, Default: d.Default,
				EnvVar: d.EnvVar(), Exists: obj != nil, Resolved: st.Inputs[i].Value, Source: sourceOf(st.Inputs[i].Origin),
				Remembered: st.Inputs[i].Origin == settings.OriginRemembered}
			if obj != nil {
				sv.Value = obj.Value
			}
			if (obj != nil && obj.Source == v3.SourceEnv) || (s.EnvSet != nil && s.EnvSet(d)) {
				sv.ReadOnly, sv.Source = true, SourceEnv
				sv.ReadOnlyReason = fmt.Sprintf("set by the env var %s on leasetune's pod (chart value settingsEnv): change or remove it there", d.EnvVar())
			}
			cv.Settings[i] = sv
		}
		if t, ok := inEffect(snap, record, comp); ok {
			cv.InEffect = tripleOf(t)
		}
		if st.Pending != nil {
			cv.Pending = tripleOf(*st.Pending)
		}
		if st.Refused != nil {
			cv.Refused = st.Refused.Error()
		}
		out.Components = append(out.Components, cv)
	}
	out.Channel = string(inv.Channel)
	if inv.Channel != "" {
		out.ChannelExplain = inv.Channel.Explain()
	}
	return out, nil
}

// inEffect is the triple in effect for c: the settings' when they hold no
// pending change, else leasetune's record (what the controllers run until
// the settle time is up).
func inEffect(snap map[settings.Component]settings.ComponentStatus, record map[settings.Component]election.Timings, c settings.Component) (election.Timings, bool) {
	st := snap[c]
	if st.Pending != nil {
		t, ok := record[c]
		return t, ok
	}
	return st.Effective, st.HasEffective
}

// lastInEffect returns the triples leasetune's record holds in effect (the
// state ConfigMap's data), by component. settings.Snapshot gives a
// component's recorded triple as its Effective when the settings
// themselves do not parse; settings that never parse are passed for that.
func lastInEffect(state map[string]string) map[settings.Component]election.Timings {
	out := map[settings.Component]election.Timings{}
	if state == nil {
		return out
	}
	var unparsable []v3.Setting
	for _, d := range settings.Registry {
		s := v3.Setting{Value: "(none)"}
		s.Name = d.Name
		unparsable = append(unparsable, s)
	}
	snap, _ := settings.Snapshot(unparsable, state)
	for c, st := range snap {
		if st.HasEffective {
			out[c] = st.Effective
		}
	}
	return out
}

// reason is the API server's message of err, without the wrapping.
func reason(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}

func decodeBody(body io.Reader, v interface{}) error {
	dec := json.NewDecoder(io.LimitReader(body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return httperror.NewAPIError(httperror.InvalidBodyContent, "the body must be one JSON object: "+err.Error())
	}
	if dec.More() {
		return httperror.NewAPIError(httperror.InvalidBodyContent, "the body must be one JSON object, with nothing after it")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
