//go:build tools

// Package crds pins the Go types of the Prometheus Operator's monitoring API,
// from which `make crds` generates CustomResourceDefinitions with
// controller-gen (the tool this module pins). Nothing here is built.
package crds

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
