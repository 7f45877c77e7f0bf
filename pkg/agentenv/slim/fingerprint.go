package slim

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// fingerprintKey is the top-level field under which a slim cached copy
// carries its fingerprint; it exists only in the cache, never in a write
// (writes are merge patches built from scratch). A served object cannot be
// taken for a slim copy (isSlim): it has metadata.creationTimestamp, which
// a slim copy never has, and slimFrom hashes a served field of this name
// like any other.
const fingerprintKey = "leasetune.io/slim-fingerprint"

// isSlim reports whether u is a slim copy (slimFrom) and returns its
// fingerprint.
func isSlim(u *unstructured.Unstructured) (string, bool) {
	fp, ok := u.Object[fingerprintKey].(string)
	if !ok {
		return "", false
	}
	if ts := u.GetCreationTimestamp(); !ts.IsZero() {
		return "", false // a served object
	}
	return fp, true
}

// fingerprint hashes what of an object is not the project's business:
// everything but spec.agentEnvVars, the project's annotations, status and
// the server-kept metadata. A changed fingerprint is a change "otherwise".
//
// A slim cached copy (slim) carries the fingerprint of the whole object it
// was made from, under fingerprintKey.
func fingerprint(u *unstructured.Unstructured) string {
	if fp, ok := isSlim(u); ok {
		return fp
	}
	s, err := slim(u)
	if err != nil {
		return "" // not an object the apiserver serves; never equal to a cached one's
	}
	fp, _ := isSlim(s.(*unstructured.Unstructured))
	return fp
}

// Fingerprint is the revert guard's fingerprint of u (fingerprint): the
// hex SHA-256 of everything of the object but spec.agentEnvVars, status
// (status.driver excepted), the server-kept metadata, the project's two
// annotations and Rancher's bookkeeping of the Plans it applied
// (rancher.IsPlanBookkeeping). An object
// read whole and its slim cached copy have the same one. "" for an object
// the apiserver would not serve.
func Fingerprint(u *unstructured.Unstructured) string { return fingerprint(u) }
