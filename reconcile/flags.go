package reconcile

import (
	"errors"
	"flag"
)

// BindFlags registers the flags of how the loop writes (prune, self-heal,
// dry run, concurrency, health and hook deadlines) on fs, bound to c's
// fields, with their defaults. The caller fills in the rest (Namespace,
// Name, Path, Live, HealthRules, MayWrite) and calls Validate after
// parsing.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Prune, "prune", true, "delete objects recond applied that left Git")
	fs.BoolVar(&c.SelfHeal, "self-heal", true, "write drift back at every tick; false: only report it until a new revision arrives")
	fs.BoolVar(&c.DryRun, "dry-run", false, "never write: validate with a server-side dry run and report")
	fs.BoolVar(&c.AllowEmpty, "allow-empty", false, "allow an empty desired state (which prunes every owned object)")
	fs.IntVar(&c.ApplyConcurrency, "apply-concurrency", 8, "most writes (and validating dry runs) made at once within one dependency wave")
	fs.DurationVar(&c.HookTimeout, "helm-hook-timeout", DefaultHookTimeout, "how long a chart's pre- or post-install/upgrade hook may run (a Job until Complete, anything else until current) before it fails the revision with reason hook")
	fs.DurationVar(&c.SuspendMax, "suspend-max", DefaultSuspendMax, "how long a suspension (recond suspend, POST /api/v1/suspend, or the recond.dev/suspended-until annotation on the inventory ConfigMap) lasts at most, and lasts when it names no end; the loop then resumes by itself")
	fs.DurationVar(&c.HealthTimeout, "health-timeout", DefaultHealthTimeout, "how long an object may stay in progress after recond last applied a change to it (or after it started progressing without one) before its health is failed (\"progress deadline\")")
}

// Validate checks the fields BindFlags binds.
func (c *Config) Validate() error {
	switch {
	case c.HookTimeout <= 0:
		return errors.New("--helm-hook-timeout must be positive")
	case c.HealthTimeout <= 0:
		return errors.New("--health-timeout must be positive")
	case c.ApplyConcurrency <= 0:
		return errors.New("--apply-concurrency must be positive")
	case c.SuspendMax <= 0:
		return errors.New("--suspend-max must be positive")
	}
	return nil
}
