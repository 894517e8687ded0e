package replay

import "github.com/gpumem/gpumem/snapshot"

// poolStats computes Stats for KindActiveWithPools.
// TODO: private-pool envelopes; without private pools the view equals
// KindActive.
func poolStats(s *snapshot.Snapshot, device int, maxEntries int) Stats {
	return computeStats(s, device, KindActive, maxEntries)
}
