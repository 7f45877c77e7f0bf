package agentenv

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// gather reads, once, what a sync of the fleet Cluster key decides from:
// the fleet Cluster and the objects it routes to, from the informers'
// caches; the global agent triple and the channel; the revert guard's
// record from the ledger. It makes no API call.
func (c *Controller) gather(key string) (state, error) {
	st := state{key: key}
	obj, exists, err := c.fleet.GetIndexer().GetByKey(key)
	if err != nil {
		return st, err
	}
	if !exists {
		st.gone = true
		return st, nil
	}
	var ok bool
	st.global, ok = c.opts.Triples.Effective(settings.FleetAgent)
	st.noTriple = !ok
	st.channel, ok = c.opts.Channels.Channel()
	st.noChannel = !ok
	if st.noTriple || st.noChannel {
		return st, nil
	}
	st.route, st.unroutable = c.route(obj.(*unstructured.Unstructured))
	if st.unroutable != nil {
		return st, nil
	}
	st.fencedMsg, st.fenced = c.ledger.fencedMessage(key, slim.Fingerprint(st.route.Target))
	st.reverts = c.ledger.revertsWithin(key, c.clock.Now())
	return st, nil
}

// route finds the objects of a fleet Cluster in the caches and routes it
// (agentenv.Route).
func (c *Controller) route(fc *unstructured.Unstructured) (agentenv.Routing, error) {
	var prov, mgmt *unstructured.Unstructured
	if name, ok := fc.GetLabels()[rancher.ClusterNameLabel]; ok && c.opts.Rancher {
		if objs, _ := c.prov.GetIndexer().ByIndex(byClusterName, name); len(objs) > 0 {
			prov = objs[0].(*unstructured.Unstructured)
		}
		if o, ok, _ := c.mgmt.GetIndexer().GetByKey(name); ok {
			mgmt = o.(*unstructured.Unstructured)
		}
	}
	return agentenv.Route(fc, prov, mgmt, c.RancherVersion())
}
