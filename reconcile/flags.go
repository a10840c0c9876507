package reconcile

import (
	"errors"
	"flag"

	"recond.dev/recond/reconcile/keys"
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
	fs.StringVar(&c.KeysSecret, "sops-keys-secret", keys.DefaultKeysSecret, "the name of the Secret that holds the SOPS age keys: reserved, so that no commit or chart hook writes, prunes or replaces it")
	fs.IntVar(&c.HookMax, "helm-hook-max", DefaultHookMax, "most hooks one revision may have; a revision with more fails read with reason invalid")
	fs.IntVar(&c.HookMaxBytes, "helm-hook-max-bytes", DefaultHookMaxBytes, "most bytes of hook objects one revision may have (and so of their state in the inventory ConfigMap); more fails read with reason invalid")
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
	case c.HookMax < 0 || c.HookMaxBytes < 0:
		return errors.New("--helm-hook-max and --helm-hook-max-bytes must not be negative")
	}
	return nil
}
