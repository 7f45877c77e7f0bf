// The "Leader election" entry of Global Settings' side menu: a virtual
// type in the existing "settings" product, as the product's own Banners,
// Branding and Performance pages are (shell/config/product/settings.js at
// shell-pkg-v3.0.8), shown where the user can see Settings at all.
export const PRODUCT = 'settings';
export const PAGE = 'leader-election';
export const ROUTE = `c-cluster-${ PRODUCT }-${ PAGE }`;
// MANAGEMENT.SETTING in shell/config/types.js.
const SETTING = 'management.cattle.io.setting';

export function init($plugin, store) {
  const { virtualType, basicType } = $plugin.DSL(store, PRODUCT);

  virtualType({
    ifHaveType: SETTING,
    label:      'Leader election',
    name:       PAGE,
    namespaced: false,
    weight:     94, // after the built-in pages (101 down to 95)
    icon:       'folder',
    route:      { name: ROUTE },
  });
  basicType([PAGE]);
}
