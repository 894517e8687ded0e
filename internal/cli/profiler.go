package cli

import (
	"fmt"

	"github.com/gpumem/gpumem/snapshot"
)

// needSegments fails, with what is missing and what to record instead,
// when the file has no allocator segments (a torch.profiler output):
// a view of segments would otherwise be drawn empty.
func needSegments(s *snapshot.Snapshot, what string) error {
	if msg := s.Unavailable("segments"); msg != "" {
		return fmt.Errorf("%s: %s: %s", s.Source.Name, what, msg)
	}
	return nil
}
