package leader

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// BindFlags registers the Lease's timing flags on fs, bound to c's fields,
// with their defaults (client-go's, as controller-runtime uses them). The
// caller fills in Namespace, Lease and Identity.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Mode, "leader-elect-mode", ModeRenew, "how the Lease is held: renew (renewed every retry period; standbys take over a lease duration after the holder stops) or claim (taken at start from whoever holds it, renewed only every third of --leader-elect-claim-duration: about no request while nothing changes; only for one pod per instance, replicas: 1 and strategy: Recreate)")
	fs.DurationVar(&c.ClaimDuration, "leader-elect-claim-duration", DefaultClaimDuration, "with --leader-elect-mode=claim: the term a claim writes in the Lease, renewed every third of it; a claiming process that dies without releasing the Lease holds it this long after its last renewal at most, then a renew-mode process or recond sync takes it over")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the last renewal before taking over")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "time between attempts to acquire or renew the Lease")
}

// Validate checks the fields BindFlags binds.
func (c *Config) Validate() error {
	if c.Mode != "" && c.Mode != ModeRenew && c.Mode != ModeClaim {
		return fmt.Errorf("--leader-elect-mode must be %s or %s, not %q", ModeRenew, ModeClaim, c.Mode)
	}
	if !(c.LeaseDuration > c.RenewDeadline && c.RenewDeadline > c.RetryPeriod && c.RetryPeriod > 0) {
		return errors.New("leader election needs --leader-elect-lease-duration > --leader-elect-renew-deadline > --leader-elect-retry-period > 0")
	}
	if c.ClaimDuration != 0 && c.ClaimDuration < 3*c.RetryPeriod {
		return errors.New("--leader-elect-claim-duration must be at least three --leader-elect-retry-period (it is renewed every third of it)")
	}
	if c.ClaimDuration%time.Second != 0 {
		return errors.New("--leader-elect-claim-duration must be whole seconds (the Lease keeps seconds)")
	}
	return nil
}
