package framework

import (
	"crypto/rand"
	"math/big"
	"testing"
)

// LegacyClusterName returns a random legacy Rancher management Cluster
// name, c-xxxxx (rancher/rancher pkg/controllers/provisioningv2/cluster
// controller.go, mgmtNameRegexp).
func LegacyClusterName(t testing.TB) string {
	t.Helper()
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = chars[n.Int64()]
	}
	return "c-" + string(b)
}
