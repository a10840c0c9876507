package reconcile

import (
	"context"
	"fmt"

	"recond.dev/recond/reconcile/cluster"
	"recond.dev/recond/reconcile/inventory"
)

// save writes inv when it differs from what is stored, or when the live
// inventory was found missing or changed (repair).
func (s inventoryStore) save(ctx context.Context, inv *inventory.Inventory) error {
	r := s.r
	if cur, stale := r.mem.inventoryState(); cur != nil && !stale && cur.Equal(inv) {
		return nil
	}
	if err := r.mayWrite(); err != nil {
		return err
	}
	cm := inventory.Object(r.cfg.Name, r.cfg.Namespace)
	cm.Object["data"] = inv.Data()
	out, err := r.kube.ApplyFor(ctx, cluster.Write{Purpose: cluster.PurposeInventory, Object: cm}, nil)
	if err != nil {
		return fmt.Errorf("write inventory: %w", err)
	}
	inv.UID, inv.ResourceVersion = out.GetUID(), out.GetResourceVersion()
	r.mem.setInventory(inv)
	return nil
}

// repair rewrites the inventory when this tick found the live one missing
// or unlike the copy in memory (load), whatever else the tick writes: inv
// is what the tick works with.
func (s inventoryStore) repair(ctx context.Context, inv *inventory.Inventory) error {
	r := s.r
	if _, stale := r.mem.inventoryState(); !stale {
		return nil
	}
	if err := s.save(ctx, inv); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "inventory ConfigMap rewritten", "configmap", inventory.Name(r.cfg.Name),
		"kinds", len(inv.Kinds), "revision", shortSHA(inv.Revision))
	return nil
}
