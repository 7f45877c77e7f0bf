package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Setting sources, the values of Setting.Source, as Rancher writes them.
const (
	// SourceEnv: an env var CATTLE_<NAME> on the controlling pod sets the
	// value; the setting is read-only.
	SourceEnv = "env"
	// SourceDB: the value was set through the API (Rancher writes "db").
	SourceDB = "db"
	// SourceDefault: no value is set; the default applies. Rancher also
	// leaves Source empty in that case.
	SourceDefault = "default"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Setting is one Rancher global setting, with the same fields as Rancher's
// own type (rancher/rancher pkg/apis/management.cattle.io/v3): the fields
// are top-level, not under spec or status. An empty Value means Default.
type Setting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Value is the value a user set; empty means Default.
	Value string `json:"value"`
	// Default is the value that applies when Value is empty; kept current
	// by the process that declares the setting.
	Default string `json:"default,omitempty"`
	// Customized is true when Value is set and differs from Default.
	Customized bool `json:"customized,omitempty"`
	// Source says where the effective value comes from: "env", "db",
	// "default" or empty.
	Source string `json:"source,omitempty"`
}
