// Package uiplugin ships leasetune's Rancher UI extension (the "Leader
// election" page under Global Settings, built from ui/ by `make ui`) and
// registers it with Rancher.
//
// It provides three things:
//
//   - The bundle, embedded in the binary (bundle/, written by `make ui`
//     and committed, so `go build` needs no Node): Embedded.
//   - Handler, which serves the bundle in exactly the layout Rancher's
//     extension cache fetches (rancher/rancher v2.11.3
//     pkg/controllers/dashboard/plugin/fscache.go, SyncWithControllersCache:
//     `<endpoint>/plugin/package.json`, whose version must equal the
//     UIPlugin's; `<endpoint>/files.txt`, one path a line; then each listed
//     file at `<endpoint>/<path>`), at a path that names the version:
//     /uiplugin/<name>/<version>. Rancher fetches it with Go's default HTTP
//     client (fetchFile: http.Get), so the endpoint is plain HTTP inside
//     the cluster, as Rancher's own extension catalogs serve it.
//   - Reconciler, which, on the leader and only while the
//     uiplugins.catalog.cattle.io CRD exists (a Rancher installation),
//     keeps one catalog.cattle.io/v1 UIPlugin in cattle-ui-plugin-system
//     (the only namespace Rancher's plugin controller reads:
//     pkg/controllers/dashboard/plugin/controller.go lists
//     namespace.UIPluginNamespace) pointing at that endpoint, with the
//     metadata Rancher's UI requires to load it; and Remove, for
//     `leasetune cleanup`.
//
// It does not serve the page's data: that is pkg/uiapi, on the HTTPS port,
// acting with the caller's token.
package uiplugin
