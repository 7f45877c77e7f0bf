// The page's route, in the default layout as Global Settings' own pages
// are (shell/config/router/routes.js at shell-pkg-v3.0.0:
// c-cluster-settings-banners and the others are children of "default").
import LeaderElection from './pages/LeaderElection.vue';
import { PRODUCT, PAGE, ROUTE } from './product';

export const routes = [
  {
    parent: 'default',
    route:  {
      name:      ROUTE,
      path:      `/c/:cluster/${ PRODUCT }/${ PAGE }`,
      component: LeaderElection,
      meta:      { product: PRODUCT, cluster: '_' },
    },
  },
];
