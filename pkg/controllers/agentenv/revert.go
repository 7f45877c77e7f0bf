package agentenv

import (
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Another writer that keeps removing the project's entries (a GitOps tool
// that owns spec.agentEnvVars, a script) would make every sync a write and
// every write an agent redeploy. The guard counts such reverts per object
// and, after RevertLimit of them within RevertWindow, stops writing that
// object until it changes in some other way.
const (
	// RevertLimit is the number of reverts within RevertWindow after which
	// an object is no longer written.
	RevertLimit = 3
	// RevertWindow is the window reverts are counted in.
	RevertWindow = 10 * time.Minute
)

// envWriters names the field managers other than the project's that manage
// spec.agentEnvVars of u, latest first ("" when none is recorded).
func envWriters(u *unstructured.Unstructured) string {
	type w struct {
		name string
		at   time.Time
	}
	var ws []w
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == FieldManager || mf.FieldsV1 == nil || !strings.Contains(string(mf.FieldsV1.Raw), `"f:agentEnvVars"`) {
			continue
		}
		var at time.Time
		if mf.Time != nil {
			at = mf.Time.Time
		}
		ws = append(ws, w{mf.Manager + " (" + string(mf.Operation) + ")", at})
	}
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.After(ws[j].at) })
	var names []string
	for _, x := range ws {
		names = append(names, x.name)
	}
	return strings.Join(names, ", ")
}
