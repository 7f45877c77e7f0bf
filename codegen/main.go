// Command codegen generates the deepcopy functions of pkg/apis and the
// wrangler v2 clients, caches and controllers under pkg/generated. Run it
// with `make generate`, which sets up the GOPATH layout wrangler's
// controller-gen writes into.
package main

import (
	controllergen "github.com/rancher/wrangler/v2/pkg/controller-gen"
	"github.com/rancher/wrangler/v2/pkg/controller-gen/args"
)

func main() {
	controllergen.Run(args.Options{
		OutputPackage: "leasetune.io/leasetune/pkg/generated",
		Boilerplate:   "scripts/boilerplate.go.txt",
		Groups: map[string]args.Group{
			"management.cattle.io": {
				PackageName:   "management.cattle.io",
				Types:         []interface{}{"./pkg/apis/management.cattle.io/v3"},
				GenerateTypes: true,
			},
		},
	})
}
