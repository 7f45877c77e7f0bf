// Package audit reads kube-apiserver audit logs and measures the
// leader-election traffic in them.
//
// It provides:
//   - Analyzer, which reads audit logs as the apiserver writes them (one
//     audit.k8s.io/v1 Event per line, any level; plain or gzip, detected by
//     content) in one pass and in bounded memory, parsing the lines on
//     every CPU GOMAXPROCS allows and counting them in order, and counts
//     requests: a request is its ResponseComplete (or Panic) event, or the
//     last stage present for its auditID;
//   - Report, what the pass found: the time span, the total, the most
//     requested URIs, and every leader-election lock with its holders,
//     its share of all requests and the retry period its holder's cadence
//     implies;
//   - Managed, the locks leasetune's settings govern (Fleet's, by name,
//     cited from Fleet's source), and Project, what those locks would cost
//     with other triples, from pkg/election's model;
//   - ParseEvent, one line as an Event (who, what, when, the answer's
//     code), with the Analyzer's decoder, and Follower, which reads the
//     lines a running kube-apiserver appends to its log (the benchmark,
//     hack/bench, counts requests with it).
//
// Which objects are locks (see isLock and inferLock): every
// coordination.k8s.io Lease outside kube-node-lease (the kubelets'
// heartbeats there elect nothing); a ConfigMap or Endpoints whose request
// or response object carries the annotation
// control-plane.alpha.kubernetes.io/leader (Request and RequestResponse
// levels); and, where the log shows no objects (Metadata level), a
// ConfigMap or Endpoints that one client (user, user agent and source IP)
// reads and writes at a steady cadence, marked as inferred. A ConfigMap
// that is only read, however regularly, is not a lock.
//
// It performs no API calls and writes nothing.
package audit
