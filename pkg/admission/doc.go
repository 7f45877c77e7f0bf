// Package admission refuses invalid election timings at the door: a
// validating admission webhook for the project's six Setting objects and
// for the per-cluster override annotations, served over TLS on every
// replica, with its CA and serving certificate kept in one Secret that all
// replicas share.
//
// The webhook configuration (charts/leasetune) matches only the project's
// settings by name, and only when value changes, and exempts the project's
// own service account, so Rancher's settings and the project's own writes
// (default, source, restores) never reach it.
package admission
