// Package uiplugin ships leasetune's Rancher UI extension (the "Leader
// election" page under Global Settings, built from ui/ by `make ui`).
//
// It provides:
//
//   - The bundle, embedded in the binary (bundle/, written by `make ui`
//     and committed, so `go build` needs no Node): Embedded.
//   - Handler, which serves the bundle in exactly the layout Rancher's
//     extension cache fetches (rancher/rancher v2.12.12
//     pkg/controllers/dashboard/plugin/fscache.go, SyncWithControllersCache
//     and cacheEndpoint: `<endpoint>/plugin/package.json`, whose version
//     must equal the UIPlugin's; `<endpoint>/files.txt`, one path a line;
//     then each listed file at `<endpoint>/<path>`), at a path that names
//     the version: /uiplugin/<name>/<version>. Rancher fetches it with Go's
//     default HTTP client (fetchFile: http.Get), so the endpoint is plain
//     HTTP inside the cluster, as Rancher's own extension catalogs serve it.
//   - What the Helm chart's UIPlugin takes from the bundle (Bundle.Chart,
//     written to ChartFile by `go run ./hack/uiplugin`): the chart, not
//     this process, makes the catalog.cattle.io/v1 UIPlugin in
//     cattle-ui-plugin-system (charts/leasetune/templates/uiplugin.yaml),
//     so leasetune's ServiceAccount has no right on UIPlugins.
//
// The page reads and writes through Rancher's own API as the user (steve:
// the Settings and the ElectionStatus); nothing here serves its data.
package uiplugin
