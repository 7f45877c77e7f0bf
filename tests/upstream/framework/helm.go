package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	itfw "leasetune.io/leasetune/tests/integration/framework"
)

// Helm runs the helm CLI the project pins (tools/helm) against the test
// control plane, as an operator installs the charts.
type Helm struct {
	Path, Kubeconfig string
}

// NewHelm returns a Helm using the admin kubeconfig at kubeconfig.
func NewHelm(kubeconfig string) (Helm, error) {
	p, err := itfw.HelmPath()
	if err != nil {
		return Helm{}, err
	}
	return Helm{Path: p, Kubeconfig: kubeconfig}, nil
}

// Run runs helm with args and returns its output.
func (h Helm) Run(args ...string) (string, error) {
	cmd := exec.Command(h.Path, append(args, "--kubeconfig", h.Kubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(filepath.Dir(h.Kubeconfig), "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(filepath.Dir(h.Kubeconfig), "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(filepath.Dir(h.Kubeconfig), "helm-data"))
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Install installs chart as release in namespace (created if missing)
// with the given --set values (values files in files). Without hooks when
// noHooks: a hook Job would never run here (there is no
// kube-controller-manager) and helm would wait for it.
func (h Helm) Install(release, chart, namespace string, noHooks bool, files []string, set ...string) error {
	args := []string{"install", release, chart, "--namespace", namespace, "--create-namespace"}
	if noHooks {
		args = append(args, "--no-hooks")
	}
	for _, f := range files {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	_, err := h.Run(args...)
	return err
}

// copyTree copies the folder src to dst (regular files and folders only).
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
