// Package health assesses the health of live Kubernetes objects: kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus/status) for the kinds that follow its
// conventions, recond's stricter reading of custom resources (a status that
// says nothing is unknown, never current) and of Services of type
// LoadBalancer (in progress until an ingress is assigned), and per-kind CEL
// rules from a file (--health-rules); and Progress, each object's progress
// across ticks (the progress deadline). It is pure: no I/O besides reading
// the rules file, and no lock (the engine guards its Progress).
package health
