package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ServiceProxy is a double of kube-proxy and of the Endpoints and
// EndpointSlice controllers for chosen Services whose pods the Kubelet double runs: each Service's
// ClusterIP is added to the loopback device, and a listener on
// ClusterIP:port forwards every connection to the address the pod's
// runner gives the target port (Runner.Port), as kube-proxy's userspace
// mode did. The test control plane has no Service network otherwise:
// Rancher, for one, hands its Service's ClusterIP to Fleet as its internal
// URL (rancher/rancher v2.12.12 pkg/controllers/dashboard/apiservice/
// setting.go getInternalServerAndURL, with the rancher Deployment present).
//
// The pods have no IPs of their own, so the Endpoints and the
// EndpointSlice it writes (once a pod runs) name the ClusterIP as the one
// address, with the target ports, where it listens too: the
// kube-apiserver's availability check of an aggregated API wants an
// address with the Service port's name, in the Endpoints up to v1.32
// (k8s.io/kube-aggregator v0.32.13 pkg/controllers/status/remote/
// remote_available_controller.go sync) and in an EndpointSlice labelled
// with the Service's name from v1.33 (v0.36.2 the same file: sync,
// hasAvailableEndpoint), and its services/proxy dials an endpoint's
// address and port. Both stay while pods come and go.
//
// It needs the right to add addresses (CAP_NET_ADMIN; root here). The
// addresses are removed again by Stop.
type ServiceProxy struct {
	k      *Kubelet
	cs     kubernetes.Interface
	cancel context.CancelFunc
	mu     sync.Mutex
	ls     []net.Listener
	ips    []string
	errs   []string
}

// StartServiceProxy serves each Service (namespace/name) of services as
// soon as it has a ClusterIP, for the pods of the Deployment selectors
// name in deployments (namespace/name of the Service → of the Deployment).
func StartServiceProxy(cs kubernetes.Interface, k *Kubelet, deployments map[string]string) *ServiceProxy {
	ctx, cancel := context.WithCancel(context.Background())
	sp := &ServiceProxy{k: k, cs: cs, cancel: cancel}
	for svc, dep := range deployments {
		go sp.serve(ctx, svc, dep)
	}
	return sp
}

// Errors returns what the proxy could not do.
func (sp *ServiceProxy) Errors() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]string(nil), sp.errs...)
}

func (sp *ServiceProxy) fail(format string, args ...interface{}) {
	sp.mu.Lock()
	sp.errs = append(sp.errs, fmt.Sprintf(format, args...))
	sp.mu.Unlock()
}

// serve serves Service svcKey, and again each time it is made anew (a
// helm uninstall and install gives it another ClusterIP): the addresses
// of the Services it served before stay, unused.
func (sp *ServiceProxy) serve(ctx context.Context, svcKey, depKey string) {
	ns, name, _ := strings.Cut(svcKey, "/")
	var served types.UID
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := sp.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || s.UID == served {
			return false, nil
		}
		served = s.UID
		sp.serveService(ctx, s, svcKey, depKey)
		return false, nil
	})
}

