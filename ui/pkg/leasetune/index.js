// leasetune's Rancher UI extension: a "Leader election" page in Rancher's
// Global Settings product (rancher/dashboard shell/config/product/settings.js
// at shell-pkg-v3.0.0: product "settings", its pages routed as
// c-cluster-settings-<page> under /c/:cluster/settings/<page>).
//
// Rancher's UI loads this bundle from /v1/uiplugins/leasetune/<version>/plugin/
// leasetune-<version>.umd.min.js and calls this default export with the
// extension's Plugin (shell/core/extension-manager-impl.js loadAsync).
import { importTypes } from '@rancher/auto-import';
import { routes } from './routes';

export default function(plugin) {
  // The l10n/ folder's translations (and any other auto-imported folder),
  // as every extension registers them (shell/pkg/auto-import.js).
  importTypes(plugin);
  plugin.metadata = require('./package.json');
  // A page in an existing product needs no product of its own: a virtual
  // type and a route (docusaurus/docs/extensions/advanced/create-page-in-an-existing-product.md).
  plugin.addProduct(require('./product'));
  plugin.addRoutes(routes);
}
