// The "Leader election" entry of Global Settings' side menu: a virtual
// type in the existing "settings" product, as the product's own Banners,
// Branding and Performance pages are (shell/config/product/settings.js at
// shell-pkg-v3.0.0), shown where the user can see Settings at all; its
// label from l10n/en-us.yaml (labelKey, as the built-in pages have).
export const PRODUCT = 'settings';
export const PAGE = 'leader-election';
export const ROUTE = `c-cluster-${ PRODUCT }-${ PAGE }`;
// MANAGEMENT.SETTING in shell/config/types.js.
const SETTING = 'management.cattle.io.setting';

export function init($plugin, store) {
  const { virtualType, basicType } = $plugin.DSL(store, PRODUCT);

  virtualType({
    ifHaveType: SETTING,
    labelKey:   'leasetune.menu.label',
    name:       PAGE,
    namespaced: false,
    weight:     94, // after the built-in pages (101 down to 95)
    icon:       'folder',
    route:      { name: ROUTE },
  });
  basicType([PAGE]);
}