// serveService serves one version of the Service: its ClusterIP on the
// loopback device, a listener per port, then (once a pod runs) its
// Endpoints and EndpointSlice.
func (sp *ServiceProxy) serveService(ctx context.Context, svc *corev1.Service, svcKey, depKey string) {
	ns, name := svc.Namespace, svc.Name
	ip := svc.Spec.ClusterIP
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil && !strings.Contains(string(out), "File exists") {
		sp.fail("add %s to lo for Service %s: %v %s", ip, svcKey, err, out)
		return
	}
	sp.mu.Lock()
	sp.ips = append(sp.ips, ip)
	sp.mu.Unlock()
	depNS, depName, _ := strings.Cut(depKey, "/")
	listen := func(port int32, target intstr.IntOrString) {
		addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			// A program of the pod binds that port on every address
			// itself (Rancher's ":6666"), the ClusterIP alias among them:
			// it is served already.
			if c, derr := net.DialTimeout("tcp", addr, time.Second); derr == nil {
				c.Close()
				return
			}
		}
		if err != nil {
			sp.fail("listen for Service %s port %d: %v", svcKey, port, err)
			return
		}
		sp.mu.Lock()
		sp.ls = append(sp.ls, l)
		sp.mu.Unlock()
		go sp.accept(l, depNS, depName, target)
	}
	for _, port := range svc.Spec.Ports {
		listen(port.Port, targetOf(port))
	}
	// The Endpoints, once a pod runs (its template names the ports).
	var pod *Pod
	_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		if ps := sp.k.Pods(depNS, depName); len(ps) > 0 {
			pod = ps[0]
		}
		return pod != nil, nil
	})
	if pod == nil {
		return
	}
	subset := corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: ip}}}
	for _, port := range svc.Spec.Ports {
		n := containerPort(pod, targetOf(port))
		if n == 0 {
			continue
		}
		subset.Ports = append(subset.Ports, corev1.EndpointPort{Name: port.Name, Port: n, Protocol: port.Protocol})
		if n != port.Port {
			listen(n, intstr.FromInt32(n))
		}
	}
	sp.endpointSlice(ctx, svcKey, ns, name, ip, subset.Ports)
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subsets: []corev1.EndpointSubset{subset}}
	if _, err := sp.cs.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{FieldManager: "endpoints-controller-double"}); err != nil && !apierrors.IsAlreadyExists(err) {
		sp.fail("Endpoints of Service %s: %v", svcKey, err)
	} else if apierrors.IsAlreadyExists(err) {
		if cur, err := sp.cs.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			cur.Subsets = ep.Subsets
			if _, err := sp.cs.CoreV1().Endpoints(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "endpoints-controller-double"}); err != nil {
				sp.fail("Endpoints of Service %s: %v", svcKey, err)
			}
		}
	}
}

// endpointSlice writes Service ns/name's EndpointSlice as the
// EndpointSlice controller names and labels it (kubernetes.io/service-name;
// here one slice, named after the Service) with the one ready address ip
// and ports.
func (sp *ServiceProxy) endpointSlice(ctx context.Context, svcKey, ns, name, ip string, ports []corev1.EndpointPort) {
	ready := true
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller-double"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	for _, p := range ports {
		p := p
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol})
	}
	_, err := sp.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{FieldManager: "endpointslice-controller-double"})
	if apierrors.IsAlreadyExists(err) {
		var cur *discoveryv1.EndpointSlice
		if cur, err = sp.cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			cur.Endpoints, cur.Ports = es.Endpoints, es.Ports
			_, err = sp.cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{FieldManager: "endpointslice-controller-double"})
		}
	}
	if err != nil {
		sp.fail("EndpointSlice of Service %s: %v", svcKey, err)
	}
}

// targetOf is a Service port's target port (the port itself when unset).
func targetOf(p corev1.ServicePort) intstr.IntOrString {
	if p.TargetPort.Type == intstr.String && p.TargetPort.StrVal != "" || p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal != 0 {
		return p.TargetPort
	}
	return intstr.FromInt32(p.Port)
}

// containerPort resolves a target port against pod p's containers: a
// number is itself, a name the container port of that name (0: none).
func containerPort(p *Pod, target intstr.IntOrString) int32 {
	if target.Type == intstr.Int {
		return target.IntVal
	}
	for _, c := range p.Template.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == target.StrVal {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

func (sp *ServiceProxy) accept(l net.Listener, ns, dep string, target intstr.IntOrString) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			to, err := sp.backend(ns, dep, target)
			if err != nil {
				return // no ready pod: the connection is refused, as with no endpoint
			}
			b, err := net.DialTimeout("tcp", to, 5*time.Second)
			if err != nil {
				return
			}
			defer b.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
			<-done
		}()
	}
}

// backend returns the local address of the target port of the first pod
// of Deployment ns/dep: a named port is looked up in the pod's
// containers, a number is the container port; the runner maps it.
func (sp *ServiceProxy) backend(ns, dep string, target intstr.IntOrString) (string, error) {
	ps := sp.k.Pods(ns, dep)
	if len(ps) == 0 {
		return "", fmt.Errorf("no pod")
	}
	p := ps[0]
	port := containerPort(p, target)
	r := sp.k.runners[ns+"/"+dep]
	if r.Port == nil || port == 0 {
		return "", fmt.Errorf("no port %s", target.String())
	}
	return r.Port(p, port)
}

// Stop closes the listeners and removes the addresses.
func (sp *ServiceProxy) Stop() {
	sp.cancel()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, l := range sp.ls {
		_ = l.Close()
	}
	for _, ip := range sp.ips {
		_ = exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run()
	}
}
