package e2e_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/pointer"
)

// TestRecommendCountsRancherLockFromTheDeployment: recommend --clusters
// with --kubeconfig reads the Rancher Deployment's replicas and counts
// Rancher's cattle-controllers lock among them; without a Rancher
// Deployment the lock is left out; --rancher-replicas says instead.
func TestRecommendCountsRancherLockFromTheDeployment(t *testing.T) {
	e := newEnv(t)
	type inst struct {
		RancherReplicas  int      `json:"rancherReplicas"`
		Rancher          string   `json:"rancher"`
		PerHour          float64  `json:"perHour"`
		LeftAlone        []string `json:"leftAlone"`
		LeftAlonePerHour float64  `json:"leftAlonePerHour"`
	}
	recommend := func(extra ...string) inst {
		t.Helper()
		args := append([]string{"recommend", "--max-failover", "60s", "--clusters", "10", "-o", "json",
			"--kubeconfig", kubeconfig, "--namespace", e.ns, "--rancher-namespace", e.rancherNS}, extra...)
		out, err := exec.Command(binary, args...).Output()
		if err != nil {
			t.Fatalf("leasetune %v: %v\n%s", args, err, out)
		}
		var r struct{ Installation inst }
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r.Installation
	}
	none := recommend()
	if none.RancherReplicas != 0 || none.Rancher != "" || len(none.LeftAlone) != 0 {
		t.Errorf("no Rancher Deployment: %+v, want Rancher's lock and the locks of what it installs left out", none)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher", Namespace: e.rancherNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: pointer.Int32(3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rancher"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rancher"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "rancher", Image: "rancher/rancher:v2.11.3"}}},
			},
		},
	}
	if _, err := cp.Client.AppsV1().Deployments(e.rancherNS).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	three := recommend()
	// 3 replicas at wrangler's 45s/30s/2s: 4,050 requests an hour (the
	// leader's 1,800, a client-go v0.30+ leader, and two followers' 1,125
	// each).
	if three.RancherReplicas != 3 || three.Rancher != "leaseDuration=45s renewDeadline=30s retryPeriod=2s" || three.PerHour-none.PerHour != 4050 {
		t.Errorf("Rancher Deployment of 3 replicas: %+v (%v/h more than without), want 3 replicas at 45s/30s/2s, 4,050/h more", three, three.PerHour-none.PerHour)
	}
	// v2.11 installs none of the locks pkg/locks leaves alone.
	if len(three.LeftAlone) != 0 {
		t.Errorf("beside Rancher v2.11.3: locks left alone %v, want none", three.LeftAlone)
	}
	// v2.15: rancher-turtles', Cluster API's and rancher-webhook's.
	d.Spec.Template.Spec.Containers[0].Image = "rancher/rancher:v2.15.0"
	if _, err := cp.Client.AppsV1().Deployments(e.rancherNS).Update(context.Background(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v215 := recommend(); len(v215.LeftAlone) != 3 || v215.LeftAlonePerHour != 5400 {
		t.Errorf("beside Rancher v2.15.0: locks left alone %v (%v/h), want 3 at 5,400/h", v215.LeftAlone, v215.LeftAlonePerHour)
	}
	if one := recommend("--rancher-replicas", "1"); one.RancherReplicas != 1 || one.PerHour-none.PerHour != 1800 {
		t.Errorf("--rancher-replicas 1: %+v (%v/h more), want the leader's 1,800/h", one, one.PerHour-none.PerHour)
	}
}
