// Command upstream-cases tells `make test-upstream` which packages of the
// suite beside the real Rancher and Fleet can run here: it prints one line
// per case that cannot (on stderr: which variable and release it expects)
// and the suites that can (on stdout, one a line: the package, the
// LEASETUNE_KUBE of its control plane, the suite's name, the
// @rancher/shell version of its dashboard and the flavour of the
// downstream cluster it imports, "-" for none). It builds nothing.
package main

import (
	"fmt"
	"os"

	"leasetune.io/leasetune/tests/upstream/releases"
)

func main() {
	for _, s := range releases.Suites {
		if s.Missing() == "" {
			shell := s.Shell
			if shell == "" {
				shell = "-"
			}
			down := s.Downstream
			if down == "" {
				down = "-"
			}
			fmt.Println("./"+s.Package, s.Kube, s.Name, shell, down)
			continue
		}
		for _, c := range s.Cases {
			fmt.Fprintln(os.Stderr, s.SkipLine(c))
		}
	}
}
