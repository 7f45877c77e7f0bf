// leasetune's Rancher UI extension: a "Leader election" page in Rancher's
// Global Settings product (rancher/dashboard shell/config/product/settings.js
// at shell-pkg-v3.0.8: product "settings", its pages routed as
// c-cluster-settings-<page> under /c/:cluster/settings/<page>).
//
// Rancher's UI loads this bundle from /v1/uiplugins/leasetune/<version>/plugin/
// leasetune-<version>.umd.min.js and calls this default export with the
// extension's Plugin (shell/core/extension-manager-impl.js loadAsync).
import { routes } from './routes';

// For hosts other than Rancher's UI (an installation without Rancher, the
// browser test's stand-in shell): the backend that talks to leasetune's
// own server, to provide to the page as `leasetuneBackend`. Rancher's
// loader uses only the default export.
export { directBackend } from './api/backend';

export default function(plugin) {
  plugin.metadata = require('./package.json');
  // A page in an existing product needs no product of its own: a virtual
  // type and a route (docusaurus/docs/extensions/advanced/create-page-in-an-existing-product.md).
  plugin.addProduct(require('./product'));
  plugin.addRoutes(routes);
}
