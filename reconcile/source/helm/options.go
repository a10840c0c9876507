package helm

import "recond.dev/recond/reconcile/source/chartspec"

// Flag names of chart rendering.
const (
	FlagRelease = chartspec.FlagRelease
	FlagValues  = chartspec.FlagValues
)

// Options are the chart settings a user gives, as flags.
type Options = chartspec.Options
