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

// needStepMarks fails for a file that can mark no steps: a memory
// timeline export has neither ProfilerStep annotations nor stacks, and
// the repeating-pattern search over its one-frame category stacks would
// cut the run into meaningless pieces.
func needStepMarks(s *snapshot.Snapshot) error {
	if msg := s.Unavailable("stacks"); msg != "" && len(s.Annotations) == 0 {
		return fmt.Errorf("%s: steps: no ProfilerStep annotations and %s", s.Source.Name, msg)
	}
	return nil
}
