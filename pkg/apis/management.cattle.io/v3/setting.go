package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Setting sources. Stored, Source is SourceEnv or empty (rancher/rancher
// v2.11.3 pkg/controllers/dashboardapi/settings/settings.go, SetAll); the
// /v3 API shows an empty one as SourceDB or SourceDefault (pkg/api/norman/
// store/setting/store.go).
const (
	// SourceEnv: an env var CATTLE_<NAME> on the controlling pod sets the
	// value; the setting is read-only.
	SourceEnv = "env"
	// SourceDB: /v3 only: a value is set (and no env var).
	SourceDB = "db"
	// SourceDefault: /v3 only: no value is set; the default applies.
	SourceDefault = "default"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Setting is one Rancher global setting, with the same fields and JSON as
// Rancher's own type (rancher/rancher v2.11.3 pkg/apis/management.cattle.io/
// v3/global_types.go: no omitempty, so a stored object always has all four):
// the fields are top-level, not under spec or status. An empty Value means
// Default.
type Setting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Value is the value a user set; empty means Default.
	Value string `json:"value"`
	// Default is the value that applies when Value is empty; kept current
	// by the process that declares the setting.
	Default string `json:"default"`
	// Customized is stored false: Rancher's settings provider never sets
	// it; its /v3 API computes it on read (true when a value is set and no
	// env var overrides it).
	Customized bool `json:"customized"`
	// Source is SourceEnv when the env var sets Value, else empty (stored;
	// see the Source constants for what /v3 shows).
	Source string `json:"source"`
}
